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
"""

from __future__ import annotations

import json
import logging
import struct
from dataclasses import dataclass
from typing import Final, final

import anyio
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from events import BadEvent, EventDecoder, InputEvent
from xce_core.cli._nats_streams import NatsOptions, parse_ack_reply, recreate_consumer

__all__ = ["InputFetcher", "InputMessage", "PayloadDecoder"]

# A pull request lives this long on the server; idle ones are renewed.
_PULL_EXPIRES_S: Final = 2.0
_FRAME_HEADER: Final = struct.Struct(">I")
_log = logging.getLogger("xce.run")


@final
@dataclass(frozen=True, slots=True)
class InputMessage:
    """One delivered input message: its stream sequence, server timestamp (s),
    ack subject and payload."""

    seq: int
    time: float
    reply: str
    data: bytes


@final
class InputFetcher:
    """Delivers the input stream in order from ``start_seq``, in batches.

    :meth:`open` (re)creates the durable consumer; :meth:`fetch` waits for the
    next messages (at most ``options.batch``). Only the lease holder uses it.
    """

    __slots__ = (
        "_credit",
        "_expected",
        "_fresh",
        "_inbox",
        "_js",
        "_nc",
        "_options",
        "_reopen",
        "_sub",
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
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None
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
        self._credit = 0
        self._fresh = True

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

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
            try:
                first = await sub.next_msg(timeout=_PULL_EXPIRES_S + 1.0)
            except nats.errors.TimeoutError:
                self._credit = 0  # requests lost (a server restart): ask again
                continue
            taken = self._take(first, sub)
            if taken:
                return taken

    def _take(self, first: Msg, sub: Subscription) -> list[InputMessage]:
        """``first`` and what else has arrived, in order, up to a gap (then
        the consumer is recreated before the next fetch)."""
        queue = sub._pending_queue
        taken: list[InputMessage] = []
        msg: Msg | None = first
        while msg is not None:
            headers = msg.headers
            if headers and "Status" in headers:
                # 404, 408 or 409: the request ended; its remaining credit with it.
                left = headers.get("Nats-Pending-Messages")
                self._credit = max(0, self._credit - int(left)) if left else 0
            else:
                self._credit -= 1
                seq, stamp = parse_ack_reply(msg.reply)
                if seq > self._expected and not self._fresh:
                    # What was taken before the gap is returned: the consumer
                    # is recreated after it, not at it.
                    self._reopen = True
                    break
                if seq >= self._expected:  # else a redelivery of what was taken
                    self._fresh = False
                    self._expected = seq + 1
                    taken.append(InputMessage(seq, stamp / 1e9, msg.reply, msg.data))
            if queue.empty():
                break
            msg = queue.get_nowait()
            sub._pending_size -= len(msg.data)
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
