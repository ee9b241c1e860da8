"""Scheduler configuration."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKFILL_MODES", "SchedulerConfig"]

BACKFILL_MODES = ("none", "easy", "conservative")


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
    - ``batch_size``: jobs per message from the picker task to the allocator task.
    - ``yield_every``: iterator steps between full yields to the event loop.
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
    batch_size: int = 256
    yield_every: int = 64
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
        if self.session_interval is not None and self.session_interval <= 0:
            raise ValueError("session_interval must be positive")
