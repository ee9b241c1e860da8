"""Reading the input stream of ``xce run --nats``: pull requests, delivery in
stream order, and decoding one event per message.

:class:`InputFetcher` keeps pull requests outstanding on the durable consumer
(re-requesting when less than half a batch of credit is left) and drains
whatever arrived in one go, so a backlog flows without a round trip per batch.
It checks the order itself: a message older than the last one taken is a
redelivery and is dropped; a message past a gap (one delivered to us and lost,
for instance while the server restarted) makes it recreate the consumer at the
expected sequence, on a fresh inbox so nothing of the old delivery can leak in.

:class:`PayloadDecoder` decodes message payloads exactly as ``xce run`` decodes
its stdin: the same :class:`~events.EventDecoder`, fed the payloads of a batch
as one chunk of lines (NDJSON) or frames (msgpack), so a good payload decodes
as that line or frame would and a bad one becomes a :class:`~events.BadEvent`.
A message holds one event: an empty NDJSON payload, or one of several lines,
is rejected.

Delivered messages without headers (every input message, unless its producer
set some) skip the client's ``Msg`` and queue: :func:`intercept_deliveries`
hands their reply subject and payload straight to the fetcher, in order with
the others, which still come as ``Msg`` (status messages, and data messages
with headers). Building a ``Msg`` and queueing it was the largest part of the
service's CPU while ingesting (benchmarks/bench_nats.py). When the client
lacks what that needs, every message comes through the subscription's queue.
"""

from __future__ import annotations

import itertools
import json
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Final, NamedTuple, final

import anyio
import anyio.lowlevel
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from events import BadEvent, EventDecoder, InputEvent
from xce_core.cli._nats_streams import NatsOptions, parse_ack_reply, recreate_consumer

__all__ = ["InputFetcher", "InputMessage", "PayloadDecoder", "intercept_deliveries"]

# A pull request lives this long on the server; idle ones are renewed.
_PULL_EXPIRES_S: Final = 2.0
_FRAME_HEADER: Final = struct.Struct(">I")
_NEWLINE: Final = itertools.repeat(b"\n")
_BAD: Final = itertools.repeat(BadEvent)
_log = logging.getLogger("xce.run")


class InputMessage(NamedTuple):
    """One delivered input message: its stream sequence, server timestamp (s),
    ack subject and payload."""

    seq: int
    time: float
    reply: str
    data: bytes


Arrival = tuple[bytes, bytes] | Msg
"""A delivered message: ``(reply subject, payload)`` when it has no headers,
else as the client builds it."""
_ProcessMsg = Callable[[int, bytes, bytes, bytes, bytes | None], Awaitable[None]]


