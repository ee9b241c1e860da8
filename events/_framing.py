"""Incremental, batch-decoding framers for NDJSON and length-prefixed msgpack.

Private to :mod:`events._codecs`, which wraps them in :class:`~events.EventDecoder`.
Both framers share one idea: a chunk's complete items are decoded with a *single*
msgspec call (which costs a fraction of a microsecond per event), and only when
that call fails is the batch bisected down to single items to report exactly
which ones are bad. A bad item never costs the good items around it.
"""

from __future__ import annotations

import struct
from typing import Any, Final, final

import msgspec
from msgspec import DecodeError, Struct, ValidationError

from events._schema import EventRejected

__all__ = ["BadEvent", "MsgpackFramer", "NdjsonFramer"]

# Below this many items a failed batch is decoded one item at a time: bisecting
# further would cost more decode calls than it saves.
_BISECT_CUTOFF: Final = 8
_JSON_BLANK: Final = b" \t\r"
_FRAME_HEADER: Final = struct.Struct(">I")
_ARRAY32_COUNT: Final = struct.Struct(">I")
_JSON_MALFORMED_PREFIX: Final = "JSON is malformed: "
_MSGPACK_MALFORMED_PREFIX: Final = "MessagePack data is malformed: "


class BadEvent(Struct, frozen=True):
    """An input item that could not be decoded; the items around it are unaffected.

    ``index`` is the item's 0-based position in the stream, counting bad items
    too; ``line`` is its 1-based line number for NDJSON (``None`` for msgpack);
    ``error`` says what is wrong, with msgspec's field path when there is one
    (``"Expected `int` >= 0 - at `$.slots`"``, ``"malformed JSON: ..."``).
    """

    index: int
    line: int | None
    error: str

    def to_decision(self) -> EventRejected:
        """This failure as an ``event_rejected`` decision (error prefixed with where).

        The prefix is ``"line N: "`` for NDJSON and ``"event N: "`` (the 0-based
        index) for msgpack.
        """
        where = f"line {self.line}" if self.line is not None else f"event {self.index}"
        return EventRejected(index=self.index, line=self.line, error=f"{where}: {self.error}")


def _describe(exc: DecodeError, malformed_prefix: str, what: str) -> str:
    """Human text for a msgspec failure: validation errors verbatim, syntax errors tagged."""
    if isinstance(exc, ValidationError):
        return str(exc)
    text = str(exc)
    if text.startswith(malformed_prefix):
        text = text[len(malformed_prefix) :]
    elif text:
        text = text[0].lower() + text[1:]
    return f"malformed {what}: {text}"


def _as_json_array(block: bytes) -> bytes:
    """Lines joined by ``\\n`` as one JSON array with one element per line.

    A blank line yields an empty element, which is a syntax error: such blocks
    take the slow path, which drops blank lines first.
    """
    return b"[" + block.replace(b"\n", b",") + b"]"


