"""SchedulerLoop: the one loop every driver uses (issue #9). When sessions run,
when decisions are handed over, numbering, backpressure and cancellation."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from events import (
    BadEvent,
    Decision,
    EventRejected,
    JobAllocated,
    SessionEnd,
    WorkerDown,
)
from tests.core.test_session import registry_with
from tests.helpers import GO, allocations, submit, up
from xce_core import SchedulerConfig, SchedulerCore, SchedulerLoop
from xce_core.plugin import Allocator, PlanIterator, PrimaryRequest, SchedContext


class Sink:
    """Records each hand-over; optionally blocks in it until released."""

    def __init__(self, *, block: bool = False) -> None:
        self.handovers: list[list[Decision]] = []
        self.entered = anyio.Event()
        self.release = anyio.Event()
        if not block:
            self.release.set()

    async def __call__(self, decisions: list[Decision]) -> None:
        self.handovers.append(decisions)
        self.entered.set()
        await self.release.wait()

    @property
    def decisions(self) -> list[Decision]:
        return [d for batch in self.handovers for d in batch]


def kinds(batch: list[Decision]) -> list[str]:
    return [type(d).__name__ for d in batch]


async def test_a_session_is_handed_over_whole_and_the_batch_rest_at_its_end() -> None:
    sink = Sink()
    loop = SchedulerLoop(SchedulerCore(), sink)
    await loop.apply([up("a", 1), submit("j1"), submit("j2"), GO, WorkerDown(name="x"), GO])
    assert [kinds(b) for b in sink.handovers] == [
        ["JobAllocated", "JobPended", "SessionEnd"],  # session 1, whole
        ["EventRejected", "SessionEnd"],  # what came after it, then session 2
    ]
    await loop.apply([submit("j3")])
    assert len(sink.handovers) == 2  # nothing decided: no empty hand-over


async def test_events_are_numbered_across_batches_or_from_start() -> None:
    sink = Sink()
    loop = SchedulerLoop(SchedulerCore(), sink)
    await loop.apply([up("a"), WorkerDown(name="x")])
    await loop.apply([WorkerDown(name="y")])
    await loop.apply([WorkerDown(name="z")], start=100)
    assert [d.index for d in sink.decisions] == [1, 2, 100]  # type: ignore[union-attr]


async def test_bad_items_are_rejected_in_place() -> None:
    sink = Sink()
    loop = SchedulerLoop(SchedulerCore(), sink)
    bad = BadEvent(index=0, line=2, error="malformed JSON")
    assert await loop.apply([up("a"), bad, submit("j"), GO]) is None
    assert sink.decisions[0] == EventRejected(index=1, error="line 2: malformed JSON", line=2)
    assert allocations(sink.decisions) == {"j": [("a", 1)]}


async def test_strict_stops_at_the_first_bad_item_and_hands_over_what_came_before() -> None:
    sink = Sink()
    core = SchedulerCore()
    loop = SchedulerLoop(core, sink)
    bad = BadEvent(index=2, line=3, error="malformed JSON")
    stopped = await loop.apply([up("a"), submit("j"), GO, bad, submit("k"), GO], strict=True)
    assert stopped is bad
    assert [kinds(b) for b in sink.handovers] == [
        ["JobAllocated", "SessionEnd"],
        ["EventRejected"],
    ]
    assert "k" not in core.state.jobs  # nothing after the bad item was applied


async def test_tick_runs_a_session_only_when_something_changed() -> None:
    sink = Sink()
    core = SchedulerCore()
    loop = SchedulerLoop(core, sink)
    assert await loop.tick() is None  # nothing yet
    await loop.apply([up("a"), submit("j")])
    end = await loop.tick()
    assert end is not None
    assert kinds(sink.decisions) == ["JobAllocated", "SessionEnd"]
    assert await loop.tick() is None
    assert core.session_count == 1


async def test_run_session_on_demand() -> None:
    sink = Sink()
    loop = SchedulerLoop(SchedulerCore(), sink)
    await loop.apply([up("a"), submit("j1"), submit("j2")])
    end = await loop.run_session()
    assert (end.allocated, end.pended) == (1, 1)
    assert [kinds(b) for b in sink.handovers] == [["JobAllocated", "JobPended", "SessionEnd"]]


async def test_a_slow_sink_holds_back_the_rest_of_the_batch() -> None:
    sink = Sink(block=True)
    core = SchedulerCore()
    loop = SchedulerLoop(core, sink)
    async with anyio.create_task_group() as tg:
        tg.start_soon(loop.apply, [up("a"), submit("j1"), GO, submit("j2"), GO])
        with anyio.fail_after(3):
            await sink.entered.wait()
        # Blocked on session 1's hand-over: the next event waits, nothing is lost.
        assert "j2" not in core.state.jobs
        assert core.session_count == 1
        sink.release.set()
    assert core.session_count == 2
    assert [kinds(b) for b in sink.handovers] == [
        ["JobAllocated", "SessionEnd"],
        ["JobPended", "SessionEnd"],
    ]


async def test_cancellation_passes_through_and_what_was_decided_stays_in_the_core() -> None:
    class Stuck(Allocator):
        """Allocates "first", then blocks on any other job until cancelled."""

        name = "stuck"

        def __init__(self) -> None:
            self.entered = anyio.Event()

        def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
            raise NotImplementedError

        async def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> bool:
            if ctx.job.job_id == "first":
                ctx.claim(next(ctx.state.live_workers()), 1, ())
                return True
            self.entered.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    stuck = Stuck()
    core = SchedulerCore(
        SchedulerConfig(sequential_allocator="stuck"), registry=registry_with(stuck)
    )
    sink = Sink()
    loop = SchedulerLoop(core, sink)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.apply, [up("a", 2), submit("first"), submit("second"), GO])
            await stuck.entered.wait()
            scope.cancel()
    assert scope.cancelled_caught
    assert not core.in_session
    assert sink.handovers == []
    await loop.flush()  # what the cancelled session decided is still there
    (allocated, end) = sink.decisions
    assert isinstance(allocated, JobAllocated)
    assert isinstance(end, SessionEnd)
    assert (end.allocated, end.pended) == (1, 0)


class SlowSink(Sink):
    """Records each hand-over and takes a few milliseconds over each (a store)."""

    async def __call__(self, decisions: list[Decision]) -> None:
        self.handovers.append(decisions)
        await anyio.sleep(0.005)


def timeless(decisions: list[Decision]) -> list[Decision]:
    return [
        msgspec.structs.replace(d, elapsed_s=0.0) if isinstance(d, SessionEnd) else d
        for d in decisions
    ]


def big_stream(jobs: int) -> list[object]:
    return [up(f"h{i}", 8) for i in range(jobs // 8)] + [submit(f"j{i}") for i in range(jobs)]


async def test_a_streamed_session_is_handed_over_in_pieces_as_it_runs() -> None:
    # yield_every=1: the session yields at every step, so the hand-over task
    # runs while it does (as it would in a long session).
    config = SchedulerConfig(yield_every=1, yield_interval=0)
    whole, pieces = Sink(), SlowSink()
    await SchedulerLoop(SchedulerCore(config), whole).apply([*big_stream(4000), GO])
    streamed = SchedulerLoop(SchedulerCore(config), pieces, stream_from=100)
    await streamed.apply([*big_stream(4000), GO, submit("late"), GO])
    assert timeless(pieces.decisions[: len(whole.decisions)]) == timeless(whole.decisions)
    session = pieces.handovers[:-1]  # the last: the second session, whole
    assert len(session) > 2  # handed over while it ran, and the rest at its end
    assert all(len(piece) >= 100 for piece in session[:-1])
    assert [kinds(p).count("SessionEnd") for p in session] == [0] * (len(session) - 1) + [1]
    assert kinds(pieces.handovers[-1]) == ["JobPended", "SessionEnd"]


async def test_a_streamed_sessions_sink_error_is_raised_as_itself() -> None:
    class Refused(Exception):
        pass

    async def refuse(decisions: list[Decision]) -> None:
        raise Refused

    loop = SchedulerLoop(
        SchedulerCore(SchedulerConfig(yield_every=1, yield_interval=0)), refuse, stream_from=10
    )
    try:
        await loop.apply([*big_stream(400), GO])
    except Refused:
        pass
    else:
        raise AssertionError("the sink's error was not raised")


def test_stream_from_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="stream_from must be at least 1, not 0"):
        SchedulerLoop(SchedulerCore(), Sink(), stream_from=0)
