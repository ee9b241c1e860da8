"""Injected time: the core never reads the wall clock for scheduling decisions."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "MonotonicClock", "VirtualClock"]


class Clock(Protocol):
    """Source of "now" in seconds. Only differences between readings are meaningful."""

    def now(self) -> float: ...


class MonotonicClock:
    """Real time from :func:`time.monotonic` (the default outside the simulator)."""

    def now(self) -> float:
        return time.monotonic()


class VirtualClock:
    """Time that moves only when told to (simulators and tests). Never sleeps."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, when: float) -> None:
        """Move time forward to ``when``; moving backwards raises ``ValueError``."""
        if when < self._now:
            raise ValueError(f"virtual time cannot go back from {self._now} to {when}")
        self._now = when
