"""Pruning plans that cannot fit (``fitting_plans``) never changes a decision:
the built-in parallel allocators decide exactly as they do without it."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

import allocators._plans as plans_module
import allocators.pack as pack
import allocators.parjob as parjob
from allocators.pack import PackAllocator
from allocators.parjob import ParJobAllocator
from allocators.seqjob import SeqJobAllocator
from events import JobSubmitted, SessionBegin, WorkerUp
from xce_core import Registry, SchedulerConfig, process_events
from xce_core.plugin import Plan, PrimaryRequest, SchedContext


def _registry() -> Registry:
    registry = Registry()
    registry.register_allocator("seqjob", SeqJobAllocator())
    registry.register_allocator("parjob", ParJobAllocator())
    registry.register_allocator("parjob_pack", PackAllocator())
    from xce_core.plugin import FcfsPicker

    registry.register_picker("fcfs", FcfsPicker())
    return registry


hosts = st.lists(
    st.tuples(st.integers(0, 6), st.sampled_from([0.0, 100.0, 250.0, 1000.0])),
    min_size=1,
    max_size=8,
)
jobs = st.lists(
    st.tuples(
        st.integers(1, 12),
        st.integers(0, 11),
        st.sampled_from(["", "rusage[mem=100]", "rusage[mem=60] span[ptile=2]"]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=120, deadline=None)
@given(hosts, jobs, st.sampled_from(["parjob", "parjob_pack"]))
async def test_pruning_never_changes_a_decision(
    cluster: list[tuple[int, float]], requests: list[tuple[int, int, str]], allocator: str
) -> None:
    events: list[object] = [
        WorkerUp(name=f"h{i}", slots=slots, resources={"mem": mem})
        for i, (slots, mem) in enumerate(cluster)
    ]
    for n, (tasks, spread, resreq) in enumerate(requests):
        events.append(
            JobSubmitted(
                job_id=f"j{n}", min_tasks=max(1, tasks - spread), max_tasks=tasks, resreq=resreq
            )
        )
    events.append(SessionBegin())
    config = SchedulerConfig(parallel_allocator=allocator)
    original = plans_module.fitting_plans

    def unpruned(
        plans: Iterator[Plan], request: PrimaryRequest, ctx: SchedContext, *, after: int = 8
    ) -> Iterator[Plan]:
        return plans

    def pruned_at_once(
        plans: Iterator[Plan], request: PrimaryRequest, ctx: SchedContext, *, after: int = 8
    ) -> Iterator[Plan]:
        return original(plans, request, ctx, after=0)  # check every plan

    results = []
    for variant in (pruned_at_once, unpruned):
        parjob.fitting_plans = variant  # type: ignore[assignment]
        pack.fitting_plans = variant  # type: ignore[assignment]
        try:
            results.append(await process_events(events, config, registry=_registry()))  # type: ignore[arg-type]
        finally:
            parjob.fitting_plans = original  # type: ignore[assignment]
            pack.fitting_plans = original  # type: ignore[assignment]
    pruned, reference = results

    def strip(decisions: list[object]) -> list[object]:
        return [d for d in decisions if type(d).__name__ != "SessionEnd"]

    assert strip(pruned) == strip(reference)  # type: ignore[arg-type]
