"""``parjob_pack``: like ``parjob``, but first tries the split the free capacity
actually offers, so uneven splits are found (7 tasks on hosts with 5 and 2 free
slots → ``(5, 2)``, which no balanced partition over two hosts gives).

Choose it when jobs are wide relative to hosts and the cluster is fragmented: it
starts jobs that ``parjob`` would pend, using the fewest hosts possible. It costs
one pass over the candidate hosts per attempt; ``parjob`` does not.
"""

from __future__ import annotations

from collections.abc import Iterator

from allocators._plans import (
    balanced_plans,
    fitting_plans,
    host_capacities,
    shaped_plans,
    span_buckets,
)
from xce_core.plugin import Allocator, Plan, PlanIterator, PlanStream, PrimaryRequest, SchedContext

__all__ = ["PackAllocator"]


class PackAllocator(Allocator):
    """Fewest hosts by current task capacity, then the balanced order."""

    name = "parjob_pack"
    capacity_only = True
    paced_only = True

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        return PlanStream(ctx, fitting_plans(_pack_then_balanced(request, ctx), request, ctx))


def task_capacity(ctx: SchedContext, request: PrimaryRequest) -> list[int]:
    """How many of the request's tasks each candidate host could take now, largest
    first (hosts that can take none left out)."""
    return sorted((cap for cap in host_capacities(ctx, request) if cap > 0), reverse=True)


def _pack_then_balanced(request: PrimaryRequest, ctx: SchedContext) -> Iterator[Plan]:
    tasks = request.tasks
    span = request.primary.span
    if span is not None and (span.block is not None or span.stripe):
        yield from shaped_plans(request, ctx)  # the span fixes the split
        return
    hosts = len(request.candidates.workers)
    if span_buckets(tasks, span, request.ptile) is None:
        packed: list[int] = []
        left = tasks
        for cap in task_capacity(ctx, request):
            take = min(cap, left)
            packed.append(take)
            left -= take
            if not left:
                break
        first: Plan | None = tuple(packed) if not left else None
        if first is not None:
            yield first
        for plan in balanced_plans(tasks, span, max_hosts=hosts, ptile=request.ptile):
            if plan != first:
                yield plan
        return
    yield from balanced_plans(tasks, span, max_hosts=hosts, ptile=request.ptile)
