"""Conservative backfill: a reservation for every blocked job, in policy order.

Each session (``SchedulerConfig.backfill="conservative"``) walks the pending
jobs in policy order with an empty plan. A job starts now only if it fits with
the capacity of every reservation made before it held for as long as the two
overlap in time; otherwise, while fewer than ``backfill_depth`` reservations
exist, it gets the earliest start at which it fits alongside them: among the
running jobs' estimated ends and the earlier reservations' ends, the first
time ``T`` at which it fits on projected capacity (running jobs ending by
``T`` released, and what the earlier reservations whose intervals meet
``[T, T + run_limit)`` hold). So no job delays a reservation made before it.

What the reservations hold beside a job is worked out moment by moment
(:func:`_most_held`): on each host, and of each consumable and licence, the
most they take at any one time of the job's run, net of the running jobs that
end before them. So on hosts of any size a job is kept only from what is
taken at some moment of its run: a reservation and a job that ends before it
starts never count together. (On one-slot hosts holding every such
reservation for the whole run is the same answer, and cheaper: a host held at
any moment is unusable for all of it.) A reservation holds particular hosts (those the
allocators pick on the projection, in host order), not a count, so a job that
a count-only model would backfill can be blocked by that choice (README,
backfill). A job that would fit only once jobs without a
run limit end gets no finite reservation: it holds every host its selects can
match, as under EASY. Reservations are worked out again every session, in
policy order; with exact run limits no job starts later than the first start
it was given. When jobs end early an earlier job may take a place a later one
was given, so that one can start later than its first reservation.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping

from xce_core._backfill import (
    Claim,
    Claims,
    Planner,
    Projection,
    Reservation,
    first_time_with_room,
)
from xce_core._context import SchedContext
from xce_core._model import Job, Worker
from xce_core._state import ClusterState

__all__ = ["ConservativePlan"]


class ConservativePlan:
    """One session's reservations (see the module docstring)."""

    __slots__ = ("_planner", "depth", "holders", "reservations")

    def __init__(self, planner: Planner, depth: int) -> None:
        self._planner = planner
        self.depth = depth
        self.reservations: list[Reservation] = []
        # Jobs without a finite reservation: each holds the hosts it can use.
        self.holders: list[Reservation] = []

    def __bool__(self) -> bool:
        return bool(self.reservations or self.holders)

    def blocking(self, ctx: SchedContext, now: float) -> Reservation | None:
        """The first reservation ``ctx``'s claims (made on the live state, for a
        job starting now) would delay, or ``None``."""
        job = ctx.job
        end = now + job.run_limit if job.run_limit is not None else math.inf
        for holder in self.holders:
            if not self._planner.off_hosts_of(holder.job, ctx):
                return holder
        taken = {worker for worker, _, _ in ctx.journal}
        for res in self.reservations:
            if res.start < end and any(worker in taken for worker, _, _ in res.claims):
                return res
            if ctx.shared and self._planner.wants_shared(res.job, ctx):
                return res
        return None

    async def place_beside(
        self,
        job: Job,
        now: float,
        cap: int | None = None,
        rooms: dict[str, int] | None = None,
    ) -> tuple[list[Claim], dict[str, float]] | None:
        """Claims for ``job`` starting now on capacity the reservations it would
        overlap do not hold at any moment of its run, or ``None``. ``cap``: the
        most tasks a task range may take, ``rooms`` the slots it may take on
        hosts at or near their per-host limits (what its limits leave).

        Exact on hosts with several slots: what is held beside the job on each
        host (and of each consumable and licence) is the most the reservations
        take there at any one time, net of the running jobs that will have
        ended by then (:func:`_most_held`). Holding every overlapping
        reservation on top of every running job counted a job that ends before
        a reservation starts together with it, and could refuse a job its own
        reservation's start."""
        end = now + job.run_limit if job.run_limit is not None else math.inf
        state = self._planner.state
        projection = Projection(state)
        try:
            overlapping = [res for res in self.reservations if res.start < end]
            if overlapping:
                claims, shared = _most_held(state, overlapping, now, released_to=-math.inf)
                projection.apply(claims, shared, +1)
            return await self._planner.fits(job, cap, rooms)
        finally:
            projection.undo()

    async def reserve(self, job: Job, now: float) -> Reservation | None:
        """Add ``job``'s reservation (the earliest start beside the earlier ones)
        and return it; ``None`` when the plan is full or the job could not
        start even on an empty cluster."""
        if len(self.reservations) + len(self.holders) >= self.depth:
            return None
        planner = self._planner
        state = planner.state
        limit = job.run_limit
        ends = list(state.ends)
        times = sorted(
            {max(end, now) for end, _, _ in ends}
            | {res.end for res in self.reservations if now < res.end < math.inf}
        )
        first = first_time_with_room(
            times, ends, state.held, state.free_total, job.min_tasks, now
        )[0]
        projection = Projection(state)
        released = 0  # ends[:released] are released in the projection
        counted = 0  # ends[:counted] are counted in ``bound``
        # Free slots at t, at most: free now plus what the jobs ending by t
        # hold (first_time_with_room's bound). The releases are projected host
        # by host only once a time passes the count checks below: a job that
        # gets no finite reservation never projects any (the generated
        # 20,000-job load-0.9 trace of README's Benchmarks, --backfill
        # conservative).
        bound = state.free_total
        held_by = state.held
        try:
            for t in times[first:]:
                upto = bisect_right(ends, t, key=_end)
                for _, _, running in ends[counted:upto]:
                    bound += held_by[running]
                counted = upto
                stop = t + limit if limit is not None else math.inf
                held = [res for res in self.reservations if res.start < stop and res.end > t]
                # Reservations already running at t overlap one another, so each
                # was placed beside the others: together they take their slots
                # of what is free at t. Fewer left than the job needs: no attempt,
                # and no count per host either (a bound of _free_beside's figure,
                # cheap to find: a deep plan scans many times; bench_simulate.py).
                busy = sum(res.slots for res in held if res.start <= t)
                if bound - busy < job.min_tasks:
                    continue
                if held and _fewest_free(state, held, t, bound) < job.min_tasks:
                    continue  # too few slots at some moment, whatever the hosts
                most, most_shared = _most_held(state, held, t, released_to=t) if held else ([], {})
                for _, _, running in ends[released:upto]:
                    projection.apply(running.claims, running.shared_claims, -1)
                released = upto
                if _free_beside(state.free_total, most) < job.min_tasks:
                    continue  # too few slots left beside them: no attempt needed
                projection.apply(most, most_shared, +1)
                claims = await planner.fits(job)
                if claims is not None:
                    # (What was held is undone with the rest, below.)
                    res = Reservation(job, t, claims[0], claims[1])
                    res.end = t + limit if limit is not None else math.inf
                    res.slots = sum(slots for _, slots, _ in res.claims)
                    self.reservations.append(res)
                    return res
                projection.apply(most, most_shared, -1)
        finally:
            projection.undo()
        holder = await planner.reserve_unlimited(job)
        if holder is not None:
            self.holders.append(holder)
        return holder


