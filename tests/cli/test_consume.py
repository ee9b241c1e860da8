"""``consume``/``consume_streams`` in-process: ordering, rejection, strict, interval,
cancellation (httpcore style: block a session, cancel, assert what was flushed)."""

from __future__ import annotations

import math

import anyio
import anyio.abc
import msgspec
import pytest

from events import (
    BadEvent,
    Decision,
    EventDecoder,
    EventEncoder,
    EventRejected,
    JobAllocated,
    JobSubmitted,
    SessionBegin,
    SessionEnd,
    WorkerUp,
)
from xce_core import Registry, SchedulerConfig, SchedulerCore
from xce_core._context import SchedContext
from xce_core._iterators import PlanIterator, PrimaryRequest
from xce_core.cli._run import (
    EXIT_BAD_EVENT,
    EXIT_OK,
    consume,
    parse_listen_address,
)
from xce_core.plugin import Allocator, FcfsPicker


class ChunkStream(anyio.abc.ByteReceiveStream):
    """Hands out the given chunks, then ends; records whether it was closed."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)
        self.closed = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)

    async def aclose(self) -> None:
        self.closed = True


class Output:
    """A ``write`` callable collecting every write (one per flush)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.written = anyio.Event()

    async def __call__(self, data: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        self.writes.append(data)
        self.written.set()

    def decisions(self) -> list[Decision]:
        decoder: EventDecoder[Decision] = EventDecoder("ndjson", type=Decision)
        items = decoder.feed(b"".join(self.writes)) + decoder.close()
        assert not any(isinstance(item, BadEvent) for item in items)
        return [item for item in items if not isinstance(item, BadEvent)]


def lines(*events: msgspec.Struct | str) -> bytes:
    encoder = EventEncoder("ndjson")
    return b"".join(
        e.encode() + b"\n" if isinstance(e, str) else encoder.encode(e) for e in events
    )


WORKER = WorkerUp(name="h1", slots=4)


async def test_a_bad_line_amid_a_chunk_of_submissions_costs_only_itself() -> None:
    # One chunk, decoded as one batch until the bad lines split it: each is
    # rejected with its own index and line, every good line around it applies.
    good = [
        b'{"type":"job_submitted","job_id":"j%d","user":"u%d","queue":"normal",'
        b'"resreq":"select[type==a] rusage[mem=100]","max_tasks":1,"submit_time":%d.0}'
        % (i, i % 7, i)
        for i in range(600)
    ]
    bad = [
        b'{"type":"job_submitted","job_id":"x1","max_tasks":0}',  # out of bounds
        b'{"type":"job_submitted","job_id":',  # malformed
        b'{"type":"job_submitted","job_id":"x2"} {"type":"session_begin"}',  # two values
    ]
    positions = [100, 300, 301]
    items = list(good)
    for pos, line in zip(positions, bad, strict=True):
        items.insert(pos, line)
    out = Output()
    core = SchedulerCore()
    data = b"\n".join(items) + b"\n"
    assert await consume(ChunkStream(data), core, out, format="ndjson") == EXIT_OK
    assert core.state.pending_count == 600
    assert all(f"j{i}" in core.state.jobs for i in range(600))
    rejected = out.decisions()
    assert all(isinstance(d, EventRejected) for d in rejected)
    assert [(d.index, d.line) for d in rejected if isinstance(d, EventRejected)] == [
        (pos, pos + 1) for pos in positions
    ]


async def test_bad_lines_are_rejected_in_place_and_nothing_good_is_lost() -> None:
    data = lines(
        WORKER,
        '{"type":"worker_up","name":"h2","slots":-1}',
        JobSubmitted(job_id="a"),
        "not json",
        "",
        JobSubmitted(job_id="b", max_tasks=2, min_tasks=2),
        SessionBegin(),
    )
    out = Output()
    stream = ChunkStream(data[:50], data[50:])
    assert await consume(stream, SchedulerCore(), out, format="ndjson") == EXIT_OK
    assert stream.closed
    decisions = out.decisions()
    rejected = [d for d in decisions if isinstance(d, EventRejected)]
    assert [(r.index, r.line) for r in rejected] == [(1, 2), (3, 4)]
    assert "$.slots" in rejected[0].error
    assert rejected[0].error.startswith("line 2: ")
    assert {d.job_id for d in decisions if isinstance(d, JobAllocated)} == {"a", "b"}
    assert isinstance(decisions[-1], SessionEnd)


async def test_decisions_are_flushed_per_chunk_and_per_session() -> None:
    out = Output()
    stream = ChunkStream(
        lines(WORKER, JobSubmitted(job_id="a"), SessionBegin(), JobSubmitted(job_id="b")),
        lines(SessionBegin()),
    )
    await consume(stream, SchedulerCore(), out, format="ndjson")
    # One write for the first session; the second chunk's session is its own write.
    assert len(out.writes) == 2
    assert b'"job_id":"a"' in out.writes[0]
    assert b'"job_id":"b"' in out.writes[1]


async def test_strict_stops_at_the_first_bad_event() -> None:
    out = Output()
    messages: list[str] = []
    data = lines(WORKER, JobSubmitted(job_id="a"), "{", JobSubmitted(job_id="b"), SessionBegin())
    status = await consume(
        ChunkStream(data),
        SchedulerCore(),
        out,
        format="ndjson",
        strict=True,
        report=messages.append,
    )
    assert status == EXIT_BAD_EVENT
    (rejected,) = out.decisions()
    assert isinstance(rejected, EventRejected)
    assert (rejected.index, rejected.line) == (2, 3)
    assert rejected.error.startswith("line 3: malformed JSON")
    assert len(messages) == 1
    assert "\n" not in messages[0]
    assert "line 3" in messages[0]


async def test_msgpack_in_ndjson_out() -> None:
    encoder = EventEncoder("msgpack")
    data = encoder.encode_many([WORKER, JobSubmitted(job_id="a"), SessionBegin()])
    out = Output()
    stream = ChunkStream(data[:7], data[7:])
    await consume(stream, SchedulerCore(), out, format="msgpack", output_format="ndjson")
    assert [type(d) for d in out.decisions()] == [JobAllocated, SessionEnd]


async def test_a_partial_last_line_is_not_joined_to_the_next_stream() -> None:
    class Streams:
        def __init__(self, *streams: ChunkStream) -> None:
            self.streams = list(streams)

        def __aiter__(self) -> Streams:
            return self

        async def __anext__(self) -> ChunkStream:
            await anyio.lowlevel.checkpoint()
            if not self.streams:
                raise StopAsyncIteration
            return self.streams.pop(0)

    first = ChunkStream(lines(WORKER) + b'{"type":"job_submitted",')
    second = ChunkStream(b'"job_id":"x"}\n' + lines(JobSubmitted(job_id="a"), SessionBegin()))
    out = Output()
    status = await consume(Streams(first, second), SchedulerCore(), out, format="ndjson")
    assert status == EXIT_OK
    assert first.closed
    assert second.closed
    rejected = [d for d in out.decisions() if isinstance(d, EventRejected)]
    # Indexes count across streams; lines restart with each stream.
    assert [(r.index, r.line) for r in rejected] == [(1, 2), (2, 1)]
    assert [d.job_id for d in out.decisions() if isinstance(d, JobAllocated)] == ["a"]


async def test_interval_runs_a_session_only_when_something_changed() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)
    out = Output()

    async def feed() -> None:
        async with send:
            await send.send(lines(WORKER, JobSubmitted(job_id="a")))
            with anyio.fail_after(3):
                await out.written.wait()
            await anyio.sleep(0.15)  # several idle intervals: no further session

    async with anyio.create_task_group() as tg:
        tg.start_soon(feed)
        status = await consume(
            _ObjectByteStream(receive), SchedulerCore(), out, format="ndjson", interval=0.03
        )
    assert status == EXIT_OK
    decisions = out.decisions()
    assert [type(d) for d in decisions] == [JobAllocated, SessionEnd]


