"""EASY backfill: a reservation for the first job that cannot start, found with
the allocation layer on projected capacity, and the check that a later job
cannot delay it.

Projected capacity at time ``T`` is the cluster as it will be if every running
job with a run limit ends at its estimated end (start + run limit): the claims
of those ending by ``T`` are released, everything else stays. It is applied to
the state in place by :class:`Projection` and undone exactly (every touched
worker and the shared-resource use are restored from a snapshot), and an
attempt runs on it through the ordinary dispatcher and allocators, with a
scratch of its own (its cursors and candidate lists must not be the session's:
projected capacity is not the session's shrinking capacity). So the
reservation honours everything the allocation layer does (select, rusage,
span, same, licences); on one-slot hosts with plain jobs it is the textbook
shadow time and extra nodes (Lifka 1995; Mu'alem & Feitelson 2001).

The rules (:class:`Planner`):

- **Reservation.** The head (the first job in policy order that cannot start
  now, and could start on the cluster with every running job ended) gets the
  earliest ``T`` among the running jobs' estimated ends at which it fits on
  projected capacity, found by a binary search over those ends (fitting is
  monotone in ``T``: capacity only grows with it), and the hosts it would use.
- **Backfill.** A later job that fits now starts only if it ends (now + run
  limit) by ``T``, or if the head still fits at ``T`` with the job's claims held
  as well. A job without a run limit never ends for planning.
- **No finite reservation.** When the head fits only if jobs without a run
  limit end too, it holds every host it can use (LSF's slot reservation): a
  later job starts only on hosts the head's selects cannot match, and only if
  it takes no shared resource the head wants. So a wide job is never starved
  by a stream of narrow ones.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xce_core._context import SchedContext
from xce_core._dispatch import Dispatcher
from xce_core._model import Job, Worker
from xce_core._results import PendReason, Reason
from xce_core._session import SessionScratch
from xce_core._state import ClusterState
from xce_core.resreq import Alternative, Compound, Primary, ResReq

__all__ = ["Planner", "Projection", "Reservation"]

Claim = tuple[Worker, int, tuple[tuple[str, float], ...]]
Claims = Sequence[Claim]
# What one attempt takes, per host (None: the shared resources).
Footprint = dict[Worker | None, tuple[int, dict[str, float]]]


@dataclass(slots=True, eq=False)
class Reservation:
    """The head's planned start ``start`` (``math.inf``: no finite one) and the
    claims it would make then (empty when ``start`` is infinite)."""

    job: Job
    start: float
    claims: list[Claim] = field(default_factory=list)
    # Shared resources the head takes (licences), held with the claims.
    shared: dict[str, float] = field(default_factory=dict)
    # When the reserved job would end, and the slots it holds (conservative
    # backfill).
    end: float = math.inf
    slots: int = 0
    # Slots that jobs running past ``start`` may still take without the head
    # losing what it needs (an upper bound; on one-slot hosts, the textbook's
    # extra nodes). Lowered as such jobs start.
    slack: int = 0
    # Fingerprints of jobs refused for running past ``start`` this session.
    refused_shapes: set[int] = field(default_factory=set)
    _reason: PendReason | None = None
    # Footprints of jobs refused this session, by each host they hold (see
    # Planner.allows; None: the shared resources).
    refused: dict[Worker | None, list[Footprint]] = field(default_factory=dict)
    # hosts() for the claims list it was computed from (the list, kept by
    # identity: a reservation kept across sessions shares its claims).
    _hosts: tuple[Claims, tuple[tuple[str, int], ...]] | None = None
    # one_slot_hosts() for the claims list it was found for (by identity).
    _one_slot: tuple[Claims, bool] | None = None

    def one_slot_hosts(self) -> bool:
        """Whether it holds slots of one-slot hosts alone: no consumable, no
        licence (where holding it for longer than it runs changes nothing)."""
        cached = self._one_slot
        if cached is None or cached[0] is not self.claims:
            alone = not self.shared and all(
                w.slots == 1 and not need for w, _, need in self.claims
            )
            cached = self._one_slot = (self.claims, alone)
        return cached[1]

    def runs_past(self, job: Job, now: float) -> bool:
        """Whether ``job``, started now, could still run at ``start``."""
        limit = job.run_limit
        return limit is None or now + limit > self.start

    def refuses_shape(self, job: Job, now: float, free: int) -> bool:
        """Whether ``job``, running past ``start``, is refused without an
        attempt: a job of its shape was refused already this session (the
        slack only shrinks and what is held at ``start`` only grows, so on
        one-slot hosts it would be refused again; elsewhere this may refuse a
        job that another host would have let through, never the reverse), or
        it needs more slots than the slack and no more than the ``free`` slots
        of the cluster. Such a job pends as held for the head even if it would
        not fit now for another reason (a select, a span)."""
        if not self.runs_past(job, now):
            return False
        if job.fingerprint in self.refused_shapes:
            return True
        if self.start != math.inf and self.slack < job.min_tasks <= free:
            # It could not run beside the head wherever it went (the first
            # check of Planner._fits_beside), so no attempt: on a deep queue
            # most jobs that fit now are refused so (benchmarks/bench_simulate.py,
            # EASY). Only if the cluster has the slots free now, so a job that
            # plainly cannot start now still pends for want of slots.
            self.refused_shapes.add(job.fingerprint)
            return True
        return False

    def blocks(self) -> PendReason:
        """The reason of a job that fits now but would delay this reservation."""
        if self._reason is not None:
            return self._reason
        head = self.job.job_id
        if self.start == math.inf:
            detail = f"job {head} holds every host it can use (no run limits to plan with)"
        else:
            detail = f"would delay job {head}, reserved to start at {self.start:g}"
        self._reason = PendReason(Reason.RESERVED_FOR_OTHER, detail)
        return self._reason

    def hosts(self) -> tuple[tuple[str, int], ...]:
        """(host name, slots) per host of the reserved claims, in claim order."""
        cached = self._hosts
        if cached is not None and cached[0] is self.claims:
            return cached[1]
        out: dict[str, int] = {}
        for worker, slots, _ in self.claims:
            out[worker.name] = out.get(worker.name, 0) + slots
        hosts = tuple(out.items())
        self._hosts = (self.claims, hosts)
        return hosts


class Projection:
    """Changes to the state's capacity, undone exactly by :meth:`undo`."""

    __slots__ = ("_amounts", "_shared", "_slots", "_state")

    def __init__(self, state: ClusterState) -> None:
        self._state = state
        # Each touched worker's used slots before, and its consumables' use
        # before, for those whose consumables changed.
        self._slots: dict[Worker, int] = {}
        self._amounts: dict[Worker, dict[str, float]] = {}
        self._shared: dict[str, float] | None = None

    def apply(self, claims: Claims, shared: Mapping[str, float] | None, sign: int) -> None:
        """Release (``sign`` -1) or take (+1) ``claims`` and ``shared`` amounts."""
        state = self._state
        saved = self._slots
        free_hosts = state.free_hosts
        total = 0
        for worker, slots, need in claims:
            if worker not in saved:
                saved[worker] = worker.used_slots
            # ClusterState._freed(worker, -sign * slots) inline, free_total
            # summed once: projections take and give back claims host by host,
            # most of a conservative plan's cost (README, Benchmarks: the
            # generated 20,000-job load-0.9 trace, --backfill conservative).
            before = worker.slots - worker.used_slots
            worker.used_slots += sign * slots
            if worker.usable:
                after = before - sign * slots
                if before > 0:
                    if after > 0:
                        total -= sign * slots
                    else:
                        total -= before
                        free_hosts.discard(worker)
                elif after > 0:
                    total += after
                    free_hosts.add(worker)
            if need:
                if worker not in self._amounts:
                    self._amounts[worker] = dict(worker.used)
                used = worker.used
                for name, amount in need:
                    used[name] = used.get(name, 0.0) + sign * amount
        if shared:
            if self._shared is None:
                self._shared = dict(state.shared_used)
            shared_used = state.shared_used
            for name, amount in shared.items():
                shared_used[name] = shared_used.get(name, 0.0) + sign * amount
        state.free_total += total

    def undo(self) -> None:
        """Put back every worker and the shared use as they were."""
        state = self._state
        free_hosts = state.free_hosts
        total = 0
        for worker, used_slots in self._slots.items():
            # apply()'s inline ClusterState._freed, back to what it was (the
            # same benchmark: README's conservative replay of the load-0.9 trace).
            before = worker.slots - worker.used_slots
            worker.used_slots = used_slots
            if worker.usable:
                after = worker.slots - used_slots
                if before > 0:
                    if after > 0:
                        total += after - before
                    else:
                        total -= before
                        free_hosts.discard(worker)
                elif after > 0:
                    total += after
                    free_hosts.add(worker)
        state.free_total += total
        for worker, used in self._amounts.items():
            worker.used = used
        self._slots.clear()
        self._amounts.clear()
        if self._shared is not None:
            self._state.shared_used = self._shared
            self._shared = None


