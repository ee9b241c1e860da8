"""EASY backfill (xce_core._backfill): hand-worked schedules, the textbook rule
as an independent reference on one-slot hosts, and properties on random traces."""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from events import (
    Decision,
    JobAllocated,
    JobFinished,
    JobPended,
    JobReserved,
    JobSubmitted,
    LimitsConfig,
    QueueConfig,
    SessionBegin,
    WorkerDown,
    WorkerUp,
)
from tests.core.test_invariants import check_invariants
from tests.core.test_invariants import op as invariant_op
from tests.core.test_invariants import to_events as invariant_events
from tests.core.test_limits import assert_within, limit_sets
from xce_core import SchedulerConfig, SchedulerCore, VirtualClock


@dataclass(frozen=True)
class TJob:
    """A trace job: ``size`` one-slot hosts for ``run`` seconds, estimated ``limit``."""

    name: str
    submit: float
    size: int
    run: float
    limit: float | None


def replay(
    jobs: list[TJob],
    hosts: int,
    backfill: str = "easy",
    resreq: str | dict[str, str] = "",
    slots: int | list[int] = 1,
) -> tuple[dict[str, float], list[object]]:
    """Drive a core over virtual time as the simulator does: at each instant,
    finishes, then submissions, then one session. Start time per job, and
    every decision. ``slots``: every host's, or each host's."""
    import anyio

    clock = VirtualClock()
    core = SchedulerCore(SchedulerConfig(backfill=backfill), clock=clock)
    for i in range(hosts):
        size = slots if isinstance(slots, int) else slots[i]
        core.apply(
            WorkerUp(
                name=f"h{i:03d}",
                slots=size,
                attrs={"type": "ab"[i % 2]},
                resources={"mem": 100.0 * size},
            )
        )
    starts: dict[str, float] = {}
    decisions: list[object] = []
    arrivals = sorted(jobs, key=lambda j: j.submit)
    by_name = {j.name: j for j in jobs}
    finishes: list[tuple[float, str]] = []

    async def run() -> None:
        i = 0
        while i < len(arrivals) or finishes:
            now = min(
                arrivals[i].submit if i < len(arrivals) else math.inf,
                finishes[0][0] if finishes else math.inf,
            )
            clock.advance_to(now)
            while finishes and finishes[0][0] == now:
                core.apply(JobFinished(job_id=heapq.heappop(finishes)[1]))
            while i < len(arrivals) and arrivals[i].submit == now:
                j = arrivals[i]
                core.apply(
                    JobSubmitted(
                        job_id=j.name,
                        submit_time=j.submit,
                        max_tasks=j.size,
                        run_limit=j.limit,
                        resreq=resreq if isinstance(resreq, str) else resreq[j.name],
                    )
                )
                i += 1
            core.apply(SessionBegin())
            await core.run_session()
            check_invariants(core)
            out = core.take_decisions()
            decisions.extend(out)
            for d in out:
                if isinstance(d, JobAllocated):
                    starts[d.job_id] = now
                    heapq.heappush(finishes, (now + by_name[d.job_id].run, d.job_id))
            if i >= len(arrivals) and not finishes and len(starts) < len(jobs):
                break  # what is left can never start

    anyio.run(run)
    return starts, decisions


