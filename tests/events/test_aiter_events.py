"""aiter_events: batches per chunk from a ByteReceiveStream, flush at end of stream."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from events import BadEvent, EventEncoder, JobFinished, SessionBegin, aiter_events


class ChunkStream(anyio.abc.ByteReceiveStream):
    """Test double: hands out the given chunks, then ends (or raises ``end``)."""

    def __init__(self, chunks: list[bytes], end: type[Exception] = anyio.EndOfStream) -> None:
        self.chunks = list(chunks)
        self.end = end
        self.receives = 0

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        self.receives += 1
        if not self.chunks:
            raise self.end
        return self.chunks.pop(0)

    async def aclose(self) -> None:
        self.chunks.clear()


GOOD = b'{"type":"job_finished","job_id":"j"}\n'


async def test_one_non_empty_list_per_chunk_then_the_close_remainder() -> None:
    stream = ChunkStream(
        [GOOD + GOOD[:5], GOOD[5:10], GOOD[10:] + b"x\n", b'{"type":"session_begin"}']
    )
    batches = [batch async for batch in aiter_events(stream)]
    job = JobFinished(job_id="j")
    assert batches == [
        [job],
        [job, BadEvent(2, 3, "malformed JSON: invalid character (byte 0)")],
        [SessionBegin()],
    ]


async def test_closed_resource_error_also_ends_the_stream() -> None:
    stream = ChunkStream([GOOD], end=anyio.ClosedResourceError)
    assert [batch async for batch in aiter_events(stream)] == [[JobFinished(job_id="j")]]


async def test_other_stream_errors_propagate() -> None:
    stream = ChunkStream([GOOD], end=anyio.BrokenResourceError)
    batches = aiter_events(stream)
    assert await batches.__anext__() == [JobFinished(job_id="j")]
    with pytest.raises(anyio.BrokenResourceError):
        await batches.__anext__()


async def test_msgpack_over_a_buffered_memory_object_stream() -> None:
    events = [JobFinished(job_id=str(i)) for i in range(50)]
    wire = EventEncoder("msgpack").encode_many(events)
    send, receive = anyio.create_memory_object_stream[bytes](1000)
    async with send:
        for i in range(0, len(wire), 7):
            send.send_nowait(wire[i : i + 7])
    got: list[Any] = []
    stream = BufferedByteReceiveStream(receive)
    async with receive, aiter_events(stream, "msgpack") as batches:
        async for batch in batches:
            assert batch
            got += batch
    assert got == events


async def test_aclose_stops_iteration_without_reading_further() -> None:
    stream = ChunkStream([GOOD, GOOD, GOOD])
    batches = aiter_events(stream)
    assert await batches.__anext__() == [JobFinished(job_id="j")]
    await batches.aclose()
    await batches.aclose()
    with pytest.raises(StopAsyncIteration):
        await batches.__anext__()
    assert stream.receives == 1


async def test_cancelled_receive_loses_no_bytes() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](10)
    batches = aiter_events(BufferedByteReceiveStream(receive))
    send.send_nowait(GOOD[:10])
    with anyio.move_on_after(0.05):
        await batches.__anext__()
    send.send_nowait(GOOD[10:])
    assert await batches.__anext__() == [JobFinished(job_id="j")]
    send.close()
    with pytest.raises(StopAsyncIteration):
        await batches.__anext__()
    receive.close()
