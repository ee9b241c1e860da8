"""Per-session scratch: candidate lists, host cursors, the cache, pend reasons.

Everything here is reset by :meth:`SessionScratch.begin` strictly before a
session's picker and allocator tasks start (Req 7.2), and is only valid while
the session runs: within a session capacity only shrinks, which is what the
cursors and the cache rely on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from xce_core._cache import UnsatisfiableCache
from xce_core._cursor import HostCursor
from xce_core._model import SLOTS, Worker, shortfall, tasks_that_fit
from xce_core._pacer import Pacer
from xce_core._results import PendReason, Reason, Want
from xce_core._select_memo import StaticSelectMemo
from xce_core.resreq import OrderKey, Primary, SelectExpr, Span

if TYPE_CHECKING:
    from xce_core._state import ClusterState

__all__ = ["CandidateSet", "Claims", "SessionScratch"]


class Claims(Protocol):
    """An attempt's tentative claims as explanations read them
    (:class:`~xce_core._context.SchedContext` is one)."""

    def shortfall(self, worker: Worker, slots: int, want: Want) -> str | None: ...

    def tasks_that_fit(self, worker: Worker, want: Want) -> int: ...


@dataclass(slots=True, eq=False)
class CandidateSet:
    """Usable workers a primary may use, in the order its host iterators walk.

    ``key`` names the set for cursors (unique within a session); ``max_free``
    bounds any member's free slots for the rest of the session (capacity only
    shrinks).
    """

    key: int
    workers: list[Worker]
    max_free: int = 0
    # True when hosts without a free slot at session start were left out (they
    # cannot take work before the session ends); such sets are per-session.
    free_only: bool = False
    # Tasks per host every member takes, when span[ptile=...] depends on the
    # host ('!' or per type/model values): see SessionScratch.ptile_groups.
    ptile: int | None = None


@dataclass(slots=True, eq=False)
class SessionScratch:
    """State that lives for one session. ``static_memo`` outlives sessions: it holds
    select results that read only static attributes, keyed by worker version."""

    state: ClusterState
    static_memo: StaticSelectMemo
    cache: UnsatisfiableCache
    number: int = 0
    # The session's time on the core's injected clock, read once at begin().
    now: float = 0.0
    pacer: Pacer = field(default_factory=Pacer)
    cursors: dict[tuple[object, ...], HostCursor] = field(default_factory=dict)
    _dynamic: dict[str, list[Worker]] = field(default_factory=dict)
    _sets: dict[tuple[object, ...], CandidateSet] = field(default_factory=dict)
    _groups: dict[tuple[object, ...], list[CandidateSet]] = field(default_factory=dict)
    # Per-session memo for callers (keyed by id() of objects that outlive the session).
    memo: dict[int, Any] = field(default_factory=dict)
    _keys: int = 0
    _commits: int = 0
    _explained: dict[tuple[object, ...], PendReason] = field(default_factory=dict)
    # Fingerprint -> this session's commit count when it first failed.
    _failed_at: dict[int, int] = field(default_factory=dict)
    _measured: bool = False
    _free_workers: list[Worker] = field(default_factory=list)
    _max_free: int = -1

    def begin(self, number: int, now: float = 0.0) -> None:
        """Reset everything per-session; ``now`` is the session's time on the
        core's clock. Synchronous: runs before any task starts."""
        self.number = number
        self.now = now
        self.cache.clear()
        self.cursors.clear()
        self._dynamic.clear()
        self._sets.clear()
        self._groups.clear()
        self.memo.clear()
        self._explained.clear()
        self._failed_at.clear()
        self._keys = 0
        self._commits = 0
        self.pacer.restart()
        self._measured = False
        self._max_free = -1

    def fork(self) -> SessionScratch:
        """A fresh scratch for an attempt on projected capacity (backfill
        planning): cursors, candidate lists and memo of its own, no cache; the
        same static memo, pacer (so the attempt is paced and cancellable like
        the session's), session number and time."""
        scratch = SessionScratch(
            self.state, self.static_memo, UnsatisfiableCache(enabled=False), pacer=self.pacer
        )
        scratch.number = self.number
        scratch.now = self.now
        return scratch

    def _measure(self) -> None:
        # The free hosts in canonical order, on first need: O(F log F) for F
        # hosts with a free slot (the state keeps them, and every total, as
        # capacity changes), so a busy cluster's session never walks the full
        # ones, and a session with nothing to allocate pays nothing.
        state = self.state
        free = state.free_hosts
        if len(free) * 8 < len(state.workers):
            self._free_workers = sorted(free, key=_index)
        else:  # most hosts are free: a walk in canonical order beats a sort
            self._free_workers = [w for w in state.workers if w in free]
        self._measured = True

    @property
    def free_workers(self) -> list[Worker]:
        """Usable workers with a free slot at session start, in canonical order."""
        if not self._measured:
            self._measure()
        return self._free_workers

    @property
    def usable_count(self) -> int:
        """Usable workers this session."""
        return self.state.usable_count

    @property
    def free_total(self) -> int:
        """Free slots on usable workers, kept exact through the session's commits."""
        return self.state.free_total

    @property
    def max_free(self) -> int:
        """Most free slots on one usable worker when first asked this session (an
        upper bound for the rest of it: capacity only shrinks)."""
        if self._max_free < 0:
            # Stops at the first host with all of the largest slot count free:
            # O(1) on an idle cluster, O(F) on a busy one (the sessions of a
            # trace replay, benchmarks/bench_simulate.py).
            cap = max(self.state.slot_sizes, default=0)
            best = 0
            for w in self.state.free_hosts:
                free = w.slots - w.used_slots
                if free > best:
                    best = free
                    if best >= cap:
                        break
            self._max_free = best
        return self._max_free

    def host_cursor(self, cset: CandidateSet, bucket: int, want: Want) -> HostCursor:
        """This session's :class:`HostCursor` for buckets of ``bucket`` tasks
        wanting ``want`` over ``cset`` (made on first use)."""
        key = (cset.key, bucket, want)
        cursor = self.cursors.get(key)
        if cursor is None:
            cursor = self.cursors[key] = HostCursor(cset.workers, bucket, want)
        return cursor

    @property
    def commits(self) -> int:
        """Commits made by this session so far."""
        return self._commits

    def committed(self) -> None:
        """Count a commit (explanations are reused only until the next one)."""
        self._commits += 1

    def failed(self, fingerprint: int) -> None:
        """Note that a job of ``fingerprint`` was just found not to fit (the
        first time counts)."""
        self._failed_at.setdefault(fingerprint, self._commits)

    @property
    def failed_at(self) -> Mapping[int, int]:
        """Fingerprint -> :attr:`commits` when a job of it first failed this
        session. Equal to ``commits`` at the end: its pend reason was worked out
        on the capacity the session ends with."""
        return self._failed_at

    # ------------------------------------------------------------------ candidates

    def candidates(self, primary: Primary) -> CandidateSet:
        """Usable workers satisfying ``primary``'s select, in ``order[]`` or canonical order.

        Selects that read only static attributes use a list memoised across
        sessions (all usable hosts; the host iterators' cursors skip full ones).
        Selects that read consumables or ``slots``, and ``order[]`` sorts, are
        worked out per session over the hosts that have a free slot.
        """
        select = primary.select
        key: tuple[object, ...] = (select.text if select else None, primary.order)
        cset = self._sets.get(key)
        if cset is None:
            workers, free_only = self._matching(select)
            if primary.order:
                if not free_only:
                    workers = [w for w in workers if w.slots - w.used_slots > 0]
                    free_only = True
                workers = _sorted(workers, primary.order)
            cset = CandidateSet(self._new_key(), workers, self.max_free, free_only)
            self._sets[key] = cset
        return cset

    def any_match(self, select: SelectExpr | None) -> bool:
        """Whether any usable host satisfies ``select`` (stops at the first)."""
        if select is None:
            return self.usable_count > 0
        if self._is_static(select):
            return bool(self._static(select))
        memo = self._dynamic.get(select.text)
        if memo is None:
            # Evaluated now as the candidates would be (and memoised): this is
            # the session's first reading of the select.
            memo, _ = self._matching(select)
        if memo:
            return True
        # As the job's candidates do: the hosts free when the select was first
        # evaluated this session answer as then; the others (full) now.
        free = set(self.free_workers)
        return any(
            select.evaluate(w.values)
            for w in self.state.workers
            if w is not None and w.usable and w not in free
        )

    def _new_key(self) -> int:
        self._keys += 1
        return self._keys

    def same_groups(self, primary: Primary, cset: CandidateSet) -> list[CandidateSet]:
        """``same[a:b]``: the candidates split by their values of a, b (groups in the
        order their first member appears; hosts lacking a value are left out)."""
        gkey = (cset.key, primary.same)
        groups = self._groups.get(gkey)
        if groups is None:
            split: dict[tuple[object, ...], list[Worker]] = {}
            for w in cset.workers:
                values = tuple(w.values.get(a) for a in primary.same)
                if None not in values:
                    split.setdefault(values, []).append(w)
            groups = self._groups[gkey] = [
                CandidateSet(self._new_key(), members, self.max_free) for members in split.values()
            ]
        return groups

    def ptile_groups(
        self, span: Span, groups: list[CandidateSet], *, split: bool = True
    ) -> list[CandidateSet]:
        """Split each group by the tasks per host ``span`` gives its members
        (``ptile='!'``: each host's slot count; ``ptile='!',HP:8``: by type or
        model), so that every bucket of a plan has one size. Groups keep their
        order; within one, sub-groups come in the order of their first member.
        Hosts ``span`` gives no value are left out. ``split=False`` only leaves
        those out (a one-task job: any ptile gives it one host, in worker order)."""
        key = (tuple(g.key for g in groups), span, split)
        result = self._groups.get(key)
        if result is None:
            result = []
            for group in groups:
                by_ptile: dict[int | None, list[Worker]] = {}
                for w in group.workers:
                    ptile = span.per_host(w.values)
                    if ptile is not None:
                        by_ptile.setdefault(ptile if split else None, []).append(w)
                result += [
                    CandidateSet(self._new_key(), members, group.max_free, group.free_only, ptile)
                    for ptile, members in by_ptile.items()
                ]
            self._groups[key] = result
        return result

    def _is_static(self, select: SelectExpr) -> bool:
        names = select.names
        return not (names & self.state.consumables or "slots" in names)

    def _static(self, select: SelectExpr | None) -> list[Worker]:
        state = self.state
        text = select.text if select is not None else None
        workers = self.static_memo.get(text, state.worker_version)
        if workers is None:
            workers = [
                w
                for w in state.workers
                if w is not None and w.usable and (select is None or select.evaluate(w.values))
            ]
            self.static_memo.put(text, state.worker_version, workers)
        return workers

    def _matching(self, select: SelectExpr | None) -> tuple[list[Worker], bool]:
        if select is None or self._is_static(select):
            workers = self._static(select)
            if len(self.state.free_hosts) * 4 < len(workers):
                free = self.free_workers
                # A busy cluster: the free hosts that match, not every match
                # (full ones cannot take work before the session ends). Keeps
                # the host scans and explanations of a session after a few
                # finishes proportional to the free hosts (B9 in
                # benchmarks/bench_queue.py).
                if select is None:
                    return free, True
                members = self.static_memo.members(select.text, self.state.worker_version)
                assert members is not None  # made by _static() just above
                return [w for w in free if w in members], True
            return workers, False
        dyn = self._dynamic.get(select.text)
        if dyn is None:
            dyn = self._dynamic[select.text] = [
                w for w in self.free_workers if select.evaluate(w.values)
            ]
        return dyn, True

    # ------------------------------------------------------------------ reasons

    def cluster_full(self, tasks: int) -> PendReason:
        """The reason when the whole cluster has fewer free slots than ``tasks``."""
        free = max(self.free_total, 0)
        if tasks > self.state.usable_slots:
            # Never satisfiable as the cluster stands: say so, it is what to act on.
            return PendReason(
                Reason.NOT_ENOUGH_SLOTS,
                f"{_tasks(tasks)} wanted, more than the {self.state.usable_slots} slots of all "
                f"usable hosts together ({free} free)",
            )
        return PendReason(
            Reason.NOT_ENOUGH_SLOTS, f"{_tasks(tasks)} wanted, {free} slots free in the cluster"
        )

    def explain_without_candidates(self, select: SelectExpr | None, tasks: int) -> PendReason:
        """Why nothing can start when the cluster has fewer free slots than
        ``tasks``, without building the candidate list (cheap for busy clusters)."""
        if self.usable_count == 0:
            return PendReason(Reason.NO_WORKERS, "no usable workers")
        if not self.any_match(select):
            return PendReason(
                Reason.NO_MATCHING_HOST,
                f"{_hosts(self.usable_count)}: select not satisfied{self._undefined(select)}",
            )
        return self.cluster_full(tasks)

    def _undefined(self, select: SelectExpr | None) -> str:
        """For a select no usable host satisfies: the names it reads that no
        usable host defines (a misspelt or unknown resource is what to act on),
        as `` (no host defines 'x')``, else ``''``. One pass over the workers per
        name, only on this path (its reason is kept until the next commit, and a
        group with no matching host sleeps until a worker changes)."""
        if select is None:
            return ""
        workers = [w for w in self.state.workers if w is not None and w.usable]
        missing = [
            name
            for name in sorted(select.resources)
            if all(w.values.get(name) is None for w in workers)
        ]
        if not missing:
            return ""
        return _defined_by_none(missing)

    def _no_host_has(self, lacked: str) -> str:
        """For a consumable hosts lack (or ``not enough slots``): `` (no host
        defines 'gpu')`` when no usable host has it at all (a misspelt or
        unknown resource in rusage[], as :meth:`_undefined` says for a
        select), else ``''``. A name never defined needs no pass; else the
        pass stops at the first host that has it."""
        if lacked == _NO_SLOT:
            return ""
        if lacked in self.state.consumables and any(
            w is not None and w.usable and lacked in w.resources for w in self.state.workers
        ):
            return ""
        return _defined_by_none([lacked])

    def explain(
        self, cset: CandidateSet, tasks: int, want: Want, select: SelectExpr | None = None
    ) -> PendReason:
        """Why ``tasks`` tasks with per-task ``want`` found no plan among ``cset``.

        The category comes first from cheap facts (no usable worker, nothing
        matches, too few free slots in the whole cluster); otherwise one pass over
        the candidates classifies each host by what it lacks for one task. The
        answer is reused for the same question until the next commit.
        """
        if not self.cache.enabled:  # the baseline: every attempt pays in full
            return self._explain(cset, tasks, want, select)
        key = (cset.key, tasks, want, self._commits)
        reason = self._explained.get(key)
        if reason is None:
            reason = self._explained[key] = self._explain(cset, tasks, want, select)
        return reason

    def explain_on(
        self,
        claims: Claims,
        cset: CandidateSet,
        tasks: int,
        want: Want,
        select: SelectExpr | None,
    ) -> PendReason:
        """:meth:`explain` on top of an attempt's tentative ``claims`` (a
        compound part after the parts before it); not memoised."""
        return self._explain(cset, tasks, want, select, claims)

    def _explain(
        self,
        cset: CandidateSet,
        tasks: int,
        want: Want,
        select: SelectExpr | None,
        claims: Claims | None = None,
    ) -> PendReason:
        if self.usable_count == 0:
            return PendReason(Reason.NO_WORKERS, "no usable workers")
        if cset.free_only:
            full = self.usable_count - len(self.free_workers)
            unmatched = len(self.free_workers) - len(cset.workers)
        else:
            full = 0
            unmatched = self.usable_count - len(cset.workers)
        if not cset.workers:
            if cset.free_only and self.any_match(select):
                return PendReason(
                    Reason.NOT_ENOUGH_SLOTS,
                    f"{_hosts(full)}: no free slot; {_hosts(unmatched)}: select not satisfied",
                )
            return PendReason(
                Reason.NO_MATCHING_HOST,
                f"{_hosts(unmatched + full)}: select not satisfied{self._undefined(select)}",
            )
        if claims is None and self.free_total < tasks:
            return self.cluster_full(tasks)
        counts: Counter[str] = Counter()
        fitting = 0
        room = 0  # tasks the hosts that could take one could take together
        fit = tasks_that_fit if claims is None else claims.tasks_that_fit
        for w in cset.workers:
            # The slot clause inline first, as in HostCursor.scan: most hosts of a
            # busy cluster are full, and a call per host is about 2% of B1.
            if claims is None:
                lacks = SLOTS if w.slots - w.used_slots < 1 else shortfall(w, 1, want)
            else:
                lacks = claims.shortfall(w, 1, want)
            if lacks is None:
                fitting += 1
                room += fit(w, want)
            else:
                counts[_NO_SLOT if lacks == SLOTS else lacks] += 1
        resource_short = sum(n for what, n in counts.items() if what != _NO_SLOT)
        # Hosts that have room but lack a consumable are what a user can act on
        # (ask for less); otherwise the hosts are simply full or too fragmented.
        if resource_short and fitting < tasks:
            category = Reason.RESOURCE_UNAVAILABLE
        else:
            category = Reason.NOT_ENOUGH_SLOTS
        parts = [
            f"{_hosts(n)}: {what}{self._no_host_has(what)}" for what, n in counts.most_common()
        ]
        if full:
            parts.append(f"{_hosts(full)}: no free slot")
        if fitting and room < tasks:
            parts.append(
                f"{_hosts(fitting)}: room for {_tasks(room)} together, too few for {tasks}"
            )
        elif fitting:
            # Room enough, but not in a shape the allocator tries (parjob's
            # balanced splits: 4 tasks on hosts with 3 and 1 free), or span[].
            parts.append(
                f"{_hosts(fitting)}: room for {_tasks(room)} together, but in no split"
                f" the allocator tries for {tasks}"
            )
        if unmatched:
            parts.append(f"{_hosts(unmatched)}: select not satisfied")
        return PendReason(category, "; ".join(parts))