def textbook_easy(
    jobs: list[TJob], hosts: int, *, one_pass_per_instant: bool = False
) -> dict[str, float]:
    """EASY as the textbooks state it, on one-slot hosts, written plainly.

    At each instant (finishes, then arrivals, then scheduling): start jobs in
    FCFS order while they fit; the first that does not fit is the head; its
    shadow time is the earliest estimated end (start + limit) of running jobs
    at which enough nodes are free for it (all jobs ending then counted), and
    the extra nodes are those free then beyond its need. A later job that fits
    now starts if it ends by the shadow time, or if it needs no more than the
    extra nodes (which it then uses up).

    A job that runs 0 s ends at the instant it starts; its end is one more
    instant, with its own pass. With ``one_pass_per_instant`` (the simulator's
    rule, as in AccaSim) it ends after that instant's pass instead, and the
    next pass is at the next arrival or end, else a second later.
    """
    queue: list[TJob] = []
    running: list[tuple[TJob, float]] = []  # job, start
    starts: dict[str, float] = {}
    pending = sorted(jobs, key=lambda j: j.submit)
    times = sorted({j.submit for j in jobs})
    t_index = 0
    now = 0.0
    retry = False  # nodes freed after the last pass while jobs wait
    while True:
        candidates = []
        if t_index < len(times):
            candidates.append(times[t_index])
        candidates += [s + j.run for j, s in running]
        if not candidates and retry:
            candidates.append(now + 1)
        if not candidates:
            break
        now = min(candidates)
        retry = False
        running = [(j, s) for j, s in running if s + j.run > now]
        while t_index < len(times) and times[t_index] <= now:
            queue += [j for j in pending if j.submit == times[t_index]]
            t_index += 1
        free = hosts - sum(j.size for j, _ in running)
        while queue and queue[0].size <= free:
            job = queue.pop(0)
            running.append((job, now))
            starts[job.name] = now
            free -= job.size
        if queue:
            head = queue[0]
            ends: dict[float, int] = {}
            for j, s in running:
                end = math.inf if j.limit is None else max(s + j.limit, now)
                ends[end] = ends.get(end, 0) + j.size
            avail, shadow, extra = free, math.inf, 0
            for end in sorted(ends):
                if end == math.inf:
                    break
                avail += ends[end]
                if avail >= head.size:
                    shadow, extra = end, avail - head.size
                    break
            for job in list(queue[1:]):
                if job.size > free:
                    continue
                if shadow == math.inf:
                    continue  # no finite reservation: the head holds every host
                if job.limit is not None and now + job.limit <= shadow:
                    pass
                elif job.size <= extra:
                    extra -= job.size
                else:
                    continue
                queue.remove(job)
                running.append((job, now))
                starts[job.name] = now
                free -= job.size
        if one_pass_per_instant and any(j.run == 0 for j, _ in running):
            running = [(j, s) for j, s in running if j.run > 0]
            retry = bool(queue)
        if t_index >= len(times) and not running and not retry:
            break
    return starts


# ---------------------------------------------------------------- hand-worked


def J(name: str, submit: float, size: int, run: float, limit: float | None = -1) -> TJob:
    return TJob(name, submit, size, run, run if limit == -1 else limit)


def test_a_short_job_backfills_before_the_reservation_and_a_long_one_does_not() -> None:
    # 4 hosts. "a" holds 3 until 10. "wide" (4) waits for t=10. "short" (1 host,
    # 5 s) ends by 10: it backfills. "long" (1 host, 20 s) would hold a host
    # the head needs at 10: it waits.
    jobs = [J("a", 0, 3, 10), J("wide", 1, 4, 5), J("short", 2, 1, 5), J("long", 2, 1, 20)]
    starts, decisions = replay(jobs, 4)
    assert starts == {"a": 0, "short": 2, "wide": 10, "long": 15}
    assert starts == textbook_easy(jobs, 4)
    reserved = [d for d in decisions if isinstance(d, JobReserved)]
    assert reserved[0].job_id == "wide"
    assert reserved[0].start == 10
    assert sum(h.slots for h in reserved[0].hosts) == 4
    # At 2 "short" took the free host; at 7 "long" fits but would delay "wide".
    blocked = [d for d in decisions if isinstance(d, JobPended) and d.job_id == "long"]
    assert [d.reason for d in blocked][:2] == ["not_enough_slots", "reserved_for_other"]
    assert "wide" in blocked[1].detail


def test_a_job_ending_exactly_at_the_reservation_backfills() -> None:
    jobs = [J("a", 0, 3, 10), J("wide", 1, 4, 5), J("edge", 2, 1, 8)]  # ends at 10
    starts, _ = replay(jobs, 4)
    assert starts == {"a": 0, "edge": 2, "wide": 10}
    assert starts == textbook_easy(jobs, 4)


def test_extra_hosts_let_a_long_job_backfill_and_are_used_up() -> None:
    # 6 hosts; "a" holds 4 until 10; the head needs 3: at 10, 6 are free, 3
    # extra. Two long 1-host jobs take 2 of the 2 free now... only 2 are free
    # now, both extra: both start. A third long one finds no free host.
    jobs = [
        J("a", 0, 4, 10),
        J("head", 1, 3, 5),
        J("l1", 2, 1, 50),
        J("l2", 2, 1, 50),
        J("l3", 3, 1, 50),
    ]
    starts, _ = replay(jobs, 6)
    assert starts == textbook_easy(jobs, 6)
    assert starts["l1"] == starts["l2"] == 2
    assert starts["head"] == 10