class Planner:
    """Reservations and backfill checks for one core (see the module docstring)."""

    def __init__(self, state: ClusterState, dispatcher: Dispatcher, scratch: SessionScratch):
        self._state = state
        self._dispatcher = dispatcher
        self._main = scratch
        self._last: Reservation | None = None  # the last finite reservation made
        self._last_releases = -1  # ClusterState.releases when it was made
        self._last_workers = -1  # ClusterState.worker_version when it was checked

    @property
    def state(self) -> ClusterState:
        return self._state

    def _remember(self, res: Reservation) -> None:
        """``res`` is the last finite reservation, checked on the workers as
        they are now, after the capacity given back so far. (Recorded with the
        reservation, not when a search starts: a search for another job that
        finds no reservation must not make a stale one look current.)"""
        self._last = res
        self._last_releases = self._state.releases
        self._last_workers = self._state.worker_version

    async def fits(
        self, job: Job, cap: int | None = None, rooms: dict[str, int] | None = None
    ) -> tuple[list[Claim], dict[str, float]] | None:
        """The claims and shared amounts ``job`` would take on the state as it
        stands (projected), or ``None`` if it does not fit. Claims nothing.
        ``cap``: the most tasks a task range may take (:attr:`SchedContext.cap`);
        ``rooms``: per-host limits' room (:meth:`SchedContext.keep_within`)."""
        ctx = SchedContext(self._state, self._main.fork(), job)
        ctx.cap = cap
        if rooms:
            ctx.keep_within(rooms)
        if await self._dispatcher.allocate(ctx):
            return list(ctx.journal), dict(ctx.shared)
        return None

    async def reserve(self, job: Job, now: float) -> Reservation | None:
        """The head's reservation, or ``None`` if ``job`` could not start even
        on an empty cluster (then it is no head: it pends, and does not hold
        anything back).

        Kept whole from the last session when it is the same head and nothing
        has given capacity back since (``ClusterState.releases``: no job ended,
        no worker or licence event) and nothing started ahead of it this
        session: capacity then only shrank, by jobs that were checked not to
        delay this reservation (or moved it, in place), so a fresh search would
        find the same start and claims. Most sessions of
        a replay are such (a job arrives while the head waits;
        benchmarks/bench_simulate.py, EASY)."""
        state = self._state
        last = self._last
        if (
            last is not None
            and last.job is job
            and self._last_releases == state.releases
            and self._main.commits == 0  # nothing started ahead of the head
            and now <= last.start
        ):
            kept = Reservation(job, last.start, last.claims, last.shared)
            kept.slack = last.slack
            kept._hosts = last._hosts
            self._remember(kept)
            return kept
        ends = list(state.ends)  # (end, seq, job), by end
        times = sorted({max(end, now) for end, _, _ in ends})
        projection = Projection(state)
        released = 0  # ends[:released] are released in the projection

        def release_to(t: float) -> None:
            # Every job ending by t (an overdue one, whose end is past, counts
            # as ending now, the earliest candidate time).
            nonlocal released
            upto = bisect_right(ends, t, key=_end)
            for _, _, running in ends[released:upto]:
                projection.apply(running.claims, running.shared_claims, -1)
            for _, _, running in ends[upto:released]:
                projection.apply(running.claims, running.shared_claims, +1)
            released = upto

        try:
            if times:
                first, free_then = first_time_with_room(
                    times, ends, state.held, state.free_total, job.min_tasks, now
                )
                claims = None
                if first < len(times):
                    # Usually the answer (on one-slot hosts with plain jobs,
                    # always): the first time enough slots could be free.
                    last = self._last
                    if last is not None and last.job is job and last.start == times[first]:
                        # The head waits, and no earlier time can fit it: if its
                        # last claims still fit then, they are its reservation,
                        # with no attempt and no projection (most sessions of a
                        # replay: the head waits many; benchmarks/bench_simulate.py,
                        # EASY). They do if all that happened since is jobs
                        # ending (capacity back) and jobs starting that were
                        # checked not to delay them; else each host is checked.
                        only_ends = (
                            self._main.commits == 0
                            and self._last_workers == state.worker_version
                            and not last.shared
                        )
                        again = _kept_at(
                            state, last, ends, times[first], free_then, check=not only_ends
                        )
                        if again is not None:
                            again._hosts = last._hosts
                            self._remember(again)
                            return again
                    release_to(times[first])
                    claims = await self.fits(job)
                    lo = hi = first
                    if claims is None:
                        release_to(times[-1])
                        claims = await self.fits(job)
                        lo, hi = first + 1, len(times) - 1  # the answer is in times[lo..hi]
                if claims is not None:
                    while lo < hi:
                        mid = (lo + hi) // 2
                        release_to(times[mid])
                        found = await self.fits(job)
                        if found is not None:
                            hi, claims = mid, found
                        else:
                            lo = mid + 1
                    release_to(times[lo])
                    # Slots free then beyond the fewest the head takes: an
                    # upper bound on what later jobs running past it may hold.
                    slack = state.free_total - job.min_tasks
                    res = Reservation(job, times[lo], claims[0], claims[1])
                    res.slack = slack
                    self._remember(res)
                    return res
        finally:
            projection.undo()
        # Not even with every limited job ended: with every job ended?
        return await self.reserve_unlimited(job)

    async def reserve_unlimited(self, job: Job) -> Reservation | None:
        """A reservation with no finite start (the head holds every host it can
        use) if ``job`` would fit with every running job ended, else ``None``."""
        state = self._state
        projection = Projection(state)
        try:
            for running in [j for j in state.jobs.values() if j.claims]:
                projection.apply(running.claims, running.shared_claims, -1)
            if await self.fits(job) is None:
                return None
            return Reservation(job, math.inf)
        finally:
            projection.undo()

    async def allows(
        self, reservation: Reservation, job: Job, ctx: SchedContext, now: float
    ) -> bool:
        """Whether ``job``, which fits now with the claims in ``ctx``, may start
        without delaying ``reservation``."""
        start = reservation.start
        if start == math.inf:
            return self.off_hosts_of(reservation.job, ctx)
        if not reservation.runs_past(job, now):
            return True
        if not await self._fits_beside(reservation, ctx, now):
            reservation.refused_shapes.add(job.fingerprint)
            return False
        return True

    async def _fits_beside(self, reservation: Reservation, ctx: SchedContext, now: float) -> bool:
        """Whether the head still fits at its start with ``ctx``'s claims held
        too (and then on which claims)."""
        start = reservation.start
        taken = sum(slots for _, slots, _ in ctx.journal)
        if taken > reservation.slack:
            return False  # the head could not fit, wherever it went
        if self._clear_of(reservation, ctx):
            # The job takes nothing the reservation counts on, and the hosts it
            # takes are free now, so free at the reservation's start too: the
            # head still fits there, on the same claims (on one-slot hosts:
            # the job uses extra nodes). No projection needed.
            reservation.slack -= taken
            return True
        footprint = _footprint(ctx)
        if any(
            _covers(footprint, failed)
            for key in footprint
            for failed in reservation.refused.get(key, ())
        ):
            # Holding less than this already delayed the head, and what is held
            # at the reservation's start only grows within a session.
            return False
        state = self._state
        projection = Projection(state)
        try:
            cutoff = max(start, now)
            for end, _, running in state.ends:
                if end > cutoff:
                    break
                projection.apply(running.claims, running.shared_claims, -1)
            projection.apply(ctx.journal, ctx.shared, +1)
            claims = await self.fits(reservation.job)
        finally:
            projection.undo()
        if claims is None:
            for key in footprint:
                refused = reservation.refused.setdefault(key, [])
                if len(refused) < _REFUSED_KEPT:
                    refused.append(footprint)
            return False
        reservation.claims, reservation.shared = claims
        reservation.slack -= taken
        return True

    def _clear_of(self, reservation: Reservation, ctx: SchedContext) -> bool:
        """No host of ``ctx``'s claims is one of the reservation's, and it takes
        no shared resource the head wants."""
        if ctx.shared and self.wants_shared(reservation.job, ctx):
            return False
        reserved = {worker for worker, _, _ in reservation.claims}
        return not any(worker in reserved for worker, _, _ in ctx.journal)

    def wants_shared(self, head: Job, ctx: SchedContext) -> bool:
        return any(
            term.name in ctx.shared
            for p in _primaries(head.resreq)
            for terms in p.rusage
            for term in terms
        )

    def off_hosts_of(self, head: Job, ctx: SchedContext) -> bool:
        """No host of ``ctx``'s claims is one the head's selects can match, and
        no shared resource it takes is one the head wants."""
        primaries = _primaries(head.resreq)
        if ctx.shared and self.wants_shared(head, ctx):
            return False
        for worker, _, _ in ctx.journal:
            for primary in primaries:
                select = primary.select
                if select is None or select.evaluate(worker.values):
                    return False
        return True


