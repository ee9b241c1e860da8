"""Applying input events to a core: the synchronous half of :class:`SchedulerCore`.

Every event goes through :meth:`EventIntake.apply` (a run of submissions
through :meth:`EventIntake.submit_run`); during a session it is queued, and
applied when the session ends. Bad input never raises: an inconsistent event
becomes an ``event_rejected`` decision, an invalid job a ``job_rejected`` one.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from msgspec import UNSET

from events import (
    BadEvent,
    EventRejected,
    FairshareConfig,
    InputEvent,
    JobCancelled,
    JobFinished,
    JobRejected,
    JobSubmitted,
    Limit,
    LimitsConfig,
    QueueConfig,
    SessionBegin,
    SharedResource,
    WorkerDown,
    WorkerRemoved,
    WorkerUp,
)
from xce_core._core_base import CoreBase, QueueSeen
from xce_core._errors import XceError
from xce_core._faults import forget_partial_job, internal_error_text, queue_config_or_nothing
from xce_core._limits import queue_limits
from xce_core._model import _EMPTY, PENDING, RUNNING, Job, JobShape, Origin
from xce_core._state import EventInconsistent

__all__ = ["RUN_END", "EventIntake", "RunEnd"]


class RunEnd(enum.Enum):
    """What :meth:`SchedulerCore.submit_run` returns when its items ran out."""

    END = enum.auto()


RUN_END: Final = RunEnd.END


class EventIntake(CoreBase):
    """Input events applied to a core's parts (see the module docstring)."""

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

    def _queue_seen(self, name: str) -> QueueSeen:
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
