"""Extreme numbers that a hostile or careless producer can send never crash a
session (issue #10, class 2): every job still gets a decision."""

from __future__ import annotations

from events import JobAllocated, JobSubmitted, SessionBegin, WorkerUp
from xce_core import run_events


def test_order_by_an_integer_too_large_for_a_float() -> None:
    # float(10**400) overflows; the sort compares the values as they are.
    events = [
        WorkerUp(name="a", slots=2, attrs={"big": 10**400}),
        WorkerUp(name="b", slots=2, attrs={"big": 5}),
        JobSubmitted(job_id="j", max_tasks=1, resreq="order[big]"),
        SessionBegin(),
    ]
    (allocated,) = [d for d in run_events(events) if isinstance(d, JobAllocated)]
    # order[] on an attribute that is not a consumable sorts ascending.
    assert [h.host for h in allocated.hosts] == ["b"]


def _pend_and_allocations(events: list[object]) -> dict[str, str]:
    out = run_events(events)  # type: ignore[arg-type]
    return {d.job_id: type(d).__name__ for d in out if hasattr(d, "job_id")}


def test_a_task_range_no_host_can_serve_costs_no_search_per_count() -> None:
    # 1..9,600 tasks whose rusage no host can give: every count used to be tried
    # over every host (7 s per session on 300 hosts). The capacity bound is 0,
    # so the job pends at once, and the job after it is still decided.
    events: list[object] = [
        WorkerUp(name=f"h{i}", slots=32, resources={"mem": 1000.0}) for i in range(300)
    ]
    events += [
        JobSubmitted(job_id="bad", min_tasks=1, max_tasks=9600, resreq="rusage[mem=2000]"),
        JobSubmitted(job_id="good", max_tasks=2),
        SessionBegin(),
    ]
    assert _pend_and_allocations(events) == {"bad": "JobPended", "good": "JobAllocated"}


def test_a_task_range_over_fragmented_capacity_places_the_most_it_can() -> None:
    # One host holds 32 tasks, 199 hold one each: no balanced plan above 201
    # tasks but one of 2 and 199 of 1; plans that cannot fit are skipped unscanned.
    events: list[object] = [WorkerUp(name="big", slots=32, resources={"mem": 100000.0})]
    events += [WorkerUp(name=f"h{i}", slots=32, resources={"mem": 1000.0}) for i in range(199)]
    events += [
        JobSubmitted(job_id="frag", min_tasks=1, max_tasks=6400, resreq="rusage[mem=600]"),
        SessionBegin(),
    ]
    (allocated,) = [d for d in run_events(events) if isinstance(d, JobAllocated)]  # type: ignore[arg-type]
    assert sum(h.slots for h in allocated.hosts) == 201  # 2 on "big", 1 on each other


def test_a_huge_capacity_with_a_tiny_rusage_amount() -> None:
    # free / per_task is inf: capacities are counted in tasks, capped by slots.
    for resreq in ["rusage[mem=1e-300] span[stripe]", "rusage[mem=1e-300] span[block=2]"]:
        events: list[object] = [
            WorkerUp(name=name, slots=4, resources={"mem": 2.0**53}) for name in "ab"
        ]
        events += [JobSubmitted(job_id="j", max_tasks=6, resreq=resreq), SessionBegin()]
        (allocated,) = [d for d in run_events(events) if isinstance(d, JobAllocated)]  # type: ignore[arg-type]
        assert sum(h.slots for h in allocated.hosts) == 6