def test_a_head_whose_reservation_needs_several_jobs_to_end() -> None:
    jobs = [
        J("a", 0, 2, 10),
        J("b", 0, 2, 20),
        J("c", 0, 2, 30),
        J("head", 1, 5, 5),  # 1 free; 3 at 10, 5 at 20: reserved at 20, no extra
        J("s1", 2, 1, 15),  # ends at 17 <= 20: backfills on the free host
        J("s2", 2, 1, 40),  # fits at 10 but would hold a host the head needs
    ]
    starts, decisions = replay(jobs, 7)
    assert starts == textbook_easy(jobs, 7)
    assert (starts["s1"], starts["head"], starts["s2"]) == (2, 20, 25)
    assert next(d.start for d in decisions if isinstance(d, JobReserved)) == 20


def test_equal_time_events_finish_before_they_start() -> None:
    jobs = [J("a", 0, 2, 5), J("b", 5, 2, 5), J("c", 5, 1, 1), J("d", 6, 2, 1)]
    starts, _ = replay(jobs, 2)
    assert starts == textbook_easy(jobs, 2)
    assert starts["b"] == 5


def test_without_run_limits_the_head_holds_every_host_and_is_never_starved() -> None:
    # The running job has no limit: no finite reservation. A stream of narrow
    # jobs arrives; none may take a host the wide head needs.
    jobs = [J("a", 0, 2, 10, None), J("wide", 1, 4, 5, None)]
    jobs += [J(f"n{i}", 2 + i, 1, 3, None) for i in range(20)]
    starts, decisions = replay(jobs, 4)
    assert starts["wide"] == 10
    assert all(starts[f"n{i}"] >= 10 for i in range(20))
    held = [d for d in decisions if isinstance(d, JobPended) and d.job_id == "n0"]
    assert held[0].reason == "reserved_for_other"


def test_a_job_that_can_never_start_is_no_head() -> None:
    # "huge" selects hosts that do not exist: it pends for good and holds
    # nothing back.
    clock = VirtualClock()
    core = SchedulerCore(SchedulerConfig(backfill="easy"), clock=clock)
    import anyio

    async def run() -> list[object]:
        core.apply(WorkerUp(name="h", slots=1))
        core.apply(JobSubmitted(job_id="huge", resreq="select[type==x]", run_limit=5))
        core.apply(JobSubmitted(job_id="small", run_limit=5))
        await core.run_session()
        return list(core.take_decisions())

    out = anyio.run(run)
    assert [d.job_id for d in out if isinstance(d, JobAllocated)] == ["small"]
    assert not [d for d in out if isinstance(d, JobReserved)]


def test_a_job_that_can_never_start_ahead_of_the_head_leaves_its_reservation_current() -> None:
    # Two 16-slot hosts, every job on one host. "never" (17 tasks) fits no
    # host, so "head" (15) is the head: reserved at 1000, the limit of "b". "b"
    # ends early, at 300: the reservation moves to 520, when "c" ends. "late"
    # (1 task until 808) would then take a slot of the head's host: it waits.
    # (The search for "never", which found no reservation, once made the
    # head's reservation from before "b" ended look current: "late" started at
    # 350 and the head at 808.)
    jobs = [
        J("a", 0, 1, 3000),
        J("b", 0, 7, 300, 1000),
        J("x", 0, 8, 10),
        J("full", 0, 16, 5000),
        J("never", 1, 17, 10),
        J("head", 1, 15, 10),
        J("c", 20, 8, 500),
        J("late", 350, 1, 458),
    ]
    starts, decisions = replay(jobs, 2, resreq="span[hosts=1]", slots=16)
    assert starts["head"] == 520
    assert starts["late"] >= 520
    reserved = [d.start for d in decisions if isinstance(d, JobReserved) and d.job_id == "head"]
    assert reserved == [1000, 520]
    without, _ = replay(
        [j for j in jobs if j.name != "never"], 2, resreq="span[hosts=1]", slots=16
    )
    assert starts == without


