"""Incremental, batch-decoding framers for NDJSON and length-prefixed msgpack.

Private to :mod:`events._codecs`, which wraps them in :class:`~events.EventDecoder`.

**The contract:** a framer returns exactly what decoding each line (or frame) on
its own would return, whatever the read boundaries. Batching is only a way to
get there in few msgspec calls.

**How batches stay exact.** A chunk's complete items are decoded in one msgspec
call as a single array in which a *marker*, a random string (96 bits) known only
to this framer, sits between consecutive items: ``[item, "marker", item, ...]``.
The batch is accepted only if it decodes to exactly that shape. An item that is
not one whole value (a line holding half an object, or two objects) swallows or
adds an element, and only input containing the secret marker could put a marker
back in its place; so an accepted batch splits exactly at the item boundaries,
and each of its values is what decoding that item alone gives. A batch that is
not accepted is bisected down to single items, which find the bad ones; a bad
item never costs the good items around it. (The markers cost about a sixth of
NDJSON decoding time; a plain element count, which they replace, could be
balanced by a line holding two values.)

**Nesting.** msgspec raises :class:`RecursionError` for values nested deeper
than the interpreter's recursion limit allows (about 1,000 levels, less the
caller's stack depth, on CPython 3.11). Such an item becomes a :class:`BadEvent`.
Single items are decoded directly in :meth:`_Runs.decode` and batches one call
further down, where they also nest their items one level deeper: a batch that
decodes holds only items that would decode alone, so even this limit does not
depend on how the input was chunked.

**Memory and time.** Each framer holds at most one partial item (bounded by
``max_frame`` plus one chunk) in a :class:`bytearray`, and looks at a partial
item again only once it may be complete: decoding is linear in the input,
however it is chunked.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, Union, final

import msgspec
from msgspec import UNSET, DecodeError, Struct, ValidationError

from events._schema import EventRejected, Name

__all__ = ["BadEvent", "MsgpackFramer", "NdjsonFramer"]

# Below this many items a failed batch is decoded one item at a time: bisecting
# further would cost more decode calls than it saves.
_BISECT_CUTOFF: Final = 8
_JSON_BLANK: Final = b" \t\r"
_FRAME_HEADER: Final = struct.Struct(">I")
_HEADER_SIZE: Final = _FRAME_HEADER.size
_ARRAY32: Final = b"\xdd"
_JSON_MALFORMED_PREFIX: Final = "JSON is malformed: "
_MSGPACK_MALFORMED_PREFIX: Final = "MessagePack data is malformed: "


class BadEvent(Struct, frozen=True):
    """An input item that could not be decoded; the items around it are unaffected.

    ``index`` is the item's 0-based position in the stream, counting bad items
    too; ``line`` is its 1-based line number for NDJSON (``None`` for msgpack);
    ``error`` says what is wrong, with msgspec's field path when there is one
    (``"Expected `int` >= 0 - at `$.slots`"``, ``"malformed JSON: ..."``);
    ``job_id`` the job the item names, when it is a well-formed value whose
    ``type`` is a job event and whose ``job_id`` is a valid one (see
    :class:`~events.EventRejected`), else ``None``.
    """

    index: int
    line: int | None
    error: str
    job_id: str | None = None

    def to_decision(self) -> EventRejected:
        """This failure as an ``event_rejected`` decision (error prefixed with where).

        The prefix is ``"line N: "`` for NDJSON and ``"event N: "`` (the 0-based
        index) for msgpack.
        """
        where = f"line {self.line}" if self.line is not None else f"event {self.index}"
        return EventRejected(
            index=self.index,
            line=self.line,
            error=f"{where}: {self.error}",
            job_id=UNSET if self.job_id is None else self.job_id,
        )


@final
class _Bad:
    """A failed item inside a run (numbered by the framer when it is reported)."""

    __slots__ = ("error", "job_id")

    def __init__(self, error: str, job_id: str | None = None) -> None:
        self.error = error
        self.job_id = job_id


# The events that name a job by ``job_id``.
_JOB_EVENTS: Final = frozenset({"job_submitted", "job_finished", "job_cancelled"})


class _Named(Struct):
    """What a bad item is read as to name its job: every other field ignored."""

    type: object = None
    job_id: Name | None = None


def _namer(decode: Callable[[Any], _Named]) -> Callable[[Any], str | None]:
    """The ``job_id`` a bad item names (its :class:`BadEvent`'s), or ``None``."""

    def job_id(item: Any) -> str | None:
        try:
            named = decode(item)
        except (DecodeError, RecursionError):
            return None
        kind = named.type
        return named.job_id if isinstance(kind, str) and kind in _JOB_EVENTS else None

    return job_id


_Entry = bytes | bytearray | _Bad | None  # an item to decode, a known failure, or a blank


def _describe(exc: Exception, malformed_prefix: str, what: str) -> str:
    """Human text for a decoding failure: validation errors verbatim, syntax errors tagged."""
    if isinstance(exc, RecursionError):
        return f"value nested too deeply: {exc}"
    if isinstance(exc, ValidationError):
        return str(exc)
    text = str(exc)
    if text.startswith(malformed_prefix):
        text = text[len(malformed_prefix) :]
    elif text:
        text = text[0].lower() + text[1:]
    return f"malformed {what}: {text}"


def _new_marker() -> str:
    # Imported here: secrets (hashlib, hmac, random) is about 5 ms of every
    # command's start-up, and only a decoder needs it.
    import secrets

    # 96 random bits; short, because every item of a batch carries one.
    return secrets.token_urlsafe(12)


@final
class _Runs:
    """Decodes runs of encoded items as if with one msgspec call per item.

    ``single`` decodes one item; ``batch`` decodes a joined run (items with the
    marker between them, see the module docstring) and is ``None`` when the item
    type cannot be combined with a marker, in which case items are decoded one
    at a time. ``join`` builds a joined run from items.
    """

    __slots__ = (
        "_batch",
        "_join",
        "_malformed_prefix",
        "_marker",
        "_name",
        "_single",
        "_what",
    )

    def __init__(
        self,
        single: Callable[[Any], Any],
        batch: Callable[[Any], list[Any]] | None,
        join: Callable[[Sequence[bytes | bytearray]], bytes],
        marker: str,
        what: str,
        name: Callable[[Any], str | None],
    ) -> None:
        self._single = single
        self._name = name
        self._batch = batch
        self._join = join
        self._marker = marker
        self._what = what
        self._malformed_prefix = (
            _JSON_MALFORMED_PREFIX if what == "JSON" else _MSGPACK_MALFORMED_PREFIX
        )

    def decode(
        self, joined: bytes | None, count: int, entries: Callable[[], list[_Entry]]
    ) -> tuple[list[Any], bool]:
        """Decode a run of ``count`` items.

        ``joined`` is the whole run already joined (or ``None``); ``entries``
        returns the run item by item, where an entry may instead be a known
        failure (:class:`_Bad`) or ``None`` (a blank line: no item). Returns
        ``(values, True)`` when ``joined`` decoded cleanly, with one value per
        item; otherwise ``(results, False)`` with one result per entry: the
        value, a :class:`_Bad`, or ``None``.
        """
        if joined is not None and self._batch is not None:
            values = self._try_batch(joined, count)
            if values is not None:
                return values, True
        results: list[Any] = entries()
        todo = [i for i, entry in enumerate(results) if isinstance(entry, bytes | bytearray)]
        # When the whole run just failed as one batch, start by splitting it.
        whole_untried = joined is None or len(todo) != count
        stack = [(0, len(todo), whole_untried)]
        while stack:
            low, high, try_batch = stack.pop()
            if high - low > _BISECT_CUTOFF and self._batch is not None:
                if try_batch:
                    items = [results[todo[k]] for k in range(low, high)]
                    values = self._try_batch(self._join(items), high - low)
                    if values is not None:
                        for k, value in zip(range(low, high), values, strict=True):
                            results[todo[k]] = value
                        continue
                middle = (low + high) // 2
                stack.append((middle, high, True))
                stack.append((low, middle, True))
                continue
            for k in range(low, high):
                position = todo[k]
                try:
                    results[position] = self._single(results[position])
                except (DecodeError, RecursionError) as exc:
                    error = _describe(exc, self._malformed_prefix, self._what)
                    results[position] = _Bad(error, self._name(results[position]))
        return results, False

    def _try_batch(self, joined: bytes, count: int) -> list[Any] | None:
        """The ``count`` values of a joined run, or ``None`` unless it has exactly
        the shape value, marker, value, ..., value."""
        assert self._batch is not None
        try:
            values = self._batch(joined)
        except (DecodeError, RecursionError):
            return None
        if len(values) != 2 * count - 1 or values[1::2].count(self._marker) != count - 1:
            return None
        # An item decoding to the marker itself needs the secret, like a forged marker.
        del values[1::2]
        return values


def _batch_decoder(module: Any, type: Any, marker: str) -> Callable[[Any], list[Any]] | None:
    """A decoder of ``list[type | Literal[marker]]``, or ``None`` if msgspec cannot
    tell the two apart (``type`` is or includes ``str``)."""
    try:
        decoder = module.Decoder(list[Union[type, Literal[marker]]])  # type: ignore[valid-type]  # noqa: UP007
    except TypeError:
        return None
    decode: Callable[[Any], list[Any]] = decoder.decode
    return decode


@final
class NdjsonFramer:
    """NDJSON: one JSON value per line; blank lines skipped but counted as lines.

    Not thread-safe; each method is synchronous and never blocks.
    """

    __slots__ = (
        "_index",
        "_line",
        "_max",
        "_pending",
        "_runs",
        "_separator",
        "_skipping",
        "lines",
    )

    def __init__(self, type: Any, max_frame: int) -> None:
        marker = _new_marker()
        separator = b',"' + marker.encode() + b'",'
        self._separator = separator
        self._runs = _Runs(
            msgspec.json.Decoder(type).decode,
            _batch_decoder(msgspec.json, type, marker),
            lambda lines: b"[" + separator.join(lines) + b"]",
            marker,
            "JSON",
            _namer(msgspec.json.Decoder(_Named).decode),
        )
        self._max = max_frame
        self._pending = bytearray()
        self._skipping = False
        self._index = 0  # items emitted so far, bad ones included
        self._line = 0  # lines fully consumed so far
        # The input lines of the items the last feed() or close() returned, in
        # order: runs of consecutive lines as ranges, so the usual chunk (no
        # blank line) costs one range, not a number per item.
        self.lines: list[range] = []

    @property
    def buffered(self) -> int:
        """Bytes held for a partial line."""
        return len(self._pending)

    def feed(self, data: bytes | bytearray) -> list[Any]:
        """Decode every line completed by ``data``; keep the partial last line."""
        out: list[Any] = []
        self.lines = []
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
        self.lines = []
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
            self.lines.append(range(self._line + 1, self._line + 2))
            self._index += 1

    def _oversize(self) -> str:
        return f"line exceeds the {self._max}-byte limit"

    def _decode_block(self, block: bytes, out: list[Any]) -> None:
        """Decode ``block`` (complete lines joined by ``\\n``, no final newline)."""
        joined = None
        if len(block) <= self._max:
            # A blank line leaves two separators side by side, a syntax error:
            # such blocks take the item-by-item path, which skips blank lines.
            separator = self._separator
            body = block.replace(b"\n", separator)
            # Each newline became a separator: counted without another pass
            # over the block (about 3% of benchmark B5, bench_ingest.py).
            count = (len(body) - len(block)) // (len(separator) - 1) + 1
            joined = b"".join((b"[", body, b"]"))
        else:
            count = block.count(b"\n") + 1
        values, clean = self._runs.decode(joined, count, lambda: self._entries(block))
        if clean:
            out.extend(values)
            self.lines.append(range(self._line + 1, self._line + count + 1))
            self._index += count
            self._line += count
            return
        lines = self.lines
        for value in values:
            self._line += 1
            if value is None:
                continue
            if isinstance(value, _Bad):
                out.append(BadEvent(self._index, self._line, value.error, value.job_id))
            else:
                out.append(value)
            if lines and lines[-1].stop == self._line:
                lines[-1] = range(lines[-1].start, self._line + 1)
            else:
                lines.append(range(self._line, self._line + 1))
            self._index += 1

    def _entries(self, block: bytes) -> list[_Entry]:
        entries: list[_Entry] = []
        for line in block.split(b"\n"):
            if len(line) > self._max:
                entries.append(_Bad(self._oversize()))
            elif line.strip(_JSON_BLANK):
                entries.append(line)
            else:
                entries.append(None)
        return entries


@final
class MsgpackFramer:
    """Frames of a 4-byte big-endian length then that many bytes of msgpack.

    The length prefix is the only framing there is, so it is trusted: a frame
    longer than the limit is reported as soon as its prefix arrives (naming the
    claimed length and the limit) and its bytes are skipped as they arrive; the
    stream carries on after them. If the input ends before they all arrived,
    :meth:`close` reports that too, as the next item (an index of its own,
    naming the frame's). Not thread-safe; each
    method is synchronous and never blocks.
    """

    __slots__ = (
        "_buf",
        "_index",
        "_max",
        "_need",
        "_runs",
        "_separator",
        "_skip",
        "_skipped",
    )

    def __init__(self, type: Any, max_frame: int) -> None:
        marker = _new_marker()
        separator = msgspec.msgpack.encode(marker)
        self._separator = separator
        self._runs = _Runs(
            msgspec.msgpack.Decoder(type).decode,
            _batch_decoder(msgspec.msgpack, type, marker),
            lambda payloads: _array_header(2 * len(payloads) - 1) + separator.join(payloads),
            marker,
            "msgpack",
            _namer(msgspec.msgpack.Decoder(_Named).decode),
        )
        self._max = max_frame
        self._buf = bytearray()  # the start of a frame not yet complete
        self._need = _HEADER_SIZE  # bytes _buf must hold before it can be decoded
        self._skip = 0  # bytes of an oversize frame still to drop
        self._skipped = (0, 0)  # (index, length) of the oversize frame being dropped
        self._index = 0

    @property
    def buffered(self) -> int:
        """Bytes held for a partial frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> list[Any]:
        """Decode every frame completed by ``data``; keep a partial last frame."""
        out: list[Any] = []
        start = 0
        if self._skip:
            start = min(self._skip, len(data))
            self._skip -= start
        buf = self._buf
        if buf:
            buf += memoryview(data)[start:]
            if len(buf) < self._need:
                return out  # nothing to decode yet: no copy, no scan
            del buf[: self._split(buf, 0, out)]
        else:
            used = self._split(data, start, out)
            buf += memoryview(data)[used:]
        if len(buf) >= _HEADER_SIZE:
            self._need = _HEADER_SIZE + _FRAME_HEADER.unpack_from(buf)[0]
        else:
            self._need = _HEADER_SIZE
        return out

    def close(self) -> list[Any]:
        """Report a truncated final frame, then reset to a fresh stream."""
        out: list[Any] = []
        have = len(self._buf)
        if self._skip:
            # An item of its own, after the frame reported as it began: every
            # rejection has an index no other item has.
            index, size = self._skipped
            error = (
                f"truncated frame: input ended {self._skip} bytes before the end of"
                f" the {size}-byte frame skipped as over the limit (event {index})"
            )
            out.append(BadEvent(self._index, None, error))
        elif have:
            if have < _HEADER_SIZE:
                error = f"truncated frame: {have} of {_HEADER_SIZE} length-prefix bytes"
            else:
                (size,) = _FRAME_HEADER.unpack_from(self._buf)
                error = f"truncated frame: {have - _HEADER_SIZE} of {size} payload bytes"
            out.append(BadEvent(self._index, None, error))
        self._buf.clear()
        self._need = _HEADER_SIZE
        self._skip = 0
        self._index = 0
        return out

    def _split(self, data: bytes | bytearray, pos: int, out: list[Any]) -> int:
        """Decode the complete frames of ``data`` from ``pos`` on; return where the
        first incomplete one starts (or the end)."""
        end = len(data)
        limit = self._max
        unpack_from = _FRAME_HEADER.unpack_from
        frames: list[bytes | bytearray] = []
        append = frames.append
        while pos + _HEADER_SIZE <= end:
            (size,) = unpack_from(data, pos)
            body = pos + _HEADER_SIZE
            stop = body + size
            if 0 < size <= limit:
                if stop > end:
                    break
                append(data[body:stop])
                pos = stop
                continue
            self._decode_frames(frames, out)
            frames = []
            append = frames.append
            if size:
                error = (
                    f"frame of {size} bytes exceeds the {limit}-byte limit;"
                    " skipping that many bytes"
                )
                self._skipped = (self._index, size)
            else:
                # An empty payload is no value; let through, a frame holding two
                # values next to it would balance a count.
                error = "empty frame"
            out.append(BadEvent(self._index, None, error))
            self._index += 1
            if stop > end:
                self._skip = stop - end
                return end
            pos = stop
        self._decode_frames(frames, out)
        return pos

    def _decode_frames(self, frames: list[bytes | bytearray], out: list[Any]) -> None:
        count = len(frames)
        if not count:
            return
        joined = _array_header(2 * count - 1) + self._separator.join(frames)
        values, clean = self._runs.decode(joined, count, lambda: list(frames))
        if clean:
            out.extend(values)
            self._index += count
            return
        for value in values:
            if isinstance(value, _Bad):
                out.append(BadEvent(self._index, None, value.error, value.job_id))
            else:
                out.append(value)
            self._index += 1


def _array_header(count: int) -> bytes:
    return _ARRAY32 + count.to_bytes(4, "big")
