"""``xce run``: the standalone event consumer.

Input events arrive as bytes (stdin, a file, or socket connections), are decoded
in chunks and fed to the core's :class:`~xce_core.SchedulerLoop`; decisions are
encoded and written out after every session and every input chunk, so a
controller talking to ``xce run`` through pipes sees each session's decisions at
once. :func:`consume` reads, decodes and writes, and does no I/O of its own
beyond the given stream(s), connections and ``write``. The click command
(:mod:`xce_core.cli._run_command`) only opens the endpoints and turns signals
into cancellation; serving connections (concurrency, idle timeout, limit,
replies) is :mod:`xce_core.cli._connections`. Faults the core survived are
logged with their tracebacks by :func:`log_internal_error` (``xce run`` sends
the log to stderr).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Protocol, final

import anyio
import anyio.abc
import msgspec

from events import (
    DEFAULT_MAX_FRAME,
    BadEvent,
    Decision,
    EventDecoder,
    EventEncoder,
    EventFormat,
    EventRejected,
    InputEvent,
)
from xce_core import SchedulerCore, SchedulerLoop
from xce_core.cli._connections import Batch, ConnectionServer
from xce_core.cli._endpoints import (
    CHUNK_SIZE,
    FdReceiveStream,
    FdWriter,
    parse_listen_address,
    stderr_line,
)
from xce_core.cli._state_dir import SnapshotSchedule

__all__ = [
    "EXIT_BAD_EVENT",
    "EXIT_IO_ERROR",
    "EXIT_OK",
    "FdReceiveStream",
    "FdWriter",
    "Observer",
    "consume",
    "log_internal_error",
    "parse_listen_address",
]

EXIT_OK: Final = 0
EXIT_IO_ERROR: Final = 1
EXIT_BAD_EVENT: Final = 2
# Decoded-but-unprocessed chunks the reader may run ahead of the core.
_QUEUE_DEPTH: Final = 4
# A final flush on cancellation must not hang forever on a reader that stopped.
_FLUSH_TIMEOUT_S: Final = 5.0
_log = logging.getLogger("xce.run")


# --------------------------------------------------------------------------- loop


class _Mark(enum.Enum):
    DONE = enum.auto()  # no more input
    TICK = enum.auto()  # --interval elapsed


_Message = Batch | _Mark


class Observer(Protocol):
    """What watches a consumer (``--metrics``): the items it applies and the
    decisions it hands over, on the event loop."""

    def observe_events(self, items: Iterable[InputEvent | BadEvent]) -> None: ...

    def observe_decisions(self, decisions: Iterable[Decision], core: SchedulerCore) -> None: ...


@final
@dataclass(slots=True)
class _Consumer:
    """Feeds decoded batches, in arrival order, to the scheduler loop, and writes
    what it hands over.

    Every method runs to completion before the next message is looked at, so the
    core has exactly one owner and never sees two sessions at once.
    """

    core: SchedulerCore
    write: Callable[[bytes], Awaitable[None]]
    encoder: EventEncoder
    strict: bool
    report: Callable[[str], None]
    # Input items still to drop: those a restored snapshot covers (--state-dir).
    skip: int = 0
    observer: Observer | None = None
    batch: Batch | None = None  # the batch being applied: its hand-overs are replies
    first: int = 0  # the core's index of that batch's first item
    unplaced: int = 0  # SchedulerCore.rejections_unplaced when last looked at
    loop: SchedulerLoop = field(init=False)

    def __post_init__(self) -> None:
        self.loop = SchedulerLoop(self.core, self._hand_over)

    async def handle(self, message: _Message) -> int | None:
        """Process one message; an exit status means stop (``--strict``)."""
        if isinstance(message, Batch):
            self.batch = message
            try:
                return await self._apply(message.items)
            finally:
                self.batch = None
                message.done()
        if message is _Mark.TICK:
            await self.loop.tick()
        return None

    async def _apply(self, items: list[InputEvent | BadEvent]) -> int | None:
        dropped = 0
        if self.skip:
            # Covered by the snapshot the core was restored from: the core
            # counts them already, and they must not be applied twice.
            dropped = min(self.skip, len(items))
            self.skip -= dropped
            items = items[dropped:]
            if not items:
                return None
        if self.observer is not None:
            self.observer.observe_events(items)
        # The core numbers events, so indexes keep counting across connections;
        # a rejection it raises names the index, and _hand_over the line.
        self.first = self.core.events_received - dropped
        bad = await self.loop.apply(items, strict=self.strict)
        if bad is None:
            return None
        self.report(f"xce run: {' '.join(bad.to_decision().error.split())} (--strict)")
        return EXIT_BAD_EVENT

    async def _hand_over(self, decisions: list[Decision]) -> None:
        """Write decisions; while a batch is applied, also hand them to it as
        replies, with the input line of each event the core rejected (the core
        knows only its index)."""
        batch = self.batch
        unplaced = self.core.rejections_unplaced
        if unplaced != self.unplaced:
            # Only when the core rejected something since the last look: a
            # session's decisions are not walked (B1's 500,000 would cost 46 ms).
            self.unplaced = unplaced
            if batch is not None and batch.lines is not None:
                decisions = [_with_line(d, batch, self.first) for d in decisions]
        if self.observer is not None:
            self.observer.observe_decisions(decisions, self.core)
        data = self.encoder.encode_many(decisions)
        if batch is not None:
            batch.reply(data)
        await self.write(data)


def _with_line(decision: Decision, batch: Batch, first: int) -> Decision:
    """``decision`` with the input line of the event it rejects, when the core
    raised it (``line`` unknown) for an event of ``batch``, whose first item
    had index ``first``."""
    if type(decision) is not EventRejected or decision.line is not None:
        return decision
    line = batch.line_of(decision.index - first) if decision.index >= first else None
    return decision if line is None else msgspec.structs.replace(decision, line=line)


async def consume(
    stream: anyio.abc.ByteReceiveStream
    | AsyncIterable[anyio.abc.ByteReceiveStream]
    | ConnectionServer,
    core: SchedulerCore,
    write: Callable[[bytes], Awaitable[None]],
    *,
    format: EventFormat,
    output_format: EventFormat | None = None,
    strict: bool = False,
    interval: float | None = None,
    max_frame: int = DEFAULT_MAX_FRAME,
    report: Callable[[str], None] = stderr_line,
    skip: int = 0,
    snapshots: SnapshotSchedule | None = None,
    observer: Observer | None = None,
) -> int:
    """Feed ``stream`` (or each stream of an async iterable of them, one after
    the other, or the connections of a :class:`ConnectionServer`, concurrently)
    to ``core``; returns the exit status.

    Each stream is read to its end (a partial last item is decoded or rejected
    there, never joined to the next stream), then closed: ownership passes to
    this function. Items are applied in order; each ``session_begin`` runs a
    session. With ``interval``, a session also runs every ``interval`` seconds
    if something changed. Decisions are encoded in ``output_format`` (default:
    ``format``) and passed to ``write`` after every session and every chunk
    read; ``write`` is awaited before anything else happens. Decisions flushed
    while a connection's batch is applied are also its replies (see
    :class:`~xce_core.cli._connections.Batch`). A server decodes with its own
    format and frame limit; ``format`` and ``max_frame`` here apply to streams.

    A malformed item becomes an ``event_rejected`` decision (``index`` counted
    by the core across all streams, ``line`` within its stream) and is skipped.
    With ``strict`` the first one ends consumption: its decision is written,
    ``report`` gets a one-line message and the result is ``EXIT_BAD_EVENT``.

    ``skip``: the first so many input items (of all streams, good or
    malformed) are dropped unapplied, as the snapshot ``core`` was restored
    from covers them. ``snapshots``: when to write snapshots (after a message,
    when due, and at the end of the input). ``observer`` sees the items applied
    and the decisions handed over (``--metrics``).

    Returns ``EXIT_OK`` when the input is exhausted (a server: with ``once``,
    when its connection ends). Cancelled, it stops the running session
    (decisions already committed stand), writes what was decided (shielded,
    bounded by a timeout) and re-raises. Errors of the streams, the listener
    or ``write`` propagate. A fault inside the core (a plugin or a bug raising)
    is not an error here: the core reports it as a decision and goes on (see
    :class:`~xce_core.SchedulerCore`).
    """
    consumer = _Consumer(
        core, write, EventEncoder(output_format or format), strict, report, skip, observer
    )
    send, receive = anyio.create_memory_object_stream[_Message](_QUEUE_DEPTH)
    status = EXIT_OK
    # receive closes after the task group: a reader blocked in send() is then
    # cancelled, never failed with BrokenResourceError.
    with receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_produce, stream, send, format, max_frame)
            if interval is not None:
                tg.start_soon(_tick, interval, send.clone())
            try:
                async for message in receive:
                    if message is _Mark.DONE:
                        if snapshots is not None:
                            await snapshots.maybe(core, force=True)
                        break
                    stop = await consumer.handle(message)
                    if stop is not None:
                        status = stop
                        break
                    if snapshots is not None:
                        await snapshots.maybe(core)
            except anyio.get_cancelled_exc_class():
                core.cancel_session()
                with anyio.move_on_after(_FLUSH_TIMEOUT_S, shield=True):
                    await consumer.loop.flush()
                raise
            tg.cancel_scope.cancel()
    return status


async def _produce(
    source: anyio.abc.ByteReceiveStream
    | AsyncIterable[anyio.abc.ByteReceiveStream]
    | ConnectionServer,
    send: anyio.abc.ObjectSendStream[_Message],
    format: EventFormat,
    max_frame: int,
) -> None:
    async with send:
        if isinstance(source, ConnectionServer):
            await source.serve(send.send)
        elif isinstance(source, anyio.abc.ByteReceiveStream):
            await _read_stream(source, send, EventDecoder(format, max_frame=max_frame))
        else:
            async for stream in source:
                await _read_stream(stream, send, EventDecoder(format, max_frame=max_frame))
        await send.send(_Mark.DONE)


async def _read_stream(
    stream: anyio.abc.ByteReceiveStream,
    send: anyio.abc.ObjectSendStream[_Message],
    decoder: EventDecoder[InputEvent],
) -> None:
    """Send the batches of ``stream`` (closed at the end), its final item included."""
    async with stream:
        while True:
            try:
                chunk = await stream.receive(CHUNK_SIZE)
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                break
            except anyio.BrokenResourceError:  # a peer reset is its end, not ours
                break
            items = decoder.feed(chunk)
            if items:
                await send.send(Batch(items, lines=decoder.lines()))
    rest = decoder.close()
    if rest:
        await send.send(Batch(rest, lines=decoder.lines()))


async def _tick(interval: float, send: anyio.abc.ObjectSendStream[_Message]) -> None:
    # A blocking send: ticks never pile up behind a busy core, nor starve.
    async with send:
        while True:
            await anyio.sleep(interval)
            await send.send(_Mark.TICK)


def log_internal_error(exc: Exception, decision: Decision) -> None:
    """Log a fault the core survived, with its traceback, and the decision that
    reported it, on the ``xce.run`` logger (an ``on_internal_error`` hook)."""
    _log.error(
        "internal error, reported as %s", msgspec.json.encode(decision).decode(), exc_info=exc
    )