class _ObjectByteStream(anyio.abc.ByteReceiveStream):
    def __init__(self, receive: anyio.abc.ObjectReceiveStream[bytes]) -> None:
        self._receive = receive

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._receive.receive()

    async def aclose(self) -> None:
        await self._receive.aclose()


class BlockingAllocator(Allocator):
    """Blocks every allocation until cancelled; ``entered`` is set when one starts."""

    name = "blocking"

    def __init__(self) -> None:
        self.entered = anyio.Event()

    def plans(self, request: PrimaryRequest, ctx: SchedContext) -> PlanIterator:
        raise NotImplementedError

    async def allocate(self, request: PrimaryRequest, ctx: SchedContext) -> bool:
        self.entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_cancelling_a_running_session_flushes_what_was_decided() -> None:
    allocator = BlockingAllocator()
    registry = Registry()
    registry.register_picker("fcfs", FcfsPicker())
    registry.register_allocator("blocking", allocator)
    config = SchedulerConfig(sequential_allocator="blocking", parallel_allocator="blocking")
    core = SchedulerCore(config, registry=registry)
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)
    send.send_nowait(lines(WORKER, "oops", JobSubmitted(job_id="a"), SessionBegin()))
    out = Output()
    with anyio.fail_after(3):
        async with anyio.create_task_group() as tg:

            async def cancel_when_blocked() -> None:
                await allocator.entered.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(cancel_when_blocked)
            await consume(_ObjectByteStream(receive), core, out, format="ndjson")
            pytest.fail("consume returned instead of being cancelled")
    assert not core.in_session
    decisions = out.decisions()
    assert [type(d) for d in decisions] == [EventRejected, SessionEnd]
    assert decisions[-1] == SessionEnd(
        session=1,
        allocated=0,
        pended=0,
        elapsed_s=decisions[-1].elapsed_s,  # type: ignore[union-attr]
    )
    send.close()


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("tcp://:0", ("tcp", "127.0.0.1", 0)),
        ("tcp://0.0.0.0:8000", ("tcp", "0.0.0.0", 8000)),
        ("tcp://[::1]:9", ("tcp", "::1", 9)),
        ("unix:/tmp/x.sock", ("unix", "/tmp/x.sock", 0)),
        ("unix:///tmp/x.sock", ("unix", "/tmp/x.sock", 0)),
    ],
)
def test_parse_listen_address(address: str, parsed: tuple[str, str, int]) -> None:
    assert parse_listen_address(address) == parsed


@pytest.mark.parametrize("address", ["tcp://host", "tcp://h:99999", "http://x:1", "unix:"])
def test_parse_listen_address_refuses(address: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_listen_address(address)