@final
class NdjsonFramer:
    """NDJSON: one JSON value per line; blank lines skipped but counted as lines.

    Not thread-safe; each method is synchronous and never blocks.
    """

    __slots__ = ("_decode", "_decode_list", "_index", "_line", "_max", "_pending", "_skipping")

    def __init__(self, type: Any, max_frame: int) -> None:
        self._decode = msgspec.json.Decoder(type).decode
        self._decode_list = msgspec.json.Decoder(list[type]).decode
        self._max = max_frame
        self._pending = bytearray()
        self._skipping = False
        self._index = 0  # items emitted so far, bad ones included
        self._line = 0  # lines fully consumed so far

    def feed(self, data: bytes | bytearray) -> list[Any]:
        """Decode every line completed by ``data``; keep the partial last line."""
        out: list[Any] = []
        start = 0
        if self._skipping:
            newline = data.find(b"\n")
            if newline < 0:
                return out
            self._skipping = False
            self._line += 1
            start = newline + 1
        last = data.rfind(b"\n", start)
        if last < 0:
            self._hold(data[start:], out)
            return out
        if self._pending:
            self._pending += data[start:last]
            block = bytes(self._pending)
            self._pending.clear()
        else:
            block = bytes(data[start:last])
        self._decode_block(block, out)
        if last + 1 < len(data):
            self._hold(data[last + 1 :], out)
        return out

    def close(self) -> list[Any]:
        """Decode a final line that lacks its newline, then reset to a fresh stream."""
        out: list[Any] = []
        if self._pending and not self._skipping:
            self._decode_block(bytes(self._pending), out)
        self._pending.clear()
        self._skipping = False
        self._index = 0
        self._line = 0
        return out

    def _hold(self, part: bytes | bytearray, out: list[Any]) -> None:
        self._pending += part
        if len(self._pending) > self._max:
            # Buffering until the newline could take unbounded memory: report the
            # line now and drop the rest of it as it arrives.
            self._pending.clear()
            self._skipping = True
            out.append(BadEvent(self._index, self._line + 1, self._oversize()))
            self._index += 1

    def _oversize(self) -> str:
        return f"line exceeds the {self._max}-byte limit"

    def _decode_block(self, block: bytes, out: list[Any]) -> None:
        """Decode ``block`` (complete lines joined by ``\\n``, no final newline)."""
        n_lines = block.count(b"\n") + 1
        if len(block) <= self._max:
            try:
                items = self._decode_list(_as_json_array(block))
            except DecodeError:
                pass
            else:
                # The count check catches a line holding "{...},{...}". A value broken
                # across lines fails to parse ("{"a":,", ",,"), except between two array
                # items, which a count check can miss only if such a line balances it.
                if len(items) == n_lines:
                    out.extend(items)
                    self._index += n_lines
                    self._line += n_lines
                    return
        self._decode_slowly(block, out)

    def _decode_slowly(self, block: bytes, out: list[Any]) -> None:
        group: list[tuple[int, bytes]] = []
        changed = False
        first = self._line + 1
        lines = block.split(b"\n")
        for offset, line in enumerate(lines):
            if len(line) > self._max:
                self._decode_group(group, out, known_bad=False)
                group = []
                out.append(BadEvent(self._index, first + offset, self._oversize()))
                self._index += 1
                changed = True
            elif line.strip(_JSON_BLANK):
                group.append((first + offset, line))
            else:
                changed = True
        self._decode_group(group, out, known_bad=not changed)
        self._line += len(lines)

    def _decode_group(
        self, group: list[tuple[int, bytes]], out: list[Any], known_bad: bool
    ) -> None:
        if len(group) > _BISECT_CUTOFF:
            if not known_bad:
                try:
                    items = self._decode_list(b"[" + b",".join([ln for _, ln in group]) + b"]")
                except DecodeError:
                    pass
                else:
                    if len(items) == len(group):
                        out.extend(items)
                        self._index += len(items)
                        return
            middle = len(group) // 2
            self._decode_group(group[:middle], out, known_bad=False)
            self._decode_group(group[middle:], out, known_bad=False)
            return
        for lineno, line in group:
            try:
                out.append(self._decode(line))
            except DecodeError as exc:
                out.append(
                    BadEvent(self._index, lineno, _describe(exc, _JSON_MALFORMED_PREFIX, "JSON"))
                )
            self._index += 1


