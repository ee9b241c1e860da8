"""Dispatch of one job's requirement tree to allocators (PRIMARY / COMPOUND / ALTER).

- PRIMARY: by its task count to the configured sequential or parallel allocator,
  through the unsatisfiable cache (Req 7) and the shared-resource check (Req 4.7).
- COMPOUND: every part must allocate; a failing part rolls back the parts
  already claimed (Req 9.2).
- ALTERNATIVE: options in order; the first that fully allocates wins.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final

from xce_core._config import SchedulerConfig
from xce_core._context import SchedContext
from xce_core._iterators import PrimaryRequest
from xce_core._model import AMOUNT_TOLERANCE, Job, JobShape
from xce_core._registry import Registry
from xce_core._results import PendReason, Reason, Status, Want
from xce_core._session import CandidateSet
from xce_core._state import ClusterState, part_counts
from xce_core.resreq import LOAD_INDICES, Alternative, Compound, Primary, ResReq, RusageTerm

__all__ = ["Dispatcher", "primary_fingerprints"]

_OK = Status.OK


def primary_fingerprints(state: ClusterState, job: Job | JobShape) -> dict[int, int]:
    """Fingerprint every primary of ``job`` (done once per shape, at ingest)."""
    if isinstance(job.resreq, Primary):
        return {id(job.resreq): job.fingerprint}
    fps: dict[int, int] = {}

    def visit(node: ResReq, top: bool) -> None:
        if isinstance(node, Primary):
            if top:
                fps[id(node)] = job.fingerprint
            else:
                fps.setdefault(
                    id(node),
                    state.fingerprint("primary", str(node), job.min_tasks, job.max_tasks),
                )
        elif isinstance(node, Compound):
            for part, count in zip(node.parts, part_counts(node, job.max_tasks), strict=True):
                fps.setdefault(
                    id(part),
                    state.fingerprint("part", str(part), count),
                )
        else:
            for option in node.options:
                visit(option, False)

    visit(job.resreq, True)
    return fps


class Dispatcher:
    """Allocates one job at a time into a :class:`SchedContext`."""

    def __init__(self, config: SchedulerConfig, registry: Registry) -> None:
        self._seq = registry.allocator(config.sequential_allocator)
        self._par = registry.allocator(config.parallel_allocator)
        self._usages = _UsageMemo()

    def allocate(self, ctx: SchedContext) -> Awaitable[bool]:
        """Try the job's whole requirement; resolves to ``True`` with the claims
        in ``ctx``, or ``False`` with no claim in ``ctx`` and ``ctx.reason``
        saying why. The caller owns the cache entry of the job's fingerprint
        (lookup before, insert on failure); entries of compound parts and
        options are handled here."""
        job = ctx.job
        resreq = job.resreq
        if isinstance(resreq, Primary):
            # The common case, awaited directly by the caller: nothing to roll
            # back, and the job's own fingerprint (which is this primary's) is
            # looked up and filled by the caller. (No cap, the usual: no call
            # for it, benchmark B11 of benchmarks/bench_fairshare.py.)
            if ctx.cap is None:
                return self._attempt(resreq, job.min_tasks, job.max_tasks, ctx)
            return self._attempt(resreq, job.min_tasks, _most(job, ctx), ctx)
        return self._tree(resreq, ctx)

    async def _tree(self, resreq: Compound | Alternative, ctx: SchedContext) -> bool:
        job = ctx.job
        options = resreq.options if isinstance(resreq, Alternative) else (resreq,)
        first_reason: PendReason | None = None
        for option in options:
            mark = ctx.mark()
            if isinstance(option, Compound):
                ok = await self._compound(option, ctx)
            else:
                ok = await self._primary(option, job.min_tasks, _most(job, ctx), ctx)
            if ok:
                return True
            ctx.rollback_to(mark)
            if first_reason is None:
                first_reason = ctx.reason
        ctx.reason = first_reason
        return False

    async def _compound(self, compound: Compound, ctx: SchedContext) -> bool:
        counts = part_counts(compound, ctx.job.max_tasks)
        total = sum(counts)
        session = ctx.session
        if total > session.free_total:
            # Every task takes a slot: the parts together want more than are
            # free (or than the cluster has).
            ctx.reason = _parts_too_many(compound, counts, total, ctx)
            return False
        for k, (part, count) in enumerate(zip(compound.parts, counts, strict=True)):
            if not await self._primary(part, count, count, ctx):
                if k and ctx.journal:
                    ctx.reason = _after_parts(ctx, part, k, len(counts), count)
                return False
        return True

    async def _primary(self, primary: Primary, lo: int, hi: int, ctx: SchedContext) -> bool:
        session = ctx.session
        clean = not ctx.journal and not ctx.shared
        fp = ctx.job.primary_fps.get(id(primary), 0)
        # A top-level primary shares the job's fingerprint, already looked up.
        if clean and fp and fp != ctx.job.fingerprint:
            hit = session.cache.lookup(fp)
            if hit is not None:
                ctx.reason = hit
                return False
        if await self._attempt(primary, lo, hi, ctx):
            return True
        # (An attempt bounded by limits fails for them, not the option: _most.)
        if clean and fp and ctx.reason is not None and ctx.cap is None:
            session.cache.insert(fp, ctx.reason)
        return False

    async def _attempt(self, primary: Primary, lo: int, hi: int, ctx: SchedContext) -> bool:
        """Place one primary of ``lo``..``hi`` tasks (most first). ``False``:
        nothing claimed, ``ctx.reason`` says why."""
        session = ctx.session
        prepared: _Prepared | None = session.memo.get(id(primary))
        if prepared is None:
            options = self._usages.get(primary.rusage, ctx.state)
            prepared = session.memo[id(primary)] = _Prepared(primary, options, ctx)
        free_total = session.free_total
        if free_total < lo:
            # Busy cluster: nothing can start, and saying why needs no host list.
            # A licence that is gone as well is more specific than a full
            # cluster (_licence_first: the same order as below).
            ctx.reason = _licence_first(
                session.explain_without_candidates(primary.select, lo), prepared, lo, ctx
            )
            return False
        allocator = self._par if hi > 1 else self._seq
        # The first reason an allocator gives for not placing a request (a
        # Status carrying one) is the job's; without one, it is explained.
        reason: PendReason | None = None
        if lo == hi and prepared.plain:
            # The usual job: a fixed task count, one rusage, no shared resource.
            usage = prepared.options[0]
            for request in prepared.requests(0, lo):
                status = await allocator.allocate(request, ctx)
                if status is _OK:
                    return True
                placed, said = _verdict(status)
                if placed:
                    return True
                reason = reason or said
            ctx.reason = reason or _shape_said(
                primary,
                lo,
                session.explain(prepared.candidates, lo, usage.first_want, primary.select),
            )
            return False
        for option, usage in enumerate(prepared.options):
            # Search by arithmetic, not by task count: no allocator can place
            # more tasks than the candidates can hold, so counts above that are
            # never tried (a 1..9,600-task job whose rusage no host can give
            # used to try all 9,600 counts, each over every host).
            top = min(hi, free_total, await prepared.most_tasks(usage, ctx))
            for n in range(top, lo - 1, -1):
                shared: dict[str, float] | None = None
                if usage.has_shared:
                    shared = usage.shared(n)
                    short = _shared_shortfall(shared, ctx)
                    if short:
                        reason = reason or PendReason(Reason.SHARED_RESOURCE_UNAVAILABLE, short)
                        continue
                for request in prepared.requests(option, n):
                    status = await allocator.allocate(request, ctx)
                    placed, said = (True, None) if status is _OK else _verdict(status)
                    if placed:
                        if shared:
                            ctx.claim_shared(shared)
                        return True
                    reason = reason or said
            if reason is None:
                # No count was tried (the candidates hold fewer than lo tasks),
                # or none said why.
                reason = _licence_first(
                    _shape_said(
                        primary,
                        lo,
                        session.explain(prepared.candidates, lo, usage.first_want, primary.select),
                    ),
                    prepared,
                    lo,
                    ctx,
                )
        ctx.reason = reason
        return False


def _licence_first(
    reason: PendReason, prepared: _Prepared, lo: int, ctx: SchedContext
) -> PendReason:
    """``reason`` for a primary that could not start, or, when it is about
    capacity (hosts full or short of a consumable) and every way the primary
    may take its licences finds one short for ``lo`` tasks, that licence:
    where the job could run (no usable worker, no host its select matches)
    comes first, then a licence, then capacity. The same order whether the
    cluster is full or not, so a reason cached in one state is the one a
    fresh attempt gives in the other (the cache property of
    tests/core/test_limits.py found them differ)."""
    if prepared.plain or reason.category not in _CAPACITY:
        return reason
    shortfalls = [_shared_shortfall(u.shared(lo), ctx) for u in prepared.options]
    if all(shortfalls):
        return PendReason(Reason.SHARED_RESOURCE_UNAVAILABLE, shortfalls[0])
    return reason


def _most(job: Job, ctx: SchedContext) -> int:
    """The most tasks ``job``'s attempt may place: its ``max_tasks``, or fewer
    (not below ``min_tasks``) under the cap its limits leave (``ctx.cap``). An
    attempt bounded by limits (a cap, or host limits' rooms) that fails caches
    nothing: the core tries again without them, as a shape may fit only
    above the cap (its task counts need not be monotone, as a ``block``'s)
    or only on hosts at their limit."""
    cap = ctx.cap
    if cap is None or cap >= job.max_tasks:
        return job.max_tasks
    return max(cap, job.min_tasks)


class _Prepared:
    """What a primary needs each attempt, worked out once per session. The host
    lists are built on first use: a busy cluster often never needs them."""

    __slots__ = ("_groups", "_primary", "_requests", "_session", "options", "plain")

    def __init__(self, primary: Primary, options: list[_Usage], ctx: SchedContext) -> None:
        self._primary = primary
        self._session = ctx.session
        self._groups: list[CandidateSet] | None = None
        # The primary's rusage alternatives (shared across sessions: read-only).
        self.options = options
        # One way to take resources, none of them shared: nothing to choose or check.
        self.plain = len(options) == 1 and not options[0].has_shared
        # Requests by (alternative, task count), made on first use.
        self._requests: dict[tuple[int, int], list[PrimaryRequest]] = {}

    @property
    def candidates(self) -> CandidateSet:
        return self._session.candidates(self._primary)

    @property
    def groups(self) -> list[CandidateSet]:
        if self._groups is None:
            primary, cset, session = self._primary, self.candidates, self._session
            groups = session.same_groups(primary, cset) if primary.same else [cset]
            if primary.span is not None and primary.span.varies:
                groups = session.ptile_groups(primary.span, groups)
            self._groups = groups
        return self._groups

    async def most_tasks(self, usage: _Usage, ctx: SchedContext) -> int:
        """An upper bound on the tasks any allocator can place for this primary
        under ``usage`` now: per ``same[]`` group, what its hosts can hold
        (:func:`tasks_that_fit` summed, or the largest for ``span[hosts=1]``);
        the largest over groups. One pass over the candidates, each host a
        :class:`Pacer` step."""
        pacer = ctx.session.pacer
        span = self._primary.span
        one_host = span is not None and span.hosts == 1
        best = 0
        for group in self.groups:
            ptile = group.ptile if group.ptile is not None or span is None else span.ptile
            total = 0
            for worker in group.workers:
                if pacer.tick():
                    await pacer.pause()
                cap = ctx.tasks_that_fit(worker, usage.want)
                if ptile is not None and cap > ptile:
                    cap = ptile
                if one_host:
                    total = max(total, cap)
                else:
                    total += cap
            best = max(best, total)
        return best

    def requests(self, option: int, tasks: int) -> list[PrimaryRequest]:
        """What allocators are asked for ``tasks`` tasks under rusage alternative
        ``options[option]``: one request per ``same[]`` group (read-only, so
        shared by every job this session; made on first use)."""
        key = (option, tasks)
        requests = self._requests.get(key)
        if requests is None:
            requests = self._requests[key] = self._make_requests(self.options[option], tasks)
        return requests

    def _make_requests(self, usage: _Usage, tasks: int) -> list[PrimaryRequest]:
        primary = self._primary
        groups = self.groups
        if tasks == 1 and primary.span is not None and primary.span.varies:
            # One task takes one host whatever its ptile: no split by ptile.
            cset, session = self.candidates, self._session
            plain = session.same_groups(primary, cset) if primary.same else [cset]
            groups = session.ptile_groups(primary.span, plain, split=False)
        return [
            PrimaryRequest(primary, tasks, usage.want, group, usage.first_want) for group in groups
        ]


class _UsageMemo:
    """Each distinct ``rusage[]`` split into :class:`_Usage` alternatives, kept
    across sessions: the split depends only on the terms and on which names are
    shared resources (``ClusterState.shared_names_version``). Made once per
    distinct rusage, not per job a session (a replay of small sessions made one
    split a job, about 5% of benchmarks/bench_simulate.py). Bounded: cleared when
    it holds ``limit`` entries (distinct requirements are unbounded input)."""

    __slots__ = ("_entries", "_version", "limit")

    def __init__(self, limit: int = 10_000) -> None:
        # id(rusage) -> (rusage, its split). The entry holds the rusage, so its
        # id names no other object while the entry lives; an id is looked up
        # without hashing the terms (primaries of one requirement text share
        # their parsed rusage).
        self._entries: dict[int, tuple[tuple[tuple[RusageTerm, ...], ...], list[_Usage]]] = {}
        self._version = 0
        self.limit = limit

    def get(self, rusage: tuple[tuple[RusageTerm, ...], ...], state: ClusterState) -> list[_Usage]:
        """The alternatives of ``rusage`` (one, empty, when there is none)."""
        entries = self._entries
        if self._version != state.shared_names_version or len(entries) >= self.limit:
            entries.clear()
            self._version = state.shared_names_version
        entry = entries.get(id(rusage))
        if entry is None or entry[0] is not rusage:
            entry = entries[id(rusage)] = (
                rusage,
                [_Usage(terms, state) for terms in rusage or ((),)],
            )
        return entry[1]


class _Usage:
    """One rusage alternative, split by where and how often each amount is taken.

    Host consumables: per task (the default and ``/task``), per host (``/host``),
    or once per job on the first host of the allocation (``/job``). Shared
    resources: once per job (the default, ``/job`` and ``/host``), or per task
    (``/task``). Read-only once made (shared across sessions by :class:`_UsageMemo`).
    """

    __slots__ = ("first_want", "has_shared", "shared_fixed", "shared_per_task", "want")

    def __init__(self, terms: tuple[RusageTerm, ...], state: ClusterState) -> None:
        host: dict[str, list[float]] = {}
        job: dict[str, float] = {}
        self.shared_fixed: dict[str, float] = {}
        self.shared_per_task: dict[str, float] = {}
        for term in terms:
            if term.amount <= 0:
                continue
            name, amount = term.name, term.amount
            if name in LOAD_INDICES and name not in state.shared_total:
                continue  # a load reservation: carried, reserves nothing
            if name in state.shared_total:
                target = self.shared_per_task if term.per == "task" else self.shared_fixed
                target[name] = target.get(name, 0.0) + amount
            elif term.per == "job":
                job[name] = job.get(name, 0.0) + amount
            else:
                entry = host.setdefault(name, [0.0, 0.0])
                entry[1 if term.per == "host" else 0] += amount
        self.want: Want = tuple((n, t, h) for n, (t, h) in sorted(host.items()))
        if job:
            merged = {n: [t, h] for n, t, h in self.want}
            for n, amount in job.items():
                merged.setdefault(n, [0.0, 0.0])[1] += amount
            self.first_want: Want = tuple((n, t, h) for n, (t, h) in sorted(merged.items()))
        else:
            self.first_want = self.want
        self.has_shared = bool(self.shared_fixed or self.shared_per_task)

    def shared(self, tasks: int) -> dict[str, float]:
        """Shared amounts for a job of ``tasks`` tasks."""
        if not self.shared_per_task:
            return self.shared_fixed
        out = dict(self.shared_fixed)
        for name, amount in self.shared_per_task.items():
            out[name] = out.get(name, 0.0) + amount * tasks
        return out


def _shape_said(primary: Primary, tasks: int, reason: PendReason) -> PendReason:
    """``reason`` (explained over all the candidates, one task per host at a
    time) with what the primary's shape asks of the hosts, when that is what
    the hosts could not give: ``same[]`` (tried group by group: the hosts may
    hold the tasks together but no group of hosts alike does), ``span[hosts=1]``
    and ``span[ptile=...]`` (tasks per host)."""
    if reason.category not in _CAPACITY:
        return reason
    notes = []
    span = primary.span
    if span is not None and tasks > 1:
        if span.hosts == 1:
            notes.append(f"span[hosts=1]: no host holds {tasks} tasks")
        elif span.ptile is not None and not span.varies:
            hosts = -(-tasks // span.ptile)
            if hosts > 1:
                notes.append(
                    f"span[ptile={span.ptile}]: {tasks} tasks go {span.ptile} to a host,"
                    f" on {hosts} hosts"
                )
            else:
                notes.append(f"span[ptile={span.ptile}]: no host holds {tasks} tasks")
        elif span.ptile_max and not span.ptile_by:
            notes.append("span[ptile='!']: each host taken whole (all its slots free)")
    if primary.same:
        names = ":".join(primary.same)
        notes.append(
            f"same[{names}]: no set of hosts alike in {names} holds"
            f" {tasks} task{'s' if tasks != 1 else ''}"
        )
    if not notes:
        return reason
    return PendReason(reason.category, "; ".join([reason.detail, *notes]))


_CAPACITY: Final = (Reason.NOT_ENOUGH_SLOTS, Reason.RESOURCE_UNAVAILABLE)


def _parts_too_many(
    compound: Compound, counts: list[int], total: int, ctx: SchedContext
) -> PendReason:
    """Why a compound whose parts want ``total`` slots, more than are free, pends,
    as a plain job would: no worker at all, else a part whose select no host
    satisfies (naming it), else too few slots."""
    session = ctx.session
    if session.usable_count == 0:
        return PendReason(Reason.NO_WORKERS, "no usable workers")
    for k, (part, count) in enumerate(zip(compound.parts, counts, strict=True)):
        if not session.any_match(part.select):
            reason = session.explain_without_candidates(part.select, count)
            where = _part_name(k, len(counts), count)
            return PendReason(reason.category, f"{where}: {reason.detail}")
    return session.cluster_full(total)


def _after_parts(ctx: SchedContext, part: Primary, k: int, parts: int, tasks: int) -> PendReason:
    """The reason compound part ``k`` (0-based; ``tasks`` tasks) could not be
    placed after the parts before it were, tentatively. Its own reason is
    explained on committed capacity (and cached for its requirement alone), so
    it may read as if the part fitted: a capacity reason is explained again on
    top of the earlier parts' claims. Either way it says which part failed."""
    reason = ctx.reason or PendReason(Reason.NOT_ENOUGH_SLOTS, "no plan fits")
    prepared: _Prepared | None = ctx.session.memo.get(id(part))
    if reason.category in _CAPACITY and prepared is not None:
        want = prepared.options[0].first_want
        again = ctx.session.explain_on(ctx, prepared.candidates, tasks, want, part.select)
        reason = _shape_said(part, tasks, again)
    before = "part 1" if k == 1 else f"parts 1-{k}"
    where = _part_name(k, parts, tasks)
    return PendReason(reason.category, f"{where}, after {before}: {reason.detail}")


def _part_name(k: int, parts: int, tasks: int) -> str:
    """Compound part ``k`` (0-based) of ``parts``, as a pend detail names it."""
    return f"compound part {k + 1} of {parts} ({tasks} task{'s' if tasks != 1 else ''})"


def _verdict(status: Status | bool) -> tuple[bool, PendReason | None]:
    """An allocator's answer as (placed, the reason it gives). A ``bool`` comes
    from an allocator written before :class:`Status`: ``True``/``False`` keep
    their old meaning, with no reason of its own."""
    if isinstance(status, Status):
        return status.ok, status.reason
    return bool(status), None


def _shared_shortfall(shared: dict[str, float], ctx: SchedContext) -> str:
    parts = []
    for name, amount in sorted(shared.items()):
        free = ctx.shared_free(name)
        if free is None or amount > free + AMOUNT_TOLERANCE:
            total = ctx.state.shared_total.get(name, 0.0)
            parts.append(f"{name}: {amount:g} wanted, {max(free or 0.0, 0.0):g} of {total:g} free")
    return "; ".join(parts)
