"""The input side of ``xce run --nats`` in-process: taking delivered messages
in order (:class:`InputFetcher`), with and without the client's deliveries
intercepted."""

from __future__ import annotations

import anyio
import pytest
from msgspec.structs import replace

pytest.importorskip("nats")
import nats
from nats.aio.msg import Msg
from nats.js.api import StreamConfig

from events import BadEvent
from tests.cli.nats_server import NatsServer
from xce_core.cli import _nats_input
from xce_core.cli._nats_input import InputFetcher, InputMessage, PayloadDecoder
from xce_core.cli._nats_streams import NatsOptions


def delivered(seq: int, data: bytes = b"{}") -> Msg:
    reply = f"$JS.ACK.IN.d.1.{seq}.{seq}.{seq * 1_000_000_000}.0"
    return Msg(_client=None, subject="_INBOX.x", reply=reply, data=data)  # type: ignore[arg-type]


def raw(seq: int, data: bytes = b"{}") -> tuple[bytes, bytes]:
    """A message as :func:`intercept_deliveries` hands it over."""
    msg = delivered(seq, data)
    return msg.reply.encode(), msg.data


def fetcher_at(expected: int) -> InputFetcher:
    fetcher = InputFetcher(None, None, NatsOptions(), expected)  # type: ignore[arg-type]
    fetcher._fresh = False
    return fetcher


def test_a_gap_keeps_what_came_before_it() -> None:
    fetcher = fetcher_at(10)
    taken = fetcher._take([delivered(10), raw(11), raw(13), delivered(14)])
    assert [m.seq for m in taken] == [10, 11]
    assert taken[1] == (11, 11.0, delivered(11).reply, b"{}")
    assert fetcher.next_seq == 12  # the consumer is recreated there
    assert fetcher._reopen


def test_redeliveries_are_dropped_and_status_messages_end_credit() -> None:
    fetcher = fetcher_at(10)
    fetcher._credit = 1000
    status = Msg(
        _client=None,  # type: ignore[arg-type]
        subject="_INBOX.x",
        headers={"Status": "408", "Nats-Pending-Messages": "900"},
    )
    taken = fetcher._take([raw(8), delivered(9), raw(10), status, delivered(11)])
    assert [m.seq for m in taken] == [10, 11]
    assert fetcher._credit == 1000 - 3 - 900 - 1
    assert not fetcher._reopen


@pytest.mark.parametrize("intercept", [True, False], ids=["intercepted", "queued"])
async def test_fetches_the_stream_in_order(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch, intercept: bool
) -> None:
    if not intercept:
        monkeypatch.setattr(_nats_input, "intercept_deliveries", lambda *args: None)
    options = NatsOptions(url=nats_server.url, stream="IN_t", subject="in.t", batch=50)
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="IN_t", subjects=["in.t"]))
        # Some with headers: those come as the client builds them, in their place.
        for i in range(300):
            headers = {"X-Producer": "p"} if i % 97 == 5 else None
            await js.publish("in.t", f"{i}\n".encode(), headers=headers)
        fetcher = InputFetcher(nc, js, options, 1)
        await fetcher.open()
        assert ("_process_msg" in nc.__dict__) == intercept
        got: list[InputMessage] = []
        with anyio.fail_after(20):
            while len(got) < 300:
                got += await fetcher.fetch()
        assert [m.seq for m in got] == list(range(1, 301))
        assert [m.data for m in got] == [f"{i}\n".encode() for i in range(300)]
        assert all(m.reply.startswith("$JS.ACK.IN_t.") for m in got)
        await nc.publish(got[-1].reply, b"+ACK")
        await fetcher.close()
        assert "_process_msg" not in nc.__dict__
        info = await js.consumer_info("IN_t", options.durable)
        assert info.delivered.stream_seq == 300
    finally:
        await nc.close()


def test_a_batch_decodes_as_its_payloads_one_by_one() -> None:
    decoder = PayloadDecoder(NatsOptions())
    good = [
        b'{"type":"worker_up","name":"h1","slots":2}\n',
        b'{"type":"job_submitted","job_id":"j1"}\n',
        b'{"type":"session_begin"}',  # no newline
        b'{"type":"job_submitted","job_id":"j2"}\r\n',
    ]
    bad = [b"\n", b" \n", b"\x0b\n", b"a\nb\n", b'{"type":"nope"}\n', b"{\n", b""]
    assert not any(isinstance(item, BadEvent) for item in decoder.decode(good))
    for payloads in (good, bad, good[:2] + bad + good[2:], bad[::-1] + good):
        alone = [decoder.decode([p])[0] for p in payloads]
        assert decoder.decode(payloads) == [
            replace(item, index=i) if isinstance(item, BadEvent) else item
            for i, item in enumerate(alone)
        ]