@final
class MsgpackFramer:
    """Frames of a 4-byte big-endian length then that many bytes of msgpack.

    A frame longer than the limit is reported and its bytes skipped (its length
    is trusted; the framer never guesses where the next frame starts). Not
    thread-safe; each method is synchronous and never blocks.
    """

    __slots__ = ("_buf", "_decode", "_decode_list", "_index", "_max", "_skip")

    def __init__(self, type: Any, max_frame: int) -> None:
        self._decode = msgspec.msgpack.Decoder(type).decode
        self._decode_list = msgspec.msgpack.Decoder(list[type]).decode
        self._max = max_frame
        self._buf = bytearray()
        self._skip = 0  # bytes of an oversize frame still to drop
        self._index = 0

    def feed(self, data: bytes | bytearray) -> list[Any]:
        """Decode every frame completed by ``data``; keep a partial last frame."""
        out: list[Any] = []
        if self._skip:
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            data = data[dropped:]
        if self._buf:
            self._buf += data
            chunk = bytes(self._buf)
        else:
            chunk = bytes(data)
        pos = self._split_frames(chunk, out)
        self._buf.clear()
        self._buf += chunk[pos:]
        return out

    def close(self) -> list[Any]:
        """Report a truncated final frame, then reset to a fresh stream."""
        out: list[Any] = []
        have = len(self._buf)
        if have:
            if have < _FRAME_HEADER.size:
                error = f"truncated frame: {have} of {_FRAME_HEADER.size} length-prefix bytes"
            else:
                (size,) = _FRAME_HEADER.unpack_from(self._buf)
                got = have - _FRAME_HEADER.size
                error = f"truncated frame: {got} of {size} payload bytes"
            out.append(BadEvent(self._index, None, error))
        self._buf.clear()
        self._skip = 0
        self._index = 0
        return out

    def _split_frames(self, chunk: bytes, out: list[Any]) -> int:
        """Decode the complete frames at the start of ``chunk``; return bytes consumed."""
        end = len(chunk)
        pos = first = count = 0
        limit = self._max
        from_bytes = int.from_bytes
        # The payloads go after a 5-byte msgpack array32 header (count set at flush):
        # the batch is then one msgpack array that decodes in a single call.
        batch = bytearray(b"\xdd\0\0\0\0")
        while True:
            body = pos + 4
            if body > end:
                break
            size = from_bytes(chunk[pos:body])
            stop = body + size
            if size > limit or not size:
                # An empty payload is no value; let it through and a frame holding two
                # values would balance the batch's element count.
                self._flush(batch, count, chunk[first:pos], out)
                batch = bytearray(b"\xdd\0\0\0\0")
                count = 0
                if size:
                    error = f"frame of {size} bytes exceeds the {limit}-byte limit"
                else:
                    error = "empty frame"
                out.append(BadEvent(self._index, None, error))
                self._index += 1
                if stop > end:
                    self._skip = stop - end
                    return end
                pos = first = stop
                continue
            if stop > end:
                break
            batch += chunk[body:stop]
            count += 1
            pos = stop
        self._flush(batch, count, chunk[first:pos], out)
        return pos

    def _flush(self, batch: bytearray, count: int, frames: bytes, out: list[Any]) -> None:
        """Decode ``batch`` (``count`` payloads); on failure bisect the ``frames``."""
        if not count:
            return
        _ARRAY32_COUNT.pack_into(batch, 1, count)
        try:
            items = self._decode_list(batch)
        except DecodeError:
            pass
        else:
            out.extend(items)
            self._index += count
            return
        payloads: list[bytes] = []
        pos = 0
        while pos < len(frames):
            body = pos + 4
            stop = body + int.from_bytes(frames[pos:body])
            payloads.append(frames[body:stop])
            pos = stop
        self._decode_group(payloads, out, known_bad=True)

    def _decode_group(self, payloads: list[bytes], out: list[Any], known_bad: bool) -> None:
        count = len(payloads)
        if count > _BISECT_CUTOFF:
            if not known_bad:
                # An array header followed by the payloads is one msgpack array, so
                # the whole batch decodes in one call.
                header = b"\xdd" + count.to_bytes(4, "big")
                try:
                    items = self._decode_list(b"".join([header, *payloads]))
                except DecodeError:
                    pass
                else:
                    out.extend(items)
                    self._index += count
                    return
            middle = count // 2
            self._decode_group(payloads[:middle], out, known_bad=False)
            self._decode_group(payloads[middle:], out, known_bad=False)
            return
        for payload in payloads:
            try:
                out.append(self._decode(payload))
            except DecodeError as exc:
                error = _describe(exc, _MSGPACK_MALFORMED_PREFIX, "msgpack")
                out.append(BadEvent(self._index, None, error))
            self._index += 1