_REFUSED_KEPT = 8  # per host


def _footprint(ctx: SchedContext) -> Footprint:
    """What an attempt's claims take per host (slots and each consumable) and,
    under ``None``, of the shared resources."""
    out: Footprint = {}
    if ctx.shared:
        out[None] = (0, dict(ctx.shared))
    for worker, slots, need in ctx.journal:
        taken, amounts = out.get(worker, (0, {}))
        amounts = dict(amounts)
        for name, amount in need:
            amounts[name] = amounts.get(name, 0.0) + amount
        out[worker] = (taken + slots, amounts)
    return out


def _covers(footprint: Footprint, other: Footprint) -> bool:
    """Whether ``footprint`` takes at least what ``other`` takes, on every host."""
    for worker, (slots, amounts) in other.items():
        mine = footprint.get(worker)
        if mine is None or mine[0] < slots:
            return False
        for name, amount in amounts.items():
            if mine[1].get(name, 0.0) < amount:
                return False
    return True


def _kept_at(
    state: ClusterState,
    res: Reservation,
    ends: list[tuple[float, int, Job]],
    start: float,
    free_then: int,
    *,
    check: bool = True,
) -> Reservation | None:
    """``res`` again (a new :class:`Reservation` with its start, claims and
    slack) if its claims still fit at ``start`` on projected capacity, else
    ``None`` (then the caller searches afresh). ``free_then`` is
    :func:`first_time_with_room`'s count of the slots free at ``start``.

    ``check=False``: the caller knows they fit, because all that happened
    since they were last checked is jobs ending (capacity only came back) and
    jobs starting that were checked not to delay ``res``. Else they are
    checked here, for claims of slots alone (no consumable, no shared
    resource; for others, ``None``): the slots that the jobs
    ending by ``start`` free are summed per reserved host, and the commit's
    slot check is made on those hosts with them added. What it duplicates of
    :class:`Projection` and :meth:`ClusterState.lacks` (the slot clause) is
    justified by benchmarks/bench_simulate.py, EASY: a head waits through many
    job ends, and releasing every running job into the state and back cost
    most of those sessions."""
    if check and not _fit_then(state, res, ends, start):
        return None
    kept = Reservation(res.job, start, res.claims, res.shared)
    # An upper bound, as a fresh search's (free_then also counts hosts that
    # are down or hold more than they have).
    kept.slack = free_then - res.job.min_tasks
    return kept


