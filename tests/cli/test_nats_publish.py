"""The decision publisher of ``xce run --nats`` in-process, on a real
``nats-server -js``: its two ways of sending (messages built here and queued in
blocks, or one ``Client.publish`` each) store the same messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

pytest.importorskip("nats")
import nats
from nats.aio.client import Client

from events import JobAllocated, JobPended
from tests.cli.nats_server import NatsServer
from xce_core.cli import _nats_publish
from xce_core.cli._nats_publish import DecisionPublisher, frame_writer, hpub_frame
from xce_core.cli._nats_streams import NatsOptions, decision_msg_id, ensure_streams

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def nc(nats_server: NatsServer) -> AsyncIterator[Client]:
    client = await nats.connect(nats_server.url)
    yield client
    await client.close()


def captured(nc: Client, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The commands ``nc`` queues from now on."""
    commands: list[bytes] = []
    send = nc._send_command

    async def spy(cmd: bytes, priority: bool = False) -> None:
        commands.append(bytes(cmd))
        await send(cmd, priority)

    monkeypatch.setattr(nc, "_send_command", spy)
    return commands


@pytest.mark.parametrize("reply", ["_INBOX.x.0.63", ""])
@pytest.mark.parametrize("job_id", ["j7", "j 7 ", "#" + "x" * 300])
async def test_frame_is_what_publish_sends(
    nc: Client, monkeypatch: pytest.MonkeyPatch, reply: str, job_id: str
) -> None:
    msg_id = decision_msg_id(JobPended(session=3, job_id=job_id, reason="r"), 9)
    payload = b'{"type":"job_pended"}\n'
    commands = captured(nc, monkeypatch)
    headers = {"Nats-Msg-Id": msg_id, "Nats-Expected-Last-Sequence": "41", "Xce-Pos": "12.3"}
    await nc.publish("out.x", payload, reply, headers=headers)
    expected = commands[0]
    if not reply:  # the client leaves the empty reply between two spaces
        expected = expected.replace(b"out.x  ", b"out.x ", 1)
    assert hpub_frame("out.x", reply, msg_id, 41, (12, 3), payload) == expected


def test_frame_writer_needs_the_client_internals() -> None:
    class Bare:
        def __init__(self) -> None:
            self.stats = {"out_msgs": 0, "out_bytes": 0}

    assert frame_writer(Bare()) is None  # type: ignore[arg-type]


async def stored(url: str, stream: str) -> list[tuple[str, str, int, Any]]:
    """``(msg id, position, stream sequence, payload)`` of every stored message."""
    client = await nats.connect(url)
    try:
        js = client.jetstream()
        info = await js.stream_info(stream)
        out = []
        for seq in range(1, info.state.last_seq + 1):
            msg = await js.get_msg(stream, seq)
            headers = msg.headers or {}
            out.append((headers["Nats-Msg-Id"], headers["Xce-Pos"], msg.seq, msg.data))
        return out
    finally:
        await client.close()


@pytest.mark.parametrize("blocks", [True, False], ids=["blocks", "publish"])
async def test_both_ways_store_the_same(
    nats_server: NatsServer, nc: Client, monkeypatch: pytest.MonkeyPatch, blocks: bool
) -> None:
    if not blocks:
        monkeypatch.setattr(_nats_publish, "frame_writer", lambda nc: None)
    options = NatsOptions(url=nats_server.url, publish_window=150)
    js = nc.jetstream()
    await ensure_streams(js, options)
    fenced = 0

    async def fence() -> None:
        nonlocal fenced
        fenced += 1

    commands = captured(nc, monkeypatch)
    publisher = DecisionPublisher(nc, js, options, fence)
    await publisher.open()
    # Two hand-overs: 2,500 decisions of input message 5, 7 of message 6.
    decisions = [JobPended(session=1, job_id=f"j{i}", reason="r") for i in range(2507)]
    items = [
        ((5, i) if i < 2500 else (6, i - 2500), decision_msg_id(d, 0), d)
        for i, d in enumerate(decisions)
    ]
    async with anyio.create_task_group() as tg:
        tg.start_soon(publisher.run)
        with anyio.fail_after(30):
            await publisher.publish(items[:2500])
            await publisher.publish(items[2500:])
            await publisher.wait_acked(len(items))
        tg.cancel_scope.cancel()
    await publisher.close()
    assert fenced > 0
    hpubs = [c for c in commands if c.startswith(b"HPUB")]
    # Blocks hold up to 1,000 messages, and stop at the window.
    assert (len(hpubs) < 50) if blocks else (len(hpubs) == len(items))
    assert nc.stats["out_msgs"] >= len(items)
    got = await stored(nats_server.url, options.decisions_stream)
    assert [(g[0], g[1], g[2]) for g in got] == [
        (msg_id, f"{pos[0]}.{pos[1]}", n + 1) for n, (pos, msg_id, _) in enumerate(items)
    ]
    assert [g[3] for g in got] == [publisher._encoder.encode(d) for d in decisions]

    # Published again (a restart replaying): nothing more is stored.
    again = DecisionPublisher(nc, js, options, fence)
    await again.open()
    await again.publish(items)
    assert again.acked == len(items)
    await again.close()
    assert len(await stored(nats_server.url, options.decisions_stream)) == len(items)


@pytest.mark.parametrize("job_id", ["j", "j ", " j", "j\t", "#j", "é", "x" * 500])
def test_msg_ids_survive_header_stripping_and_stay_distinct(job_id: str) -> None:
    # A client strips spaces at the ends of a header value: every msg id is
    # already stripped, so jobs whose ids differ only there keep distinct ids.
    msg_id = decision_msg_id(JobAllocated(session=2, job_id=job_id, hosts=[]), 0)
    assert msg_id == msg_id.strip()
    assert msg_id.isascii()
    assert msg_id.isprintable()
    others = {"j", "j ", " j", "j\t", "#j", "é", "x" * 500} - {job_id}
    assert msg_id not in {
        decision_msg_id(JobAllocated(session=2, job_id=o, hosts=[]), 0) for o in others
    }