def intercept_deliveries(
    nc: Client, sub: Subscription, arrived: list[Arrival], wake: Callable[[], None]
) -> Callable[[], None] | None:
    """Route the messages delivered to ``sub`` into ``arrived``, in order, and
    call ``wake`` when it was empty; returns the function that undoes it, or
    ``None`` when the client lacks what this needs (then read ``sub``).

    nats-py's parser hands every message to ``Client._process_msg(sid,
    subject, reply, payload, headers)`` (nats-py 2.9 to 2.16, checked), which
    builds a ``Msg`` and queues it on the subscription. This puts a wrapper in
    its place on this client: messages of ``sub`` without headers become
    ``(reply, payload)``; the rest go through the original and are moved from
    the subscription's queue, so a status message keeps its place."""
    original: _ProcessMsg | None = getattr(nc, "_process_msg", None)
    sid = getattr(sub, "_id", None)
    if original is None or not isinstance(sid, int) or not hasattr(sub, "_pending_queue"):
        return None
    shadowed = nc.__dict__.get("_process_msg")
    stats = nc.stats

    async def process_msg(
        msg_sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        if msg_sid != sid:
            await original(msg_sid, subject, reply, data, headers)
            return
        if not arrived:
            wake()
        if headers is None:
            stats["in_msgs"] += 1
            stats["in_bytes"] += len(data)
            arrived.append((reply, data))
            return
        await original(msg_sid, subject, reply, data, headers)
        _drain(sub, arrived)

    def undo() -> None:
        if nc.__dict__.get("_process_msg") is process_msg:
            if shadowed is None:
                del nc.__dict__["_process_msg"]
            else:
                nc.__dict__["_process_msg"] = shadowed

    nc.__dict__["_process_msg"] = process_msg
    return undo


def _drain(sub: Subscription, arrived: list[Arrival]) -> None:
    """Move every message queued on ``sub`` to ``arrived``, in order (and off
    the subscription's pending size, as ``next_msg`` would)."""
    queue = sub._pending_queue
    while not queue.empty():
        msg = queue.get_nowait()
        sub._pending_size -= len(msg.data)
        arrived.append(msg)


@final
class InputFetcher:
    """Delivers the input stream in order from ``start_seq``, in batches.

    :meth:`open` (re)creates the durable consumer; :meth:`fetch` waits for the
    next messages (at most ``options.batch``). Only the lease holder uses it.
    """

    __slots__ = (
        "_arrival",
        "_arrived",
        "_credit",
        "_expected",
        "_fresh",
        "_inbox",
        "_js",
        "_nc",
        "_options",
        "_reopen",
        "_sub",
        "_undo",
    )

    def __init__(
        self, nc: Client, js: JetStreamContext, options: NatsOptions, start_seq: int
    ) -> None:
        self._nc = nc
        self._js = js
        self._options = options
        self._expected = start_seq  # the next sequence to take
        self._sub: Subscription | None = None
        self._inbox = ""
        self._credit = 0  # messages requested and not yet delivered or expired
        self._fresh = True  # no message taken since the consumer was created
        self._reopen = False
        # Delivered, not yet taken (see intercept_deliveries); _arrival is set
        # when something comes.
        self._arrived: list[Arrival] = []
        self._arrival = anyio.Event()
        self._undo: Callable[[], None] | None = None

    @property
    def next_seq(self) -> int:
        return self._expected

    def request_reopen(self) -> None:
        """Recreate the consumer before the next fetch (after a reconnect)."""
        self._reopen = True

    async def open(self) -> None:
        """Recreate the consumer at the next sequence to take, on a new inbox.
        Retries while the server is unreachable."""
        self._reopen = False
        await self.close()
        while True:
            try:
                await recreate_consumer(self._js, self._options, self._expected)
                break
            except (nats.errors.Error, TimeoutError) as exc:
                _log.warning("creating the consumer failed (%s); retrying", exc)
                await anyio.sleep(0.5)
        self._inbox = self._nc.new_inbox()
        self._sub = await self._nc.subscribe(
            self._inbox, pending_msgs_limit=0, pending_bytes_limit=0
        )
        self._arrived.clear()
        self._undo = intercept_deliveries(self._nc, self._sub, self._arrived, self._wake)
        self._credit = 0
        self._fresh = True

    async def close(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

    def _wake(self) -> None:
        self._arrival.set()

    async def _request(self) -> None:
        batch = self._options.batch
        request = {"batch": batch, "expires": int(_PULL_EXPIRES_S * 1e9)}
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{self._options.stream}.{self._options.durable}"
        await self._nc.publish(subject, json.dumps(request).encode(), reply=self._inbox)
        self._credit += batch

    async def fetch(self) -> list[InputMessage]:
        """The next messages in stream order (never empty). A cancellation
        point; waits as long as the stream has nothing new. Errors of the
        connection propagate (the caller reconnects or gives up)."""
        while True:
            if self._reopen:
                await self.open()
            sub = self._sub
            assert sub is not None, "open() first"
            if self._credit < self._options.batch // 2:
                await self._request()
            arrivals = await self._wait(sub)
            if arrivals is None:
                self._credit = 0  # requests lost (a server restart): ask again
                continue
            taken = self._take(arrivals)
            if taken:
                return taken

    async def _wait(self, sub: Subscription) -> list[Arrival] | None:
        """What has arrived, once something has; ``None`` after a long wait."""
        timeout = _PULL_EXPIRES_S + 1.0
        arrived = self._arrived
        if self._undo is None:  # as the client delivers, through its queue
            try:
                first = await sub.next_msg(timeout=timeout)
            except nats.errors.TimeoutError:
                return None
            arrived.append(first)
            _drain(sub, arrived)
        elif not arrived:
            self._arrival = anyio.Event()
            with anyio.move_on_after(timeout):
                await self._arrival.wait()
            if not arrived:
                return None
        else:
            await anyio.lowlevel.checkpoint()
        arrivals = arrived.copy()
        arrived.clear()
        return arrivals

    def _take(self, arrivals: list[Arrival]) -> list[InputMessage]:
        """The messages of ``arrivals`` to apply, in order, up to a gap (then
        the consumer is recreated before the next fetch)."""
        taken: list[InputMessage] = []
        expected = self._expected
        for arrival in arrivals:
            if isinstance(arrival, tuple):
                reply, data = arrival[0].decode(), arrival[1]
            else:
                headers = arrival.headers
                if headers and "Status" in headers:
                    # 404, 408 or 409: the request ended; its remaining credit with it.
                    left = headers.get("Nats-Pending-Messages")
                    self._credit = max(0, self._credit - int(left)) if left else 0
                    continue
                reply, data = arrival.reply, arrival.data
            self._credit -= 1
            seq, stamp = parse_ack_reply(reply)
            if seq > expected and not self._fresh:
                # What was taken before the gap is returned: the consumer is
                # recreated after it, not at it.
                self._reopen = True
                break
            if seq >= expected:  # else a redelivery of what was taken
                self._fresh = False
                expected = seq + 1
                taken.append(InputMessage(seq, stamp / 1e9, reply, data))
        self._expected = expected
        return taken


@final
class PayloadDecoder:
    """Decodes message payloads, one event per message, as stdin would."""

    __slots__ = ("_decoder", "_format")

    def __init__(self, options: NatsOptions) -> None:
        self._format = options.format
        self._decoder = EventDecoder(options.format, max_frame=options.max_frame)

    def decode(self, payloads: list[bytes]) -> list[InputEvent | BadEvent]:
        """One item per payload, in order. A :class:`BadEvent`'s ``index`` is
        its position in ``payloads`` (the caller renumbers)."""
        if self._format == "msgpack":
            chunk = b"".join(_FRAME_HEADER.pack(len(p)) + p for p in payloads)
            return self._decode_chunk(chunk, len(payloads), [])
        # Nearly always each payload is one line with its newline and decodes:
        # then the payloads joined are the chunk below, decoded in one call
        # without looking at each (benchmarks/bench_nats.py).
        chunk = b"".join(payloads)
        if chunk.count(b"\n") == len(payloads) and all(map(bytes.endswith, payloads, _NEWLINE)):
            items = self._decoder.feed(chunk)
            items += self._decoder.close()
            if len(items) == len(payloads) and not any(map(isinstance, items, _BAD)):
                return items
        lines: list[bytes] = []
        refused: list[tuple[int, str]] = []
        for position, payload in enumerate(payloads):
            body = payload[:-1] if payload.endswith(b"\n") else payload
            if b"\n" in body:
                lines_in = body.count(b"\n") + 1
                refused.append((position, f"a message holds one event, got {lines_in} lines"))
                lines.append(b"null")  # a placeholder the decoder rejects
            elif not body.strip():
                refused.append((position, "empty message"))
                lines.append(b"null")
            else:
                lines.append(body)
        chunk = b"\n".join(lines) + b"\n"
        return self._decode_chunk(chunk, len(payloads), refused)

    def _decode_chunk(
        self, chunk: bytes, count: int, refused: list[tuple[int, str]]
    ) -> list[InputEvent | BadEvent]:
        items = self._decoder.feed(chunk)
        items += self._decoder.close()
        if len(items) != count:  # pragma: no cover - framing guarantees one per payload
            raise AssertionError(f"decoded {len(items)} items from {count} messages")
        for position, error in refused:
            items[position] = BadEvent(index=position, line=None, error=error)
        return [
            BadEvent(index=i, line=None, error=item.error, job_id=item.job_id)
            if isinstance(item, BadEvent)
            else item
            for i, item in enumerate(items)
        ]