def _fit_then(
    state: ClusterState, res: Reservation, ends: list[tuple[float, int, Job]], start: float
) -> bool:
    """Whether ``res``'s claims of slots alone fit at ``start`` (see :func:`_kept_at`)."""
    if res.shared:
        return False
    per_host = state.per_host(res.claims)
    for worker, _, need in per_host:
        if need or not worker.usable:  # (a removed worker is unusable)
            return False
    freed = dict.fromkeys([worker for worker, _, _ in per_host], 0)
    for _, _, running in ends[: bisect_right(ends, start, key=_end)]:
        for worker, slots, _ in running.claims:
            if worker in freed:
                freed[worker] += slots
    return all(
        slots <= worker.slots - worker.used_slots + freed[worker] for worker, slots, _ in per_host
    )


def first_time_with_room(
    times: list[float],
    ends: list[tuple[float, int, Job]],
    held: Mapping[Job, int],
    free: int,
    need: int,
    now: float,
) -> tuple[int, int]:
    """The index of the first of ``times`` by which ``need`` slots could be free
    (free now plus every slot the jobs ending by then hold, ``held`` by job: an
    upper bound), or ``len(times)``, and that count of free slots. No earlier
    time can fit the head, so the search starts here."""
    i = 0
    for k, t in enumerate(times):
        while i < len(ends) and max(ends[i][0], now) <= t:
            free += held[ends[i][2]]
            i += 1
        if free >= need:
            return k, free
    return len(times), free


def _end(entry: tuple[float, int, Job]) -> float:
    return entry[0]


def _primaries(resreq: ResReq) -> list[Primary]:
    if isinstance(resreq, Primary):
        return [resreq]
    if isinstance(resreq, Compound):
        return list(resreq.parts)
    assert isinstance(resreq, Alternative)
    out: list[Primary] = []
    for option in resreq.options:
        out += _primaries(option)
    return out
