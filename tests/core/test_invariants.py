"""Req 9.4: random event streams keep every invariant, with the real allocators.

After every session: no worker's slots or consumables and no shared resource
over its total, every job in exactly one state, every allocation consistent
with the state; and the unsatisfiable cache never changes a decision.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import (
    EventRejected,
    InputEvent,
    JobAllocated,
    JobCancelled,
    JobFinished,
    JobPended,
    JobRejected,
    SessionBegin,
    SessionEnd,
    SharedResource,
    WorkerDown,
    WorkerRemoved,
)
from tests.helpers import submit, up
from xce_core import JobState, SchedulerConfig, SchedulerCore, process_events
from xce_core.plugin import AMOUNT_TOLERANCE

NAMES = [f"w{i}" for i in range(6)]
RESREQS = [
    "",
    "select[type==a]",
    "rusage[mem=100]",
    "rusage[mem=30] span[ptile=2]",
    "span[hosts=1]",
    "rusage[lic=1]",
    "same[type]",
    "order[-mem] rusage[mem=10]",
    "2*{select[type==a]} + 1*{select[type==b] rusage[mem=50]}",
    "{select[type==b] rusage[lic=2]} || {span[hosts=1]}",
    "select[mem>200]",
]


def ops_over(resreqs: list[str], names: list[str], sessions: int = 1) -> st.SearchStrategy[tuple]:  # type: ignore[type-arg]
    """One random operation: a worker (up, down, removed) of ``names``, the
    licence pool, a submission of one of ``resreqs``, a finish, a cancel or a
    session (``sessions`` times as likely as one of the others)."""
    return st.one_of(
        st.tuples(
            st.just("up"),
            st.sampled_from(names),
            st.integers(0, 4),
            st.sampled_from([0, 100, 300]),
            st.sampled_from(["a", "b"]),
        ),
        st.tuples(st.just("down"), st.sampled_from(names)),
        st.tuples(st.just("remove"), st.sampled_from(names)),
        st.tuples(st.just("lic"), st.integers(0, 3)),
        st.tuples(
            st.just("submit"),
            st.sampled_from(resreqs),
            st.integers(1, 5),
            st.integers(0, 2),
            st.integers(0, 2),
        ),
        st.tuples(st.just("finish"), st.integers(0, 40)),
        st.tuples(st.just("cancel"), st.integers(0, 40)),
        *[st.tuples(st.just("session"))] * sessions,
    )


op = ops_over(RESREQS, NAMES)


def to_events(ops: list[tuple]) -> list[InputEvent]:  # type: ignore[type-arg]
    events: list[InputEvent] = []
    n = 0
    for o in ops:
        kind = o[0]
        if kind == "up":
            events.append(up(o[1], o[2], {"mem": float(o[3])}, type=o[4]))
        elif kind == "down":
            events.append(WorkerDown(name=o[1]))
        elif kind == "remove":
            events.append(WorkerRemoved(name=o[1]))
        elif kind == "lic":
            events.append(SharedResource(name="lic", total=float(o[1])))
        elif kind == "submit":
            events.append(submit(f"j{n}", o[1], o[2], min=max(1, o[2] - o[3]), priority=o[4]))
            n += 1
        elif kind == "finish":
            events.append(JobFinished(job_id=f"j{o[1]}"))
        elif kind == "cancel":
            events.append(JobCancelled(job_id=f"j{o[1]}"))
        else:
            events.append(SessionBegin())
    events.append(SessionBegin())
    return events


def check_invariants(core: SchedulerCore) -> None:
    state = core.state
    slots: Counter[str] = Counter()
    amounts: Counter[tuple[str, str]] = Counter()
    shared: Counter[str] = Counter()
    states = Counter(job.state for job in state.jobs.values())
    assert states[JobState.PENDING] == state.pending_count
    assert states[JobState.RUNNING] == state.running_count
    # The capacity totals the state keeps incrementally match a recount.
    usable = [w for w in state.live_workers() if w.usable]
    assert state.usable_count == len(usable)
    assert state.usable_slots == sum(w.slots for w in usable)
    assert state.free_total == sum(max(w.slots - w.used_slots, 0) for w in usable)
    assert state.free_hosts == {w for w in usable if w.slots > w.used_slots}
    for job in state.jobs.values():
        if job.state is JobState.RUNNING:
            assert job.claims, job.job_id
            placed = sum(n for _, n in job.allocation)
            assert placed == sum(n for _, n, _ in job.claims)
            assert placed >= 1
            for worker, n, rusage in job.claims:
                assert state.by_name.get(worker.name) is worker  # host still exists
                slots[worker.name] += n
                for name, amount in rusage:
                    amounts[worker.name, name] += amount
            for name, amount in job.shared_claims.items():
                shared[name] += amount
        else:
            assert not job.claims
            assert not job.shared_claims
    for w in state.live_workers():
        assert w.used_slots == slots[w.name]
        assert w.used_slots >= 0
        for name, used in w.used.items():
            assert abs(used - amounts[w.name, name]) < 1e-6
        assert set(state.running_on(w)) == {
            j.job_id
            for j in state.jobs.values()
            if j.state is JobState.RUNNING and any(x is w for x, _, _ in j.claims)
        }
    for name, used in state.shared_used.items():
        assert abs(used - shared[name]) < 1e-6
    # Every pending job is in its group, or parked (in none) because a limit
    # holds it back whatever else runs; every job such a limit holds is parked.
    parked = core._pending.parked
    for job in state.jobs.values():
        if job.state is not JobState.PENDING:
            assert job not in parked
            continue
        never = core._limits.never_for(job)
        if job.group is None:
            assert never is not None, job.job_id
            assert parked.get(job) == never, job.job_id
        else:
            assert never is None, job.job_id
            assert job not in parked, job.job_id
            assert job in job.group.jobs, job.job_id
    assert all(job.state is JobState.PENDING for job in parked)
    # Backfill's index of running jobs with run limits, and the slots each holds.
    assert set(state.held) == set(state.end_of) == {job for _, _, job in state.ends}
    for job, held in state.held.items():
        assert job.state is JobState.RUNNING
        assert held == sum(n for _, n in job.allocation)


def summarize(decisions: list) -> list:  # type: ignore[type-arg]
    """Allocations and pends per session. The cache may not change which jobs
    start or where; a hit reports the original miss's category (Req 7.5), which
    can differ from what a fresh look at the shrunken capacity would say, so
    categories are not compared."""
    out = []
    for d in decisions:
        if isinstance(d, JobAllocated):
            out.append(("alloc", d.session, d.job_id, tuple((h.host, h.slots) for h in d.hosts)))
        elif isinstance(d, SessionEnd):
            out.append(("end", d.session, str(d.allocated), (d.pended,)))
    return sorted(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=60))
async def test_random_streams_keep_invariants(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    events = to_events(ops)
    cached = SchedulerCore()
    uncached = SchedulerCore(SchedulerConfig(unsatisfiable_cache=False))
    decisions_cached: list = []  # type: ignore[type-arg]
    decisions_uncached: list = []  # type: ignore[type-arg]
    for event in events:
        for core, sink in ((cached, decisions_cached), (uncached, decisions_uncached)):
            if core.apply(event):
                await core.run_session()
                check_invariants(core)
                # Capacity was respected by every commit of the session.
                for w in core.state.live_workers():
                    assert w.used_slots <= max(w.slots, 0) or core.state.running_on(w)
            sink.extend(core.take_decisions())
    assert summarize(decisions_cached) == summarize(decisions_uncached)
    # The core survives faults (a commit that failed validation, anything that
    # raised) by reporting them as decisions: there must be none.
    assert not [
        d
        for d in decisions_cached + decisions_uncached
        if (isinstance(d, JobPended) and d.reason == "internal_error")
        or (isinstance(d, EventRejected | JobRejected) and d.error.startswith("internal error"))
    ]
    # Every allocation decision names a job that was started exactly once.
    allocated = [d.job_id for d in decisions_cached if isinstance(d, JobAllocated)]
    assert len(allocated) == len(set(allocated))


async def test_no_oversubscription_when_capacity_is_never_shrunk() -> None:
    events = [up(f"w{i}", 2, {"mem": 100.0}, type="a") for i in range(3)]
    events += [submit(f"j{i}", "rusage[mem=40]", 1 + i % 3) for i in range(20)]
    events.append(SessionBegin())
    core = SchedulerCore()
    await process_events(events, core=core)
    for w in core.state.live_workers():
        assert w.used_slots <= w.slots
        assert w.used.get("mem", 0.0) <= 100.0 + AMOUNT_TOLERANCE
    check_invariants(core)