def test_backfill_none_is_todays_behaviour() -> None:
    jobs = [J("a", 0, 3, 10), J("wide", 1, 4, 5), J("long", 2, 1, 20)]
    starts, _ = replay(jobs, 4, backfill="none")
    assert starts["long"] == 2  # LSF: anything that fits starts
    with pytest.raises(ValueError, match="backfill"):
        SchedulerConfig(backfill="sometimes")


# ---------------------------------------------------------------- properties

trace = st.lists(
    st.tuples(
        st.integers(0, 30),  # submit
        st.integers(1, 6),  # size
        st.integers(0, 25),  # run
        st.integers(0, 10),  # limit - run, for "over"
        st.sampled_from(["exact", "over", "none"]),  # the run limit
    ),
    min_size=1,
    max_size=25,
)


def to_jobs(rows: list[tuple[int, int, int, int, str]]) -> list[TJob]:
    limits = {"exact": lambda run, over: float(run), "over": lambda run, over: float(run + over)}
    return [
        TJob(
            f"j{i}",
            float(s),
            size,
            float(run),
            limits[kind](run, over) if kind in limits else None,
        )
        for i, (s, size, run, over, kind) in enumerate(rows)
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace)
def test_the_schedule_equals_the_textbook_rule_on_one_slot_hosts(
    rows: list[tuple[int, int, int, int, str]],
) -> None:
    jobs = to_jobs(rows)
    starts, _ = replay(jobs, 6)
    assert starts == textbook_easy(jobs, 6)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace)
def test_with_exact_limits_no_reserved_job_starts_after_its_reservation(
    rows: list[tuple[int, int, int, int, str]],
) -> None:
    jobs = [TJob(j.name, j.submit, j.size, j.run, j.run) for j in to_jobs(rows)]  # exact
    starts, decisions = replay(jobs, 6)
    promised: dict[str, float] = {}
    for d in decisions:
        if isinstance(d, JobReserved):
            promised.setdefault(d.job_id, d.start)
    for name, start in promised.items():
        assert starts[name] <= start


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace, st.lists(st.sampled_from(["", "span[hosts=1]"]), min_size=25, max_size=25))
@example(  # j8 arrived at 24, an instant of its own, until it was moved first
    rows=[(0, 1, 0, 0, "exact")] * 5
    + [(1, 3, 24, 0, "exact"), (2, 2, 0, 3, "exact"), (2, 2, 2, 0, "exact")]
    + [(24, 5, 0, 0, "exact")]
    + [(0, 1, 0, 0, "exact")] * 3
    + [(1, 5, 22, 0, "exact"), (1, 3, 24, 1, "exact"), (1, 1, 24, 0, "exact")]
    + [(1, 4, 0, 0, "exact")],
    shapes=[""] * 8 + ["span[hosts=1]"] + [""] * 6 + ["span[hosts=1]"] + [""] * 9,
)
def test_under_easy_jobs_that_can_never_start_change_no_start(
    rows: list[tuple[int, int, int, int, str]], shapes: list[str]
) -> None:
    # 3 hosts of 4 slots; run limits at or above the run times, so jobs end
    # on time or early. A job of more than 4 tasks on one host can never
    # start: it is no head and holds nothing back, so every other job starts
    # when it would without it. A head's reservations only move earlier, and
    # it starts by the last.
    jobs = [
        TJob(j.name, j.submit, j.size, j.run, max(j.run + over, 1.0))
        for j, (_, _, _, over, _) in zip(to_jobs(rows), rows, strict=True)
    ]
    resreqs = {j.name: shapes[i] for i, j in enumerate(jobs)}
    never = {j.name for j in jobs if j.size > 4 and resreqs[j.name]}
    # Such a job arrives at an instant the others make anyway: an arrival of
    # its own would be one more session, where a later job may rightly
    # backfill sooner than at the next instant without it.
    instants = sorted(j.submit for j in jobs if j.name not in never) or [0.0]
    jobs = [
        dataclasses.replace(j, submit=max([t for t in instants if t <= j.submit] or instants[:1]))
        if j.name in never
        else j
        for j in jobs
    ]
    starts, decisions = replay(jobs, 3, resreq=resreqs, slots=4)
    others = [j for j in jobs if j.name not in never]
    without, _ = replay(others, 3, resreq=resreqs, slots=4)
    assert starts == without
    promised: dict[str, list[float]] = {}
    for d in decisions:
        if isinstance(d, JobReserved):
            promised.setdefault(d.job_id, []).append(d.start)
    for name, times in promised.items():
        assert times == sorted(times, reverse=True), (name, times)
        assert starts[name] <= times[-1], (name, starts[name], times)


