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

Delivered messages come through :mod:`._nats_deliveries`.
"""

from __future__ import annotations

import itertools
import json
import logging
import operator
import struct
from collections.abc import Callable
from typing import Final, NamedTuple, final

import anyio
import anyio.lowlevel
import nats.errors
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from events import BadEvent, EventDecoder, InputEvent
from xce_core.cli._nats_deliveries import Arrival, drain, intercept_deliveries
from xce_core.cli._nats_streams import NatsOptions, parse_ack_reply, recreate_consumer

__all__ = ["InputFetcher", "InputMessage", "PayloadDecoder", "intercept_deliveries"]

# A pull request lives this long on the server; idle ones are renewed.
_PULL_EXPIRES_S: Final = 2.0
_FRAME_HEADER: Final = struct.Struct(">I")
_NEWLINE: Final = itertools.repeat(b"\n")
_BAD: Final = itertools.repeat(BadEvent)
_TUPLE: Final = itertools.repeat(tuple)
_DOT: Final = itertools.repeat(b".")
_NANOSECONDS: Final = itertools.repeat(1e9)
_log = logging.getLogger("xce.run")


class InputMessage(NamedTuple):
    """One delivered input message: its stream sequence, server timestamp (s),
    ack subject and payload."""

    seq: int
    time: float
    reply: str
    data: bytes


_INPUT_MESSAGE: Final = itertools.repeat(InputMessage)


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
            drain(sub, arrived)
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
        plain = self._take_plain(arrivals)
        if plain is not None:
            return plain
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

    def _take_plain(self, arrivals: list[Arrival]) -> list[InputMessage] | None:
        """:meth:`_take` of the usual batch, all of it at once: every arrival
        ``(reply, payload)`` with an ack subject of the short form, sequences
        in a row from the expected one; ``None`` for any other.

        The subjects are split and their numbers read in bulk, not one
        message at a time (benchmarks/bench_nats.py: that was a sixth of the
        service's CPU while ingesting)."""
        count = len(arrivals)
        if not count or not all(map(isinstance, arrivals, _TUPLE)):
            return None
        replies, payloads = map(list, zip(*arrivals, strict=True))
        # parse_ack_reply's short form: nine tokens, "$JS.ACK." first.
        if set(map(bytes.count, replies, _DOT)) != {8}:
            return None
        tokens = b".".join(replies).split(b".")
        if tokens[0::9].count(b"$JS") != count or tokens[1::9].count(b"ACK") != count:
            return None
        try:
            seqs = list(map(int, tokens[5::9]))
            stamps = list(map(int, tokens[7::9]))
        except ValueError:
            return None
        first = seqs[0]
        if first < self._expected or (first > self._expected and not self._fresh):
            return None
        if seqs != list(range(first, first + count)):
            return None
        self._credit -= count
        self._fresh = False
        self._expected = first + count
        times = map(operator.truediv, stamps, _NANOSECONDS)
        texts = map(bytes.decode, replies)
        # tuple.__new__ builds each InputMessage without a Python-level call.
        rows = zip(seqs, times, texts, payloads, strict=True)
        return list(map(tuple.__new__, _INPUT_MESSAGE, rows))


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
