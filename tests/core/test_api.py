"""The embedding API: open_scheduler, send/send_batch, decisions, run_events."""

from __future__ import annotations

import anyio
import pytest

from events import Decision, InputEvent, JobAllocated, SessionBegin, SessionEnd
from tests.helpers import GO, allocations, submit, up
from xce_core import Scheduler, SchedulerConfig, open_scheduler, run_events


async def test_open_scheduler_round_trip() -> None:
    got: list[Decision] = []
    async with anyio.create_task_group() as tg, open_scheduler() as sched:

        async def read() -> None:
            async for d in sched.decisions():
                got.append(d)

        tg.start_soon(read)
        await sched.send_batch([up("a", 2), submit("j1"), submit("j2", tasks=2)])
        await sched.send(GO)
        # Leaving the block ended the decision stream, so the reader finishes.
    assert sched.core.session_count == 1
    assert allocations(got) == {"j1": [("a", 1)]}
    assert isinstance(got[-1], SessionEnd)


async def test_decisions_readable_after_the_block() -> None:
    async with open_scheduler() as sched:
        await sched.send_batch([up("a"), submit("j"), SessionBegin()])
    out = [d async for d in sched.decisions()]
    assert [type(d) for d in out] == [JobAllocated, SessionEnd]


async def test_backpressure_bounded_input() -> None:
    async with open_scheduler(buffer=1) as sched:
        for i in range(200):
            await sched.send(submit(f"j{i}"))
        await sched.send_batch([up("a", 500), GO])
    out = [d async for d in sched.decisions()]
    assert len(allocations(out)) == 200


async def test_interval_sessions_run_when_something_changed() -> None:
    async with open_scheduler(SchedulerConfig(session_interval=0.01)) as sched:
        await sched.send_batch([up("a"), submit("j")])
        with anyio.fail_after(5):
            async for d in sched.decisions():
                if isinstance(d, SessionEnd):
                    break
    assert sched.core.session_count >= 1


def test_run_events_is_synchronous() -> None:
    out = run_events([up("a", 4), submit("j", tasks=3), GO])
    assert allocations(out) == {"j": [("a", 3)]}


async def test_reader_going_away_does_not_break_the_scheduler() -> None:
    async with open_scheduler() as sched:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    async for _ in sched.decisions():
                        pass

                tg.start_soon(read)
                await anyio.sleep(0.01)
                scope.cancel()
        # The reader is gone; sessions still run and leaving the block is clean.
        await sched.send_batch([up("a"), submit("j"), GO])
    assert sched.core.state.jobs["j"].state.value == "running"
    # What was decided meanwhile is still there to read.
    assert "j" in allocations([d async for d in sched.decisions()])


async def test_job_without_min_tasks_asks_for_exactly_max_tasks() -> None:
    from events import JobSubmitted
    from xce_core import process_events

    out = await process_events(
        [up("a", 2), up("b", 2), JobSubmitted(job_id="exact", max_tasks=8), GO]
    )
    assert allocations(out) == {}
    out = await process_events(
        [up("a", 2), up("b", 2), JobSubmitted(job_id="flex", min_tasks=1, max_tasks=8), GO]
    )
    assert allocations(out) == {"flex": [("a", 2), ("b", 2)]}


# --------------------------------------------------------------- bounded decisions


def session_of(n: int, prefix: str) -> list[InputEvent]:
    """``n`` one-task jobs and a session: n + 1 decisions (the last n pend)."""
    return [*(submit(f"{prefix}{i}") for i in range(n)), GO]


async def test_a_slow_reader_keeps_the_decision_buffer_bounded() -> None:
    limit, per_session, sessions = 20, 7, 30  # each session: 7 pends + session_end
    peaks: list[int] = []
    got: list[list[Decision]] = []
    async with anyio.create_task_group() as tg, open_scheduler(decision_buffer=limit) as sched:

        async def read_slowly() -> None:
            async for batch in sched.decision_batches():
                peaks.append(sched.statistics().decisions_buffered)
                got.append(batch)
                await anyio.sleep(0.005)

        tg.start_soon(read_slowly)
        for s in range(sessions):
            await sched.send_batch(session_of(per_session, f"s{s}-"))
    stats = sched.statistics()
    # Never more than the bound plus one hand-over (a session's worth).
    assert stats.decisions_peak <= limit + per_session + 1
    assert max(peaks) <= limit + per_session + 1
    assert stats.decisions_peak >= limit  # the reader really was slow
    assert (stats.decisions_buffered, stats.decision_limit) == (0, limit)
    # Nothing was lost or reordered, and every hand-over is one whole session.
    assert [b[-1].session for b in got] == list(range(1, sessions + 1))  # type: ignore[union-attr]
    assert all(len(b) == per_session + 1 for b in got)


async def test_a_reader_that_stops_reading_makes_the_core_wait() -> None:
    got: list[list[Decision]] = []
    async with (
        anyio.create_task_group() as tg,
        open_scheduler(decision_buffer=10, buffer=2) as sched,
    ):
        # Each session hands over 5 decisions, and nobody reads them yet.
        with anyio.move_on_after(0.3):
            for s in range(10):
                await sched.send_batch(session_of(4, f"s{s}-"))
        # Sessions 1 and 2 wait to be read (10 decisions: the bound); session 3
        # is made and waits, whole, for room; the core applies nothing further,
        # so its input buffer (2 messages) filled and the sender had to wait.
        stats = sched.statistics()
        assert sched.core.session_count == 3
        assert stats.decisions_buffered == 10
        assert stats.event_messages_buffered == 2
        tg.start_soon(read_all, sched, got)
    # Once read, the core went on with everything that had been sent.
    assert [b[-1].session for b in got] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
    assert all(len(b) == 5 for b in got)


async def read_all(sched: Scheduler, into: list[list[Decision]]) -> None:
    async for batch in sched.decision_batches():
        into.append(batch)


async def test_decision_buffer_none_is_unbounded_and_zero_is_refused() -> None:
    async with open_scheduler(decision_buffer=None) as sched:
        for s in range(20):
            await sched.send_batch(session_of(5, f"s{s}-"))
    assert sched.statistics().decision_limit is None
    assert sched.statistics().decisions_buffered == 20 * 6
    assert len([d async for d in sched.decisions()]) == 20 * 6
    with pytest.raises(ValueError, match="decision_buffer must be at least 1"):
        async with open_scheduler(decision_buffer=0):
            pass


async def test_a_cancelled_hand_over_leaves_the_decision_buffer_as_it_was() -> None:
    from xce_core._api import _DecisionBuffer

    first = [SessionEnd(session=1, allocated=0, pended=0, elapsed_s=0.0)] * 2
    buffer = _DecisionBuffer(2)
    await buffer.put(first)
    with anyio.move_on_after(0.05) as scope:  # full: the next hand-over waits
        await buffer.put([SessionEnd(session=2, allocated=0, pended=0, elapsed_s=0.0)])
    assert scope.cancelled_caught
    assert (buffer.buffered, buffer.peak) == (2, 2)
    buffer.close()
    assert await buffer.receive() == first
    with pytest.raises(anyio.EndOfStream):
        await buffer.receive()