def _index(worker: Worker) -> int:
    return worker.index


# What an explanation counts a host under when its free slots are too few.
_NO_SLOT = "not enough slots"


def _defined_by_none(names: list[str]) -> str:
    """The detail's note for names no usable host defines (select or rusage)."""
    return f" (no host defines {', '.join(map(repr, names))})"


def _hosts(n: int) -> str:
    return f"{n} host" if n == 1 else f"{n} hosts"


def _tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def _sorted(workers: list[Worker], order: tuple[OrderKey, ...]) -> list[Worker]:
    """Sort by ``order[]`` keys: numeric values descending for consumables and
    ``slots`` (more free is better), ascending for anything else (load-style
    indices, lower is better); ``-`` reverses. Hosts lacking a value go last;
    ties keep canonical order."""
    result = list(workers)
    # Successive stable sorts, last key first, give the lexicographic order.
    for key in reversed(order):
        present: list[tuple[int | float, Worker]] = []
        missing: list[Worker] = []
        for w in result:
            value = w.values.get(key.name)
            if isinstance(value, int | float):
                # Compared as they are: ints and floats compare exactly in Python,
                # and an int too large for a float would overflow float().
                present.append((value, w))
            else:
                missing.append(w)
        descending = _bigger_is_better(key.name, [w for _, w in present]) != key.reverse
        present.sort(key=lambda pair: pair[0], reverse=descending)  # stable either way
        result = [w for _, w in present] + missing
    return result


def _bigger_is_better(name: str, workers: list[Worker]) -> bool:
    if name in ("slots", "maxslots", "ncpus", "cpuf") or name.startswith("max"):
        return True
    return any(name in w.resources for w in workers)
