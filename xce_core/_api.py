"""Embedding API for async controller processes, and helpers for tests.

.. code-block:: python

    async with xce_core.open_scheduler(SchedulerConfig()) as sched:
        await sched.send_batch(events)          # backpressure when the core is busy
        await sched.send(SessionBegin())
        async for decision in sched.decisions():
            ...

For tests: ``decisions = xce_core.run_events(events)`` (synchronous) or
``await xce_core.process_events(events)`` inside a running loop.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import final

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from events import Decision, InputEvent
from xce_core._clock import Clock
from xce_core._config import SchedulerConfig
from xce_core._core import SchedulerCore
from xce_core._loop import SchedulerLoop
from xce_core._registry import Registry
from xce_core.runtime import run_async

__all__ = ["Scheduler", "open_scheduler", "process_events", "run_events"]


class _Tick:
    """Internal: the interval timer asks for a session if something changed."""


_TICK = _Tick()
_Input = list[InputEvent] | _Tick


@final
class Scheduler:
    """A running scheduler inside :func:`open_scheduler`.

    Events are applied in the order sent; a ``session_begin`` runs a session
    before later events are applied. Decisions come out of :meth:`decisions` in
    order, handed over after every session and every batch of events.
    """

    def __init__(
        self,
        core: SchedulerCore,
        events: MemoryObjectSendStream[_Input],
        decisions: MemoryObjectReceiveStream[list[Decision]],
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
                stream.close()
                return
            except anyio.ClosedResourceError:
                return
            yield batch

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
) -> AsyncIterator[Scheduler]:
    """Run a scheduler core in the background for the duration of the block.

    ``buffer`` bounds the number of queued event messages (backpressure). The
    decision stream is unbounded: read it concurrently, or after the block.
    Leaving the block applies every event already sent (running any session they
    ask for), then ends the decision stream. With ``config.session_interval``
    set, a session also runs every that many seconds when something changed.
    """
    core = SchedulerCore(config, registry=registry, clock=clock)
    in_send, in_receive = anyio.create_memory_object_stream[_Input](buffer)
    out_send, out_receive = anyio.create_memory_object_stream[list[Decision]](math.inf)
    sched = Scheduler(core, in_send, out_receive)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(_consume, core, in_receive, out_send)
            interval = core.config.session_interval
            timer = anyio.CancelScope()
            if interval is not None:
                tg.start_soon(_interval_ticks, interval, in_send.clone(), timer)
            try:
                yield sched
            finally:
                timer.cancel()
                await in_send.aclose()
    finally:
        # Nothing left to read: release the stream (reading later just ends at once).
        if out_receive.statistics().current_buffer_used == 0:
            out_receive.close()


async def _consume(
    core: SchedulerCore,
    events: MemoryObjectReceiveStream[_Input],
    out: MemoryObjectSendStream[list[Decision]],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()

    async def hand_over(decisions: list[Decision]) -> None:
        # Nobody may read decisions any more; keep applying events anyway.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            out.send_nowait(decisions)

    loop = SchedulerLoop(core, hand_over)
    async with events, out:
        async for message in events:
            if isinstance(message, _Tick):
                await loop.tick()
            else:
                await loop.apply(message)


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
