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

from events import Decision
from xce_core._clock import Clock
from xce_core._errors import XceError
from xce_core._faults import InternalErrorHook
from xce_core._intake import RUN_END, RunEnd
from xce_core._model import PENDING
from xce_core._registry import Registry
from xce_core._session_run import SessionRunner
from xce_core._snapshot import (
    CoreParts,
    Counters,
    config_of,
    load_snapshot,
    read_snapshot,
    write_snapshot,
)

__all__ = ["RUN_END", "RunEnd", "SchedulerCore"]


class SchedulerCore(SessionRunner):
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

    # ------------------------------------------------------------------ what a driver reads

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

    # ------------------------------------------------------------------ decisions

    def take_decisions(self) -> list[Decision]:
        """Decisions made since the last call, in order (the outbox is emptied)."""
        out, self._outbox = self._outbox, []
        return out