# ---------------------------------------------------------------- conservative


def test_conservative_reserves_every_blocked_job_and_backfills_beside_them() -> None:
    # 4 hosts. "a" holds 3 until 10; "wide" (4) is reserved at 10; "b" (2
    # hosts, 20 s) cannot start now and is reserved after "wide", at 15; "c"
    # (1 host, ends at 5) starts now beside both; "d" (1 host, 100 s) would
    # overlap them on any host until 15, where "b" leaves it two: reserved at 15.
    jobs = [
        J("a", 0, 3, 10),
        J("wide", 1, 4, 5),
        J("b", 2, 2, 20),
        J("c", 2, 1, 3),
        J("d", 3, 1, 100),
    ]
    starts, decisions = replay(jobs, 4, backfill="conservative")
    assert starts == {"a": 0, "c": 2, "wide": 10, "b": 15, "d": 15}
    first = {}
    for d in decisions:
        if isinstance(d, JobReserved):
            first.setdefault(d.job_id, d.start)
    assert first == {"wide": 10, "b": 15, "d": 15}


def test_conservative_does_not_let_a_later_job_delay_an_earlier_reservation() -> None:
    # 4 hosts; "a" holds 2 until 10. "w1" (3) is the head, reserved at 10 with
    # one extra host. "w2" (4) is blocked behind it. "long" (1 host, 100 s)
    # fits now: EASY lets it take the extra host, which delays "w2" until 102;
    # conservative backfill reserved "w2" at 15 first, so "long" waits.
    jobs = [J("a", 0, 2, 10), J("w1", 1, 3, 5), J("w2", 1, 4, 5), J("long", 2, 1, 100)]
    easy, _ = replay(jobs, 4, backfill="easy")
    cons, _ = replay(jobs, 4, backfill="conservative")
    assert (easy["long"], easy["w2"]) == (2, 102)
    assert (cons["w1"], cons["w2"], cons["long"]) == (10, 15, 20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace, st.integers(3, 8))
def test_conservative_with_exact_limits_keeps_every_first_promise(
    rows: list[tuple[int, int, int, int, str]], hosts: int
) -> None:
    # Exact limits; a run limit is positive (the event schema refuses 0).
    jobs = [
        TJob(j.name, j.submit, j.size, max(j.run, 1.0), max(j.run, 1.0))
        for j in to_jobs(rows)
        if j.size <= hosts
    ]
    if not jobs:
        return
    starts, decisions = replay(jobs, hosts, backfill="conservative")
    assert len(starts) == len(jobs)  # everything ran
    promised: dict[str, float] = {}
    for d in decisions:
        if isinstance(d, JobReserved):
            promised.setdefault(d.job_id, d.start)
    for name, start in promised.items():
        assert starts[name] <= start, (name, starts[name], start)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace,
    st.lists(
        st.sampled_from(
            ["", "rusage[mem=150]", "select[type==a]", "span[hosts=1]", "span[ptile=2]"]
        ),
        min_size=25,
        max_size=25,
    ),
    st.sampled_from(["easy", "conservative"]),
)
def test_general_requirements_on_multi_slot_hosts_keep_every_first_promise(
    rows: list[tuple[int, int, int, int, str]], shapes: list[str], backfill: str
) -> None:
    # 4 hosts of 3 slots and 300 mem, two types: reservations are found with
    # the allocators (select, rusage, span); with exact limits no head starts
    # later than it was first promised, and every invariant holds throughout.
    jobs = [
        TJob(j.name, j.submit, min(j.size, 3), max(j.run, 1.0), max(j.run, 1.0))
        for j in to_jobs(rows)
    ]
    resreq = {j.name: shapes[i] for i, j in enumerate(jobs)}
    starts, decisions = replay(jobs, 4, backfill, resreq=resreq, slots=3)
    promised: dict[str, float] = {}
    for d in decisions:
        if isinstance(d, JobReserved):
            promised.setdefault(d.job_id, d.start)
    for name, start in promised.items():
        assert starts.get(name, math.inf) <= start, (name, start)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace, st.lists(st.sampled_from([1, 2, 4]), min_size=2, max_size=5))
