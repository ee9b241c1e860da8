"""Serving ``xce run --listen``: concurrent connections feeding the one consumer.

The rules (the README's ``xce run`` section states them for users):

- **Concurrency.** Every connection is read in its own task with its own
  decoder (framing, line numbers and a partial item are per connection). What
  one read completes is a :class:`Batch`; batches reach the consumer, and so
  the core, in the order they were read. A connection reads again only once
  the core has applied its previous batch, so the queue holds at most one
  batch per connection and a busy client cannot starve the others.
- **Idle timeout.** A connection that sends nothing for ``idle_timeout``
  seconds, while none of its events wait for the core, is closed with a note
  on stderr; so is one that leaves a reply unread that long. Its partial last
  item is decoded (or rejected) as at end of input.
- **Connection limit.** At most ``max_connections`` connections are served at
  once; one beyond that is sent an ``event_rejected`` (``index`` -1) saying so,
  then closed, with a note on stderr. With ``once``, the first connection is
  the only one served; the server stops when it ends.
- **Replies.** With ``reply``, every decision flushed while the core applies
  a connection's batch goes back to that connection as well as to the main
  output: the rejections of its events, and everything decided in the
  sessions its ``session_begin`` events ran (allocations of other clients'
  jobs included). Decisions of ``--interval`` sessions go to the main output
  only. Replies are queued without blocking the core; a connection with more
  than :data:`REPLY_BACKLOG` bytes of replies unread is closed.
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, final

import anyio
import anyio.abc
from anyio.abc import SocketAttribute, SocketListener, SocketStream

from events import BadEvent, EventDecoder, EventEncoder, EventFormat, EventRejected, InputEvent
from xce_core.cli._endpoints import CHUNK_SIZE, format_address, stderr_line

__all__ = ["REPLY_BACKLOG", "Batch", "ConnectionServer"]

REPLY_BACKLOG: Final = 16 << 20
"""Bytes of replies a connection may leave unread before it is closed."""
# A refusal, or the last replies at shutdown, must not wait long on a peer that
# does not read.
_GOODBYE_TIMEOUT_S: Final = 1.0


@final
class Batch:
    """Items decoded from one read, applied by the consumer as a unit.

    The consumer calls :meth:`reply` with every block of encoded decisions it
    flushes while applying the items, then :meth:`done` (always, even when it
    stops early). Both are synchronous, never block and are no-ops for a batch
    read from stdin or a file (``connection=None``).
    """

    __slots__ = ("_connection", "_done", "items", "lines")

    def __init__(
        self,
        items: list[InputEvent | BadEvent],
        connection: _Connection | None = None,
        lines: list[range] | None = None,
    ) -> None:
        self.items = items
        # The items' input lines (NDJSON: EventDecoder.lines), for the
        # rejections the core raises, which know only an event's index.
        self.lines = lines
        self._connection = connection
        self._done = anyio.Event()

    def line_of(self, position: int) -> int | None:
        """The input line of ``items[position]``, when known."""
        if self.lines is None:
            return None
        for run in self.lines:
            if position < len(run):
                return run[position]
            position -= len(run)
        return None

    def reply(self, data: bytes) -> None:
        """Queue ``data`` (encoded decisions) for the connection, with ``--reply``."""
        if self._connection is not None:
            self._connection.reply(data)

    def done(self) -> None:
        """The consumer has finished with this batch (idempotent)."""
        self._done.set()

    async def wait_done(self) -> None:
        await self._done.wait()


@final
class _Connection:
    """One served connection: its name, its cancel scope and its reply queue."""

    __slots__ = (
        "_backlog",
        "_finished",
        "_queue",
        "_ready",
        "_report",
        "closed",
        "name",
        "replies",
        "scope",
    )

    def __init__(self, name: str, replies: bool, report: Callable[[str], None]) -> None:
        self.name = name
        self.replies = replies
        self._report = report
        self.scope = anyio.CancelScope()
        self._queue: deque[bytes] = deque()
        self._backlog = 0  # reply bytes queued or being sent
        self._ready = anyio.Event()
        self._finished = False
        self.closed = False

    def reply(self, data: bytes) -> None:
        if not self.replies or self.closed:
            return
        if self._backlog > REPLY_BACKLOG:
            self.close(f"more than {REPLY_BACKLOG} bytes of replies unread")
            return
        self._queue.append(data)
        self._backlog += len(data)
        self._ready.set()

    def close(self, reason: str) -> None:
        """Close the connection now, with a note on stderr (idempotent)."""
        if not self.closed:
            self.closed = True
            self._report(f"xce run: closing {self.name}: {reason}")
            self.scope.cancel()

    def finish(self) -> None:
        """No more replies will come: the writer returns once the queue is sent."""
        self._finished = True
        self._ready.set()

    def take_replies(self) -> bytes:
        data = b"".join(self._queue)
        self._queue.clear()
        return data

    async def next_replies(self) -> bytes | None:
        """Wait for queued replies and take them; ``None`` once finished and sent."""
        while not self._queue:
            if self._finished:
                return None
            self._ready = anyio.Event()
            await self._ready.wait()
        return self.take_replies()

    def sent(self, size: int) -> None:
        self._backlog -= size


@final
class ConnectionServer:
    """Accepts connections on ``listener`` and serves them concurrently.

    ``idle_timeout`` is in seconds (``None``: no timeout). Decoded batches go
    to the ``send`` callable given to :meth:`serve`; see the module docstring
    for the rules. Not reusable: :meth:`serve` runs once.
    """

    def __init__(
        self,
        listener: SocketListener,
        *,
        format: EventFormat,
        output_format: EventFormat,
        max_frame: int,
        idle_timeout: float | None,
        max_connections: int,
        reply: bool = False,
        once: bool = False,
        report: Callable[[str], None] = stderr_line,
    ) -> None:
        self._listener = listener
        self._format: EventFormat = format
        self._encoder = EventEncoder(output_format)
        self._max_frame = max_frame
        self._idle = idle_timeout
        self._max_connections = max_connections
        self._reply = reply
        self._once = once
        self._report = report
        self._open = 0
        self._accepted = 0

    async def serve(self, send: Callable[[Batch], Awaitable[None]]) -> None:
        """Accept and serve connections until cancelled or, with ``once``, until
        the first connection has ended. Listener errors propagate."""
        async with anyio.create_task_group() as tg:
            while True:
                stream = await self._listener.accept()
                self._accepted += 1
                name = _describe(stream, self._accepted)
                if self._once and self._accepted > 1:
                    tg.start_soon(self._refuse, stream, name, "serving one connection (--once)")
                elif self._open >= self._max_connections:
                    reason = f"limit of {self._max_connections} open connection(s) reached"
                    tg.start_soon(self._refuse, stream, name, reason + " (--max-connections)")
                else:
                    self._open += 1
                    tg.start_soon(self._serve_one, stream, name, send, tg.cancel_scope)

    async def _serve_one(
        self,
        stream: SocketStream,
        name: str,
        send: Callable[[Batch], Awaitable[None]],
        server_scope: anyio.CancelScope,
    ) -> None:
        connection = _Connection(name, self._reply, self._report)
        try:
            async with stream:
                try:
                    with connection.scope:
                        async with anyio.create_task_group() as tg:
                            if self._reply:
                                tg.start_soon(self._write_replies, stream, connection)
                            await self._read(stream, connection, send)
                            connection.finish()
                finally:
                    if connection.replies and not connection.closed:
                        # Shutdown (a signal, --strict): what was decided still goes out.
                        with anyio.move_on_after(_GOODBYE_TIMEOUT_S, shield=True):
                            await _send_quietly(stream, connection.take_replies())
        finally:
            connection.closed = True
            self._open -= 1
            if self._once:
                server_scope.cancel()

    async def _read(
        self,
        stream: SocketStream,
        connection: _Connection,
        send: Callable[[Batch], Awaitable[None]],
    ) -> None:
        decoder = EventDecoder(self._format, max_frame=self._max_frame)
        idle = self._idle if self._idle is not None else float("inf")
        while True:
            chunk: bytes | None = None
            with anyio.move_on_after(idle) as timer:
                # A reset is the peer's end of input, not an error of ours.
                with contextlib.suppress(
                    anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
                ):
                    chunk = await stream.receive(CHUNK_SIZE)
            if timer.cancelled_caught:
                self._report(f"xce run: closing {connection.name}: idle for {idle:g} s")
            items = decoder.close() if chunk is None else decoder.feed(chunk)
            if items:
                batch = Batch(items, connection, decoder.lines())
                await send(batch)
                await batch.wait_done()
            if chunk is None:
                return

    async def _write_replies(self, stream: SocketStream, connection: _Connection) -> None:
        idle = self._idle if self._idle is not None else float("inf")
        while (data := await connection.next_replies()) is not None:
            with anyio.move_on_after(idle) as timer:
                try:
                    await stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    connection.close(f"cannot send replies ({exc.__class__.__name__})")
                    return
            if timer.cancelled_caught:
                connection.close(f"replies left unread for {idle:g} s")
                return
            connection.sent(len(data))

    async def _refuse(self, stream: SocketStream, name: str, reason: str) -> None:
        self._report(f"xce run: refusing {name}: {reason}")
        refusal = EventRejected(index=-1, error=f"connection refused: {reason}")
        async with stream:
            with anyio.move_on_after(_GOODBYE_TIMEOUT_S):
                await _send_quietly(stream, self._encoder.encode(refusal))


async def _send_quietly(stream: SocketStream, data: bytes) -> None:
    """Send ``data`` if the peer is still there; a gone peer is no error here."""
    if data:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await stream.send(data)


def _describe(stream: SocketStream, number: int) -> str:
    """``connection 3 (tcp://127.0.0.1:50022)``; Unix peers have no address."""
    try:
        family = stream.extra(SocketAttribute.family)
        address = stream.extra(SocketAttribute.remote_address)
    except anyio.TypedAttributeLookupError:  # pragma: no cover - every socket has both
        return f"connection {number}"
    if not address:
        return f"connection {number}"
    kind = "unix" if family == getattr(socket, "AF_UNIX", None) else "tcp"
    return f"connection {number} ({format_address(kind, address)})"