def _most_held(
    state: ClusterState, reservations: list[Reservation], at: float, *, released_to: float
) -> tuple[list[Claim], dict[str, float]]:
    """Beyond what is in use on ``state`` (live, or projected to ``at`` with the
    running jobs ending by ``released_to`` released): the most
    ``reservations`` hold at any one time from ``at`` on, per host (slots and
    each consumable) and per licence, net of what the other running jobs give
    back as they end (by their estimated ends; one past its end counts as
    ending at ``at``). One sweep over the starts and ends: a reservation or a
    running job ending at the moment another reservation starts is gone by
    then. Never below zero (``at`` itself counts).

    So a job fits beside the reservations for ``[at, at + run limit)`` exactly
    when it fits on ``state`` with these claims taken, on hosts of any size: a
    reservation and a job that ends before it starts never count together."""
    if all(res.one_slot_hosts() for res in reservations):
        # One-slot hosts, slots alone: a host held at any moment of the run is
        # unusable for all of it, so every reservation's claims at once is the
        # same answer, without the sweep (which made the conservative replay
        # of the generated load-0.9 trace of README's Benchmarks 2.5x slower).
        return [claim for res in reservations for claim in res.claims], {}
    horizon = max(res.start for res in reservations)
    # Only the hosts and licences the reservations take can be held beside the
    # job: a running job's end elsewhere changes nothing.
    hosts = {worker for res in reservations for worker, _, _ in res.claims}
    licensed = any(res.shared for res in reservations)
    events: list[tuple[float, int, Claims, Mapping[str, float]]] = []
    for res in reservations:
        events.append((max(res.start, at), 1, res.claims, res.shared))
        if res.end <= horizon:
            events.append((res.end, -1, res.claims, res.shared))
    # The running jobs that end after ``released_to`` and by the last start.
    ends = state.ends
    first = 0 if released_to == -math.inf else bisect_right(ends, released_to, key=_end)
    for end, _, running in ends.islice(first, bisect_right(ends, horizon, key=_end)):
        touched = [claim for claim in running.claims if claim[0] in hosts]
        shared = running.shared_claims if licensed else {}
        if touched or shared:
            events.append((max(end, at), -1, touched, shared))
    # At one time, what ends before what starts.
    events.sort(key=lambda event: (event[0], event[1]))
    slots_level: dict[Worker, int] = {}
    slots_most: dict[Worker, int] = {}
    level: dict[tuple[Worker, str] | str, float] = {}  # consumables, licences
    most: dict[tuple[Worker, str] | str, float] = {}
    for _, sign, claims, shared in events:
        for worker, slots, need in claims:
            held = slots_level[worker] = slots_level.get(worker, 0) + sign * slots
            if sign > 0 and held > slots_most.get(worker, 0):
                slots_most[worker] = held
            for name, amount in need:
                key: tuple[Worker, str] | str = (worker, name)
                value = level[key] = level.get(key, 0.0) + sign * amount
                if sign > 0 and value > most.get(key, 0.0):
                    most[key] = value
        for name, amount in shared.items():
            value = level[name] = level.get(name, 0.0) + sign * amount
            if sign > 0 and value > most.get(name, 0.0):
                most[name] = value
    amounts_on: dict[Worker, list[tuple[str, float]]] = {}
    licences: dict[str, float] = {}
    for key, value in most.items():
        if isinstance(key, str):
            licences[key] = value
        else:
            amounts_on.setdefault(key[0], []).append((key[1], value))
    claims = [
        (worker, slots_most.get(worker, 0), tuple(amounts_on.get(worker, ())))
        for worker in slots_most.keys() | amounts_on.keys()
    ]
    return claims, licences