def test_conservative_on_hosts_of_mixed_sizes_keeps_every_first_promise(
    rows: list[tuple[int, int, int, int, str]], sizes: list[int]
) -> None:
    # Hosts of 1, 2 and 4 slots, exact limits: a job that starts now beside
    # the reservations is checked against what they hold at each moment of
    # its run, net of the running jobs that end before them. (Holding them
    # on top of every running job refused a job at its own reservation's
    # start, found by a reference check on 3 hosts of 4 slots and 2 of 1.)
    jobs = [
        TJob(j.name, j.submit, j.size, max(j.run, 1.0), max(j.run, 1.0)) for j in to_jobs(rows)
    ]
    starts, decisions = replay(jobs, len(sizes), "conservative", slots=sizes)
    promised: dict[str, float] = {}
    for d in decisions:
        if isinstance(d, JobReserved):
            promised.setdefault(d.job_id, d.start)
    for name, start in promised.items():
        assert starts.get(name, math.inf) <= start, (name, starts.get(name), start)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(invariant_op, min_size=1, max_size=60),
    limit_sets,
    st.sampled_from(["easy", "conservative"]),
    st.integers(1, 50),
    st.booleans(),
)
def test_backfill_with_limits_keeps_every_invariant_and_never_faults(
    ops: list[Any], limits: list[Any], mode: str, seed: int, cache: bool
) -> None:
    # Random churn (workers up, down and removed, licences, finishes, cancels)
    # under limits, run limits and time moving on: every invariant holds after
    # every session, no limit is exceeded (a job placed again beside the
    # reservations is checked again), and nothing is ever an internal error.
    rng = random.Random(seed)
    events: list[Any] = [LimitsConfig(limits=limits)]
    for i, event in enumerate(invariant_events(ops)):
        if isinstance(event, JobSubmitted):
            limit = rng.choice([None, 5.0, 10.0, 50.0])
            event = msgspec.structs.replace(event, user=f"u{i % 3}", run_limit=limit)
        events.append(event)
    clock = VirtualClock()
    config = SchedulerConfig(
        backfill=mode, backfill_depth=rng.randint(1, 5), unsatisfiable_cache=cache
    )
    core = SchedulerCore(config, clock=clock)

    async def run() -> None:
        for event in events:
            if core.apply(event):
                clock.advance_to(clock.now() + rng.choice([0.0, 1.0, 7.0]))
                await core.run_session()
                check_invariants(core)
                assert_within(core, limits)
            for d in core.take_decisions():
                assert not (isinstance(d, JobPended) and d.reason == "internal_error"), d
                error = getattr(d, "error", "")
                assert not (isinstance(error, str) and error.startswith("internal error")), d

    import anyio

    anyio.run(run)


def easy_core(
    hosts: int, attrs: dict[int, dict[str, str | bool | int | float]] | None = None
) -> tuple[SchedulerCore, VirtualClock]:
    """An EASY core and its virtual clock, with ``hosts`` one-slot hosts h0,
    h1... (``attrs`` by host number)."""
    clock = VirtualClock()
    core = SchedulerCore(SchedulerConfig(backfill="easy"), clock=clock)
    for i in range(hosts):
        core.apply(WorkerUp(name=f"h{i}", slots=1, attrs=(attrs or {}).get(i, {})))
    return core, clock


def started_on(decisions: list[Decision]) -> dict[str, list[str]]:
    """The hosts of each job that ``decisions`` start."""
    return {d.job_id: [h.host for h in d.hosts] for d in decisions if isinstance(d, JobAllocated)}


