"""Publishing decisions of ``xce run --nats``: pipelined, in order, exactly once.

Every decision is one message on the decisions subject with three headers:

- ``Nats-Msg-Id``: its deterministic id (:func:`decision_msg_id`), so the
  server's deduplication drops a decision published again within
  ``duplicate_window``;
- ``Xce-Pos``: its position, ``<input sequence>.<ordinal>``: where it stands
  in the deterministic sequence of decisions;
- ``Nats-Expected-Last-Sequence``: the stream sequence of the decision before
  it. The server stores a message only right after its predecessor, so the
  decisions stream can hold no gap, no reordering and no copy, however many
  messages are in flight, and a former holder of the lease still publishing
  is refused.

Up to ``publish_window`` messages are in flight; one in ``_ACK_EVERY`` (and the
last of a hand-over) asks for an ack, and acks are read in bulk. When
an ack reports an error, or none arrives for ``_STALL_S`` (a server restart),
or the connection comes back, the publisher **resyncs**: it reads the last
message of the decisions stream, drops what its position shows stored, and
sends the rest again. A restarted service does the same first, so the
decisions it computes again while replaying are not sent twice.

The messages of a window are written as the client would write them, but
built here, up to ``_YIELD_EVERY`` at a time into one block handed to the
client in one call (:func:`frame_writer`): one publish call per decision, each
encoding a header dict, was the largest part of the service's CPU
(benchmarks/bench_nats.py). When the client lacks what that needs, or is not
connected, each message goes through ``Client.publish`` as before.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Final, Protocol, final

import anyio
import anyio.lowlevel
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from events import Decision, EventEncoder
from xce_core import XceError
from xce_core.cli._nats_streams import POSITION_HEADER, NatsOptions

__all__ = ["DecisionPublisher", "Position", "frame_writer", "hpub_frame", "parse_position"]

Position = tuple[int, int]
"""``(input stream sequence, ordinal among the decisions it caused)``."""
_NOTHING: Final[Position] = (0, -1)
# Every this many messages, and the last one sent, ask for an ack; an ack of a
# message proves its predecessors stored (each was checked against the one
# before), and one refused breaks the chain, so the next acked message reports
# it. Acks are most of the client's work otherwise.
_ACK_EVERY: Final = 64
# No ack for this long while messages are in flight: resync.
_STALL_S: Final = 10.0
_YIELD_EVERY: Final = 1000
_log = logging.getLogger("xce.run")


def _nothing() -> None:
    pass


def parse_position(text: str) -> Position:
    seq, _, ordinal = text.partition(".")
    return int(seq), int(ordinal)


def hpub_frame(
    subject: str, reply: str, msg_id: str, last_seq: int, position: Position, payload: bytes
) -> bytes:
    """The ``HPUB`` command ``Client.publish(subject, payload, reply, headers)``
    sends for a decision with its three headers (same headers, same order).

    The msg id is stripped as the client strips header values; it holds no CR
    or LF (:func:`decision_msg_id`). Without a reply, the client's form leaves
    two spaces; here there is one."""
    header = _HEADER % (msg_id.strip().encode(), last_seq, position[0], position[1])
    size = len(header)
    target = f"{subject} {reply}" if reply else subject
    # Bytes formatting, one % a part: a third less than building the text and
    # encoding it (benchmarks/bench_nats.py sends 500,000 decisions).
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (
        target.encode(),
        size,
        size + len(payload),
        header,
        payload,
    )


_HEADER: Final = (
    b"NATS/1.0\r\nNats-Msg-Id: %s\r\nNats-Expected-Last-Sequence: %d\r\n"
    + POSITION_HEADER.encode()
    + b": %d.%d\r\n\r\n"
)


def _plain_subject(subject: str) -> bool:
    """Not a subject ``publish`` refuses (empty, or with a space, tab, CR or
    LF): those go through it, and it raises."""
    return bool(subject) and not any(c in subject for c in " \t\r\n")


class FrameWriter(Protocol):
    """Queues protocol commands on a client: ``(block, messages, payload bytes)``."""

    async def __call__(self, block: bytes, messages: int, payload_bytes: int) -> None: ...


def frame_writer(nc: Client) -> FrameWriter | None:
    """A way to queue ready-made ``HPUB`` commands on ``nc`` exactly as its
    ``publish`` queues the one it builds, or ``None`` when ``nc`` lacks it.

    nats-py has no public call for this: this uses ``Client._send_command``,
    ``_flush_queue`` and ``_flush_pending``, as ``Client._send_publish`` does
    (checked against nats-py 2.9 to 2.16). The caller checks beforehand what
    ``publish`` checks (connected, subject, payload size)."""
    send = getattr(nc, "_send_command", None)
    flush = getattr(nc, "_flush_pending", None)
    if send is None or flush is None or not hasattr(nc, "_flush_queue"):
        return None

    async def write(block: bytes, messages: int, payload_bytes: int) -> None:
        stats = nc.stats
        stats["out_msgs"] += messages
        stats["out_bytes"] += payload_bytes
        await send(block)
        queue = nc._flush_queue
        if queue is not None and queue.empty():  # as after every publish
            await flush()

    return write


@final
class DecisionPublisher:
    """Sends decisions in order and tracks which the server has stored.

    ``published`` counts the decisions handed to :meth:`publish` (skipped ones
    included); ``acked`` counts those known stored, always a prefix of them.
    :meth:`run` must run in a task of its own while the publisher is used; it
    reads acks and resyncs. ``await fence()`` runs before anything is sent and
    raises to stop a holder that lost its lease.
    """

    __slots__ = (
        "_buffer",
        "_encoder",
        "_fence",
        "_generation",
        "_js",
        "_last_seq",
        "_lock",
        "_nc",
        "_needs_resync",
        "_options",
        "_prefix",
        "_progress",
        "_progress_at",
        "_sent",
        "_stored",
        "_sub",
        "_write",
        "acked",
        "on_progress",
        "published",
    )

    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        options: NatsOptions,
        fence: Callable[[], Awaitable[None]],
    ) -> None:
        self._nc = nc
        self._js = js
        self._options = options
        self._fence = fence
        self._encoder = EventEncoder(options.output_format)
        # Unacked entries in order: (number, position, msg id, payload).
        self._buffer: deque[tuple[int, Position, str, bytes]] = deque()
        self._sent = 0  # entries of _buffer sent in this generation
        self._generation = 0
        self._last_seq = 0  # stream sequence the next message expects before it
        self._stored: Position = _NOTHING  # position of the stream's last decision
        self._lock = anyio.Lock()
        self._progress = anyio.Event()
        self._progress_at = time.monotonic()
        self._needs_resync = False
        self._prefix = ""
        self._sub: Subscription | None = None
        # Messages built here and queued on the client (None: one publish each).
        self._write = frame_writer(nc) if _plain_subject(options.decisions_subject) else None
        self.published = 0
        self.acked = 0
        self.on_progress: Callable[[], None] = _nothing

    async def open(self) -> None:
        """Subscribe to acks and read the decisions stream's tail."""
        self._prefix = self._nc.new_inbox()
        self._sub = await self._nc.subscribe(
            f"{self._prefix}.>", pending_msgs_limit=0, pending_bytes_limit=0
        )
        await self._read_tail()

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

    def request_resync(self) -> None:
        """Resync at the next occasion (after a reconnect)."""
        self._needs_resync = True

    async def publish(self, decisions: Iterable[tuple[Position, str, Decision]]) -> None:
        """Queue decisions (with their positions and msg ids) and send them.
        Waits while ``publish_window`` messages are in flight. Decisions at or
        before the stored tail are counted as acked and not sent."""
        encode = self._encoder.encode
        for position, msg_id, decision in decisions:
            if self.published % _YIELD_EVERY == 0:  # a session's hand-over can be huge
                # What is ready goes now: the server stores it while the rest
                # is encoded (benchmarks/bench_nats.py).
                await self._send_pending()
                await anyio.lowlevel.checkpoint()
            number = self.published
            self.published += 1
            if position <= self._stored:
                if not self._buffer:
                    self.acked = self.published
                continue
            self._buffer.append((number, position, msg_id, encode(decision)))
        # Sent as the window allows: a session's hand-over of many thousand
        # decisions sent at once would wait in the server's buffers, and its
        # first ack come late (benchmarks/bench_nats.py).
        await self._send_pending()
        while self._sent < len(self._buffer) or (
            self.published - self.acked > self._options.publish_window
        ):
            await self._wait_progress()
            await self._send_pending()

    async def wait_acked(self, count: int) -> None:
        """Wait until ``acked >= count``."""
        while self.acked < count:
            await self._wait_progress()

    async def _wait_progress(self) -> None:
        event = self._progress
        await event.wait()

    def _advance(self, acked: int) -> None:
        if acked <= self.acked:
            return
        self.acked = acked
        buffer = self._buffer
        dropped = 0
        while buffer and buffer[0][0] < acked:
            buffer.popleft()
            dropped += 1
        self._sent = max(0, self._sent - dropped)
        if not buffer:
            self.acked = self.published
        self._progress_at = time.monotonic()
        self._progress.set()
        self._progress = anyio.Event()
        self.on_progress()

    async def _send_pending(self) -> None:
        if self._needs_resync or self._sent >= len(self._buffer):
            return
        async with self._lock:
            await self._fence()
            buffer = self._buffer
            window = self._options.publish_window
            if self._sent == 0:  # nothing in flight: the ack clock starts now
                self._progress_at = time.monotonic()
            try:
                while self._sent < len(buffer) and not self._needs_resync:
                    number = buffer[self._sent][0]
                    if number - self.acked >= window:
                        break  # the rest when acks come
                    if number % _YIELD_EVERY == 0:  # let acks and the lease through
                        await anyio.lowlevel.checkpoint()
                    await self._send_some()
            except nats.errors.Error as exc:  # disconnected with a full buffer, say
                _log.warning("publishing decisions failed (%s); will resync", exc)
                self._needs_resync = True

    def _next_to_send(self) -> int:
        """The end of what to send now: from ``_sent`` (which the window allows)
        up to the window or the next multiple of ``_YIELD_EVERY``."""
        buffer = self._buffer
        limit = self.acked + self._options.publish_window
        end = self._sent + 1
        while end < len(buffer):
            number = buffer[end][0]
            if number >= limit or number % _YIELD_EVERY == 0:
                break
            end += 1
        return end

    async def _send_some(self) -> None:
        """Send the entries :meth:`_next_to_send` allows (at least one)."""
        buffer = self._buffer
        start, end = self._sent, self._next_to_send()
        subject = self._options.decisions_subject
        reply = f"{self._prefix}.{self._generation}."
        last = len(buffer) - 1

        def ack_to(i: int, number: int) -> str:
            # Only some messages ask for an ack (see _ACK_EVERY): "" for none.
            asks = i == last or number % _ACK_EVERY == _ACK_EVERY - 1
            return f"{reply}{number}" if asks else ""

        nc = self._nc
        write = self._write
        if write is not None and nc.is_connected and not nc.is_draining_pubs:
            # The messages publish() would send, built here and queued in one
            # block (benchmarks/bench_nats.py); see frame_writer.
            frames: list[bytes] = []
            size = 0
            max_payload = nc.max_payload
            last_seq = self._last_seq
            for i in range(start, end):
                number, position, msg_id, payload = buffer[i]
                if len(payload) > max_payload:
                    break  # publish() raises MaxPayloadError
                frames.append(
                    hpub_frame(subject, ack_to(i, number), msg_id, last_seq, position, payload)
                )
                size += len(payload)
                last_seq += 1
            else:
                await write(b"".join(frames), len(frames), size)
                self._sent = end
                self._last_seq = last_seq
                return
        # Through Client.publish, which checks the connection, the subject and
        # the payload size, and raises as it should.
        for i in range(start, end):
            number, position, msg_id, payload = buffer[i]
            headers = {
                "Nats-Msg-Id": msg_id,
                "Nats-Expected-Last-Sequence": str(self._last_seq),
                POSITION_HEADER: f"{position[0]}.{position[1]}",
            }
            await nc.publish(subject, payload, ack_to(i, number), headers=headers)
            self._sent += 1
            self._last_seq += 1

    async def run(self) -> None:
        """Read acks and resync when needed, until cancelled."""
        sub = self._sub
        assert sub is not None, "open() first"
        queue = sub._pending_queue
        while True:
            if self._needs_resync:
                await self._resync()
                continue
            try:
                msg: Msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                # Only once something is sent: a long session fills the
                # buffer long after the last ack (benchmarks/bench_nats.py).
                if self._sent and time.monotonic() - self._progress_at > _STALL_S:
                    _log.warning("no ack from the server for %.0f s; resyncing", _STALL_S)
                    self._needs_resync = True
                continue
            best = self.acked
            while True:
                best = max(best, self._ack(msg))
                if queue.empty():
                    break
                msg = queue.get_nowait()
            self._advance(best)

    def _ack(self, msg: Msg) -> int:
        """The acked count ``msg`` shows (0 if none); flags a resync on error."""
        generation, _, number = msg.subject[len(self._prefix) + 1 :].partition(".")
        if int(generation) != self._generation:
            return 0
        if b'"error"' in msg.data:
            if not self._needs_resync:
                _log.warning("decision refused: %s; resyncing", msg.data.decode(errors="replace"))
            self._needs_resync = True
            return 0
        # Stored right after its predecessor: everything before it is stored too.
        return int(number) + 1

    async def _resync(self) -> None:
        async with self._lock:
            self._generation += 1
            while True:
                try:
                    await self._read_tail()
                    break
                except (nats.errors.Error, TimeoutError) as exc:
                    _log.warning("reading the decisions stream failed (%s); retrying", exc)
                    await anyio.sleep(0.5)
            buffer = self._buffer
            stored = 0
            while buffer and buffer[0][1] <= self._stored:
                stored = buffer.popleft()[0] + 1
            self._sent = 0
            self._needs_resync = False
        if stored:
            self._advance(stored)
        self._progress_at = time.monotonic()
        await self._send_pending()

    async def _read_tail(self) -> None:
        stream = self._options.decisions_stream
        info = await self._js.stream_info(stream)
        last = info.state.last_seq
        self._last_seq = last
        if last == 0:
            self._stored = _NOTHING
            return
        try:
            msg = await self._js.get_msg(stream, last)
        except NotFoundError:
            raise XceError(
                f"the decisions stream {stream!r} lost its last message (seq {last}); "
                "xce needs it to know what was published"
            ) from None
        header = (msg.headers or {}).get(POSITION_HEADER)
        if header is None:
            raise XceError(
                f"the last message of the decisions stream {stream!r} (seq {last}) has no "
                f"{POSITION_HEADER} header: the stream must hold xce's decisions only"
            )
        self._stored = parse_position(header)
