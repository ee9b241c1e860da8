"""Scheduler configuration."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BACKFILL_MODES", "FairshareParams", "SchedulerConfig"]

BACKFILL_MODES = ("none", "easy", "conservative")


@dataclass(frozen=True, slots=True)
class FairshareParams:
    """The ``fairshare`` picker's parameters (LSF's ``lsb.params`` names and
    defaults): a share account's dynamic priority is ``shares /
    (run_time·run_time_factor + (1 + job_slots)·run_job_factor)``, where
    ``run_time`` is its slot-hours of use, decayed so that an hour counts 0.1 h
    after ``hist_hours`` hours (0: no decay). The core has no CPU-time feed, so
    LSF's CPU_TIME_FACTOR term is 0 (``cpu_time_factor`` is kept for the day a
    usage event reports CPU time), as is FAIRSHARE_ADJUSTMENT_FACTOR's.
    ``recalc_interval``: seconds of the clock between two recalculations, when
    usage history enters every priority and the order is re-keyed (0: at every
    session); the running-slots term is always current."""

    cpu_time_factor: float = 0.7
    run_time_factor: float = 0.7
    run_job_factor: float = 3.0
    hist_hours: float = 5.0
    recalc_interval: float = 60.0

    def __post_init__(self) -> None:
        for name in (
            "cpu_time_factor",
            "run_time_factor",
            "run_job_factor",
            "hist_hours",
            "recalc_interval",
        ):
            value = getattr(self, name)
            if not (value >= 0 and value < float("inf")):
                raise ValueError(f"fairshare {name} must be a finite number >= 0, not {value!r}")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """How the core schedules. Plugin names are looked up in the registry.

    - ``picker``: default job order for queues without their own (``queue_config``).
    - ``sequential_allocator`` / ``parallel_allocator``: allocators for primaries
      of one task / more than one task.
    - ``strict_fifo``: a session stops at the first job that cannot start (FIFO
      simulators); by default a job that cannot start does not stop later ones (LSF).
    - ``unsatisfiable_cache``: the per-session cache of unsatisfiable requirements
      and fingerprint grouping; turning it off never changes which jobs start or
      where, only speed (a cache hit reports the original miss's pend category).
    - ``sleep_blocked_groups``: a group of jobs proven unsatisfiable stays out of
      later sessions until an event that could help it, or change why it
      pends, wakes it (see :mod:`xce_core._sleep`); never changes a decision,
      only what a session costs. Needs the cache; not used with strict FIFO.
    - ``backfill``: ``"none"`` (LSF's default: a job that cannot start does not
      hold back later ones), ``"easy"`` (the first job that cannot start gets
      a reservation from the running jobs' run limits; later jobs start only
      if they cannot delay it; see :mod:`xce_core._backfill`), or
      ``"conservative"`` (every blocked job, in policy order, up to
      ``backfill_depth`` of them, gets the earliest reservation that delays
      no earlier one; see :mod:`xce_core._conservative`). With backfill,
      ``strict_fifo`` is not used: a job that cannot start stops the in-order
      starts either way, and later jobs may only backfill.
    - ``fairshare``: the ``fairshare`` picker's factors and recalculation
      interval (:class:`FairshareParams`).
    - ``batch_size``: jobs per message from the picker task to the allocator task.
    - ``yield_every``: plan and host steps between looks at the pacing budget.
    - ``yield_interval``: seconds of session work between full yields to the
      event loop, looked at every ``yield_every`` steps (``0``: yield every
      ``yield_every`` steps). Other tasks on the loop wait at most about this
      long while a session runs; a cancellation from an enclosing scope
      arrives within it. Pacing never changes a decision.
    - ``session_interval``: for long-running consumers, run a session every so
      many seconds when something changed (``None``: only on ``session_begin``).
    """

    picker: str = "fcfs"
    sequential_allocator: str = "seqjob"
    parallel_allocator: str = "parjob"
    strict_fifo: bool = False
    unsatisfiable_cache: bool = True
    sleep_blocked_groups: bool = True
    backfill: str = "none"
    backfill_depth: int = 500
    fairshare: FairshareParams = FairshareParams()
    batch_size: int = 256
    yield_every: int = 64
    yield_interval: float = 0.001
    session_interval: float | None = None

    def __post_init__(self) -> None:
        if self.backfill_depth < 1:
            raise ValueError("backfill_depth must be at least 1")
        if self.backfill not in BACKFILL_MODES:
            raise ValueError(
                f"backfill must be one of {', '.join(BACKFILL_MODES)}, not {self.backfill!r}"
            )
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.yield_every < 1:
            raise ValueError("yield_every must be at least 1")
        if not 0 <= self.yield_interval < math.inf:
            raise ValueError("yield_interval must be a finite number of seconds, at least 0")
        if self.session_interval is not None and self.session_interval <= 0:
            raise ValueError("session_interval must be positive")
