"""Req 7: the unsatisfiable cache — key, hits, reason round trip, clearing, soundness."""

from __future__ import annotations

import pytest

from tests.core.test_session import SpyAllocator, registry_with
from tests.helpers import GO, allocations, pends, submit, up
from xce_core import SchedulerConfig, SchedulerCore, process_events
from xce_core._cache import UnsatisfiableCache
from xce_core.plugin import PendReason


def test_same_key_twice_hits_and_keeps_category() -> None:
    cache = UnsatisfiableCache()
    assert cache.lookup(7) is None
    cache.insert(7, PendReason("resource_unavailable", "2 hosts: mem"))
    assert cache.lookup(7) == PendReason("resource_unavailable", "2 hosts: mem")
    assert cache.lookup(7) is not None
    assert cache.lookup(8) is None
    cache.insert(7, PendReason("not_enough_slots"))  # first miss's reason is kept
    assert cache.lookup(7).category == "resource_unavailable"  # type: ignore[union-attr]
    cache.clear()
    assert cache.lookup(7) is None
    assert len(cache) == 0


def test_disabled_cache_never_hits() -> None:
    cache = UnsatisfiableCache(enabled=False)
    cache.insert(1, PendReason("x"))
    assert cache.lookup(1) is None


BASE = dict(
    resreq="select[type==a] rusage[mem=10] span[hosts=1] same[rack]",
    tasks=2,
    user="u",
    queue="q",
    project="p",
)
VARIANTS = {
    "select": dict(resreq="select[type==b] rusage[mem=10] span[hosts=1] same[rack]"),
    "rusage": dict(resreq="select[type==a] rusage[mem=11] span[hosts=1] same[rack]"),
    "span": dict(resreq="select[type==a] rusage[mem=10] span[ptile=1] same[rack]"),
    "same": dict(resreq="select[type==a] rusage[mem=10] span[hosts=1] same[row]"),
    "order": dict(resreq="select[type==a] order[mem] rusage[mem=10] span[hosts=1] same[rack]"),
    "tasks": dict(tasks=3),
    "min_tasks": dict(min=1),
}
# Who submits a job changes nothing a session can place: one shape, one group.
IRRELEVANT = {
    "user": dict(user="v"),
    "queue": dict(queue="r"),
    "project": dict(project="o"),
}


@pytest.mark.parametrize("field", sorted(VARIANTS))
def test_fingerprint_differs_in_any_one_field(field: str) -> None:
    core = SchedulerCore()
    core.apply(submit("base", **BASE))  # type: ignore[arg-type]
    core.apply(submit("same_again", **BASE))  # type: ignore[arg-type]
    core.apply(submit("other", **{**BASE, **VARIANTS[field]}))  # type: ignore[arg-type]
    jobs = core.state.jobs
    assert jobs["base"].fingerprint == jobs["same_again"].fingerprint
    assert jobs["base"].fingerprint != jobs["other"].fingerprint


@pytest.mark.parametrize("field", sorted(IRRELEVANT))
def test_fingerprint_ignores_who_submits(field: str) -> None:
    core = SchedulerCore()
    core.apply(submit("base", **BASE))  # type: ignore[arg-type]
    core.apply(submit("other", **{**BASE, **IRRELEVANT[field]}))  # type: ignore[arg-type]
    jobs = core.state.jobs
    assert jobs["base"].fingerprint == jobs["other"].fingerprint
    assert jobs["base"].group is jobs["other"].group


async def test_jobs_differing_in_one_field_are_not_wrongly_pended() -> None:
    """A cache that grouped too broadly would pend the 1-task job with the 3-task one."""
    out = await process_events(
        [up("a", 2), submit("wide", tasks=3), submit("narrow", tasks=2), GO]
    )
    assert pends(out)["wide"].reason == "not_enough_slots"
    assert allocations(out) == {"narrow": [("a", 2)]}


async def test_hit_never_runs_an_iterator_and_reports_original_category() -> None:
    spy = SpyAllocator()
    reg = registry_with(spy)
    core = SchedulerCore(SchedulerConfig(sequential_allocator="spy"), registry=reg)
    out = await process_events(
        [up("a", 1, {"mem": 10}), *[submit(f"j{i}", "rusage[mem=50]") for i in range(20)], GO],
        core=core,
    )
    assert len(spy.calls) == 1  # only the first job ran the allocator
    p = pends(out)
    assert {x.reason for x in p.values()} == {"resource_unavailable"}
    assert not p["j0"].cached
    assert all(p[f"j{i}"].cached for i in range(1, 20))
    assert core.last_session is not None
    assert core.last_session.cache_hits == 19


async def test_cache_is_cleared_at_session_begin() -> None:
    from events import JobFinished

    core = SchedulerCore()
    out = await process_events(
        [up("a", 1), submit("r"), submit("w1"), submit("w2"), GO], core=core
    )
    assert set(pends(out)) == {"w1", "w2"}
    out = await process_events([JobFinished(job_id="r"), GO], core=core)
    assert allocations(out) == {"w1": [("a", 1)]}  # not pended by a stale entry


async def test_compound_part_failure_after_tentative_claims_is_not_cached() -> None:
    """A part that failed only because earlier parts of the same job held hosts
    must not condemn another job whose identical part comes first."""
    out = await process_events(
        [
            up("a", 1, type="a"),
            submit("c1", "1*{select[type==a]} + 1*{select[type==a]}", 2),
            submit("c2", "1*{select[type==a]}", 1),
            GO,
        ]
    )
    assert allocations(out) == {"c2": [("a", 1)]}
