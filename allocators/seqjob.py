"""``seqjob``: one-task primaries, the one-bucket case of the shared bucket loop.

Picks exactly the host "list all workers, return the first that satisfies select
and availability" would pick (Req 9.1), through the same host iterator.
"""

from __future__ import annotations

from collections.abc import Awaitable

from xce_core.plugin import (
    Allocator,
    PlanIterator,
    PlanStream,
    PrimaryRequest,
    SchedContext,
    Status,
    allocate_single,
)

__all__ = ["SeqJobAllocator"]


class SeqJobAllocator(Allocator):
    """Its plan iterator yields exactly one plan: ``(tasks,)`` on one host."""

    name = "seqjob"
    capacity_only = True
    paced_only = True

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        return PlanStream(ctx, iter(((request.tasks,),)))

    def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> Awaitable[Status]:
        # The bucket loop over that single plan, without walking a plan iterator
        # per job: sequential jobs are most of a session (same result as the
        # default, which tests/allocators check).
        return allocate_single(ctx, request)
