"""Backfill in a session: the one place the core's allocator asks about
reservations (EASY, :mod:`xce_core._backfill`; conservative,
:mod:`xce_core._conservative`), and the ``job_reserved`` decisions.

Per session: :meth:`Reservations.begin` starts an empty plan; the allocator
calls :meth:`on_failure` for a job that cannot start (EASY: the first one
becomes the head; conservative: each gets a reservation up to the depth),
:meth:`on_cache_hit` for one whose shape already failed, :meth:`refused` before
an attempt and :meth:`holds_back` after a successful one; :meth:`end` returns
the ``job_reserved`` decisions for reservations that are new or moved.
"""

from __future__ import annotations

import math

from events import HostSlots, JobReserved
from xce_core._backfill import Planner, Reservation
from xce_core._conservative import ConservativePlan
from xce_core._context import SchedContext
from xce_core._dispatch import Dispatcher
from xce_core._model import Job
from xce_core._results import PendReason
from xce_core._session import SessionScratch
from xce_core._state import ClusterState

__all__ = ["Reservations"]


class Reservations:
    """A core's backfill (``backfill`` is ``"easy"`` or ``"conservative"``)."""

    __slots__ = ("_announced", "_depth", "_head", "_mode", "_plan", "_planner")

    def __init__(
        self,
        state: ClusterState,
        dispatcher: Dispatcher,
        scratch: SessionScratch,
        mode: str,
        depth: int,
    ) -> None:
        self._planner = Planner(state, dispatcher, scratch)
        self._mode = mode
        self._depth = depth
        self._head: Reservation | None = None  # EASY: this session's head
        self._plan: ConservativePlan | None = None  # conservative: this session's plan
        # The last job_reserved sent, per job: (start, hosts).
        self._announced: dict[str, tuple[float, tuple[tuple[str, int], ...]]] = {}

    @property
    def groups_whole(self) -> bool:
        """Whether a group of a failed shape may be settled whole (not under
        conservative backfill: each blocked job needs its own reservation)."""
        return self._mode != "conservative"

    def begin(self) -> None:
        """Start a session with no reservation."""
        self._head = None
        if self._mode == "conservative":
            self._plan = ConservativePlan(self._planner, self._depth)

    async def on_failure(self, job: Job, now: float) -> None:
        """``job`` could not start now."""
        if self._plan is not None:
            await self._plan.reserve(job, now)
        elif self._head is None:
            # The first job that cannot start: the head.
            self._head = await self._planner.reserve(job, now)

    async def on_cache_hit(self, job: Job, now: float) -> None:
        """``job``'s shape already failed this session."""
        if self._plan is not None:
            await self._plan.reserve(job, now)

    def refused(self, job: Job, now: float) -> PendReason | None:
        """Why ``job`` must pend without an attempt (EASY: a job of its shape
        running past the head's start was refused already), or ``None``."""
        head = self._head
        if head is not None and head.refuses_shape(job, now, self._planner.state.free_total):
            return head.blocks()
        return None

    async def holds_back(
        self, job: Job, ctx: SchedContext, now: float, rooms: dict[str, int] | None = None
    ) -> PendReason | None:
        """``job`` fits now with the claims in ``ctx``: why it must pend all the
        same (it would delay a reservation), or ``None``. Under conservative
        backfill its claims may be replaced by ones beside the reservations,
        kept to the same limits as the attempt (``ctx.cap`` tasks, and the
        per-host ``rooms``, :meth:`SchedContext.keep_within`); the core checks
        the new claims against the limits again."""
        if self._head is not None:
            if await self._planner.allows(self._head, job, ctx, now):
                return None
            return self._head.blocks()
        plan = self._plan
        if not plan:
            return None
        assert plan is not None
        blocker = plan.blocking(ctx, now)
        if blocker is None:
            return None
        placed = (
            await plan.place_beside(job, now, ctx.cap, rooms)
            if blocker.start != math.inf
            else None
        )
        if placed is not None:
            ctx.reset(job)
            ctx.journal, ctx.shared = placed
            return None
        await plan.reserve(job, now)
        return blocker.blocks()

    def end(self, session: int) -> list[JobReserved]:
        """End the session: ``job_reserved`` for each finite reservation that is
        new or moved since it was last sent."""
        if self._plan is not None:
            reservations = self._plan.reservations
        else:
            reservations = [self._head] if self._head is not None else []
        self._head = self._plan = None
        out: list[JobReserved] = []
        announced: dict[str, tuple[float, tuple[tuple[str, int], ...]]] = {}
        for res in reservations:
            if res.start == math.inf:
                continue
            said = (res.start, res.hosts())
            job_id = res.job.job_id
            announced[job_id] = said
            if self._announced.get(job_id) != said:
                hosts = [HostSlots(host=name, slots=n) for name, n in said[1]]
                out.append(
                    JobReserved(session=session, job_id=job_id, start=res.start, hosts=hosts)
                )
        self._announced = announced
        return out
