"""Embedding API for async controller processes, and helpers for tests.

.. code-block:: python

    async with xce_core.open_scheduler(SchedulerConfig()) as sched:
        await sched.send_batch(events)          # backpressure when the core is busy
        await sched.send(SessionBegin())
        async for decision in sched.decisions():  # backpressure when read slowly
            ...

For tests: ``decisions = xce_core.run_events(events)`` (synchronous) or
``await xce_core.process_events(events)`` inside a running loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final, final

import anyio
import anyio.lowlevel
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from events import Decision, InputEvent
from xce_core._clock import Clock
from xce_core._config import SchedulerConfig
from xce_core._core import SchedulerCore
from xce_core._faults import InternalErrorHook
from xce_core._loop import SchedulerLoop
from xce_core._registry import Registry
from xce_core.runtime import run_async

__all__ = [
    "DECISION_BUFFER",
    "Scheduler",
    "SchedulerStatistics",
    "open_scheduler",
    "process_events",
    "run_events",
]

DECISION_BUFFER: Final = 10_000
"""Default bound of :func:`open_scheduler`'s decision stream, in decisions."""


class _Tick:
    """Internal: the interval timer asks for a session if something changed."""


_TICK = _Tick()
_Input = list[InputEvent] | _Tick


@final
@dataclass(frozen=True, slots=True)
class SchedulerStatistics:
    """A snapshot of a :class:`Scheduler`'s buffers.

    ``decisions_buffered``: decisions handed over by the core and not yet taken
    by a reader; ``decisions_peak``: the most there ever were; ``decision_limit``:
    the bound (``None``: unbounded). ``event_messages_buffered``: sent event
    messages (a batch is one) not yet taken by the core.
    """

    decisions_buffered: int
    decisions_peak: int
    decision_limit: int | None
    event_messages_buffered: int