async def test_a_waiting_head_moves_when_a_reserved_host_goes_down() -> None:
    # 5 one-slot hosts. "a" (3 hosts) ends at 10, "b" (1 host) at 20; "wide" (4)
    # is reserved at 10 on a's hosts and the free one. Then one of a's hosts
    # goes down: by slot count 10 still looks possible (a's slots come back),
    # and the head's last claims would be kept as they are if only jobs had
    # ended since; a worker event makes them be checked, and the head moves to
    # 20, where four usable hosts are free.
    core, clock = easy_core(5)
    core.apply(JobSubmitted(job_id="a", max_tasks=3, run_limit=10.0))
    core.apply(JobSubmitted(job_id="b", max_tasks=1, run_limit=20.0))
    core.apply(JobSubmitted(job_id="c", max_tasks=1, run_limit=30.0))
    await core.run_session()
    hosts_of = started_on(core.take_decisions())
    assert set(hosts_of) == {"a", "b", "c"}
    core.apply(JobFinished(job_id="c"))
    core.apply(JobSubmitted(job_id="wide", max_tasks=4, run_limit=5.0))
    await core.run_session()
    first = [d for d in core.take_decisions() if isinstance(d, JobReserved)]
    assert [(d.job_id, d.start) for d in first] == [("wide", 10.0)]
    down = hosts_of["a"][0]
    assert down in [h.host for h in first[0].hosts]
    clock.advance_to(1.0)
    core.apply(WorkerDown(name=down))
    await core.run_session()
    moved = [d for d in core.take_decisions() if isinstance(d, JobReserved)]
    assert [(d.job_id, d.start) for d in moved] == [("wide", 20.0)]
    assert down not in [h.host for h in moved[0].hosts]
    check_invariants(core)


async def test_a_waiting_head_moves_when_a_job_ahead_of_it_takes_a_reserved_host() -> None:
    # 6 one-slot hosts; only h5 has type b. "a" (3 hosts) ends at 10; "wide" (4)
    # is reserved at 10 on a's hosts and h5. Then "c" ends (capacity back, so
    # the reservation is looked at again) and "x", of a higher-priority queue,
    # takes h5 ahead of the head: 10 is still the first time with room by slot
    # count, but the head's last claims no longer fit there and must move to h4.
    core, clock = easy_core(6, {i: {"type": "b" if i == 5 else "a"} for i in range(6)})
    core.apply(QueueConfig(name="high", priority=10))
    core.apply(JobSubmitted(job_id="a", max_tasks=3, run_limit=10.0))
    core.apply(JobSubmitted(job_id="b", max_tasks=1, run_limit=20.0))
    core.apply(JobSubmitted(job_id="c", max_tasks=1, run_limit=30.0))
    core.apply(JobSubmitted(job_id="filler", max_tasks=1, run_limit=40.0))
    await core.run_session()
    started = started_on(core.take_decisions())
    assert started["filler"] == ["h5"]
    assert started["c"] == ["h4"]
    core.apply(JobFinished(job_id="filler"))
    core.apply(JobSubmitted(job_id="wide", max_tasks=4, run_limit=5.0))
    await core.run_session()
    first = [d for d in core.take_decisions() if isinstance(d, JobReserved)]
    assert [(d.job_id, d.start) for d in first] == [("wide", 10.0)]
    assert "h5" in [h.host for h in first[0].hosts]
    clock.advance_to(1.0)
    core.apply(JobFinished(job_id="c"))
    core.apply(
        JobSubmitted(
            job_id="x", queue="high", max_tasks=1, run_limit=100.0, resreq="select[type==b]"
        )
    )
    await core.run_session()
    out = core.take_decisions()
    assert [h.host for d in out if isinstance(d, JobAllocated) for h in d.hosts] == ["h5"]
    moved = [d for d in out if isinstance(d, JobReserved)]
    assert [(d.job_id, d.start) for d in moved] == [("wide", 10.0)]
    assert sorted(h.host for h in moved[0].hosts) == ["h0", "h1", "h2", "h4"]
    check_invariants(core)


async def test_a_job_wider_than_the_slack_is_refused_without_an_attempt() -> None:
    # 4 one-slot hosts; "a" holds 3 until 10, so "wide" (4) is reserved at 10
    # with no slack. "long" (1 host, 20 s) fits now on the free host but would
    # run past 10 on a slot the head needs: it is held for the head without
    # being placed first (only "wide" is attempted).
    core, _ = easy_core(4)
    core.apply(JobSubmitted(job_id="a", max_tasks=3, run_limit=10.0))
    await core.run_session()
    core.take_decisions()
    core.apply(JobSubmitted(job_id="wide", max_tasks=4, run_limit=5.0))
    core.apply(JobSubmitted(job_id="long", max_tasks=1, run_limit=20.0))
    await core.run_session()
    pended = {d.job_id: d.reason for d in core.take_decisions() if isinstance(d, JobPended)}
    assert pended == {"wide": "not_enough_slots", "long": "reserved_for_other"}
    assert core.last_session is not None
    assert core.last_session.attempts == 1
