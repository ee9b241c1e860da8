"""Event codecs: NDJSON and length-prefixed msgpack, decoded incrementally in batches.

Wire formats
------------
``"ndjson"``
    One JSON object per line, ``\\n``-terminated (``\\r\\n`` accepted). Blank or
    whitespace-only lines are skipped; they are not events but do count as lines.
``"msgpack"``
    Each frame is a 4-byte big-endian unsigned length followed by that many bytes
    holding one msgpack value.

Decoding never raises on bad input: every undecodable item becomes a
:class:`BadEvent` in its place in the output, and the good items around it are
returned as usual. Whether to skip, reject or abort is the caller's decision
(``--strict`` consumers raise :class:`~events.EventDecodeError`).

What a decoder returns does not depend on how the input is chunked: it is
exactly what decoding each line or frame on its own gives (see
:mod:`events._framing` for how batching keeps that promise).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar, final, overload

import anyio
import anyio.abc
import msgspec

from events._framing import BadEvent, MsgpackFramer, NdjsonFramer
from events._schema import InputEvent

__all__ = [
    "BadEvent",
    "EventBatchIterator",
    "EventDecoder",
    "EventEncoder",
    "EventFormat",
    "aiter_events",
]

EventFormat: TypeAlias = Literal["ndjson", "msgpack"]
"""The two wire formats: newline-delimited JSON and length-prefixed msgpack."""

DEFAULT_MAX_FRAME: Final = 1 << 20
_MAX_FRAME_LENGTH: Final = (1 << 32) - 1
_FRAME_HEADER: Final = struct.Struct(">I")

T = TypeVar("T")


def _framer(format: EventFormat, type: Any, max_frame: int) -> NdjsonFramer | MsgpackFramer:
    if max_frame < 1:
        raise ValueError(f"max_frame must be at least 1, got {max_frame}")
    if format == "ndjson":
        return NdjsonFramer(type, max_frame)
    if format == "msgpack":
        return MsgpackFramer(type, max_frame)
    raise ValueError(f"unknown event format {format!r} (expected 'ndjson' or 'msgpack')")


@final
class EventDecoder(Generic[T]):
    """Incremental decoder of an event stream, fed raw chunks as they arrive.

    ``type`` is what each item decodes to (default: the :data:`~events.InputEvent`
    union; pass :data:`~events.Decision` or :data:`~events.WireEvent` to read
    decisions). ``max_frame`` bounds one NDJSON line (excluding its newline) or
    one msgpack payload, in bytes; it also bounds the memory held for a partial
    item. The msgspec decoders are built once, here.

    Each NDJSON line must hold exactly one JSON value and each msgpack frame
    exactly one msgpack value; anything else is a :class:`BadEvent`, and so is
    a value nested too deeply to decode (never a :class:`RecursionError`). The
    result is the same however the input is split into chunks.

    A msgpack frame whose length prefix exceeds ``max_frame`` is reported as
    soon as the prefix arrives and its bytes are skipped (the prefix is the only
    framing msgpack has); if the input ends first, :meth:`close` reports the
    truncation under the same index.

    Items are numbered from 0 in stream order, bad ones included. A decoder is
    not thread-safe; its methods are synchronous and never block. Decoding is
    linear in the input however it is chunked, and :attr:`buffered` (at most
    ``max_frame`` plus one chunk) is all a decoder holds between calls.
    Raises :class:`ValueError` for an unknown ``format`` or ``max_frame < 1``.
    """

    __slots__ = ("_framer", "format")

    @overload
    def __init__(
        self: EventDecoder[InputEvent],
        format: EventFormat = "ndjson",
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None: ...

    @overload
    def __init__(
        self, format: EventFormat = "ndjson", *, max_frame: int = DEFAULT_MAX_FRAME, type: Any
    ) -> None: ...

    def __init__(
        self,
        format: EventFormat = "ndjson",
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        type: Any = InputEvent,
    ) -> None:
        self.format: Final = format
        self._framer = _framer(format, type, max_frame)

    def feed(self, data: bytes | bytearray | memoryview) -> list[T | BadEvent]:
        """Decode every item that ``data`` completes, in stream order.

        A partial trailing item is kept for the next call. Good items are decoded
        in one msgspec call per chunk; a failing batch is bisected to find the bad
        items, which are returned as :class:`BadEvent` in their place.
        """
        if isinstance(data, memoryview):
            data = data.tobytes()
        return self._framer.feed(data)

    def close(self) -> list[T | BadEvent]:
        """Flush the end of the stream and reset the decoder for a new stream.

        NDJSON: a final line without its newline is decoded. msgpack: a truncated
        frame (including one being skipped as over the limit) becomes a
        :class:`BadEvent`. Numbering restarts at 0 afterwards.
        """
        return self._framer.close()

    @property
    def buffered(self) -> int:
        """Bytes held for a partial item (what :meth:`close` would flush)."""
        return self._framer.buffered

    def lines(self) -> list[range] | None:
        """The 1-based input lines of the items the last :meth:`feed` or
        :meth:`close` returned, bad ones included, in order: runs of
        consecutive lines (a chunk without blank lines is one range). ``None``
        for msgpack, which has no lines."""
        framer = self._framer
        return framer.lines if isinstance(framer, NdjsonFramer) else None


@final
class EventEncoder:
    """Encoder of events (any msgspec-encodable values) to one of the wire formats.

    The msgspec encoder is built once, here. Methods are synchronous; the
    encoder holds no per-call state, so one instance may be shared.
    Raises :class:`ValueError` for an unknown ``format``.
    """

    __slots__ = ("_json", "_msgpack", "format")

    def __init__(self, format: EventFormat = "ndjson") -> None:
        if format not in ("ndjson", "msgpack"):
            raise ValueError(f"unknown event format {format!r} (expected 'ndjson' or 'msgpack')")
        self.format: Final = format
        self._json = msgspec.json.Encoder()
        self._msgpack = msgspec.msgpack.Encoder()

    def encode(self, event: Any) -> bytes:
        """One event: a ``\\n``-terminated JSON line, or one length-prefixed frame."""
        if self.format == "ndjson":
            return self._json.encode_lines((event,))
        buf = bytearray(4)
        self._msgpack.encode_into(event, buf, 4)
        _FRAME_HEADER.pack_into(buf, 0, self._checked_length(len(buf) - 4))
        return bytes(buf)

    def encode_many(self, events: Iterable[Any]) -> bytes:
        """Many events, concatenated exactly as :meth:`encode` would write each."""
        if self.format == "ndjson":
            return self._json.encode_lines(events)
        buf = bytearray()
        encode_into = self._msgpack.encode_into
        pack_into = _FRAME_HEADER.pack_into
        for event in events:
            start = len(buf)
            buf += b"\0\0\0\0"
            encode_into(event, buf, -1)
            pack_into(buf, start, self._checked_length(len(buf) - start - 4))
        return bytes(buf)

    @staticmethod
    def _checked_length(length: int) -> int:
        if length > _MAX_FRAME_LENGTH:
            raise ValueError(f"event of {length} bytes does not fit a msgpack frame")
        return length


@final
class EventBatchIterator(Generic[T]):
    """Async iterator of decoded batches read from a byte stream.

    Each ``__anext__`` receives chunks until one completes at least one item and
    returns that chunk's items (never an empty list); at end of stream
    (:class:`anyio.EndOfStream` or :class:`anyio.ClosedResourceError`) it returns
    the decoder's flushed remainder, if any, then stops. Every ``__anext__`` is a
    cancellation point (it awaits ``stream.receive()``); cancellation between
    chunks loses nothing, as undecoded bytes stay in the decoder. Other stream
    errors propagate. :meth:`aclose` ends iteration; it does not close the stream,
    which belongs to the caller.
    """

    __slots__ = ("_decoder", "_done", "_stream")

    def __init__(self, stream: anyio.abc.ByteReceiveStream, decoder: EventDecoder[T]) -> None:
        self._stream = stream
        self._decoder = decoder
        self._done = False

    def __aiter__(self) -> EventBatchIterator[T]:
        return self

    async def __anext__(self) -> list[T | BadEvent]:
        while not self._done:
            try:
                chunk = await self._stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                self._done = True
                rest = self._decoder.close()
                if rest:
                    return rest
                break
            items = self._decoder.feed(chunk)
            if items:
                return items
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop iterating (idempotent); bytes not yet decoded are discarded."""
        self._done = True

    async def __aenter__(self) -> EventBatchIterator[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@overload
def aiter_events(
    stream: anyio.abc.ByteReceiveStream,
    format: EventFormat = "ndjson",
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
) -> EventBatchIterator[InputEvent]: ...


@overload
def aiter_events(
    stream: anyio.abc.ByteReceiveStream,
    format: EventFormat = "ndjson",
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    type: Any,
) -> EventBatchIterator[Any]: ...


def aiter_events(
    stream: anyio.abc.ByteReceiveStream,
    format: EventFormat = "ndjson",
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    type: Any = InputEvent,
) -> EventBatchIterator[Any]:
    """Iterate over ``stream`` as lists of decoded items, one list per useful chunk.

    See :class:`EventBatchIterator` for the iteration contract and
    :class:`EventDecoder` for ``format``, ``max_frame`` and ``type``. This is a
    plain function returning an iterator object, not an async generator, so there
    is nothing to finalise; ``async with aiter_events(...) as batches:`` is
    supported for symmetry.
    """
    decoder: EventDecoder[Any] = EventDecoder(format, max_frame=max_frame, type=type)
    return EventBatchIterator(stream, decoder)