def _fewest_free(
    state: ClusterState, reservations: list[Reservation], at: float, free: int
) -> int:
    """The fewest slots free at any one time from ``at`` (where ``free`` slots
    are free, at most) until the last of ``reservations`` starts, as they start
    and end and the running jobs end: counts alone, no host (a bound of what
    :func:`_most_held` leaves, found without a count per host; most candidate
    times of a deep plan on hosts of several slots fail here)."""
    horizon = max(res.start for res in reservations)
    changes: list[tuple[float, int]] = []  # (time, slots taken); frees first
    for res in reservations:
        changes.append((max(res.start, at), res.slots))
        if res.end <= horizon:
            changes.append((res.end, -res.slots))
    ends = state.ends
    held = state.held
    for end, _, running in ends.islice(
        bisect_right(ends, at, key=_end), bisect_right(ends, horizon, key=_end)
    ):
        changes.append((end, -held[running]))
    changes.sort()
    fewest = free
    for _, taken in changes:
        free -= taken
        if free < fewest:
            fewest = free
    return fewest


def _free_beside(free_total: int, held: list[Claim]) -> int:
    """Free slots left on the state as it stands if the ``held`` claims
    (:func:`_most_held`) were taken: exact, and without touching the state (a
    cheap test before an attempt: this is most of what a deep conservative
    plan costs)."""
    if not held:
        return free_total
    taken: dict[Worker, int] = {}
    for worker, slots, _ in held:
        taken[worker] = taken.get(worker, 0) + slots
    lost = 0
    for worker, slots in taken.items():
        if worker.usable:
            free = worker.slots - worker.used_slots
            if free > 0:
                lost += free if free < slots else slots
    return free_total - lost


def _end(entry: tuple[float, int, Job]) -> float:
    return entry[0]
