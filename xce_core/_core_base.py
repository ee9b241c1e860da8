"""The scheduler core's parts, built once: what :class:`SchedulerCore` holds.

:class:`CoreBase` makes every part of a core (the state, the pending queue,
the session scratch, limits, fairshare, the outbox) and the one way a fault is
reported. The core's behaviour is layered on it, each layer using only those
below: :class:`~xce_core._intake.EventIntake` applies input events,
:class:`~xce_core._session_run.SessionRunner` runs sessions (and applies the
events queued while one ran), :class:`~xce_core._core.SchedulerCore` is the
public face (snapshots, decisions, what a driver reads).
"""

from __future__ import annotations

import functools
from typing import Any, TypeAlias

import anyio
import anyio.lowlevel

from events import Decision, InputEvent, Limit
from xce_core._admission import ShapeCache
from xce_core._cache import UnsatisfiableCache
from xce_core._clock import Clock, MonotonicClock
from xce_core._config import SchedulerConfig
from xce_core._dispatch import Dispatcher
from xce_core._fairshare import Fairshare
from xce_core._faults import InternalErrorHook
from xce_core._limits import Limits
from xce_core._model import Job
from xce_core._order import OrderKeys, QueueKeys
from xce_core._pacer import Pacer
from xce_core._pending import PendingQueue
from xce_core._registry import Registry, default_registry
from xce_core._reservations import Reservations
from xce_core._results import SessionStats
from xce_core._select_memo import StaticSelectMemo
from xce_core._session import SessionScratch
from xce_core._state import ClusterState

__all__ = ["CoreBase", "QueueSeen"]

# A queue's order keys, and the same again if its jobs are placed by shape.
QueueSeen: TypeAlias = tuple["QueueKeys | functools.partial[tuple[Any, ...]]", "QueueKeys | None"]


class CoreBase:
    """A core's parts (see the module docstring); :class:`SchedulerCore`
    documents the arguments."""

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
        self._admission: tuple[bool, dict[str, QueueSeen]] | None = None
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

    def _fault(self, exc: Exception, decision: Decision) -> None:
        """Report a fault the core survives: ``decision`` (which says so) to the
        outbox, and ``exc`` with it to the ``on_internal_error`` hook."""
        self._outbox.append(decision)
        if self._on_internal_error is not None:
            self._on_internal_error(exc, decision)
