"""Plan and host iterators and the bucket loop every allocator shares (Req 2, 3, 4).

A *plan* is a partition of a primary's task count into per-host slot buckets,
largest first (``(3, 2, 2)``). An allocator supplies an async iterator of plans;
:func:`allocate_plans` walks it and places each plan in turn: a distinct host
per bucket, each from a fresh :class:`HostIterator`, and a failed plan rolled
back exactly. A one-bucket plan has one path, :func:`allocate_single`, which
``seqjob`` also calls directly. The result is a :class:`Status`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Container, Iterator
from typing import ClassVar, Protocol, final

from xce_core._context import SchedContext
from xce_core._model import Worker
from xce_core._results import Status, Want
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
    the request, easy to test). This adapter paces the steps: each step ticks the
    session's :class:`Pacer` (a counter and a flag, no await), every
    ``yield_every`` steps it awaits a full checkpoint (yielding to the loop and
    delivering a pending cancellation), and a session stopped by
    ``cancel_session()`` checkpoints at its very next step. So a step is not
    always a cancellation point: a cancellation from an enclosing scope is
    delivered at the next budgeted checkpoint. It stays exhausted once
    exhausted, and :meth:`aclose` closes the generator (also when the consumer
    stops early or is cancelled).
    """

    __slots__ = ("_gen", "_pacer")

    def __init__(self, ctx: SchedContext, plans: Iterator[Plan]) -> None:
        self._gen: Iterator[Plan] | None = plans
        self._pacer = ctx.session.pacer

    def __aiter__(self) -> PlanStream:
        return self

    async def __anext__(self) -> Plan:
        if self._pacer.tick():
            await self._pacer.pause()
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
    tentative claims; the fit rule is :func:`~xce_core.plugin.shortfall`). A
    fresh instance per bucket (Req 3.3); exclusivity across a plan's buckets is
    the caller's business (Req 3.4).

    :meth:`next_host` steps through the core's one host scan,
    :meth:`HostCursor.scan`; ``async for`` (each ``__anext__``) is that plus one
    :class:`Pacer` step, paced as :class:`PlanStream` describes. Hosts too full
    on *committed* state are skipped once per session: the session's cursor per
    (candidates, bucket, want) remembers how far the leading run of such hosts
    goes, which is sound because capacity only shrinks within a session.
    """

    __slots__ = ("_ctx", "_cursor", "_pos")

    def __init__(
        self,
        ctx: SchedContext,
        candidates: CandidateSet,
        bucket: int,
        want: Want,
    ) -> None:
        self._ctx = ctx
        self._cursor = ctx.session.host_cursor(candidates, bucket, want)
        self._pos = self._cursor.start

    @property
    def want(self) -> Want:
        """The consumables this iterator's bucket needs."""
        return self._cursor.want

    @property
    def bucket(self) -> int:
        """The bucket size this iterator serves."""
        return self._cursor.bucket

    def __aiter__(self) -> HostIterator:
        return self

    async def __anext__(self) -> Worker:
        if self._ctx.session.pacer.tick():
            await self._ctx.session.pacer.pause()
        host = self.next_host()
        if host is None:
            raise StopAsyncIteration
        return host

    def next_host(self, claimed: Container[int] = ()) -> Worker | None:
        """The next host the bucket fits on, skipping hosts whose index is in
        ``claimed``; ``None`` when exhausted. Synchronous and never a
        cancellation point: the caller owns the pacing (the bucket loop ticks
        once per bucket)."""
        found, self._pos = self._cursor.scan(self._ctx, self._pos, claimed)
        return found

    async def aclose(self) -> None:
        """Nothing to release; present so callers can treat every iterator alike."""
        self._pos = len(self._cursor.workers)


_OK = Status.OK
_UNSCHEDULABLE = Status.UNSCHEDULABLE


async def allocate_plans(
    ctx: SchedContext, request: PrimaryRequest, plans: PlanIterator
) -> Status:
    """The bucket loop (docs/design.md, Req 4): each plan in
    turn goes to :func:`_place_plan` until one is placed.

    Resolves to :attr:`Status.OK` with the winning plan's claims left in
    ``ctx``, or to :attr:`Status.UNSCHEDULABLE` (no reason: the core explains)
    with ``ctx`` as it was. Closes ``plans`` in every case. Each plan is one
    :class:`Pacer` step, each bucket another.
    """
    pacer = ctx.session.pacer
    # The core's own PlanStream is walked synchronously, with the same budgeted
    # checkpoints; any other plan iterator is awaited step by step.
    stream = plans if isinstance(plans, PlanStream) else None
    try:
        while True:
            if stream is not None:
                if pacer.tick():
                    await pacer.pause()
                plan = stream.next_plan()
                if plan is None:
                    break
            else:
                try:
                    plan = await plans.__anext__()
                except StopAsyncIteration:
                    break
            if await _place_plan(ctx, request, plan) is _OK:
                return _OK
    finally:
        if stream is not None:
            stream.close()
        else:
            await plans.aclose()
    return _UNSCHEDULABLE


async def allocate_single(ctx: SchedContext, request: PrimaryRequest) -> Status:
    """Place the one-bucket plan ``(request.tasks,)``: every task on the first
    candidate host that can take them all. The one path for one-bucket plans:
    :func:`allocate_plans` places such plans through it too, so an allocator
    whose only plan this is can call it instead of walking a plan iterator (what
    :class:`SeqJobAllocator` does). One :class:`Pacer` step.
    """
    tasks = request.tasks
    candidates = request.candidates
    if tasks < 1 or tasks > candidates.max_free:
        return _UNSCHEDULABLE
    if ctx.session.pacer.tick():
        await ctx.session.pacer.pause()
    # No host to exclude and nothing to roll back: no mark, no claimed set and
    # no iterator object, only the scan (this is the whole of benchmark B1,
    # benchmarks/bench_alloc.py).
    want = request.first_want
    cursor = ctx.session.host_cursor(candidates, tasks, want)
    found = cursor.scan(ctx, cursor.start)[0]
    if found is None:
        return _UNSCHEDULABLE
    ctx.claim(found, tasks, want)
    return _OK