@final
class _DecisionBuffer:
    """The decision stream: whole hand-overs of decisions, bounded in decisions.

    One writer (the loop's sink, :meth:`put`) and any number of readers
    (:meth:`receive`). :meth:`put` waits while ``limit`` or more decisions wait
    to be read, then adds its whole hand-over, so at most ``limit - 1`` plus one
    hand-over are ever buffered. ``buffered`` and ``peak`` count decisions
    waiting now and at most; read them, never set them.
    """

    __slots__ = ("_batches", "_closed", "_has_data", "_has_room", "buffered", "limit", "peak")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.buffered = 0
        self.peak = 0
        self._batches: deque[list[Decision]] = deque()
        self._closed = False
        self._has_data: anyio.Event | None = None
        self._has_room: anyio.Event | None = None

    def _full(self) -> bool:
        return self.limit is not None and self.buffered >= self.limit

    async def put(self, batch: list[Decision]) -> None:
        """Add ``batch`` whole, once fewer than ``limit`` decisions wait. Always a
        cancellation point; cancelled while waiting, it adds nothing."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        while self._full():
            if self._has_room is None:
                self._has_room = anyio.Event()
            await self._has_room.wait()
        self._batches.append(batch)
        self.buffered += len(batch)
        if self.buffered > self.peak:
            self.peak = self.buffered
        self._wake_readers()

    def close(self) -> None:
        """No more hand-overs: readers get what is buffered, then the end. Idempotent."""
        self._closed = True
        self._wake_readers()

    async def receive(self) -> list[Decision]:
        """The next hand-over, whole, waiting for one. Always a cancellation point.
        Raises ``anyio.EndOfStream`` once closed and read to the end."""
        await anyio.lowlevel.checkpoint()
        while not self._batches:
            if self._closed:
                raise anyio.EndOfStream
            if self._has_data is None:
                self._has_data = anyio.Event()
            await self._has_data.wait()
        batch = self._batches.popleft()
        self.buffered -= len(batch)
        if self._has_room is not None and not self._full():
            self._has_room.set()
            self._has_room = None
        return batch

    def _wake_readers(self) -> None:
        if self._has_data is not None:
            self._has_data.set()
            self._has_data = None


@final
class Scheduler:
    """A running scheduler inside :func:`open_scheduler`.

    Events are applied in the order sent; a ``session_begin`` runs a session
    before later events are applied. Decisions come out of :meth:`decisions` in
    order, handed over after every session and every batch of events.

    Both directions are bounded. Sending waits while the core is behind (the
    input buffer is full). Reading slowly makes the core wait: once the decision
    stream holds its bound, the core finishes handing over the session or batch
    it is on (a session's decisions are made whole, then handed over in one
    piece) and then waits before it applies the next event or runs the next
    session; its input buffer then fills and senders wait in turn. So the task
    that reads decisions should not itself wait in :meth:`send` for the core:
    the two would wait on each other.
    """

    def __init__(
        self,
        core: SchedulerCore,
        events: MemoryObjectSendStream[_Input],
        decisions: _DecisionBuffer,
    ) -> None:
        self.core = core
        self._events = events
        self._decisions = decisions

    async def send(self, event: InputEvent) -> None:
        """Queue one event. Waits (backpressure) while the input buffer is full."""
        await self._events.send([event])

    async def send_batch(self, events: Iterable[InputEvent]) -> None:
        """Queue several events as one message (much cheaper per event than :meth:`send`)."""
        batch = list(events)
        if batch:
            await self._events.send(batch)

    async def decisions(self) -> AsyncGenerator[Decision, None]:
        """Every decision, in order, until the scheduler is closed (then the
        iteration ends once the decisions made so far are read)."""
        async for batch in self.decision_batches():
            for decision in batch:
                yield decision

    async def decision_batches(self) -> AsyncGenerator[list[Decision], None]:
        """Decisions in the pieces the core handed them over: one per session
        (its decisions and ``session_end``, whole) and one per batch of events
        for what applying it decided."""
        stream = self._decisions
        while True:
            try:
                batch = await stream.receive()
            except anyio.EndOfStream:
                return
            yield batch

    def statistics(self) -> SchedulerStatistics:
        """How full the buffers are now (a snapshot)."""
        decisions = self._decisions
        return SchedulerStatistics(
            decisions_buffered=decisions.buffered,
            decisions_peak=decisions.peak,
            decision_limit=decisions.limit,
            event_messages_buffered=self._events.statistics().current_buffer_used,
        )

    def cancel_session(self) -> None:
        """Cancel the running session (committed allocations stand)."""
        self.core.cancel_session()


@asynccontextmanager
async def open_scheduler(
    config: SchedulerConfig | None = None,
    *,
    registry: Registry | None = None,
    clock: Clock | None = None,
    buffer: int = 64,
    decision_buffer: int | None = DECISION_BUFFER,
    on_internal_error: InternalErrorHook | None = None,
) -> AsyncIterator[Scheduler]:
    """Run a scheduler core in the background for the duration of the block.

    ``buffer`` bounds the number of queued event messages (backpressure on
    senders). ``decision_buffer`` bounds the decisions waiting to be read
    (backpressure on the core: see :class:`Scheduler`); at most that many, plus
    one session's or batch's worth, are ever buffered. ``None`` makes it
    unbounded. Read decisions concurrently, or after the block when they fit.
    Leaving the block applies every event already sent (running any session they
    ask for), then ends the decision stream. With ``config.session_interval``
    set, a session also runs every that many seconds when something changed.
    ``on_internal_error`` is handed to :class:`SchedulerCore` (log faults there).
    Raises ``ValueError`` for a ``decision_buffer`` below 1.
    """
    if decision_buffer is not None and decision_buffer < 1:
        raise ValueError(f"decision_buffer must be at least 1, got {decision_buffer}")
    core = SchedulerCore(
        config, registry=registry, clock=clock, on_internal_error=on_internal_error
    )
    in_send, in_receive = anyio.create_memory_object_stream[_Input](buffer)
    decisions = _DecisionBuffer(decision_buffer)
    sched = Scheduler(core, in_send, decisions)
    async with anyio.create_task_group() as tg:
        await tg.start(_consume, SchedulerLoop(core, decisions.put), in_receive, decisions)
        interval = core.config.session_interval
        timer = anyio.CancelScope()
        if interval is not None:
            tg.start_soon(_interval_ticks, interval, in_send.clone(), timer)
        try:
            yield sched
        finally:
            timer.cancel()
            await in_send.aclose()


async def _consume(
    loop: SchedulerLoop,
    events: MemoryObjectReceiveStream[_Input],
    decisions: _DecisionBuffer,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    try:
        async with events:
            async for message in events:
                if isinstance(message, _Tick):
                    await loop.tick()
                else:
                    await loop.apply(message)
    finally:
        decisions.close()


async def _interval_ticks(
    interval: float, send: MemoryObjectSendStream[_Input], scope: anyio.CancelScope
) -> None:
    with scope:
        async with send:
            while True:
                await anyio.sleep(interval)
                await send.send(_TICK)


async def process_events(
    events: Iterable[InputEvent],
    config: SchedulerConfig | None = None,
    *,
    registry: Registry | None = None,
    core: SchedulerCore | None = None,
) -> list[Decision]:
    """Apply ``events`` in order (running a session at each ``session_begin``) and
    return every decision. Pass ``core`` to continue with an existing one."""
    decisions: list[Decision] = []

    async def collect(batch: list[Decision]) -> None:
        decisions.extend(batch)

    await SchedulerLoop(core or SchedulerCore(config, registry=registry), collect).apply(events)
    return decisions


def run_events(
    events: Iterable[InputEvent],
    config: SchedulerConfig | None = None,
    *,
    registry: Registry | None = None,
) -> list[Decision]:
    """Synchronous :func:`process_events` for tests and scripts (on uvloop when
    available). Must not be called from inside a running event loop."""
    events = list(events)

    async def main() -> list[Decision]:
        return await process_events(events, config, registry=registry)

    return run_async(main, gc_tuning=False)
