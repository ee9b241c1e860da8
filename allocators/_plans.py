"""Plan orders as pure generators (easy to test without any cluster)."""

from __future__ import annotations

from collections.abc import Iterator

from xce_core import Plan, Span, balanced_partition

__all__ = ["balanced_plans", "span_plan"]


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
    only = span_plan(tasks, span, ptile)
    if only is not None:
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
