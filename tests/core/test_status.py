"""Allocator results: a Status that may carry the plugin's own pend reason, and
allocators written before Status (returning bool) that keep working."""

from __future__ import annotations

import pytest

from allocators.parjob import ParJobAllocator
from tests.helpers import GO, allocations, pends, submit, up
from xce_core import Registry, SchedulerConfig, process_events
from xce_core.plugin import (
    Allocator,
    PendReason,
    PlanIterator,
    PlanStream,
    PrimaryRequest,
    SchedContext,
    Status,
)

CLOSED = PendReason("licence_server_down", "flexlm at lic1:27000 does not answer")


class OnePlan(Allocator):
    """All tasks on one host, through the shared bucket loop."""

    name = "one_plan"

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        return PlanStream(ctx, iter([(request.tasks,)]))


class Gate(OnePlan):
    """Refuses requests whose candidates' first host is in ``closed``, saying why
    (reason per host name); places the others with the bucket loop."""

    name = "gate"

    def __init__(self, closed: dict[str, PendReason | None]) -> None:
        self.closed = closed

    async def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> Status:
        first = request.candidates.workers[0].name if request.candidates.workers else ""
        if first in self.closed:
            return Status.unschedulable(self.closed[first])
        return await super().allocate(request, ctx)


class Legacy(ParJobAllocator):
    """``parjob`` as if written before Status: answers True/False."""

    name = "legacy"

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse

    async def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> bool:  # type: ignore[override]
        if self.refuse:
            return False
        return bool(await super().allocate(request, ctx))


def config_for(allocator: Allocator) -> tuple[SchedulerConfig, Registry]:
    registry = Registry().load_entry_points()
    registry.register_allocator(allocator.name, allocator)
    config = SchedulerConfig(
        sequential_allocator=allocator.name, parallel_allocator=allocator.name
    )
    return config, registry


def test_status_is_ok_or_unschedulable_with_an_optional_reason() -> None:
    assert Status.OK.ok
    assert bool(Status.OK)
    assert not Status.UNSCHEDULABLE
    assert Status.UNSCHEDULABLE.reason is None
    assert Status.unschedulable() is Status.UNSCHEDULABLE
    assert Status.unschedulable(CLOSED) == Status(False, CLOSED)
    with pytest.raises(ValueError, match="no pend reason"):
        Status(True, CLOSED)


async def test_a_plugins_reason_is_the_jobs_pend_reason_and_is_cached() -> None:
    config, registry = config_for(Gate({"a": CLOSED}))
    jobs = [submit(f"j{i}") for i in range(20)]
    out = await process_events([up("a", 4), *jobs, GO], config, registry=registry)
    pended = pends(out)
    assert len(pended) == 20
    assert {(p.reason, p.detail) for p in pended.values()} == {
        ("licence_server_down", "flexlm at lic1:27000 does not answer")
    }
    # The first was decided by the plugin, the other 19 by the cache it filled.
    assert [j for j, p in pended.items() if not p.cached] == ["j0"]


async def test_without_a_reason_the_core_explains_as_for_the_built_ins() -> None:
    events = [up("a", 1, {"mem": 10.0}), submit("j", "rusage[mem=50]"), GO]
    config, registry = config_for(Gate({"a": None}))
    gated = pends(await process_events(events, config, registry=registry))["j"]
    builtin = pends(await process_events(events))["j"]
    assert (gated.reason, gated.detail) == (builtin.reason, builtin.detail)
    assert gated.reason == "resource_unavailable"


async def test_the_first_reason_given_wins_over_same_groups_and_task_counts() -> None:
    second = PendReason("quota", "project over quota")
    config, registry = config_for(Gate({"a": CLOSED, "b": second}))
    events = [
        up("a", 4, type="x"),
        up("b", 4, type="y"),
        submit("same", "same[type]", tasks=2),  # one request per type: a's, then b's
        submit("range", "same[type]", tasks=4, min=2),  # counts 4, 3, 2
        GO,
    ]
    out = await process_events(events, config, registry=registry)
    assert {j: p.reason for j, p in pends(out).items()} == {
        "same": "licence_server_down",
        "range": "licence_server_down",
    }


async def test_an_allocator_returning_bool_keeps_working() -> None:
    events = [
        up("a", 2, {"mem": 100.0}),
        up("b", 2, {"mem": 100.0}),
        submit("fits", "rusage[mem=60]", tasks=2),
        submit("too_big", "rusage[mem=60]", tasks=2),
        submit("one", "rusage[mem=60]"),
        GO,
    ]
    builtin = await process_events(events)
    config, registry = config_for(Legacy())
    legacy = await process_events(events, config, registry=registry)
    assert allocations(legacy) == allocations(builtin) == {"fits": [("a", 1), ("b", 1)]}
    assert pends(legacy) == pends(builtin)
    assert sorted(pends(builtin)) == ["one", "too_big"]
    config, registry = config_for(Legacy(refuse=True))
    refused = pends(await process_events(events, config, registry=registry))
    assert sorted(refused) == ["fits", "one", "too_big"]
    # False: the core explains from the hosts, as it always did.
    assert (refused["fits"].reason, refused["fits"].detail) == (
        "not_enough_slots",
        "2 hosts: room for 2 tasks together, but in no split the allocator tries for 2",
    )