async def _place_plan(ctx: SchedContext, request: PrimaryRequest, plan: Plan) -> Status:
    """Place one plan, every bucket or none: buckets in order, each on the first
    host a fresh :class:`HostIterator` offers that this plan has not claimed,
    claimed tentatively. A bucket without a host rolls back this plan's claims
    exactly (Req 4.2). A one-bucket plan goes to :func:`allocate_single`.

    Plans that cannot fit (a bucket larger than any host's free slots, more
    buckets than candidates) are refused without searching: they would fail
    anyway, so which plan wins does not change. So are plans that are not a
    partition of ``request.tasks`` into positive buckets (a plugin's bug).
    """
    tasks = request.tasks
    if len(plan) == 1:
        if plan[0] != tasks:
            return _UNSCHEDULABLE
        return await allocate_single(ctx, request)
    candidates = request.candidates
    first_want = request.first_want
    pacer = ctx.session.pacer
    if len(plan) > len(candidates.workers) or plan[0] > candidates.max_free:
        return _UNSCHEDULABLE
    if sum(plan) != tasks or min(plan) < 1:
        return _UNSCHEDULABLE
    mark = ctx.mark()
    if plan[0] == plan[-1] and first_want == request.want:
        # Every bucket alike: one iterator would serve them all, and the hosts
        # its forward scan finds are distinct, so the loop below needs neither
        # the iterator object nor the claimed set. Same hosts, same steps; the
        # replays of benchmarks/bench_simulate.py place about 100 hosts a job.
        # A step per host, run in bursts: as many hosts as the budget allows
        # before its next checkpoint, in one scan and one claim (a call per
        # host saved; the same checkpoints).
        bucket = plan[0]
        cursor = ctx.session.host_cursor(candidates, bucket, first_want)
        pos = cursor.start
        left = len(plan)
        while left:
            if pacer.tick():
                await pacer.pause()
            burst = pacer.burst(left)
            run, pos = cursor.scan_many(ctx, pos, burst)
            if len(run) < burst:  # the step after the last host found failed
                pacer.spend(len(run))
                ctx.rollback_to(mark)
                return _UNSCHEDULABLE
            ctx.claim_many(run, bucket, first_want)
            pacer.spend(burst - 1)
            left -= burst
        return _OK
    claimed: set[int] = set()
    hosts: HostIterator | None = None
    hosts_bucket = 0
    hosts_want = want = first_want
    for bucket in plan:
        if pacer.tick():
            await pacer.pause()
        # Each bucket size gets a fresh iterator (Req 3.3). A bucket as large as
        # the previous one continues that one's scan, which is the same as a
        # fresh scan: every host before its position was claimed or too small
        # for this size too.
        if hosts is None or bucket != hosts_bucket or want != hosts_want:
            hosts = HostIterator(ctx, candidates, bucket, want)
            hosts_bucket, hosts_want = bucket, want
        found = hosts.next_host(claimed)
        if found is None:
            ctx.rollback_to(mark)
            return _UNSCHEDULABLE
        claimed.add(found.index)
        ctx.claim(found, bucket, want)
        want = request.want
    return _OK


class Allocator(ABC):
    """An allocation strategy plugin: a plan iterator over the shared bucket loop.

    Implement :meth:`plans`; override :meth:`allocate` only to change the loop
    itself, or to say why a request cannot be placed. Registered by name through
    the ``xce.allocators`` entry point group.
    """

    name: ClassVar[str]
    # True when this allocator's answer for a request depends only on the
    # capacity of the candidate hosts and licences (not on time, randomness or
    # anything outside the state), and it gives no reason of its own: then
    # blocked groups may sleep across sessions (xce_core._sleep). The
    # built-ins do; a plugin must opt in.
    capacity_only: ClassVar[bool] = False
    # True when this allocator awaits nothing but the core's paced steps (its
    # plan stream, host iterators, allocate_plans): then a session small enough
    # to run inline needs no cancel scope of its own, since cancel_session()
    # reaches it at its next step (Pacer.pause). A plugin that awaits anything
    # else (I/O, a sleep, another task) must leave it False: its sessions run
    # in a cancel scope, which cancel_session() cancels. The built-ins declare it.
    paced_only: ClassVar[bool] = False

    @abstractmethod
    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        """Plans for ``request.tasks`` tasks, most preferred first. Lazy: one plan
        per step; stays exhausted; closable. Steps should be paced as
        :class:`PlanStream` paces them (wrap a generator in one)."""

    def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> Awaitable[Status]:
        """Place ``request`` with tentative claims in ``ctx``.

        Resolves to :attr:`Status.OK` with the claims left in ``ctx``, or to an
        unschedulable :class:`Status` with no claim of this call left in ``ctx``.
        An unschedulable status may carry the :class:`PendReason` the job should
        pend with (``Status.unschedulable(PendReason(...))``); the core then
        reports it (and caches it for the session like any other reason).
        Without one, the core works the reason out from the hosts, as for the
        built-in allocators. Overrides may simply be ``async def``.

        Compatibility: an override written before :class:`Status` existed may
        still resolve to a ``bool``. ``True`` and ``False`` mean what they always
        meant (placed; not placed, with the reason worked out by the core); type
        checkers flag the ``bool``, so return a :class:`Status` in new code.
        """
        return allocate_plans(ctx, request, self.plans(request, ctx))
