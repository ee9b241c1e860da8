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
