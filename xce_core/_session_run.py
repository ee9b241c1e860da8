"""Running a session: the asynchronous half of :class:`SchedulerCore`.

A session (:meth:`SessionRunner.run_session`) is an anyio task group in which a
picker task sends pending jobs in policy order, in batches, through a bounded
memory stream to an allocator task (or the same code inline, for a session
that fits one batch). Each job is started by one synchronous commit or pended
with a reason; the events applied meanwhile are queued and applied as the
session ends. Cancellation is never caught.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable, Mapping

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream

from events import EventRejected, HostSlots, JobAllocated, JobPended, SessionEnd
from xce_core._context import SchedContext
from xce_core._errors import XceError
from xce_core._fairgroup import FairGroup
from xce_core._faults import INTERNAL_ERROR, internal_error_text
from xce_core._intake import EventIntake
from xce_core._model import PENDING, Job, JobGroup
from xce_core._order import BatchSink, DirectSink, Item
from xce_core._pacer import SessionInterrupted
from xce_core._results import PendReason, Reason, SessionStats

__all__ = ["SessionRunner"]


class SessionRunner(EventIntake):
    """Sessions over a core's parts (see the module docstring); built on
    :class:`EventIntake`, whose queued events a session applies as it ends."""

    def cancel_session(self) -> None:
        """Cancel the running session, if any. Committed allocations stand; the
        interrupted attempt leaves nothing behind. Idempotent."""
        if self._in_session:
            self.scratch.pacer.interrupt = True
            if self._scope is not None:
                self._scope.cancel()

    async def run_session(self) -> SessionEnd:
        """Run one scheduling session and return its ``session_end`` (also emitted).

        Per-session state is reset before the picker and allocator tasks start.
        :meth:`cancel_session` stops it at its next plan or host step at the
        latest; it then returns normally. Cancelled from an enclosing scope, it
        stops at its next checkpoint (at most ``yield_every`` steps later, see
        :class:`Pacer`), emits ``session_end`` and re-raises the cancellation.

        A job whose attempt raises pends (``internal_error``) and the session
        goes on; any other fault ends the session as usual and rejects the
        ``session_begin`` that asked for it (index -1 if none). Raises
        :class:`XceError` only if a session is already running.
        """
        if self._in_session:
            raise XceError("a session is already running")
        self._sessions += 1
        stats = SessionStats(self._sessions)
        started = time.perf_counter()
        self._in_session = True
        self.changed = False
        asked_by, self._session_event = self._session_event, -1
        complete = False
        try:
            # Strictly before any task starts.
            now = self.clock.now()
            self.scratch.begin(stats.number, now)
            fairshare = self._fairshare
            if fairshare.used:
                if fairshare.due(now):
                    fairshare.recalculate(now)  # usage history enters every priority
                    self._pending.reprioritised()
                self._pending.begin(stats, self._pend, fairshare.take_risen())
            else:
                self._pending.begin(stats, self._pend)
            if self._backfill is not None:
                self._backfill.begin()
            if not len(self._pending):
                # Nothing to cover: no picker or allocator to start. Still a
                # checkpoint, so a loop of empty sessions stays cancellable.
                await anyio.lowlevel.checkpoint()
                complete = True
                return self._end_session(stats, started, complete)
            pending = self._pending
            awake = self.state.pending_count - pending.sleeping_jobs
            # Under fairshare too: a job's charge must be seen before the next
            # pick under its account (_order.py), which the picker task,
            # running ahead of the allocator, could not promise.
            if awake <= self.config.batch_size or self._fifo or fairshare.used or pending.barren:
                # A small session fits in one batch, a strict-FIFO one usually
                # stops at its first job, and a barren one (it commits nothing:
                # PendingQueue.barren) only tells failed groups why they pend,
                # a batch or so per group: starting two tasks would cost more
                # than the session (half of a --strict-fifo replay,
                # benchmarks/bench_simulate.py; half of B9' in
                # benchmarks/bench_queue.py). The same picker and allocator
                # code runs in this task, batch by batch; when the allocators
                # await only paced steps, without a cancel scope (entering and
                # leaving one costs 4-5 us a session, 4% of that replay's
                # instructions under callgrind): cancel_session() makes the
                # next step raise SessionInterrupted.
                sink = DirectSink(functools.partial(self._allocate_batch, stats=stats))
                if self._scopeless:
                    with contextlib.suppress(SessionInterrupted):
                        await self._picker_task(sink, stats)
                    complete = not self.scratch.pacer.interrupt
                else:
                    with anyio.CancelScope() as scope:
                        self._scope = scope
                        await self._picker_task(sink, stats)
                    complete = not scope.cancel_called
            else:
                # Two tasks: a budget of steps alone keeps the order of
                # decisions independent of the machine's speed (Pacer).
                self.scratch.pacer.restart(timed=False)
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    send, receive = anyio.create_memory_object_stream[list[Item]](2)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._picker_task, send, stats)
                        tg.start_soon(self._allocator_task, receive, stats, tg.cancel_scope)
                complete = not scope.cancel_called
        except Exception as exc:  # never a cancellation: those are BaseExceptions
            self._pending.broken()  # a heap operation may have raised midway
            where = f"session {stats.number} stopped: "
            self._fault(exc, EventRejected(index=asked_by, error=internal_error_text(exc, where)))
            self._unplaced += 1
        finally:
            if self._in_session:
                end = self._end_session(stats, started, complete)
        return end

    def _end_session(self, stats: SessionStats, started: float, complete: bool) -> SessionEnd:
        if self._fifo and complete:
            self._tell_behind(stats)
        scratch = self.scratch
        failed: Mapping[int, PendReason] = scratch.cache.entries
        if self._limits:
            # No group sleeps under limits: any start charges its consumers,
            # which can turn what a fresh attempt of a sleeping member would
            # say into limit_reached, even in a later session before its turn
            # (the sleep equivalence test under fairshare found it).
            failed = {}
        self._pending.finish(complete, failed, scratch.commits, scratch.failed_at)
        if self._backfill is not None:
            self._outbox += self._backfill.end(stats.number)
        self._scope = None
        self._in_session = False
        end = SessionEnd(
            session=stats.number,
            allocated=stats.allocated,
            pended=stats.pended,
            elapsed_s=time.perf_counter() - started,
        )
        self._outbox.append(end)
        self.last_session = stats
        self._drain_deferred()
        return end

    def _tell_behind(self, stats: SessionStats) -> None:
        """Strict FIFO, a session that ran to its end: every job submitted since
        the last such session that is still pending and was never told a reason
        waits behind the job the session stopped at (it was not tried), and
        pends with ``fifo_order`` naming that job. Costs the jobs submitted
        since, not the queue. A job told before keeps its last category until
        it is tried again (only a category change is sent)."""
        untold, self._untold = self._untold, []
        head, self._fifo_stop = self._fifo_stop, None
        if head is None or not stats.stopped_by_fifo:
            return  # every pending job was tried
        reason = PendReason(
            Reason.FIFO_ORDER,
            f"strict FIFO: behind job {head.job_id}, which cannot start ({head.last_reason})",
        )
        behind = [
            job
            for job in untold
            if job.state is PENDING and job.last_reason is None and job is not head
        ]
        if behind:
            self._pend(0, behind, reason, stats, cached=False)

    async def _picker_task(self, send: BatchSink, stats: SessionStats) -> None:
        """The picker: queued groups' pending jobs in policy order, in batches
        (:meth:`PolicyOrder.merge`)."""
        # A strict-FIFO session usually stops at its first job (the head that
        # could not start last time): its first batch is that one job, not 16
        # (the --strict-fifo replay of benchmarks/bench_simulate_big.py).
        first = 1 if self._fifo else 16
        # Conservative backfill reserves for blocked jobs one by one: groups of
        # a failed shape are not handed over whole.
        whole = self._backfill is None or self._backfill.groups_whole
        failed = self.scratch.cache.entries if whole else {}
        await self._pending.merge(
            failed, send, stats, self.config.batch_size, first, fair=self._fairshare.used
        )

    async def _allocator_task(
        self,
        receive: MemoryObjectReceiveStream[list[Item]],
        stats: SessionStats,
        scope: anyio.CancelScope,
    ) -> None:
        async with receive:
            async for batch in receive:
                if not await self._allocate_batch(batch, stats):
                    scope.cancel()
                    return

    async def _allocate_batch(self, batch: list[Item], stats: SessionStats) -> bool:
        """Decide every job of a batch, in order. ``False``: strict FIFO stopped."""
        if stats.stopped_by_fifo:
            return False
        scratch = self.scratch
        state = self.state
        cache = scratch.cache
        failed = cache.entries
        allocate = self._dispatcher.allocate
        # None without limits: no Limits.__bool__ call per job (benchmark B11
        # of benchmarks/bench_fairshare.py counts three a job).
        limits = self._limits if self._limits else None
        backfill = self._backfill
        pending = PENDING
        ctx: SchedContext | None = None
        for item in batch:
            if isinstance(item, JobGroup):
                reason = failed[item.fingerprint]
                self._pending.settle(item, reason, stats, self._pend)
                continue
            job = item
            if job.state is not pending:
                continue
            hit = failed.get(job.fingerprint)
            if hit is not None:
                self._pend(1, (job,), hit, stats, cached=True)
                if backfill is not None:
                    await backfill.on_cache_hit(job, scratch.now)
                continue
            if backfill is not None and (held := backfill.refused(job, scratch.now)) is not None:
                self._pend(1, (job,), held, stats, cached=True)
                continue
            if limits is not None and (held := limits.held(job)) is not None:
                # Over a limit whatever hosts it gets: no attempt (_limits.py).
                self._pend_limited(job, held, stats)
                continue
            stats.attempts += 1
            if ctx is None:
                ctx = SchedContext(state, scratch, job)
            else:
                ctx.reset(job)
            # A task range takes what its cluster-wide limits leave, up to its most.
            cap = (
                limits.room(job) if limits is not None and job.min_tasks < job.max_tasks else None
            )
            rooms: dict[str, int] | None = None
            try:
                on_hosts = limits.host_room(job) if limits is not None and limits.by_host else None
                if on_hosts is not None or (cap is not None and cap < job.max_tasks):
                    rooms, by_hosts = on_hosts if on_hosts is not None else (None, None)
                    within = await self._within_limits(ctx, rooms, by_hosts, cap)
                    if isinstance(within, PendReason):
                        # It fits, only not within its host limits: not cached
                        # (another user's job of its shape may fit).
                        self._pend_limited(job, within, stats)
                        continue
                    allocated = within
                else:
                    allocated = await allocate(ctx)
            except Exception as exc:
                # The attempt's claims live only in ctx, which the next job resets.
                self._pend_on_fault(job, exc, stats)
            else:
                if not allocated:
                    reason = ctx.reason or PendReason(Reason.NOT_ENOUGH_SLOTS, "no plan fits")
                    cache.insert(job.fingerprint, reason)
                    scratch.failed(job.fingerprint)
                    self._pend(1, (job,), reason, stats, cached=False)
                    if backfill is not None:
                        await backfill.on_failure(job, scratch.now)
                elif (
                    limits is not None
                    and (held := limits.check(job, checked := ctx.journal, ctx.shared)) is not None
                ):
                    self._pend_limited(job, held, stats)
                    continue
                elif backfill is not None and (
                    (held := await backfill.holds_back(job, ctx, scratch.now, rooms)) is not None
                ):
                    # It would delay a reservation (and under conservative
                    # backfill has one of its own now).
                    self._pend(1, (job,), held, stats, cached=False)
                    continue
                elif (
                    limits is not None
                    and ctx.journal is not checked
                    and (held := limits.check(job, ctx.journal, ctx.shared)) is not None
                ):
                    # Placed again beside the reservations (conservative
                    # backfill), within its rooms and cap, but with amounts or
                    # over hosts together that its limits refuse.
                    self._pend_limited(job, held, stats)
                    continue
                elif self._start(job, ctx, stats):
                    continue
            if self._fifo:
                stats.stopped_by_fifo = True
                self._fifo_stop = job
                return False
        return True

    async def _within_limits(
        self,
        ctx: SchedContext,
        rooms: dict[str, int] | None,
        held: PendReason | None,
        cap: int | None,
    ) -> bool | PendReason:
        """An attempt for a job its limits constrain before it is made: per-host
        limits keep it to ``rooms`` slots on some hosts (those hosts look that
        full to it: tentative claims that are never committed), and a job of a
        task range takes no more than ``cap`` tasks (what its cluster-wide
        limits leave). If it does not fit so, the attempt is made again
        without them: if it fits then, ``held`` (the host limits' reason; or,
        with none, ``True``, and the limits' check after the attempt refuses
        what it took), else ``False`` with the attempt's own reason in ``ctx``,
        which is the shape's (a capped failure is never cached: a shape whose
        task counts are not all alike, as a ``block``, might fit only above
        the cap)."""
        if rooms:
            ctx.keep_within(rooms)
        # Not None: the attempt is bounded by limits, so no failure of it is
        # cached for a shape (Dispatcher._primary), host limits alone included.
        ctx.cap = cap if cap is not None else ctx.job.max_tasks
        allocate = self._dispatcher.allocate
        if await allocate(ctx):
            return True
        ctx.reset(ctx.job)
        if not await allocate(ctx):
            return False
        return held if held is not None else True

    def _pend_limited(self, job: Job, reason: PendReason, stats: SessionStats) -> None:
        """Pend ``job``, which a limit holds back: never cached (another
        consumer's job of its shape may start). No group sleeps under limits
        (_end_session)."""
        self._pend(1, (job,), reason, stats, cached=False)

    def _pend_on_fault(self, job: Job, exc: Exception, stats: SessionStats) -> None:
        """Pend ``job`` after a fault in its attempt (not cached: it may be this
        job's alone); the hook hears of it even if no decision is new."""
        reason = PendReason(INTERNAL_ERROR, internal_error_text(exc))
        self._pend(1, (job,), reason, stats, cached=False)
        if self._on_internal_error is not None:
            pended = JobPended(
                session=stats.number,
                job_id=job.job_id,
                reason=reason.category,
                detail=reason.detail,
            )
            self._on_internal_error(exc, pended)

    def _start(self, job: Job, ctx: SchedContext, stats: SessionStats) -> bool:
        """Commit a successful attempt (one synchronous step) and report it."""
        try:
            self.state.commit(job, ctx.journal, ctx.shared, self.scratch.now, ctx.distinct())
        except Exception as exc:  # a bug, not bad input: keep running, say so
            self._pend_on_fault(job, exc, stats)
            return False
        # A host holding one slot is listed by its shared view: one struct less
        # per host (the replays of benchmarks/bench_simulate.py list about 100
        # hosts a job); one host without a comprehension (benchmark B1 of
        # benchmarks/bench_alloc.py: one host a job).
        allocation = job.allocation
        if len(allocation) == 1:
            worker, slots = allocation[0]
            hosts = [worker.one_slot if slots == 1 else HostSlots(host=worker.name, slots=slots)]
        else:
            hosts = [
                w.one_slot if n == 1 else HostSlots(host=w.name, slots=n) for w, n in allocation
            ]
        self.scratch.committed()
        if self._limits:
            self._limits.charge(job, ctx.journal, ctx.shared, +1)
        fairshare = self._fairshare
        if fairshare.used and isinstance(job.group, FairGroup):
            fairshare.started(job, fairshare.charged(job), self.scratch.now)
        stats.allocated += 1
        self._outbox.append(JobAllocated(session=stats.number, job_id=job.job_id, hosts=hosts))
        return True

    def _pend(
        self,
        count: int,
        jobs: Iterable[Job],
        reason: PendReason,
        stats: SessionStats,
        *,
        cached: bool,
    ) -> None:
        """The one pend path, for single jobs and whole groups: ``count`` pending
        jobs stay pending for ``reason`` this session (counted, and counted as
        cache hits when ``cached``). ``jobs`` are those of them whose last
        reported category may differ from ``reason``'s, the others being known
        to report it already; each that does differ gets a ``job_pended``."""
        stats.pended += count
        if cached:
            stats.cache_hits += count
        category, detail, session = reason.category, reason.detail, stats.number
        outbox = self._outbox
        for job in jobs:
            if job.last_reason != category:
                job.last_reason = category
                group = job.group
                if group is not None and group.settled_reason not in (None, category):
                    # Its members no longer all report the category the group
                    # last settled with: the next settle visits every one.
                    group.settled_reason = None
                outbox.append(
                    JobPended(
                        session=session,
                        job_id=job.job_id,
                        reason=category,
                        detail=detail,
                        cached=cached,
                    )
                )
