"""Plan and host iterators and the bucket loop every allocator shares (Req 2, 3, 4).

A *plan* is a partition of a primary's task count into per-host slot buckets,
largest first (``(3, 2, 2)``). An allocator supplies an async iterator of plans;
:func:`allocate_plans` walks it, finds a distinct host per bucket through a
fresh :class:`HostIterator` each, and rolls a failed plan back exactly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Container, Iterator
from typing import ClassVar, Protocol, final

import anyio.lowlevel

from xce_core._context import SchedContext
from xce_core._model import Worker, shortfall
from xce_core._results import Want
from xce_core._session import CandidateSet
from xce_core.resreq import Primary

__all__ = [
    "Allocator",
    "HostIterator",
    "Plan",
    "PlanIterator",
    "PlanStream",
    "PrimaryRequest",
    "allocate_plans",
    "allocate_single",
    "balanced_partition",
]

Plan = tuple[int, ...]


class PlanIterator(Protocol):
    """What an allocator's :meth:`Allocator.plans` returns: an async iterator of
    plans that can be closed (async generators and :class:`PlanStream` qualify)."""

    def __aiter__(self) -> AsyncIterator[Plan]: ...

    async def __anext__(self) -> Plan: ...

    async def aclose(self) -> None: ...


def balanced_partition(tasks: int, hosts: int) -> Plan:
    """``tasks`` over ``hosts`` buckets as evenly as possible, largest first.

    ``tasks mod hosts`` buckets of ceil(tasks/hosts), the rest floor: (7, 3) → (3, 2, 2).
    """
    base, extra = divmod(tasks, hosts)
    return (base + 1,) * extra + (base,) * (hosts - extra)


@final
class PrimaryRequest:
    """One primary to place: ``tasks`` tasks, ``want`` consumables per task, over
    ``candidates`` (already filtered by select, ordered by ``order[]``, restricted
    to one ``same[]`` group). Treat as read-only."""

    __slots__ = ("candidates", "first_want", "primary", "ptile", "tasks", "want")

    def __init__(
        self,
        primary: Primary,
        tasks: int,
        want: Want,
        candidates: CandidateSet,
        first_want: Want | None = None,
    ) -> None:
        self.primary = primary
        self.tasks = tasks
        self.want = want
        self.candidates = candidates
        # The first bucket of a plan also carries per-job amounts (rusage .../job).
        self.first_want = want if first_want is None else first_want
        # Tasks per host under span[ptile=...] for these candidates (None: free).
        self.ptile: int | None = candidates.ptile
        if self.ptile is None and primary.span is not None:
            self.ptile = primary.span.ptile

    def __repr__(self) -> str:
        return f"PrimaryRequest({self.primary}, tasks={self.tasks}, want={self.want})"


@final
class PlanStream:
    """An async plan iterator over a lazy synchronous generator of plans.

    Allocators describe their plan order as a plain generator (a pure function of
    the request, easy to test); this adapter makes each step a cancellation point
    (:class:`Pacer`), stays exhausted once exhausted, and closes the generator on
    :meth:`aclose` (also when the consumer stops early or is cancelled).
    """

    __slots__ = ("_gen", "_pacer")

    def __init__(self, ctx: SchedContext, plans: Iterator[Plan]) -> None:
        self._gen: Iterator[Plan] | None = plans
        self._pacer = ctx.session.pacer

    def __aiter__(self) -> PlanStream:
        return self

    async def __anext__(self) -> Plan:
        if self._pacer.tick():
            await anyio.lowlevel.checkpoint()
        if self._gen is None:
            raise StopAsyncIteration
        try:
            return next(self._gen)
        except StopIteration:
            self._gen = None
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Release the generator. Idempotent."""
        self.close()

    def close(self) -> None:
        """Synchronous :meth:`aclose` (nothing here needs to wait)."""
        gen, self._gen = self._gen, None
        close = getattr(gen, "close", None)
        if close is not None:
            close()

    def next_plan(self) -> Plan | None:
        """The next plan, or ``None`` when exhausted; no cancellation point (the
        bucket loop pairs it with its own :class:`Pacer` tick)."""
        if self._gen is None:
            return None
        plan = next(self._gen, None)
        if plan is None:
            self._gen = None
        return plan


