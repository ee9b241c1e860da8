"""Sessions: reset-before-go ordering, deferred events, picker order, cancellation."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from events import (
    EventRejected,
    HostSlots,
    JobAllocated,
    JobFinished,
    JobPended,
    QueueConfig,
    SessionEnd,
    WorkerDown,
)
from tests.helpers import GO, allocations, ends, pends, submit, up
from xce_core import (
    JobState,
    Registry,
    SchedulerConfig,
    SchedulerCore,
    VirtualClock,
    process_events,
)
from xce_core._iterators import Allocator
from xce_core.plugin import (
    FcfsPicker,
    Job,
    Picker,
    PlanIterator,
    PlanStream,
    PrimaryRequest,
    Queue,
    SchedContext,
    Status,
)


class SpyAllocator(Allocator):
    """One-host plans; records what the session looked like when it was called."""

    name = "spy"

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int]] = []
        self.on_call: Any = None

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        return PlanStream(ctx, iter([(request.tasks,)]))

    async def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> Status:
        s = ctx.session
        self.calls.append((s.number, len(s.cache), len(s.cursors)))
        if self.on_call is not None:
            await self.on_call(ctx)
        return await super().allocate(request, ctx)


def registry_with(*allocators: Allocator, pickers: tuple[Picker, ...] = ()) -> Registry:
    reg = Registry().load_entry_points()
    for a in allocators:
        reg.register_allocator(a.name, a)
    for p in pickers:
        reg.register_picker(p.name, p)
    return reg


async def test_session_state_is_reset_before_allocators_run() -> None:
    spy = SpyAllocator()
    core = SchedulerCore(SchedulerConfig(sequential_allocator="spy"), registry=registry_with(spy))
    # Session 1: "big" cannot run and fills the cache; "ok" runs and leaves a cursor.
    out = await process_events(
        [up("a", 1), submit("big", "select[mem>10]"), submit("ok"), submit("ok2"), GO],
        core=core,
    )
    assert core.scratch.cache.enabled
    assert len(core.scratch.cache) >= 1
    assert allocations(out) == {"ok": [("a", 1)]}
    # Session 2: the first allocator call sees an empty cache and no cursors.
    spy.calls.clear()
    out = await process_events([up("b", 1), GO], core=core)
    assert spy.calls[0] == (2, 0, 0)
    assert allocations(out) == {"ok2": [("b", 1)]}


async def test_events_during_a_session_wait_until_it_ends() -> None:
    spy = SpyAllocator()
    core = SchedulerCore(SchedulerConfig(sequential_allocator="spy"), registry=registry_with(spy))
    seen: list[bool] = []

    async def meddle(ctx: SchedContext) -> None:
        if ctx.job.job_id == "j1":
            core.apply(WorkerDown(name="b"))
            core.apply(submit("late"))
            seen.append(core.state.by_name["b"].usable)
            seen.append("late" in core.state.jobs)

    spy.on_call = meddle
    out = await process_events([up("a"), up("b"), submit("j1"), submit("j2"), GO], core=core)
    assert seen == [True, False]  # nothing applied mid-session
    assert allocations(out) == {"j1": [("a", 1)], "j2": [("b", 1)]}
    assert core.state.by_name["b"].usable is False  # applied after the session
    assert core.state.jobs["late"].state is JobState.PENDING


async def test_fcfs_order_queue_priority_then_job_priority_then_submit_time() -> None:
    events = [up(f"h{i}", 1) for i in range(6)] + [
        QueueConfig(name="low", priority=1),
        QueueConfig(name="high", priority=10),
        submit("a", queue="low", submit_time=1.0),
        submit("b", queue="low", submit_time=0.5),
        submit("c", queue="low", submit_time=0.5),  # same time as b: arrival order
        submit("d", queue="high", submit_time=9.0),
        submit("e", queue="low", submit_time=5.0, priority=3),
        submit("f", queue="other", submit_time=0.0),  # unconfigured queue: priority 0
        GO,
    ]
    out = await process_events(events)
    order = [d.job_id for d in out if isinstance(d, JobAllocated)]
    assert order == ["d", "e", "b", "c", "a", "f"]


class LifoPicker(Picker):
    name = "lifo"

    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        return (-job.seq,)


async def test_per_queue_picker_override() -> None:
    reg = registry_with(pickers=(LifoPicker(),))
    core = SchedulerCore(registry=reg)
    events = [up(f"h{i}", 1) for i in range(4)] + [
        QueueConfig(name="stack", priority=5, picker="lifo"),
        submit("s1", queue="stack"),
        submit("s2", queue="stack"),
        submit("n1", queue="normal"),
        submit("n2", queue="normal"),
        GO,
    ]
    out = await process_events(events, core=core)
    assert [d.job_id for d in out if isinstance(d, JobAllocated)] == ["s2", "s1", "n1", "n2"]
    # Switching the queue back to the default picker reorders its pending jobs.
    core2 = SchedulerCore(registry=reg)
    events2 = [
        QueueConfig(name="stack", picker="lifo"),
        submit("x1", queue="stack"),
        submit("x2", queue="stack"),
        QueueConfig(name="stack", picker=None),
        up("h", 2),
        GO,
    ]
    out2 = await process_events(events2, core=core2)
    assert [d.job_id for d in out2 if isinstance(d, JobAllocated)] == ["x1", "x2"]
    assert isinstance(reg.picker("fcfs"), FcfsPicker)


async def test_cancelling_mid_allocation_leaves_state_as_before_the_attempt() -> None:
    spy = SpyAllocator()
    core = SchedulerCore(SchedulerConfig(sequential_allocator="spy"), registry=registry_with(spy))
    blocked = anyio.Event()

    async def block_on_second(ctx: SchedContext) -> None:
        if ctx.job.job_id == "j2":
            # Claim something tentatively, then hang: the cancel must drop it.
            ctx.claim(core.state.by_name["b"], 1, ())
            blocked.set()
            await anyio.sleep_forever()

    spy.on_call = block_on_second
    await process_events([up("a"), up("b"), submit("j1"), submit("j2")], core=core)
    async with anyio.create_task_group() as tg:
        tg.start_soon(core.run_session)
        await blocked.wait()
        assert core.in_session
        core.cancel_session()
    out = core.take_decisions()
    assert allocations(out) == {"j1": [("a", 1)]}  # committed work stands
    assert isinstance(out[-1], SessionEnd)
    assert out[-1].allocated == 1
    b = core.state.by_name["b"]
    assert (b.used_slots, core.state.running_on(b)) == (0, [])
    assert core.state.jobs["j2"].state is JobState.PENDING
    # The job is still schedulable afterwards.
    spy.on_call = None
    out = await process_events([GO], core=core)
    assert allocations(out) == {"j2": [("b", 1)]}


async def test_external_cancellation_propagates_and_emits_session_end() -> None:
    spy = SpyAllocator()
    core = SchedulerCore(SchedulerConfig(sequential_allocator="spy"), registry=registry_with(spy))

    async def hang(ctx: SchedContext) -> None:
        await anyio.sleep_forever()

    spy.on_call = hang
    await process_events([up("a"), submit("j")], core=core)
    with anyio.move_on_after(0.05):
        await core.run_session()
    assert not core.in_session
    assert isinstance(core.take_decisions()[-1], SessionEnd)
    assert core.state.jobs["j"].state is JobState.PENDING


async def test_long_session_yields_to_other_tasks() -> None:
    core = SchedulerCore(SchedulerConfig(yield_every=8, yield_interval=0))
    await process_events(
        [up(f"h{i}", 4) for i in range(200)] + [submit(f"j{i}") for i in range(2000)],
        core=core,
    )
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        before = ticks
        await core.run_session()
        done = True
    assert ticks - before > 10  # the session let the ticker run many times


async def test_scripted_decision_stream() -> None:
    out = await process_events(
        [
            up("a", 2, resources={"mem": 100}),
            up("b", 1),
            submit("p", "rusage[mem=40]", tasks=2),
            submit("q", "select[gpu>0]"),
            submit("r"),
            GO,
            submit("q", ""),  # duplicate id
            GO,
        ]
    )
    assert [type(d).__name__ for d in out] == [
        "JobAllocated",
        "JobPended",
        "JobAllocated",
        "SessionEnd",
        "EventRejected",
        "SessionEnd",
    ]
    assert out[0] == JobAllocated(session=1, job_id="p", hosts=[HostSlots(host="a", slots=2)])
    assert isinstance(out[1], JobPended)
    assert (out[1].job_id, out[1].reason, out[1].cached) == ("q", "no_matching_host", False)
    assert "select not satisfied" in out[1].detail
    assert out[2] == JobAllocated(session=1, job_id="r", hosts=[HostSlots(host="b", slots=1)])
    first, second = ends(out)
    assert (first.session, first.allocated, first.pended) == (1, 2, 1)
    assert isinstance(out[4], EventRejected)
    assert out[4].index == 6
    # Session 2: q still pends with the same category, so no new job_pended.
    assert (second.session, second.allocated, second.pended) == (2, 0, 1)


@pytest.mark.parametrize("backlog", [0, 1000])  # inline session / picker+allocator tasks
async def test_strict_fifo_stops_at_first_job_that_cannot_start(backlog: int) -> None:
    filler = [submit(f"f{i}", submit_time=-1.0) for i in range(backlog)]
    events = [up("a", 2 + backlog), *filler, submit("big", tasks=3), submit("small"), GO]
    lsf = await process_events(events)
    fifo = await process_events(events, SchedulerConfig(strict_fifo=True))
    assert "small" in allocations(lsf)
    assert len(allocations(fifo)) == backlog
    assert "small" not in allocations(fifo)
    assert [e.pended for e in ends(fifo)] == [1]  # only "big" was covered


@pytest.mark.parametrize("backlog", [0, 1000])  # inline session / picker+allocator tasks
async def test_strict_fifo_jobs_behind_the_stop_pend_once_naming_it(backlog: int) -> None:
    filler = [submit(f"f{i}", submit_time=-1.0) for i in range(backlog)]
    events = [up("a", 2 + backlog), *filler, submit("big", tasks=3), submit("s1"), submit("s2")]
    events += [GO, submit("s3"), GO, GO]
    out = await process_events(events, SchedulerConfig(strict_fifo=True))
    pended = [d for d in out if isinstance(d, JobPended)]
    told = pends(out)
    assert told["big"].reason == "not_enough_slots"
    for name in ("s1", "s2", "s3"):
        assert told[name].reason == "fifo_order"
        assert told[name].detail == (
            "strict FIFO: behind job big, which cannot start (not_enough_slots)"
        )
    # Each once: s1 and s2 in session 1, s3 (submitted after it) in session 2,
    # nothing new in session 3; none of them is counted as tried.
    behind = [(p.job_id, p.session) for p in pended if p.reason == "fifo_order"]
    assert behind == [("s1", 1), ("s2", 1), ("s3", 2)]
    assert [e.pended for e in ends(out)] == [1, 1, 1]


async def test_a_strict_fifo_job_tried_at_last_gets_its_own_reason() -> None:
    events = [up("a", 2), submit("r", tasks=2), submit("big", tasks=2), submit("c", "select[x]")]
    events += [GO, JobFinished(job_id="r"), GO]
    out = await process_events(events, SchedulerConfig(strict_fifo=True))
    reasons = [(p.session, p.job_id, p.reason) for p in out if isinstance(p, JobPended)]
    assert reasons == [
        (1, "big", "not_enough_slots"),
        (1, "c", "fifo_order"),
        (2, "c", "no_matching_host"),  # big started: c was tried
    ]


async def test_without_strict_fifo_no_job_pends_for_fifo_order() -> None:
    events = [up("a", 2), submit("big", tasks=3), submit("s1"), submit("s2"), GO]
    out = await process_events(events)
    assert "fifo_order" not in {p.reason for p in pends(out).values()}
    assert allocations(out).keys() == {"s1", "s2"}


@pytest.mark.parametrize("cache", [True, False])
async def test_jobs_of_one_shape_pend_together_and_report_once(cache: bool) -> None:
    events = [up("a", 1), *[submit(f"j{i}", "select[mem>1]") for i in range(50)], GO, GO]
    out = await process_events(events, SchedulerConfig(unsatisfiable_cache=cache))
    pended = [d for d in out if isinstance(d, JobPended)]
    assert len(pended) == 50  # each reported once, not again in session 2
    assert all(p.reason == "no_matching_host" for p in pended)
    assert [p.cached for p in pended].count(False) == (1 if cache else 50)
    assert [(e.pended, e.allocated) for e in ends(out)] == [(50, 0), (50, 0)]


async def test_cancel_during_real_allocation_leaves_only_whole_allocations() -> None:
    from tests.core.test_invariants import check_invariants

    core = SchedulerCore(SchedulerConfig(yield_every=1, yield_interval=0))
    events = [up(f"h{i}", 1) for i in range(64)]
    events += [submit(f"j{i}", tasks=1 + i % 7) for i in range(200)]
    await process_events(events, core=core)
    ticks = 0

    async with anyio.create_task_group() as tg:
        tg.start_soon(core.run_session)
        while ticks < 40:  # let it get into the bucket loops, then cancel
            ticks += 1
            await anyio.lowlevel.checkpoint()
        core.cancel_session()
    end = core.take_decisions()[-1]
    assert isinstance(end, SessionEnd)
    assert end.allocated > 0
    assert end.allocated + end.pended < 200  # stopped before covering every job
    check_invariants(core)
    assert core.state.running_count == end.allocated
    assert sum(w.used_slots for w in core.state.live_workers()) == sum(
        sum(n for _, n in j.allocation) for j in core.state.jobs.values() if j.allocation
    )


@pytest.mark.parametrize("strict_fifo", [False, True])
async def test_cancel_of_an_inline_session_stops_at_its_next_step(strict_fifo: bool) -> None:
    """A session of at most batch_size jobs runs inline, and with the built-in
    allocators without a cancel scope: cancel_session() must still stop it at its
    next plan or host step, with only whole allocations left behind."""
    from tests.core.test_invariants import check_invariants

    core = SchedulerCore(SchedulerConfig(yield_every=1, yield_interval=0, strict_fifo=strict_fifo))
    events = [up(f"h{i}", 1) for i in range(64)]
    # Every job fits: a session that ran to its end would start all 40.
    events += [submit(f"j{i}", tasks=1 + i % 2) for i in range(40)]
    await process_events(events, core=core)

    async with anyio.create_task_group() as tg:
        tg.start_soon(core.run_session)
        for _ in range(20):  # into the session's steps, then cancel
            await anyio.lowlevel.checkpoint()
        assert core.in_session
        core.cancel_session()
    assert not core.in_session
    out = core.take_decisions()
    end = out[-1]
    assert isinstance(end, SessionEnd)
    assert 0 < end.allocated < 40
    check_invariants(core)
    assert core.state.running_count == end.allocated
    assert sum(w.used_slots for w in core.state.live_workers()) == sum(
        sum(n for _, n in j.allocation) for j in core.state.jobs.values() if j.allocation
    )
    # The jobs it did not reach are tried next time, and all fit.
    out = await process_events([GO], core=core)
    assert len(allocations(out)) == 40 - end.allocated


class ConstantPicker(Picker):
    """A careless plugin: every job has the same key."""

    name = "constant"

    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        return (0,)


async def test_picker_with_ties_still_schedules_every_group() -> None:
    core = SchedulerCore(
        SchedulerConfig(picker="constant"), registry=registry_with(pickers=(ConstantPicker(),))
    )
    events = [up("a", 8)] + [
        submit(f"j{i}", f"rusage[mem={i}]" if i % 2 else "") for i in range(6)
    ]
    out = await process_events([*events, up("a", 8, {"mem": 100}), GO], core=core)
    assert len(allocations(out)) == 6


async def test_the_static_select_memo_is_bounded() -> None:
    # A stream of distinct static selects: the memo keeps at most max_refs
    # worker references, dropping the least recently used selects.
    core = SchedulerCore()
    core.scratch.static_memo.max_refs = 50
    events: list[Any] = [up(f"h{i}", 1, type="a") for i in range(10)]
    events += [submit(f"j{i}", f"select[type==a && ncpus>={-i}]", 1) for i in range(40)]
    events.append(GO)
    await process_events(events, core=core)
    memo = core.scratch.static_memo
    assert memo.refs <= 50
    assert 0 < len(memo) <= 5


@pytest.mark.parametrize("sleep", [True, False])
async def test_group_settlement_counts_every_member_and_reports_only_changes(sleep: bool) -> None:
    core = SchedulerCore(SchedulerConfig(sleep_blocked_groups=sleep))
    jobs = [submit(f"j{i}") for i in range(40)]
    out = await process_events([up("a", 1), *jobs, GO], core=core)
    # The first batch (16 jobs) is decided job by job: j0 starts, j1 fails and
    # fills the cache, j2-j15 are cache hits. The rest of the group is then
    # settled whole; j0 having started, members are checked one by one.
    assert allocations(out) == {"j0": [("a", 1)]}
    pended = pends(out)
    assert sorted(pended, key=lambda j: int(j[1:])) == [f"j{i}" for i in range(1, 40)]
    assert [j for j, p in pended.items() if not p.cached] == ["j1"]
    assert core.last_session is not None
    assert (core.last_session.pended, core.last_session.cache_hits) == (39, 38)
    # Next session the settled group is counted whole; only the new member,
    # whose category changed (it had none), is reported.
    out = await process_events([submit("j40"), GO], core=core)
    assert list(pends(out)) == ["j40"]
    assert pends(out)["j40"].cached
    # Asleep, the group is not even attempted (nothing freed could help it);
    # awake, its first member is attempted again and the rest are hits.
    hits = 40 if sleep else 39
    assert (core.last_session.pended, core.last_session.cache_hits) == (40, hits)
    assert ends(out)[0].pended == 40


async def test_allocators_see_the_sessions_time_on_the_injected_clock() -> None:
    spy = SpyAllocator()
    clock = VirtualClock(1000.0)
    core = SchedulerCore(
        SchedulerConfig(sequential_allocator="spy"), registry=registry_with(spy), clock=clock
    )
    seen: list[float] = []

    async def note(ctx: SchedContext) -> None:
        seen.append(ctx.now)
        clock.advance_to(ctx.now + 5.0)  # time moving mid-session changes nothing

    spy.on_call = note
    await process_events([up("a", 4), submit("j1"), submit("j2"), GO], core=core)
    clock.advance_to(2000.0)
    await process_events([submit("j3"), GO], core=core)
    assert seen == [1000.0, 1000.0, 2000.0]  # one reading per session


async def test_a_select_on_slots_reads_the_values_when_first_tried_this_session() -> None:
    # j1 starts first, so j2's select[slots>=5] reads 4 free slots: no match.
    later = [up("h1", 5), submit("j1"), submit("j2", "select[slots>=5]"), GO]
    assert pends(await process_events(later))["j2"].reason == "no_matching_host"
    # Tried first, it matched: a wider job of the same select then pends for
    # slots on that host, not for a select it no longer satisfies live.
    first = [up("h1", 4), submit("j1", "select[slots>3]"), submit("j2", "select[slots>3]", 4)]
    out = await process_events([*first, GO])
    assert "j1" in allocations(out)
    assert (pends(out)["j2"].reason, pends(out)["j2"].detail) == (
        "not_enough_slots",
        "4 tasks wanted, 3 slots free in the cluster",
    )
    # Tried first, it matched nothing: a job of the same select tried after a
    # start that would make it match live still finds no matching host.
    rest = [submit("j1"), submit("j2", "select[slots<2]"), submit("j3")]
    rest.append(submit("j4", "select[slots<2] rusage[x=1]"))
    out = await process_events([up("h", 3), *rest, GO])
    assert (pends(out)["j4"].reason, pends(out)["j4"].detail) == (
        "no_matching_host",
        "1 host: select not satisfied",
    )
    # A job that pends without an attempt (its parts want more slots than
    # are free) still reads its select first: later jobs read it as it did.
    rest = [submit("c", "1*{select[slots>3]} + 4*{}")]
    rest.append(submit("j", "select[slots>3]", submit_time=8))
    out = await process_events([up("h", 4), *rest, submit("w", "1*{} + 3*{}", 4), GO])
    assert "w" in allocations(out)
    assert pends(out)["j"].reason == "not_enough_slots"


async def test_the_order_of_a_two_task_sessions_decisions_does_not_depend_on_time() -> None:
    # A session too big for one batch runs as a picker task and an allocator
    # task; where the allocator yields decides how far the picker runs ahead,
    # and so whether a failed shape's later jobs pend together or one by one.
    # A time budget would make that depend on the machine's speed: a two-task
    # session keeps the step budget, whatever yield_interval says.
    events = [up(f"h{i}", 8) for i in range(10)]
    events += [submit(f"j{i}", tasks=1 + i % 2) for i in range(600)]
    runs = []
    for interval in (0.0, 1000.0):  # steps alone; a time budget never spent
        config = SchedulerConfig(batch_size=16, yield_every=4, yield_interval=interval)
        out = await process_events([*events, GO], core=SchedulerCore(config))
        # session_end's elapsed_s is wall time: the rest must match exactly.
        runs.append([d for d in out if not isinstance(d, SessionEnd)])
    assert len(runs[0]) == 600  # a decision per job
    assert runs[0] == runs[1]
