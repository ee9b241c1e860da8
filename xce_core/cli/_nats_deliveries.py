"""Delivered messages of the input subscription of ``xce run --nats``, past
nats-py's per message work.

Delivered messages without headers (every input message, unless its producer
set some) skip the client's ``Msg`` and queue: :func:`intercept_deliveries`
hands their reply subject and payload straight to the fetcher, in order with
the others, which still come as ``Msg`` (status messages, and data messages
with headers). Building a ``Msg`` and queueing it was the largest part of the
service's CPU while ingesting (benchmarks/bench_nats.py); then the client's
parser was, and runs of such messages are split here in bulk. When the client
lacks what that needs, every message comes through the subscription's queue.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Final

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD

__all__ = ["Arrival", "drain", "intercept_deliveries"]

_SPACE: Final = itertools.repeat(b" ")
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
    the subscription's queue, so a status message keeps its place.

    The parser itself is wrapped too (``Client._ps.parse``, nats-py 2.16,
    checked; skipped when it is not as expected): the complete ``MSG`` frames
    of ``sub`` at the front of what it holds are split here, in one pass,
    and the rest is left to it (see :func:`_split_deliveries`)."""
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
        drain(sub, arrived)

    undo_parse = _wrap_parser(nc, sid, arrived, wake)

    def undo() -> None:
        if undo_parse is not None:
            undo_parse()
        if nc.__dict__.get("_process_msg") is process_msg:
            if shadowed is None:
                del nc.__dict__["_process_msg"]
            else:
                nc.__dict__["_process_msg"] = shadowed

    nc.__dict__["_process_msg"] = process_msg
    return undo


def _wrap_parser(
    nc: Client, sid: int, arrived: list[Arrival], wake: Callable[[], None]
) -> Callable[[], None] | None:
    """Put the fast path of :func:`intercept_deliveries` in front of the
    client's parser; the function that undoes it, or ``None`` if not done.

    nats-py's parser keeps what it has not parsed in ``buf``, and after a
    ``MSG`` control line, until its payload is complete, ``state`` is
    ``AWAITING_MSG_PAYLOAD`` with ``needed``, ``header_needed`` and
    ``msg_arg`` describing it. Its per message regular expression, dict and
    coroutine were a third of the service's CPU while ingesting
    (benchmarks/bench_nats.py); this takes such a message's payload when it
    completes, then splits the frames of ``sub`` that follow in one pass, and
    leaves whatever else there is (other subscriptions, headers, ``PING``, a
    frame cut short) to the parser, which sees it as it would have."""
    ps = getattr(nc, "_ps", None)
    parse: Callable[[bytes], Awaitable[None]] | None = getattr(ps, "parse", None)
    if ps is None or parse is None or "parse" in ps.__dict__:
        return None
    if not all(hasattr(ps, name) for name in ("buf", "state", "needed", "header_needed")):
        return None
    if not isinstance(getattr(ps, "msg_arg", None), dict) or not isinstance(ps.buf, bytearray):
        return None
    stats = nc.stats
    sid_bytes = str(sid).encode()

    async def fast_parse(data: bytes = b"") -> None:
        buf: bytearray = ps.buf
        buf += data
        if ps.state == AWAITING_MSG_PAYLOAD:
            needed = ps.needed
            if ps.header_needed or ps.msg_arg.get("sid") != sid or len(buf) < needed + 2:
                await parse(b"")
                return
            if not arrived:
                wake()
            stats["in_msgs"] += 1
            stats["in_bytes"] += needed
            arrived.append((ps.msg_arg["reply"], bytes(buf[:needed])))
            del buf[: needed + 2]
            ps.state = AWAITING_CONTROL_LINE
        if ps.state == AWAITING_CONTROL_LINE and buf.startswith(b"MSG "):
            empty = not arrived
            count = len(arrived)
            used, size = _split_deliveries(bytes(buf), sid_bytes, arrived)
            if used:
                del buf[:used]
                stats["in_msgs"] += len(arrived) - count
                stats["in_bytes"] += size
                if empty:
                    wake()
        if buf:
            await parse(b"")

    def undo() -> None:
        if ps.__dict__.get("parse") is fast_parse:
            del ps.__dict__["parse"]

    ps.__dict__["parse"] = fast_parse
    return undo


def _split_deliveries(data: bytes, sid: bytes, arrived: list[Arrival]) -> tuple[int, int]:
    """Append ``(reply, payload)`` to ``arrived`` for each complete frame
    ``MSG <subject> <sid> <reply> <size>\\r\\n<payload>\\r\\n`` at the front of
    ``data``, up to the first that is anything else or incomplete; the bytes
    they took, and the bytes of their payloads."""
    # Usually every complete frame is one: then data split at CRLF is control
    # lines and payloads in turn, checked and taken apart in bulk.
    pieces = data.split(b"\r\n")
    count = (len(pieces) - 1) // 2
    lines, payloads = pieces[0 : 2 * count : 2], pieces[1 : 2 * count : 2]
    if count and set(map(bytes.count, lines, _SPACE)) == {4}:
        fields = b" ".join(lines).split(b" ")
        sizes = fields[4::5]
        if (
            fields[0::5].count(b"MSG") == count
            and fields[2::5].count(sid) == count
            and all(map(bytes.isdigit, sizes))
            and list(map(int, sizes)) == list(map(len, payloads))
        ):
            arrived += zip(fields[3::5], payloads, strict=True)
            size = sum(map(len, payloads))
            return size + sum(map(len, lines)) + 4 * count, size
    at = 0
    size = 0
    end = len(data)
    while data.startswith(b"MSG ", at):
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            break
        fields = data[at + 4 : line_end].split(b" ")
        if len(fields) != 4 or fields[1] != sid or not fields[3].isdigit():
            break
        start = line_end + 2
        stop = start + int(fields[3])
        if stop + 2 > end or not data.startswith(b"\r\n", stop):
            break
        arrived.append((fields[2], data[start:stop]))
        size += stop - start
        at = stop + 2
    return at, size


def drain(sub: Subscription, arrived: list[Arrival]) -> None:
    """Move every message queued on ``sub`` to ``arrived``, in order (and off
    the subscription's pending size, as ``next_msg`` would)."""
    queue = sub._pending_queue
    while not queue.empty():
        msg = queue.get_nowait()
        sub._pending_size -= len(msg.data)
        arrived.append(msg)
