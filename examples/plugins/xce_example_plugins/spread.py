"""``spread``: place a parallel job on as MANY hosts as possible.

The built-in ``parjob`` tries 1, 2, 3, … hosts (packing, which keeps jobs
close together and leaves whole hosts free for wide jobs). ``spread`` is its
reverse: k = N, N-1, …, 1 hosts for N tasks, each the balanced partition
(7 tasks over 3 hosts: ``(3, 2, 2)``).

When you would want it: tasks that are I/O-heavy (local scratch disk, network
interface, memory bandwidth) rather than CPU-bound run faster one or two per
host than eight to a host, and a job spread thin also loses less when one host
dies. The cost is fragmentation: every host ends up partly used, so wide
``span[hosts=1]`` jobs may wait longer. Use it as the scheduler's
``parallel_allocator``; leave one-task jobs to ``seqjob``.

``span[hosts=1]`` and ``span[ptile=P]`` fix the shape, so they get exactly the
one plan they admit, as with ``parjob``.
"""

from __future__ import annotations

from collections.abc import Iterator

from xce_core.plugin import (
    Allocator,
    Plan,
    PlanIterator,
    PlanStream,
    PrimaryRequest,
    SchedContext,
    balanced_partition,
)
from xce_core.resreq import Span

__all__ = ["SpreadAllocator", "spread_plans"]


def spread_plans(
    tasks: int, span: Span | None = None, *, max_hosts: int | None = None
) -> Iterator[Plan]:
    """Plans for ``tasks`` tasks, most hosts first: k = tasks, tasks-1, …, 1.

    ``max_hosts`` (the number of hosts that have a free slot at all) skips plans
    with more buckets than that: they cannot fit, so leaving them out changes
    nothing but the time spent. A pure function of its arguments, lazy.
    """
    if span is not None and span.hosts == 1:
        yield (tasks,)
        return
    if span is not None and span.ptile is not None:
        full, rest = divmod(tasks, span.ptile)
        yield (span.ptile,) * full + ((rest,) if rest else ())
        return
    most = tasks if max_hosts is None else min(tasks, max_hosts)
    for hosts in range(most, 0, -1):
        yield balanced_partition(tasks, hosts)


class SpreadAllocator(Allocator):
    """Balanced partitions, most hosts first (the reverse of ``parjob``).

    The shared bucket loop (:func:`xce_core.allocate_plans`) does the placing,
    the exact rollback of failed plans and the cancellation points; this class
    only says in which order to try plan shapes.
    """

    name = "spread"

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        # One pass over the candidates to count hosts with room: on a busy
        # cluster this skips the hopeless widest plans without searching them.
        with_room = sum(1 for w in request.candidates.workers if ctx.free_slots(w) > 0)
        return PlanStream(
            ctx, spread_plans(request.tasks, request.primary.span, max_hosts=with_room)
        )
