"""The pending queue across sessions: the policy order and the sleeping groups.

:class:`PendingQueue` is what the core asks about pending jobs between and
around sessions. It owns the :class:`~xce_core._order.PolicyOrder` (queued
groups, merged by each session) and the :class:`~xce_core._sleep.Sleepers`
(groups proven unsatisfiable, out of sessions until an event wakes them), and
moves groups between the two: new jobs join their group's side, events wake
sleepers, a session starts by queueing what woke and ends by putting each
group it covered to sleep, back in the order, or away (nothing pending).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from xce_core._fairgroup import FairGroup
from xce_core._model import PENDING, Job, JobGroup
from xce_core._order import BatchSink, PolicyOrder
from xce_core._results import PendReason, SessionStats
from xce_core._sleep import Sleepers, reads_free, watch
from xce_core._state import ClusterState
from xce_core.resreq import Primary

if TYPE_CHECKING:
    from xce_core._fairshare import ShareNode

__all__ = ["PendingQueue"]

# _pend(count, jobs, reason, stats, cached=...) of the core: the one pend path.
Pend = Callable[..., None]


class PendingQueue:
    """Queued and sleeping groups (see the module docstring). ``may_sleep``:
    whether groups may sleep at all (the cache is on, no strict FIFO or
    backfill, allocators that declare ``capacity_only``)."""

    __slots__ = (
        "_barren",
        "_may_sleep",
        "_order",
        "_parked",
        "_sleepers",
        "_state",
        "_untold_parked",
    )

    def __init__(self, state: ClusterState, *, may_sleep: bool) -> None:
        self._state = state
        self._may_sleep = may_sleep
        self._order = PolicyOrder(state.lanes)
        self._sleepers = Sleepers()
        # Pending jobs in no group that no session looks at (park()), with why;
        # those not told yet.
        self._parked: dict[Job, PendReason] = {}
        self._untold_parked: dict[Job, None] = {}
        # Whether the next session provably commits nothing: every queued group
        # failed in the last session, which ran to its end, and nothing since
        # could help one (no capacity freed, no group queued afresh, no
        # worker, licence, limits or order change). Feasibility is monotone in
        # capacity, and capacity only shrank since each failed, so each fails
        # again. Such a session leaves the fragile sleepers asleep (begin()):
        # without a commit, what they were told still holds (B9' of
        # benchmarks/bench_queue.py: a session with nothing changed after one
        # that committed).
        self._barren = False

    def __len__(self) -> int:
        """Entries in the policy order (0: a session has nothing to cover)."""
        return len(self._order)

    @property
    def barren(self) -> bool:
        """Whether the next session provably commits nothing (see ``_barren``
        in ``__init__``): it only tells groups that failed last time why they
        pend, on the capacity that session left."""
        return self._barren

    @property
    def sleeping_jobs(self) -> int:
        """Pending jobs of sleeping groups, and parked ones."""
        return self._sleepers.jobs + len(self._parked)

    # ------------------------------------------------------------------ parked jobs

    def park(self, job: Job, reason: PendReason) -> None:
        """Pending ``job``, in no group (:meth:`ClusterState.withdraw`), can never
        start until the limits change (:meth:`Limits.never` gave ``reason``):
        no session looks at it, so a job over a limit costs nothing a session
        (a replay of the NASA trace under a 32-slot per-user limit, whose
        wider jobs can never start, took 88 s, 1,623 of them looked at in
        every session). Told ``reason`` as the next session begins, and
        counted as pended by every session, as sleepers are."""
        self._parked[job] = reason
        self._untold_parked[job] = None

    def unpark(self, job: Job) -> None:
        """``job`` is parked no more (the caller put it back in its group)."""
        del self._parked[job]

    @property
    def parked(self) -> Mapping[Job, PendReason]:
        """The parked jobs and why (read-only)."""
        return self._parked

    @property
    def sleeping_groups(self) -> int:
        return len(self._sleepers)

    # ------------------------------------------------------------------ events

    def submitted(self, job: Job) -> None:
        """A pending job joined its group. (``SchedulerCore._submit`` skips the
        call when it would change nothing, by the rule of this method and
        :meth:`PolicyOrder.submitted`: change them together.)"""
        group = job.group
        assert group is not None
        if group.asleep is not None:
            self._sleepers.submitted(job)
            return
        if not group.queued:
            # A new shape, or one no session failed: it may start. (A job
            # joining a queued group shares its fingerprint: it fails alike.)
            self._barren = False
        try:
            self._order.submitted(job)
        except Exception:
            # Keys that do not compare (a picker breaking its contract): the
            # job stands; the next session rebuilds the order, and reports the
            # fault if the keys still do not compare.
            self._order.broken = True

    def ended(self, job: Job) -> None:
        """A job finished or was cancelled: what it freed may wake sleepers."""
        if self._parked and self._parked.pop(job, None) is not None:
            return  # a parked job cancelled: it held nothing, in no group
        if job.allocation:
            self._barren = False
            self._sleepers.released((w for w, _ in job.allocation), self._state.free_total)
        elif job.group is not None and job.group.asleep is not None:
            self._sleepers.cancelled(job.group)

    def lift(self, account: ShareNode) -> None:
        """``account``'s priority rose (a job of it ended): its lanes move up."""
        self._order.lift((account,))

    def wake_all(self) -> None:
        """A worker, licence or limits event: every sleeping group wakes."""
        self._barren = False
        self._sleepers.wake_all()

    def reorder(self) -> None:
        """Order keys changed (a queue's priority or picker): every group rejoins
        the order afresh before the next session."""
        self._barren = False
        self._sleepers.wake_all()
        self._sleepers.take_woken()
        self._order.broken = True

    def reprioritised(self) -> None:
        """Every fairshare account's priority changed (a recalculation): every
        lane is keyed again before the next session. Jobs keep their keys
        and groups their runs, so nothing else moves (O(lanes), not
        O(pending jobs): a queue of 400,000 jobs was rebuilt whole at every
        recalculation, once a minute by default)."""
        self._barren = False
        self._order.relane()

    def broken(self) -> None:
        """A session raised part of the way: rebuild the order before the next."""
        self._barren = False
        self._order.broken = True

    # ------------------------------------------------------------------ sessions

    def begin(self, stats: SessionStats, pend: Pend, risen: Iterable[ShareNode] = ()) -> None:
        """Before a session's tasks start: queue the groups woken since the last
        session (and, before a session that may commit, the fragile sleepers:
        see :mod:`xce_core._sleep`; one that provably commits nothing leaves
        them asleep: ``_barren``); tell members that joined a sleeping group
        why they pend (through ``pend``); count every sleeper as pended."""
        sleepers = self._sleepers
        order = self._order
        if order.broken:
            awake: list[JobGroup] = []
            asleep: list[FairGroup] = []
            for group in self._state.groups.values():
                if group.asleep is None:
                    awake.append(group)
                elif isinstance(group, FairGroup):
                    # Asleep through the change: its runs are entered in their
                    # lanes again now, or it would wake in the old order.
                    asleep.append(group)
            order.rebuild(awake, asleep)
            for group in awake:
                if not group.queued:
                    self._forget(group)
        # Fairshare accounts whose priority rose (a job ended): they move up.
        order.lift(risen)
        woken = sleepers.take_woken()
        if woken:
            self._barren = False
            for group in woken:
                self._queue(group)
        if len(order) and len(sleepers) and not self._barren:
            sleepers.wake_fragile()
            for group in sleepers.take_woken():
                self._queue(group)
        for group in sleepers.unsettled.values():
            members = [job for job in group.unsettled if job.state is PENDING]
            group.unsettled = []
            assert group.asleep is not None
            pend(0, members, group.asleep, stats, cached=True)
        sleepers.unsettled.clear()
        stats.pended += sleepers.jobs
        stats.cache_hits += sleepers.jobs
        if self._parked:
            untold, self._untold_parked = self._untold_parked, {}
            # In submission order, however they were parked (a restored core
            # parks its jobs in that order and must tell them alike: R6).
            for job in sorted(untold, key=_seq):
                reason = self._parked.get(job)
                if reason is not None:  # not cancelled since
                    pend(0, (job,), reason, stats, cached=False)
            stats.pended += len(self._parked)

    async def merge(
        self,
        failed: Mapping[int, PendReason],
        send: BatchSink,
        stats: SessionStats,
        limit: int,
        first: int,
        *,
        fair: bool = False,
    ) -> None:
        """The session's picker: :meth:`PolicyOrder.merge`."""
        await self._order.merge(failed, send, stats, limit, first, fair=fair)

    def settle(self, group: JobGroup, reason: PendReason, stats: SessionStats, pend: Pend) -> None:
        """Pend (through ``pend``) every not-yet-covered member of ``group``, whose
        shape failed this session with ``reason``. Only members whose reported
        category changes produce a decision."""
        # Members taken one by one this session were covered already.
        covered = group.covered_pending()
        if group.settled_reason == reason.category:
            # Every pending member reports this category already, except those
            # added since the group last settled: only they are visited, so a
            # steady session costs per group, not per job (B8 in
            # benchmarks/bench_alloc.py).
            stale = [job for job in group.unsettled if job.state is PENDING]
            pend(group.live - covered, stale, reason, stats, cached=True)
        else:
            members = group.rest_pending()
            pend(len(members), members, reason, stats, cached=True)
        group.close()
        group.settled_reason = reason.category
        group.unsettled = []

    def finish(
        self,
        complete: bool,
        failed: Mapping[int, PendReason],
        commits: int,
        failed_at: Mapping[int, int],
    ) -> None:
        """After a session: each group it covered is dropped (nothing pending),
        put to sleep (proven unsatisfiable, ``failed``, by a session that ran to
        its end and made ``commits`` commits, when sleeping is allowed and
        safe), or queued again. ``failed_at[fp]`` is the commit count when
        fingerprint ``fp`` first failed."""
        if not (complete and self._may_sleep):
            failed = {}
        consumables = self._state.consumables
        # A session cut short left groups it never covered in the order.
        barren = complete and self._may_sleep
        for group in self._order.finish():
            reason = failed.get(group.fingerprint) if group.live else None
            if group.live and reason is None:
                barren = False  # covered only part of the way: it may start
            if group.live and complete:
                # Its members that started are dropped now, while the session
                # has them at hand, not cold as the next one starts (B12 of
                # benchmarks/bench_fairshare.py: under limits nothing sleeps).
                # Not after a cancellation, which must stop at once (B7 of
                # benchmarks/bench_alloc.py); only a complete session has
                # failed groups.
                group.begin()
            if reason is not None:
                head = group.jobs[group.head].resreq
                selects = watch(head, consumables)
                # A fragile group's category depends on how full its hosts
                # are: it sleeps only when its reason was worked out on the
                # capacity the session ends with, that is after the session's
                # last commit. For a requirement of one primary that is when
                # its fingerprint failed; options and parts of a tree may have
                # been explained (and cached) at any earlier point, so such a
                # group sleeps only after a session that committed nothing. So
                # does one whose select reads free amounts: it read them as the
                # session began, before any of its commits.
                if (
                    selects is not None
                    or commits == 0
                    or (
                        isinstance(head, Primary)
                        and failed_at.get(group.fingerprint) == commits
                        and not reads_free(head.select, consumables)
                    )
                ):
                    self._sleepers.sleep(group, reason, selects, group.jobs[group.head].min_tasks)
                    continue
            if group.live:
                self._order.requeue(group)
            else:
                self._forget(group)
        self._barren = barren

    def _queue(self, group: JobGroup) -> None:
        """Queue ``group`` for the next session; one with nothing pending is
        forgotten."""
        self._order.queue(group)
        if not group.queued:
            self._forget(group)

    def _forget(self, group: JobGroup) -> None:
        """Drop a group with nothing pending (a later job of its shape starts a
        new group)."""
        self._state.drop_group(group)


def _seq(job: Job) -> int:
    return job.seq
