"""Defence in depth (issue #10): a plugin or a state method that raises is a fault
the core survives. It is reported as a decision ("internal error: ..."), the
good events around it are still decided, no claim of a failed attempt stays
behind, and cancellation is never swallowed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from events import (
    Decision,
    EventRejected,
    JobCancelled,
    JobFinished,
    JobPended,
    JobRejected,
    Limit,
    LimitsConfig,
    QueueConfig,
    SessionEnd,
    WorkerDown,
)
from tests.core.test_invariants import check_invariants
from tests.core.test_session import registry_with
from tests.helpers import GO, allocations, ends, pends, submit, up
from xce_core import (
    JobState,
    Registry,
    SchedulerConfig,
    SchedulerCore,
    open_scheduler,
    process_events,
)
from xce_core._sleep import Sleepers
from xce_core._state import ClusterState
from xce_core.plugin import (
    Allocator,
    Job,
    Picker,
    PlanIterator,
    PrimaryRequest,
    Queue,
    SchedContext,
)


class ExplodingAllocator(Allocator):
    """Delegates to a real allocator, except for jobs whose id starts with "bad":
    for those it claims a host tentatively, then raises (the worst moment)."""

    def __init__(self, name: str, inner: Allocator) -> None:
        self.name = name
        self.inner = inner

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        return self.inner.plans(request, ctx)

    async def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> bool:
        if ctx.job.job_id.startswith("bad"):
            worker = next(w for w in ctx.state.live_workers() if ctx.free_slots(w) > 0)
            ctx.claim(worker, 1, ())
            raise RuntimeError(f"allocator exploded on {ctx.job.job_id}")
        return await self.inner.allocate(request, ctx)


def exploding_registry() -> Registry:
    real = Registry().load_entry_points()
    return registry_with(
        ExplodingAllocator("boom_seq", real.allocator("seqjob")),
        ExplodingAllocator("boom_par", real.allocator("parjob")),
    )


EXPLODING = SchedulerConfig(sequential_allocator="boom_seq", parallel_allocator="boom_par")


class PickyPicker(Picker):
    """fcfs's order, but it cannot order mallory's jobs."""

    name = "picky"

    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        if job.user == "mallory":
            raise ValueError("no order for mallory")
        return (-job.priority, job.submit_time, job.seq)


class Faults:
    """An ``on_internal_error`` hook that keeps what it is given."""

    def __init__(self) -> None:
        self.seen: list[tuple[Exception, Decision]] = []

    def __call__(self, exc: Exception, decision: Decision) -> None:
        self.seen.append((exc, decision))


def internal(decisions: list[Decision]) -> list[Decision]:
    """Decisions that report a fault."""
    return [
        d
        for d in decisions
        if (isinstance(d, EventRejected | JobRejected) and d.error.startswith("internal error: "))
        or (isinstance(d, JobPended) and d.reason == "internal_error")
    ]


@pytest.mark.parametrize("batch_size", [256, 2])  # inline session, and picker/allocator tasks
async def test_a_raising_allocator_pends_its_job_and_the_session_goes_on(batch_size: int) -> None:
    faults = Faults()
    config = SchedulerConfig(
        sequential_allocator="boom_seq", parallel_allocator="boom_par", batch_size=batch_size
    )
    core = SchedulerCore(config, registry=exploding_registry(), on_internal_error=faults)
    events = [up("a", 4), up("b", 4), submit("j1"), submit("bad1"), submit("j2", tasks=3)]
    events += [submit("bad2", tasks=2), submit("j3", tasks=4), GO]
    out = await process_events(events, core=core)

    assert allocations(out) == {"j1": [("a", 1)], "j2": [("a", 3)], "j3": [("b", 4)]}
    bad = pends(out)
    assert set(bad) == {"bad1", "bad2"}
    for job_id in ("bad1", "bad2"):
        assert bad[job_id].reason == "internal_error"
        assert (
            bad[job_id].detail == f"internal error: RuntimeError: allocator exploded on {job_id}"
        )
    assert ends(out)[-1].allocated == 3
    # The tentative claims of the failed attempts left nothing behind.
    check_invariants(core)
    assert core.state.by_name["a"].used_slots == 4
    assert core.state.by_name["b"].used_slots == 4
    # The hook saw each fault with its traceback and the decision reporting it.
    assert [(type(e), d.job_id) for e, d in faults.seen] == [
        (RuntimeError, "bad1"),
        (RuntimeError, "bad2"),
    ]
    assert all(e.__traceback__ is not None for e, _ in faults.seen)


async def test_a_job_that_raised_is_tried_again_and_reported_once() -> None:
    core = SchedulerCore(EXPLODING, registry=exploding_registry())
    first = await process_events([up("a", 2), submit("bad"), submit("j"), GO], core=core)
    assert [d.job_id for d in internal(first)] == ["bad"]
    # Same fault next session: no new decision (the category did not change)...
    second = await process_events([GO], core=core)
    assert [type(d) for d in second] == [SessionEnd]
    assert second[0] == SessionEnd(session=2, allocated=0, pended=1, elapsed_s=second[0].elapsed_s)
    # ...and the job stays pending, so it can still be cancelled like any other.
    third = await process_events([JobCancelled(job_id="bad"), GO], core=core)
    assert not internal(third)
    check_invariants(core)


async def test_a_failed_commit_pends_the_job_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    commit = ClusterState.commit

    def failing_commit(self: ClusterState, job: Job, *args: Any) -> None:
        if job.job_id == "bad":
            raise KeyError("lost a worker")
        commit(self, job, *args)

    monkeypatch.setattr(ClusterState, "commit", failing_commit)
    core = SchedulerCore()
    events = [up("a", 2), submit("j1"), submit("bad"), submit("j2"), GO]
    out = await process_events(events, core=core)
    assert allocations(out) == {"j1": [("a", 1)], "j2": [("a", 1)]}
    (fault,) = internal(out)
    assert fault == JobPended(
        session=1,
        job_id="bad",
        reason="internal_error",
        detail="internal error: KeyError: 'lost a worker'",
    )
    check_invariants(core)


async def test_a_raising_state_method_rejects_only_its_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: ClusterState, name: str) -> None:
        raise RuntimeError("worker_down is broken")

    monkeypatch.setattr(ClusterState, "worker_down", broken)
    faults = Faults()
    core = SchedulerCore(on_internal_error=faults)
    events = [up("a", 1), submit("j1"), WorkerDown(name="a"), up("b", 1), submit("j2"), GO]
    out = await process_events(events, core=core)

    assert out[0] == EventRejected(
        index=2, error="internal error: RuntimeError: worker_down is broken"
    )
    assert allocations(out) == {"j1": [("a", 1)], "j2": [("b", 1)]}
    assert [d for _, d in faults.seen] == [out[0]]


async def test_an_event_that_raised_half_way_leaves_no_group_asleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The finish is in the state when telling the sleepers raises: the event
    # is rejected as an internal error, and every sleeping group wakes, so the
    # job that waited for the freed host starts in the next session.
    calls = 0
    released = Sleepers.released

    def broken(self: Sleepers, workers: Any, free: int) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("released is broken")

    core = SchedulerCore()
    await process_events([up("a", 1), submit("j1"), submit("j2"), GO], core=core)
    assert core._pending.sleeping_groups == 1  # j2's group: the one host is taken
    monkeypatch.setattr(Sleepers, "released", broken)
    out = await process_events([JobFinished(job_id="j1"), GO], core=core)
    monkeypatch.setattr(Sleepers, "released", released)
    assert calls == 1
    assert isinstance(out[0], EventRejected)
    assert "released is broken" in out[0].error
    assert allocations(out) == {"j2": [("a", 1)]}


async def test_a_job_whose_admission_raised_is_rejected_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The picker raises after the state took the job in.
    registry = registry_with(pickers=(PickyPicker(),))
    core = SchedulerCore(SchedulerConfig(picker="picky"), registry=registry)
    events = [up("a", 2), submit("j1"), submit("m", user="mallory"), submit("j2"), GO]
    out = await process_events(events, core=core)

    assert out[0] == JobRejected(
        job_id="m", error="internal error: ValueError: no order for mallory"
    )
    assert allocations(out) == {"j1": [("a", 1)], "j2": [("a", 1)]}
    # The half-admitted job is a rejected one: not pending, its id taken.
    check_invariants(core)
    assert core.state.job_state("m") is JobState.REJECTED
    again = await process_events([submit("m"), JobCancelled(job_id="m")], core=core)
    assert [d.error for d in again] == [
        "duplicate job id 'm'",
        "job 'm' is already rejected",
    ]


async def test_a_queue_config_whose_picker_raises_changes_nothing() -> None:
    core = SchedulerCore(registry=registry_with(pickers=(PickyPicker(),)))
    jobs = [submit(f"j{i}", queue="q", priority=i, user=u) for i, u in enumerate("abcm")]
    jobs[-1] = submit("m", queue="q", priority=3, user="mallory")
    await process_events([up("a"), *jobs], core=core)
    keys = {job_id: job.key for job_id, job in core.state.jobs.items()}

    out = await process_events([QueueConfig(name="q", priority=5, picker="picky"), GO], core=core)
    assert out[0] == EventRejected(
        index=5, error="internal error: ValueError: no order for mallory"
    )
    queue = core.state.queues["q"]
    assert (queue.priority, queue.picker) == (0, None)
    assert {job_id: job.key for job_id, job in core.state.jobs.items()} == keys
    assert allocations(out) == {"m": [("a", 1)]}  # fcfs: the highest priority
    check_invariants(core)


class FullJobTable(dict[str, Job]):
    """A table of jobs with no room for one more."""

    def __setitem__(self, job_id: str, job: Job) -> None:
        raise MemoryError("no room for jobs")


# A fairshare queue's job is admitted by ClusterState.job_submitted; a plain
# queue's, the usual, inline by the core (SchedulerCore._submit).
@pytest.mark.parametrize("queue", ["", "fair"])
async def test_a_submission_raising_before_the_state_took_it_is_rejected(queue: str) -> None:
    core = SchedulerCore()
    core.state.jobs = FullJobTable()
    out = await process_events(
        [up("a"), QueueConfig(name="fair", picker="fairshare"), submit("j", queue=queue), GO],
        core=core,
    )
    assert out[0] == JobRejected(job_id="j", error="internal error: MemoryError: no room for jobs")
    check_invariants(core)
    assert core.state.job_state("j") is JobState.REJECTED


async def test_a_session_that_raises_ends_cleanly_and_the_core_goes_on() -> None:
    class UnorderedPicker(Picker):
        """Breaks the picker contract: "odd" jobs get a key that cannot be
        compared with the others', so the session's merge raises."""

        name = "unordered"

        def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
            return (None if job.user == "odd" else 0, job.seq)

    registry = registry_with(pickers=(UnorderedPicker(),))
    faults = Faults()
    core = SchedulerCore(registry=registry, on_internal_error=faults)
    events = [up("a", 2), QueueConfig(name="q", picker="unordered")]
    # "o" has another shape, so it is in another group: the merge compares them.
    events += [submit("j", queue="q"), submit("o", "span[hosts=1]", queue="q", user="odd"), GO]
    out = await process_events(events, core=core)

    (fault, end) = out
    assert isinstance(fault, EventRejected)
    assert fault.index == 4  # the session_begin that asked for the session
    assert fault.error.startswith("internal error: session 1 stopped: TypeError: ")
    assert end == SessionEnd(session=1, allocated=0, pended=0, elapsed_s=end.elapsed_s)
    assert not core.in_session
    assert [d for _, d in faults.seen] == [fault]
    # The core keeps running: without the odd job, the next session works.
    out = await process_events([JobCancelled(job_id="o"), GO], core=core)
    assert allocations(out) == {"j": [("a", 1)]}
    check_invariants(core)


async def test_cancellation_is_never_taken_for_a_fault() -> None:
    class Stuck(Allocator):
        name = "stuck"

        def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
            raise NotImplementedError

        async def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> bool:
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    core = SchedulerCore(
        SchedulerConfig(sequential_allocator="stuck"), registry=registry_with(Stuck())
    )
    core.apply(up("a"))
    core.apply(submit("j"))
    with anyio.move_on_after(0.05) as scope:
        await core.run_session()
    assert scope.cancelled_caught
    assert not internal(core.take_decisions())
    assert core.state.jobs["j"].state.value == "pending"


async def test_open_scheduler_decides_every_good_event_around_the_faults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: ClusterState, name: str) -> None:
        raise RuntimeError("worker_down is broken")

    monkeypatch.setattr(ClusterState, "worker_down", broken)
    faults = Faults()
    got: list[Decision] = []
    async with (
        anyio.create_task_group() as tg,
        open_scheduler(EXPLODING, registry=exploding_registry(), on_internal_error=faults) as s,
    ):

        async def read() -> None:
            async for d in s.decisions():
                got.append(d)

        tg.start_soon(read)
        await s.send_batch([up("a", 2), submit("j1"), submit("bad"), WorkerDown(name="a"), GO])
        await s.send_batch([up("b", 1), submit("j2"), GO])
    # Leaving the block was normal; every good event was decided.
    assert allocations(got) == {"j1": [("a", 1)], "j2": [("a", 1)]}
    assert [type(d) for d in internal(got)] == [EventRejected, JobPended]
    assert len(ends(got)) == 2
    # The hook hears of every fault, also the job that raised again in session
    # 2 (a decision only reports a change of reason).
    assert [type(e) for e, _ in faults.seen] == [RuntimeError] * 3


async def test_a_parked_job_is_not_lost_when_putting_it_back_raises() -> None:
    # The limits lifted, ann's parked job goes back to its group; should its
    # order key raise on the way, it stays parked (still pending, still
    # counted) and the next limits change puts it back.
    two = LimitsConfig(limits=[Limit(name="u2", per_user=["all"], slots=2)])
    core = SchedulerCore()
    await process_events([up("a", 4), two, submit("big", tasks=3, user="ann"), GO], core=core)
    job = core.state.jobs["big"]
    assert job in core._pending.parked
    keys = core.state.order_key

    def broken(*args: Any) -> tuple[Any, ...]:
        raise RuntimeError("no key")

    core.state.order_key = broken
    out = await process_events([LimitsConfig(limits=[]), GO], core=core)
    assert [d.error for d in out if isinstance(d, EventRejected)] == [
        "internal error: RuntimeError: no key"
    ]
    assert job in core._pending.parked
    assert ends(out)[-1].pended == 1
    core.state.order_key = keys
    out = await process_events([LimitsConfig(limits=[]), GO], core=core)
    assert allocations(out) == {"big": [("a", 3)]}
    check_invariants(core)