@final
class HostIterator:
    """Candidate hosts for ONE bucket: usable, matching select, with ``bucket`` free
    slots and ``want`` × ``bucket`` of each consumable (after the attempt's own
    tentative claims). A fresh instance per bucket (Req 3.3); exclusivity across a
    plan's buckets is the caller's business (Req 3.4).

    Hosts too full on *committed* state are skipped once per session: a cursor per
    (candidates, bucket, want) remembers how far the leading run of such hosts
    goes, which is sound because capacity only shrinks within a session.
    Each step is a cancellation point (:class:`Pacer`).
    """

    __slots__ = ("_bucket", "_ctx", "_cursor_key", "_frontier", "_pos", "_want", "_workers")

    def __init__(
        self,
        ctx: SchedContext,
        candidates: CandidateSet,
        bucket: int,
        want: Want,
    ) -> None:
        self._ctx = ctx
        self._workers = candidates.workers
        self._bucket = bucket
        self._want = want
        self._cursor_key = (candidates.key, bucket, want)
        self._pos = ctx.session.cursors.get(self._cursor_key, 0)
        self._frontier = True

    @property
    def want(self) -> Want:
        """The consumables this iterator's bucket needs."""
        return self._want

    @property
    def bucket(self) -> int:
        """The bucket size this iterator serves."""
        return self._bucket

    def __aiter__(self) -> HostIterator:
        return self

    async def __anext__(self) -> Worker:
        if self._ctx.session.pacer.tick():
            await anyio.lowlevel.checkpoint()
        host = self.next_host()
        if host is None:
            raise StopAsyncIteration
        return host

    def next_host(self, claimed: Container[int] = ()) -> Worker | None:
        """The next candidate, skipping hosts whose index is in ``claimed``;
        ``None`` when exhausted. Synchronous: the caller owns the cancellation
        point (``__anext__`` is this plus a :class:`Pacer` step)."""
        found, self._pos, self._frontier = _scan(
            self._ctx,
            self._workers,
            self._pos,
            self._bucket,
            self._want,
            self._cursor_key,
            self._frontier,
            claimed,
        )
        return found

    async def aclose(self) -> None:
        """Nothing to release; present so callers can treat every iterator alike."""
        self._pos = len(self._workers)


def first_host(
    ctx: SchedContext, candidates: CandidateSet, bucket: int, want: Want
) -> Worker | None:
    """What a fresh ``HostIterator(ctx, candidates, bucket, want).next_host()``
    returns, without building the iterator (the one-bucket case, once per job)."""
    key = (candidates.key, bucket, want)
    pos = ctx.session.cursors.get(key, 0)
    return _scan(ctx, candidates.workers, pos, bucket, want, key, True, ())[0]


def _scan(
    ctx: SchedContext,
    workers: list[Worker],
    pos: int,
    bucket: int,
    want: Want,
    cursor_key: tuple[object, ...],
    frontier: bool,
    claimed: Container[int],
) -> tuple[Worker | None, int, bool]:
    """The host iterator's one scan: from ``pos``, the first host with room for
    the bucket; returns it (or ``None``), the position after it, and whether
    every host so far was too full on committed state (``frontier``: the
    session cursor for ``cursor_key`` then moves past them for good)."""
    end = len(workers)
    # Every tentative claim takes at least one slot, so a host absent from
    # ctx.slots carries none: the committed check is then the whole check.
    tentative = ctx.slots
    while pos < end:
        w = workers[pos]
        pos += 1
        if shortfall(w, bucket, want) is not None:
            if frontier:
                ctx.session.cursors[cursor_key] = pos
            continue
        frontier = False
        index = w.index
        if index in claimed:
            continue
        if index not in tentative or ctx.fits(w, bucket, want):
            return w, pos, frontier
    return None, pos, frontier


