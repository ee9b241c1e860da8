"""Plan orders as pure generators (easy to test without any cluster)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from xce_core.plugin import Plan, PrimaryRequest, SchedContext, balanced_partition
from xce_core.resreq import Span

__all__ = [
    "balanced_plans",
    "block_plan",
    "can_fit",
    "fitting_plans",
    "host_capacities",
    "shaped_plans",
    "span_buckets",
    "span_plan",
    "stripe_plan",
]


def span_plan(tasks: int, span: Span | None, ptile: int | None = None) -> Plan | None:
    """The only plan a ``span[]`` admits, or ``None`` when span leaves the shape free.

    ``span[hosts=1]`` → ``(tasks,)``; ``span[ptile=P]`` → buckets of P and one
    remainder bucket (10 tasks, P=4 → ``(4, 4, 2)``). ``ptile`` is P when the
    caller resolved it for its candidates (``PrimaryRequest.ptile``: LSF's
    ``ptile='!'`` and per type/model values); it defaults to ``span.ptile``.
    """
    if span is None:
        return None
    if span.hosts == 1:
        return (tasks,)
    if ptile is None:
        ptile = span.ptile
    if ptile is not None:
        full, rest = divmod(tasks, ptile)
        return (ptile,) * full + ((rest,) if rest else ())
    return None


def span_buckets(tasks: int, span: Span | None, ptile: int | None = None) -> int | None:
    """How many buckets :func:`span_plan` would return, without building it
    (``None`` when span leaves the shape free). A huge task count under
    ``span[ptile=1]`` would otherwise build a huge tuple before any pruning."""
    if span is None:
        return None
    if span.hosts == 1:
        return 1
    if ptile is None:
        ptile = span.ptile
    if ptile is not None:
        return -(-tasks // ptile)
    return None


def balanced_plans(
    tasks: int,
    span: Span | None = None,
    *,
    max_bucket: int | None = None,
    max_hosts: int | None = None,
    ptile: int | None = None,
) -> Iterator[Plan]:
    """The v1 default order (Req 2.3): k = 1, 2, …, tasks hosts, each the balanced
    partition with buckets descending (7 tasks, k=3 → (3, 2, 2)).

    ``max_bucket`` / ``max_hosts`` prune plans that cannot fit (a bucket larger
    than any host's free slots, more hosts than candidates). Pruned plans would
    fail anyway, so which plan wins does not change. ``ptile``: see :func:`span_plan`.
    """
    buckets = span_buckets(tasks, span, ptile)
    if buckets is not None:
        if max_hosts is not None and buckets > max_hosts:
            return
        only = span_plan(tasks, span, ptile)
        assert only is not None
        if (max_bucket is None or only[0] <= max_bucket) and (
            max_hosts is None or len(only) <= max_hosts
        ):
            yield only
        return
    first = 1
    if max_bucket is not None:
        if max_bucket <= 0:
            return
        first = max(1, -(-tasks // max_bucket))
    last = tasks if max_hosts is None else min(tasks, max_hosts)
    for hosts in range(first, last + 1):
        yield balanced_partition(tasks, hosts)


def host_capacities(ctx: SchedContext, request: PrimaryRequest) -> list[int]:
    """How many of the request's tasks each candidate host could take now, in
    candidate order, after this attempt's tentative claims (the core's fit rule,
    :meth:`SchedContext.tasks_that_fit`)."""
    want = request.want
    return [ctx.tasks_that_fit(w, want) for w in request.candidates.workers]


def can_fit(plan: Plan, caps_ascending: list[int]) -> bool:
    """Whether some distinct host per bucket can take ``plan`` (buckets largest
    first), given every candidate's capacity sorted ascending: for each bucket
    size b at position j, at least j hosts hold b or more. The bucket loop's
    first fit, taking buckets largest first, succeeds exactly then (a host that
    holds a bucket holds every smaller one). O(buckets · log hosts)."""
    hosts = len(caps_ascending)
    for position, bucket in enumerate(plan, 1):
        if position < len(plan) and plan[position] == bucket:
            continue  # only the last bucket of each size needs checking
        if hosts - bisect.bisect_left(caps_ascending, bucket) < position:
            return False
    return True


def fitting_plans(
    plans: Iterator[Plan], request: PrimaryRequest, ctx: SchedContext, *, after: int = 8
) -> Iterator[Plan]:
    """``plans`` in the same order, minus those :func:`can_fit` rules out on the
    hosts as they are now, once ``after`` plans have been tried.

    Skipped plans would fail in the bucket loop anyway, so which plan wins does
    not change; it only stops a search over every host count from costing a scan
    of every host per plan (a 1,000-host cluster of fragmented capacity took
    seconds per job). The first plans pass unchecked so a job that fits early
    never pays the one pass over the candidates the check needs. A request
    whose first bucket carries per-job amounts is passed through unchanged.
    """
    if request.first_want != request.want:
        yield from plans
        return
    caps: list[int] | None = None
    for tried, plan in enumerate(plans):
        if tried >= after:
            if caps is None:
                caps = sorted(host_capacities(ctx, request))
            if not can_fit(plan, caps):
                continue
        yield plan


def block_plan(tasks: int, block: int, caps: list[int]) -> Plan | None:
    """``span[block=B]``: walk the hosts once, in order, each taking as many whole
    blocks as it can; a remainder (``tasks`` not a multiple of B) is one more
    bucket. ``None`` when the blocks do not fit."""
    blocks, rest = divmod(tasks, block)
    buckets: list[int] = []
    for cap in caps:
        if not blocks:
            break
        take = min(cap // block, blocks)
        if take:
            buckets.append(take * block)
            blocks -= take
    if blocks:
        return None
    if rest:
        buckets.append(rest)  # the bucket loop finds it a host of its own
    return tuple(buckets)


def stripe_plan(tasks: int, caps: list[int], per_host: int | None = None) -> Plan | None:
    """``span[stripe]``: tasks dealt one at a time round the hosts that still have
    room (at most ``per_host`` each), so they spread as evenly as capacity allows
    (4 tasks on 3 free hosts → 2, 1, 1). ``None`` when they do not fit.

    Computed, not dealt: full rounds reach a level L where every host holds
    ``min(room, L)``; the last, partial round gives one more to the first hosts
    with room left. O(hosts · log(room)), whatever the task count.
    """
    room = [min(cap, per_host) if per_host is not None else cap for cap in caps]
    room = [cap for cap in room if cap > 0]
    if sum(room) < tasks:
        return None
    # The largest level whose full rounds do not exceed the task count.
    low, high = 0, max(room, default=0)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(cap, mid) for cap in room) <= tasks:
            low = mid
        else:
            high = mid - 1
    counts = [min(cap, low) for cap in room]
    left = tasks - sum(counts)
    for i, cap in enumerate(room):
        if not left:
            break
        if cap > low:
            counts[i] += 1
            left -= 1
    return tuple(n for n in counts if n)


def shaped_plans(request: PrimaryRequest, ctx: SchedContext) -> Iterator[Plan]:
    """The one plan ``span[block=B]`` or ``span[stripe]`` gives on the hosts as
    they are now (nothing when it does not fit). Buckets are in candidate order,
    so the bucket loop's first fit puts each on the host it was counted for."""
    span = request.primary.span
    if span is None:
        return
    caps = host_capacities(ctx, request)
    if span.block is not None:
        plan = block_plan(request.tasks, span.block, caps)
    elif span.stripe:
        plan = stripe_plan(request.tasks, caps, span.stripe_max)
    else:
        return
    if plan is not None:
        yield plan
