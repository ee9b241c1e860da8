"""Conservative backfill: a reservation for every blocked job, in policy order.

Each session (``SchedulerConfig.backfill="conservative"``) walks the pending
jobs in policy order with an empty plan. A job starts now only if it fits with
the capacity of every reservation made before it held for as long as the two
overlap in time; otherwise, while fewer than ``backfill_depth`` reservations
exist, it gets the earliest start at which it fits alongside them: among the
running jobs' estimated ends and the earlier reservations' ends, the first
time ``T`` at which it fits on projected capacity (running jobs ending by
``T`` released, every earlier reservation whose interval meets
``[T, T + run_limit)`` held). So no job delays a reservation made before it.

Holding every reservation that meets the interval at once is exact on one-slot
hosts (a host busy at any moment of the interval is unusable for all of it)
and may be later than necessary on hosts with several slots, where two
reservations of one host at different times are counted together; it never
delays an earlier reservation. A reservation holds particular hosts (those the
allocators pick on the projection, in host order), not a count, so a job that
a count-only model would backfill can be blocked by that choice (README,
backfill). A job that would fit only once jobs without a
run limit end gets no finite reservation: it holds every host its selects can
match, as under EASY. Reservations are worked out again every session; with
exact run limits no job starts later than the first start it was given.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from xce_core._backfill import (
    Claim,
    Planner,
    Projection,
    Reservation,
    first_time_with_room,
)
from xce_core._context import SchedContext
from xce_core._model import Job, Worker

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
        self, job: Job, now: float
    ) -> tuple[list[Claim], dict[str, float]] | None:
        """Claims for ``job`` starting now on capacity the reservations it would
        overlap do not hold, or ``None``."""
        end = now + job.run_limit if job.run_limit is not None else math.inf
        state = self._planner.state
        projection = Projection(state)
        try:
            for res in self.reservations:
                if res.start < end:
                    projection.apply(res.claims, res.shared, +1)
            return await self._planner.fits(job)
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
        released = 0
        try:
            for t in times[first:]:
                upto = bisect_right(ends, t, key=_end)
                for _, _, running in ends[released:upto]:
                    projection.apply(running.claims, running.shared_claims, -1)
                released = upto
                stop = t + limit if limit is not None else math.inf
                held = [res for res in self.reservations if res.start < stop and res.end > t]
                # Reservations already running at t overlap one another, so each
                # was placed beside the others: together they take their slots
                # of what is free at t. Fewer left than the job needs: no attempt,
                # and no count per host either (a bound of _free_beside's figure,
                # cheap to find: a deep plan scans many times; bench_simulate.py).
                busy = sum(res.slots for res in held if res.start <= t)
                if state.free_total - busy < job.min_tasks:
                    continue
                if _free_beside(state.free_total, held) < job.min_tasks:
                    continue  # too few slots left beside them: no attempt needed
                for res in held:
                    projection.apply(res.claims, res.shared, +1)
                try:
                    claims = await planner.fits(job)
                finally:
                    for res in held:
                        projection.apply(res.claims, res.shared, -1)
                if claims is not None:
                    res = Reservation(job, t, claims[0], claims[1])
                    res.end = t + limit if limit is not None else math.inf
                    res.slots = sum(slots for _, slots, _ in res.claims)
                    self.reservations.append(res)
                    return res
        finally:
            projection.undo()
        holder = await planner.reserve_unlimited(job)
        if holder is not None:
            self.holders.append(holder)
        return holder


def _free_beside(free_total: int, held: list[Reservation]) -> int:
    """Free slots left on the state as it stands if ``held`` took their
    claims: exact, and without touching the state (a cheap test before an
    attempt: this is most of what a deep conservative plan costs)."""
    if not held:
        return free_total
    taken: dict[Worker, int] = {}
    for res in held:
        for worker, slots, _ in res.claims:
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