async def allocate_plans(ctx: SchedContext, request: PrimaryRequest, plans: PlanIterator) -> bool:
    """The bucket loop (seeds' corrected three-level pseudocode).

    For each plan: for each bucket, a fresh host iterator; skip hosts claimed in
    this plan; tentatively claim the first that fits. A bucket without a host
    abandons the plan and rolls back its claims exactly. Returns ``True`` with the
    winning plan's claims left in ``ctx``; ``False`` with ``ctx`` as it was.
    Plans that cannot fit (a bucket larger than any host's free slots, more
    buckets than candidates) are skipped without searching: they would fail anyway,
    so which plan wins does not change. So are plans that are not a partition of
    ``request.tasks`` into positive buckets. Closes ``plans`` in every case.
    """
    candidates = request.candidates
    limit = len(candidates.workers)
    max_free = candidates.max_free
    want = request.want
    tasks = request.tasks
    first_want = request.first_want
    pacer = ctx.session.pacer
    # The core's own PlanStream is walked synchronously, with the same budgeted
    # checkpoints; any other plan iterator is awaited step by step.
    stream = plans if isinstance(plans, PlanStream) else None
    try:
        while True:
            if stream is not None:
                if pacer.tick():
                    await anyio.lowlevel.checkpoint()
                plan = stream.next_plan()
                if plan is None:
                    break
            else:
                try:
                    plan = await plans.__anext__()
                except StopAsyncIteration:
                    break
            if len(plan) == 1:
                # One bucket (every sequential plan): one host, nothing to exclude
                # and nothing to roll back.
                if plan[0] != tasks:
                    continue
                if pacer.tick():
                    await anyio.lowlevel.checkpoint()
                if _place_one(ctx, candidates, tasks, first_want):
                    return True
                continue
            if len(plan) > limit or plan[0] > max_free:
                continue
            if sum(plan) != tasks or min(plan) < 1:
                continue  # not a partition of the task count: a plugin's bug, never a fit
            mark = ctx.mark()
            claimed: set[int] = set()
            hosts: HostIterator | None = None
            bucket_want = first_want
            for bucket in plan:
                if pacer.tick():
                    await anyio.lowlevel.checkpoint()
                # Each bucket size gets a fresh iterator (Req 3.3). A bucket as large
                # as the previous one continues that one's scan, which is the same
                # as a fresh scan: every host before its position was claimed or too
                # small for this size too.
                if hosts is None or hosts.bucket != bucket or hosts.want != bucket_want:
                    hosts = HostIterator(ctx, candidates, bucket, bucket_want)
                found = hosts.next_host(claimed)
                if found is None:
                    break
                claimed.add(found.index)
                ctx.claim(found, bucket, bucket_want)
                bucket_want = want
            else:
                return True
            ctx.rollback_to(mark)
    finally:
        if stream is not None:
            stream.close()
        else:
            await plans.aclose()
    return False


def _place_one(ctx: SchedContext, candidates: CandidateSet, tasks: int, want: Want) -> bool:
    """One bucket of ``tasks`` on the first host that fits (a fresh host iterator)."""
    if tasks > candidates.max_free or tasks < 1:
        return False
    found = first_host(ctx, candidates, tasks, want)
    if found is None:
        return False
    ctx.claim(found, tasks, want)
    return True


async def allocate_single(ctx: SchedContext, request: PrimaryRequest) -> bool:
    """The bucket loop for exactly one plan, ``(request.tasks,)``: every task on
    the first candidate host that can take them all.

    Same result as :func:`allocate_plans` over a plan iterator yielding only that
    plan, without walking one (what :class:`SeqJobAllocator` runs for every
    sequential job). One step, one cancellation point.
    """
    if ctx.session.pacer.tick():
        await anyio.lowlevel.checkpoint()
    return _place_one(ctx, request.candidates, request.tasks, request.first_want)


class Allocator(ABC):
    """An allocation strategy plugin: a plan iterator over the shared bucket loop.

    Implement :meth:`plans`; override :meth:`allocate` only to change the loop
    itself. Registered by name through the ``xce.allocators`` entry point group.
    """

    name: ClassVar[str]

    @abstractmethod
    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        """Plans for ``request.tasks`` tasks, most preferred first. Lazy: one plan
        per step, each step a cancellation point; stays exhausted; closable."""

    def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> Awaitable[bool]:
        """Place ``request`` with tentative claims in ``ctx``; resolves to ``False``
        if no plan fits. Overrides may simply be ``async def``."""
        return allocate_plans(ctx, request, self.plans(request, ctx))
