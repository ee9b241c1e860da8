"""The scheduler core: events in, decisions out, pure and deterministic.

:class:`SchedulerCore` owns the cluster state. Input events are applied by the
synchronous :meth:`SchedulerCore.apply`; a session (:meth:`run_session`) is an
anyio task group in which a picker task sends pending jobs in policy order, in
batches, through a bounded memory stream to an allocator task. Events applied
while a session runs are queued and applied after it ends. Decisions collect in
an outbox that drivers drain with :meth:`take_decisions`.

Faults (defence in depth, see :mod:`xce_core._faults`): a bug or a plugin that
raises becomes a decision reporting it, and the core keeps running.
Cancellation is never caught.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeAlias

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream
from msgspec import UNSET

from events import (
    BadEvent,
    Decision,
    EventRejected,
    FairshareConfig,
    HostSlots,
    InputEvent,
    JobAllocated,
    JobCancelled,
    JobFinished,
    JobPended,
    JobRejected,
    JobSubmitted,
    Limit,
    LimitsConfig,
    QueueConfig,
    SessionBegin,
    SessionEnd,
    SharedResource,
    WorkerDown,
    WorkerRemoved,
    WorkerUp,
)
from xce_core._admission import ShapeCache
from xce_core._cache import UnsatisfiableCache
from xce_core._clock import Clock, MonotonicClock
from xce_core._config import SchedulerConfig
from xce_core._context import SchedContext
from xce_core._dispatch import Dispatcher
from xce_core._errors import XceError
from xce_core._fairgroup import FairGroup
from xce_core._fairshare import Fairshare
from xce_core._faults import (
    INTERNAL_ERROR,
    InternalErrorHook,
    forget_partial_job,
    internal_error_text,
    queue_config_or_nothing,
)
from xce_core._limits import Limits, queue_limits
from xce_core._model import _EMPTY, PENDING, RUNNING, Job, JobGroup, JobShape, Origin
from xce_core._order import BatchSink, DirectSink, Item, OrderKeys, QueueKeys
from xce_core._pending import PendingQueue
from xce_core._registry import Registry, default_registry
from xce_core._reservations import Reservations
from xce_core._results import PendReason, Reason, SessionStats
from xce_core._session import Pacer, SessionInterrupted, SessionScratch, StaticSelectMemo
from xce_core._snapshot import (
    CoreParts,
    Counters,
    config_of,
    load_snapshot,
    read_snapshot,
    write_snapshot,
)
from xce_core._state import ClusterState, EventInconsistent

__all__ = ["RUN_END", "RunEnd", "SchedulerCore"]

# A queue's order keys, and the same again if its jobs are placed by shape.
_QueueSeen: TypeAlias = tuple["QueueKeys | functools.partial[tuple[Any, ...]]", "QueueKeys | None"]


class RunEnd(enum.Enum):
    """What :meth:`SchedulerCore.submit_run` returns when its items ran out."""

    END = enum.auto()


RUN_END: Final = RunEnd.END


class SchedulerCore:
    """One scheduler instance: state, sessions, decisions. Not thread-safe; use it
    from one event loop. Does no I/O.

    Time: ``clock`` (a :class:`MonotonicClock` unless injected, a
    :class:`VirtualClock` in the simulator) is read once per session, when it
    begins, and offered to allocators as ``SchedContext.now``. The core itself
    makes no time-based decision yet (``rusage`` durations and decay are carried,
    not acted on). ``session_end.elapsed_s`` is wall time, measured with
    :func:`time.perf_counter` whatever the clock: it reports what the session
    cost, not when it happened.

    Raises :class:`PluginError` at construction if a configured plugin is unknown.
    ``on_internal_error(exc, decision)`` is called for every fault the core
    survives (where a driver logs the traceback); it must not raise.
    """

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        registry: Registry | None = None,
        clock: Clock | None = None,
        on_internal_error: InternalErrorHook | None = None,
    ) -> None:
        self.config = config or SchedulerConfig()
        self.registry = registry or default_registry()
        self.clock: Clock = clock or MonotonicClock()
        self.registry.picker(self.config.picker)  # fail early on a bad name
        self._dispatcher = Dispatcher(self.config, self.registry)
        config = self.config
        may_sleep = (
            config.sleep_blocked_groups
            and config.backfill == "none"  # the head must be seen every session
            and config.unsatisfiable_cache
            and not config.strict_fifo
            and self._allocators_declare("capacity_only")
        )
        # Inline sessions without a cancel scope (run_session): only when no
        # allocator may await anything the pacer does not see.
        self._scopeless = self._allocators_declare("paced_only")
        self._limits = Limits()
        self._cluster_limits: list[Limit] = []
        self._queue_limits: dict[str, list[Limit]] = {}
        self._fifo = config.strict_fifo and config.backfill == "none"
        # Strict FIFO: jobs submitted since the last complete session (the only
        # ones that may never have been told a reason), and the job the current
        # session stopped at. Jobs behind that one are not tried; those never
        # told anything pend with ``fifo_order`` (_tell_behind).
        self._untold: list[Job] = []
        self._fifo_stop: Job | None = None
        self._fairshare = Fairshare(config.fairshare, self.registry, config.picker)
        self.state = ClusterState(
            OrderKeys(self.registry, config.picker), self._fairshare.account_of
        )
        self._pending = PendingQueue(self.state, may_sleep=may_sleep)
        self._shapes = ShapeCache(self.state)
        self._shape_tables = self._shapes.tables()  # never replaced
        # What a submission looks up that only configuration changes (so a
        # queue, limits or fairshare event forgets it): whether limits are
        # configured, and per queue its order keys and, when the state places
        # its jobs by shape alone, the same again (else None).
        self._admission: tuple[bool, dict[str, _QueueSeen]] | None = None
        self.scratch = SessionScratch(
            self.state,
            StaticSelectMemo(),
            UnsatisfiableCache(enabled=self.config.unsatisfiable_cache),
            pacer=Pacer(self.config.yield_every, self.config.yield_interval),
        )
        self._backfill = (
            Reservations(
                self.state, self._dispatcher, self.scratch, config.backfill, config.backfill_depth
            )
            if config.backfill != "none"
            else None
        )
        self._outbox: list[Decision] = []
        # event_rejected decisions raised here, knowing no input line
        # (rejections_unplaced).
        self._unplaced = 0
        self._deferred: list[tuple[int, InputEvent]] = []
        self._index = 0
        self._on_internal_error = on_internal_error
        # Index of the session_begin that asked for the next session (-1: none).
        self._session_event = -1
        self._sessions = 0
        self._in_session = False
        self._scope: anyio.CancelScope | None = None
        self.changed = False
        self.last_session: SessionStats | None = None

    def _allocators_declare(self, flag: str) -> bool:
        """Whether both configured allocators set the class attribute ``flag``
        (``capacity_only``, ``paced_only``: see :class:`Allocator`)."""
        config = self.config
        return all(
            getattr(self.registry.allocator(name), flag, False)
            for name in (config.sequential_allocator, config.parallel_allocator)
        )

    # ------------------------------------------------------------------ events

    @property
    def in_session(self) -> bool:
        """Whether a session is running (events are then queued)."""
        return self._in_session

    @property
    def charges_by_time(self) -> bool:
        """Whether the core reads its clock when a job starts or ends, not only
        when a session begins: fairshare charges share accounts for the time
        their jobs run, from the first job given an account on. A driver that
        holds ends back to apply them later (the simulator, between sessions)
        must apply each at the time it happened while this is true."""
        return self._fairshare.used

    def recalculation_due(self, now: float) -> bool:
        """Whether a session beginning at ``now`` would bring fairshare usage
        history into priorities (``FairshareParams.recalc_interval`` after the
        last time). Such a session changes later decisions even if it can start
        nothing: a driver that skips sessions which cannot start a job (the
        simulator) must run this one."""
        fairshare = self._fairshare
        return fairshare.used and fairshare.due(now)

    @property
    def session_count(self) -> int:
        return self._sessions

    @property
    def decisions_waiting(self) -> int:
        """How many decisions :meth:`take_decisions` would return now (during a
        session too: those it made so far, in order, final)."""
        return len(self._outbox)

    @property
    def rejections_unplaced(self) -> int:
        """How many ``event_rejected`` decisions the core raised itself (an
        event inconsistent with the state, or a fault), which name an index
        but no input line: a driver that knows its input's lines can add
        them, and needs to look only when this count moved."""
        return self._unplaced

    @property
    def events_received(self) -> int:
        """Input events counted so far (the index the next one gets by default);
        a snapshot covers exactly the events before it."""
        return self._index

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> bytes:
        """The whole state as one msgpack message (:mod:`xce_core._snapshot`):
        :meth:`restore` gives a core that decides exactly as this one would from
        here on. Covers the first :attr:`events_received` events, and includes
        decisions not yet taken. Synchronous, no checkpoint; reads only. Raises
        :class:`XceError` during a session (take it between events)."""
        if self._in_session:
            raise XceError("cannot snapshot a core during a session")
        counters = Counters(
            self._index,
            self._sessions,
            self._session_event,
            self.changed,
            self._cluster_limits,
            self._queue_limits,
        )
        return write_snapshot(self._parts(), counters)

    @classmethod
    def restore(
        cls,
        data: bytes,
        *,
        registry: Registry | None = None,
        clock: Clock | None = None,
        on_internal_error: InternalErrorHook | None = None,
    ) -> SchedulerCore:
        """A core rebuilt from :meth:`snapshot`'s bytes, with the configuration
        they hold (plugins looked up in ``registry``; a stateful picker gets its
        saved state back). Derived structures are rebuilt directly, not by
        replaying events. Raises :class:`SnapshotError` naming what is wrong
        with a snapshot that is not one, of another format, corrupt or
        inconsistent, and :class:`PluginError` for a plugin not registered."""
        image = read_snapshot(data)
        core = cls(
            config_of(image), registry=registry, clock=clock, on_internal_error=on_internal_error
        )
        counters = load_snapshot(image, core._parts())
        core._index = counters.events_received
        core._sessions = counters.sessions
        core._session_event = counters.session_event
        core.changed = counters.changed
        core._cluster_limits = counters.cluster_limits
        core._queue_limits = counters.queue_limits
        if core._fifo:
            core._untold = [
                job
                for job in core.state.jobs.values()
                if job.state is PENDING and job.last_reason is None
            ]
        return core

    def _parts(self) -> CoreParts:
        return CoreParts(
            self.config,
            self.registry,
            self.state,
            self._pending,
            self._shapes,
            self._limits,
            self._backfill,
            self._outbox,
            self._fairshare,
        )

    def apply(self, event: InputEvent, index: int | None = None, *, counted: bool = True) -> bool:
        """Apply one input event (queued if a session runs). Synchronous, never raises
        for bad input: an inconsistent event becomes an ``event_rejected`` decision,
        an invalid job a ``job_rejected`` one, and so is a fault (an
        ``"internal error: "`` text). ``index`` defaults to the count of
        events received so far; ``counted=False`` leaves that count alone (for
        configuration applied beside the input, such as ``xce run --policy``).
        Returns ``True`` when the event is a ``session_begin`` (the caller
        should then run a session)."""
        idx = self._index if index is None else index
        if counted:
            self._index += 1
        if isinstance(event, SessionBegin):
            self._session_event = idx
            return True
        if self._in_session:
            self._deferred.append((idx, event))
            return False
        self._apply_now(idx, event)
        return False

    def submit_run(
        self,
        event: JobSubmitted,
        more: Iterator[InputEvent | BadEvent],
        index: int | None = None,
    ) -> tuple[InputEvent | BadEvent | RunEnd, int]:
        """Apply ``event`` and the ``job_submitted`` events that follow it in
        ``more``, as :meth:`apply` would one by one (numbered from ``index``,
        default: the count of events received). Returns the first item taken
        from ``more`` that is not a ``job_submitted`` (not applied; ``RUN_END``
        when ``more`` ran out) and how many events were applied. Synchronous;
        never raises for bad input.

        The ingest of a busy stream (benchmark B5, benchmarks/bench_ingest.py):
        what no submission changes is looked up once per run, not per job."""
        if not self._in_session:
            return self._submit(event, more, index)
        count = 0
        item: InputEvent | BadEvent | RunEnd = event
        while isinstance(item, JobSubmitted):
            self.apply(item, None if index is None else index + count)
            count += 1
            item = next(more, RUN_END)
        return item, count

    def reject(
        self,
        error: str,
        index: int | None = None,
        line: int | None = None,
        job_id: str | None = None,
    ) -> None:
        """Report an input that could not even be decoded (counts as an event);
        ``job_id``: the job it names, if that could be read."""
        idx = self._index if index is None else index
        self._index += 1
        named = UNSET if job_id is None else job_id
        self._outbox.append(EventRejected(index=idx, error=error, line=line, job_id=named))

    def _apply_now(self, idx: int, event: InputEvent) -> None:
        state = self.state
        try:
            match event:
                case JobSubmitted():  # first: nearly every event of a busy stream
                    self._submit(event, iter(()), idx, counted=False)
                    return  # reported and marked changed there
                case WorkerUp():
                    state.worker_up(event)
                    self._pending.wake_all()
                case WorkerDown(name=name):
                    state.worker_down(name)
                    self._pending.wake_all()
                case WorkerRemoved(name=name):
                    state.worker_removed(name)
                    self._pending.wake_all()
                case SharedResource():
                    state.shared_resource(event)
                    self._pending.wake_all()
                case JobFinished(job_id=job_id):
                    self._discharge(job_id)
                    self._pending.ended(state.job_finished(job_id))
                case JobCancelled(job_id=job_id):
                    self._discharge(job_id)
                    self._pending.ended(state.job_cancelled(job_id))
                case LimitsConfig():
                    self._admission = None
                    self._configure_limits(event.limits, self._queue_limits, event.user_groups)
                    self._pending.wake_all()
                case QueueConfig():
                    self._admission = None
                    if event.picker is not None:
                        self.registry.picker(event.picker)
                    fairshare = self._fairshare
                    spec = event.fairshare
                    where = f"queue {event.name} fairshare"
                    tree = fairshare.build(spec, where) if spec is not None else None
                    shorthands = {**self._queue_limits, event.name: queue_limits(event)}
                    self._configure_limits(self._cluster_limits, shorthands)
                    queue_config_or_nothing(state, event)
                    fairshare.configure(state, event.name, tree, self.clock.now())
                    # Order keys changed: every group rejoins the order afresh.
                    self._pending.reorder()
                case FairshareConfig(tree=spec):
                    self._admission = None
                    fairshare = self._fairshare
                    tree = fairshare.build(spec, "cluster fairshare") if spec is not None else None
                    fairshare.configure(state, None, tree, self.clock.now())
                    self._pending.reorder()
                case _:
                    raise EventInconsistent(f"unsupported event {type(event).__name__}")
        except Exception as exc:
            self._failed(idx, event, exc)
            return
        self.changed = True

    def _failed(self, idx: int, event: InputEvent, exc: Exception) -> None:
        """Report event ``idx``, which raised ``exc`` (an ``XceError``: bad input,
        rejected; else a fault) while it was applied."""
        if isinstance(exc, XceError):
            # The job events name their job; the others leave job_id unset.
            named = getattr(event, "job_id", UNSET)
            self._outbox.append(EventRejected(index=idx, error=str(exc), job_id=named))
            self._unplaced += 1
            return
        text = internal_error_text(exc)
        if isinstance(event, JobSubmitted):
            self._fault(exc, JobRejected(job_id=event.job_id, error=text))
        else:
            named = getattr(event, "job_id", UNSET)
            self._fault(exc, EventRejected(index=idx, error=text, job_id=named))
            self._unplaced += 1
        # The event may have been applied part of the way (a job ended in
        # the state, its sleepers not told): nothing derived is trusted. Every
        # sleeping group wakes and the order is built again, so the next
        # session sees the state as it is.
        self._pending.wake_all()
        self._pending.broken()
        self.changed = True

    def _fault(self, exc: Exception, decision: Decision) -> None:
        self._outbox.append(decision)
        if self._on_internal_error is not None:
            self._on_internal_error(exc, decision)

    def _submit(
        self,
        event: JobSubmitted,
        more: Iterator[InputEvent | BadEvent],
        index: int | None,
        *,
        counted: bool = True,
    ) -> tuple[InputEvent | BadEvent | RunEnd, int]:
        """Apply ``event`` and the ``job_submitted`` events after it in ``more``
        (see :meth:`submit_run`; ``counted``: whether each is counted as an
        event received, which :meth:`apply` did for one already; ``index`` is
        then that of ``event``). The one path of a submission, a run of one
        included.

        The usual job (a repeat of a known requirement and origin, for a
        queue placed by shape alone, with no limits configured) is admitted
        inline, by the rules of the methods named in the comments (benchmark
        B5 of benchmarks/bench_ingest.py: their calls were most of ingest;
        tests/core/test_ingest.py compares the two paths on random streams).
        Any other goes through those methods (:meth:`_admit`)."""
        state = self.state
        jobs, ended, groups = state.jobs, state.ended, state.groups
        shapes = self._shapes
        texts, last_origins = self._shape_tables
        admission = self._admission
        if admission is None:
            admission = self._admission = (bool(self._limits), {})
        limited, queues = admission
        submitted = self._pending.submitted
        new_job = object.__new__
        # The events are counted as received at the end of the run, and
        # before a fault is reported (its hook may look).
        first = self._index if index is None else index
        received = self._index
        count = 0
        after: InputEvent | BadEvent | RunEnd = RUN_END
        for ev in itertools.chain((event,), more):
            if not isinstance(ev, JobSubmitted):
                after = ev
                break
            count += 1
            try:
                job_id = ev.job_id
                if job_id in jobs or job_id in ended:  # state.known(), inlined
                    raise EventInconsistent(f"duplicate job id {job_id!r}")
                # Parsed, checked and fingerprinted once per distinct
                # requirement text and task range: a repeat costs dictionary
                # lookups (_admission.py; ShapeCache.shape's for a repeat).
                text = texts.get(ev.resreq)
                shape = None
                if text is not None and text.resreq is not None and ev.min_tasks is None:
                    shape = text.ranges.get(ev.max_tasks)
                if shape is None:
                    shape = shapes.shape(ev)
                if isinstance(shape, str):
                    state.job_rejected(ev)
                    self._outbox.append(JobRejected(job_id=job_id, error=shape))
                else:
                    origin = last_origins.get(ev.user)  # ShapeCache.origin's, for a repeat
                    if (
                        origin is None
                        or origin[1] != ev.queue
                        or origin[2] != ev.project
                        or origin[3] != ev.priority
                        or origin[4] != ev.run_limit
                    ):
                        origin = shapes.origin(ev)
                    seen = queues.get(origin[1])
                    if seen is None:
                        seen = queues[origin[1]] = self._queue_seen(origin[1])
                    keys, plain_keys = seen
                    if limited or plain_keys is None:
                        self._admit(ev, shape, origin, keys)
                    else:
                        pending = state.pending_count
                        try:
                            # ClusterState.job_submitted's, for a queue it
                            # placed by shape before; the job as Job.admit
                            # makes it.
                            state._seq += 1
                            job = jobs[job_id] = new_job(Job)
                            job.job_id = job_id
                            job._shape = shape
                            job._origin = origin
                            job.submit_time = ev.submit_time
                            job.seq = state._seq
                            job.state = PENDING
                            job.allocation = ()
                            job.claims = ()
                            job.shared_claims = _EMPTY
                            job.last_reason = None
                            job.key = ()
                            job.group = None
                            key = plain_keys.picker_key(
                                job, plain_keys.queue
                            )  # QueueKeys.__call__'s
                            if type(key) is tuple and len(key) == plain_keys.size:
                                key = plain_keys.head + key
                            else:
                                key = plain_keys.join(key)
                            job.key = key
                            group = groups.get(shape.fingerprint)
                            if group is None:
                                group = state._shape_group(shape.fingerprint)
                            job.group = group
                            members = group.jobs
                            if not members or members[-1].key <= key:
                                # JobGroup.insert's, for a member that goes
                                # last (the usual: first come, first served).
                                members.append(job)
                                group.unsettled.append(job)
                                group.live += 1
                            else:
                                group.insert(job)
                            state.pending_count = pending + 1
                        except Exception:
                            # A fault part of the way in (a picker's
                            # order_key, say).
                            forget_partial_job(state, ev, pending)
                            raise
                        # PendingQueue.submitted leaves a queued group that is
                        # awake as it is, unless the job comes before the
                        # member it is queued by.
                        try:
                            quiet = group.queued and group.asleep is None and not key < group.key
                        except Exception:
                            quiet = False  # submitted() compares again, and says so
                        if not quiet:
                            submitted(job)
                        if self._fifo:
                            self._untold.append(job)
            except Exception as exc:
                if counted:
                    self._index = received + count
                self._failed(first + count - 1, ev, exc)
            else:
                self.changed = True
        if counted:
            self._index = received + count
        return after, count

    def _admit(
        self, ev: JobSubmitted, shape: JobShape, origin: Origin, keys: Callable[[Job], Any]
    ) -> None:
        """Admit ``ev``'s job of ``shape`` from ``origin`` (a new id), keyed by
        ``keys``: parked if a limit holds it whatever else runs, else pending
        in its group. Raises what a fault raises, the job forgotten."""
        state = self.state
        # A job over a limit whatever else runs is parked: no session looks at
        # it until the limits change (_repark).
        never = self._limits.never(origin[:3], shape.min_tasks) if self._limits else None
        pending = state.pending_count
        try:
            job = state.job_submitted(ev, shape, origin, keys, place=never is None)
        except Exception:
            # A fault part of the way in (a picker's order_key, say).
            forget_partial_job(state, ev, pending)
            raise
        if never is not None:
            self._pending.park(job, never)
            return
        self._pending.submitted(job)
        if self._fifo:
            self._untold.append(job)

    def _queue_seen(self, name: str) -> _QueueSeen:
        """The order keys of queue ``name`` as it is now, and the same again if
        the state places its jobs by shape alone (its picker is no fairshare
        one: ``Fairshare.account_of`` gives them no account), else ``None``."""
        order_key = self.state.order_key
        queue = self.state.queue(name)
        try:
            keys = order_key.of_queue(queue)
            fair = self._fairshare.is_fair(queue)
        except Exception:
            # Its picker cannot be looked up: each key asks, and fails where
            # it always did (the job admitted, then forgotten).
            return functools.partial(order_key, queue=queue), None
        return keys, None if fair else keys

    def _configure_limits(
        self,
        cluster: Sequence[Limit],
        queues: dict[str, list[Limit]],
        user_groups: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Limits from ``limits_config`` (and its user groups: ``None`` keeps
        them) and the queues' shorthands, checked and applied together (raises
        :class:`LimitError`, changing nothing)."""
        state = self.state
        every = [*cluster, *(limit for limits in queues.values() for limit in limits)]
        running = [j for j in state.jobs.values() if j.state is RUNNING]
        self._limits.configure(every, running, user_groups)
        self._cluster_limits = list(cluster)
        self._queue_limits = {name: limits for name, limits in queues.items() if limits}
        self._repark()

    def _repark(self) -> None:
        """After the limits changed: the parked jobs they no longer hold back
        rejoin their groups, and the pending jobs they now hold back whatever
        else runs (:meth:`Limits.never`) are parked. O(pending jobs), once per
        limits change; every group then wakes and the order is built again."""
        state, limits, pending = self.state, self._limits, self._pending
        held = {
            job: reason
            for job in state.jobs.values()
            if job.state is PENDING and (reason := limits.never_for(job)) is not None
        }
        back = [job for job in pending.parked if job not in held]
        gone = [job for job in held if job.group is not None]
        if back or gone:
            pending.wake_all()
            pending.broken()
            state.withdraw(gone)
        for job, reason in held.items():
            pending.park(job, reason)  # told again only if its category changed
        for job in back:
            # One at a time: should a picker's order key raise, the jobs not put
            # back yet stay parked, none is lost.
            state.readmit(job)
            pending.unpark(job)
            if self._fifo:
                # Back in the queue like a new submission: under strict FIFO
                # it waits behind the head and is told so (_tell_behind).
                self._untold.append(job)

    def _discharge(self, job_id: str) -> None:
        """Before a running job ends: take what it held off the limits and its
        share account."""
        job = self.state.jobs.get(job_id)
        if job is None or job.state is not RUNNING:
            return
        if self._limits:
            self._limits.charge(job, job.claims, dict(job.shared_claims), -1)
        if self._fairshare.running:
            risen = self._fairshare.ended(job, self.clock.now())
            if risen is not None:
                self._pending.lift(risen)

    def _drain_deferred(self) -> None:
        deferred, self._deferred = self._deferred, []
        for idx, event in deferred:
            self._apply_now(idx, event)

    # ------------------------------------------------------------------ decisions

    def take_decisions(self) -> list[Decision]:
        """Decisions made since the last call, in order (the outbox is emptied)."""
        out, self._outbox = self._outbox, []
        return out

    # ------------------------------------------------------------------ sessions

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
            try:
                if (
                    limits is not None
                    and limits.by_host
                    and (rooms := limits.host_room(job)) is not None
                ):
                    within = await self._within_hosts(ctx, *rooms)
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
                    and (held := limits.check(job, ctx.journal, ctx.shared)) is not None
                ):
                    self._pend_limited(job, held, stats)
                    continue
                elif (
                    backfill is not None
                    and (held := await backfill.holds_back(job, ctx, scratch.now)) is not None
                ):
                    # It would delay a reservation (and under conservative
                    # backfill has one of its own now).
                    self._pend(1, (job,), held, stats, cached=False)
                    continue
                elif self._start(job, ctx, stats):
                    continue
            if self._fifo:
                stats.stopped_by_fifo = True
                self._fifo_stop = job
                return False
        return True

    async def _within_hosts(
        self, ctx: SchedContext, rooms: dict[str, int], held: PendReason
    ) -> bool | PendReason:
        """An attempt for a job that per-host limits keep to ``rooms`` slots on
        some hosts: those hosts look that full to it (tentative claims that are
        never committed). If it does not fit so, ``held`` when it would fit
        without them, else ``False`` (the attempt's own reason in ``ctx``)."""
        by_name = self.state.by_name
        for host, room in rooms.items():
            worker = by_name.get(host)
            if worker is not None:
                free = worker.slots - worker.used_slots
                if free > room:
                    ctx.slots[worker.index] = free - room
        allocate = self._dispatcher.allocate
        if await allocate(ctx):
            return True
        ctx.reset(ctx.job)
        return held if await allocate(ctx) else False

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
            self.state.commit(job, ctx.journal, ctx.shared, self.scratch.now)
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
