"""``parjob``: multi-task primaries over the balanced plan order (Req 4).

Tries 1, 2, … hosts, each the balanced partition with the largest bucket first
(largest-first with first fit always finds a host assignment for a plan when one
exists). ``span[hosts=1]`` and ``span[ptile=P]`` admit a single plan;
``span[block=B]`` and ``span[stripe]`` one plan shaped by the hosts' free capacity.
"""

from __future__ import annotations

from allocators._plans import balanced_plans, fitting_plans, shaped_plans
from xce_core.plugin import Allocator, PlanIterator, PlanStream, PrimaryRequest, SchedContext

__all__ = ["ParJobAllocator"]


class ParJobAllocator(Allocator):
    """Balanced partitions, fewest hosts first."""

    name = "parjob"
    capacity_only = True
    paced_only = True

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        span = request.primary.span
        if span is not None and (span.block is not None or span.stripe):
            return PlanStream(ctx, shaped_plans(request, ctx))  # the span fixes the split
        cands = request.candidates
        plans = balanced_plans(
            request.tasks,
            request.primary.span,
            max_bucket=cands.max_free,
            max_hosts=len(cands.workers),
            ptile=request.ptile,
        )
        return PlanStream(ctx, fitting_plans(plans, request, ctx))
