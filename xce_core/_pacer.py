"""Pacing a session: the budget of steps and time between its yields to the loop.

Every plan and host step of a session calls :meth:`Pacer.tick` (Req 2.6); see
:class:`Pacer` for when a step yields, and :class:`SessionInterrupted` for how
an inline session stops after ``cancel_session()``.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter

import anyio.lowlevel

__all__ = ["Pacer", "SessionInterrupted"]


class SessionInterrupted(BaseException):
    """Raised by :meth:`Pacer.pause` in a session that ``cancel_session()``
    interrupted and that runs without a cancel scope of its own (an inline
    session, see ``SchedulerCore.run_session``). A ``BaseException``, like a
    cancellation, so no ``except Exception`` on the way takes it for a fault;
    ``run_session`` catches it."""


class Pacer:
    """The budget behind every plan and host step of a session.

    Each step calls :meth:`tick`: a counter increment and a flag test, no await.
    Every ``every`` steps (``SchedulerConfig.yield_every``) ``tick`` looks at the
    budget: with no ``interval`` it tells the caller to await :meth:`pause`, which
    yields to the loop and delivers any pending cancellation, or
    :class:`SessionInterrupted` once the session was interrupted. With an
    ``interval`` (``SchedulerConfig.yield_interval``, seconds on ``clock``) it
    asks only once that long has passed since the session began or last
    yielded: Req 2.6's "every N steps or T µs", so a session of wide jobs does
    not pay a loop round trip every few microseconds of work (about 7% of the
    replay of benchmarks/bench_simulate_big.py), and other tasks still wait
    at most ``interval`` plus ``every`` steps. Only a session run in one task
    uses the interval (:meth:`restart`): in one run as a picker task and an
    allocator task, where the allocator yields decides how far the picker has
    run ahead, which decides whether a failed shape's later jobs are pended
    together or one by one, so the order of decisions; a budget in time would
    make that order depend on the machine's speed. At the first step after
    ``cancel_session()`` set :attr:`interrupt`, ``tick`` asks at once. So a
    step is a cancellation point only when ``tick`` says so:
    ``cancel_session()`` stops a session at its next step, while a cancellation
    from an enclosing scope arrives at the next budgeted checkpoint or at any
    other await of the session, whichever comes first.
    """

    __slots__ = ("budget", "clock", "count", "due", "every", "interrupt", "interval")

    def __init__(
        self, every: int = 64, interval: float = 0.0, clock: Callable[[], float] = perf_counter
    ) -> None:
        self.every = every
        self.interval = interval
        self.clock = clock
        self.count = 0
        self.due = 0.0
        self.interrupt = False
        self.budget = interval  # this session's interval: 0 for steps alone

    def restart(self, timed: bool = True) -> None:
        """Start a session's budget afresh: no step counted, not interrupted, the
        interval counted from now; ``timed=False``: steps alone this session
        (one run as two tasks, see the class docstring)."""
        self.count = 0
        self.interrupt = False
        self.budget = self.interval if timed else 0.0
        if self.budget:
            self.due = self.clock() + self.budget

    def tick(self) -> bool:
        """Count one step without awaiting; ``True`` means the caller must now
        await :meth:`pause` (budget spent, or the session was cancelled: then
        every step says so until the session ends)."""
        self.count += 1
        if self.count >= self.every or self.interrupt:
            self.count = 0
            return not self.budget or self.interrupt or self.clock() >= self.due
        return False

    async def pause(self) -> None:
        """The checkpoint a :meth:`tick` asked for: ``anyio.lowlevel.checkpoint()``,
        then :class:`SessionInterrupted` if ``cancel_session()`` was called (a
        session in a cancel scope of its own is cancelled by the checkpoint
        first)."""
        await anyio.lowlevel.checkpoint()
        if self.interrupt:
            raise SessionInterrupted
        if self.budget:
            self.due = self.clock() + self.budget

    def burst(self, steps: int) -> int:
        """Right after :meth:`tick`: how many of the next ``steps`` steps, the one
        just ticked included, may run before the budget is looked at again (one
        while a cancellation is pending). The caller runs them without ticking,
        then counts the extra ones with :meth:`spend`: the same checkpoints as a
        tick per step."""
        if self.interrupt:
            return 1
        return min(steps, self.every - self.count)

    def spend(self, steps: int) -> None:
        """Count ``steps`` steps run within a :meth:`burst` after its first."""
        self.count += steps
