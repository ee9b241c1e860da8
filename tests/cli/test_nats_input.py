"""The input side of ``xce run --nats`` in-process: taking delivered messages
in order (:class:`InputFetcher`), with and without the client's deliveries
intercepted."""

from __future__ import annotations

import anyio
import pytest
from msgspec.structs import replace

pytest.importorskip("nats")
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import StreamConfig

from events import BadEvent
from tests.cli.nats_server import NatsServer
from xce_core.cli import _nats_deliveries, _nats_input
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


def msg_frame(sid: int, seq: int, payload: bytes) -> bytes:
    reply = raw(seq)[0]
    return b"MSG in.t %d %s %d\r\n%s\r\n" % (sid, reply, len(payload), payload)


@pytest.mark.parametrize("cut", [1, 7, 64, 1 << 20])
async def test_the_parser_fast_path_delivers_what_the_client_would(cut: int) -> None:
    nc = Client()
    sub = Subscription(nc, 2, "_INBOX.x", pending_msgs_limit=0, pending_bytes_limit=0)
    nc._subs[2] = sub
    arrived: list[_nats_deliveries.Arrival] = []
    undo = _nats_deliveries.intercept_deliveries(nc, sub, arrived, lambda: None)
    assert undo is not None
    assert "parse" in nc._ps.__dict__
    payloads = [b'{"a":1}\n', b"two\r\nlines\r\n", b"", b"MSG in.t 2 x 3\r\n", b"x" * 300]
    head = b"NATS/1.0 408 Request Timeout\r\n\r\n"
    status = b"HMSG _INBOX.x 2 %d %d\r\n%s\r\n" % (len(head), len(head), head)
    other = b"MSG out.t 3 r 2\r\nok\r\n"
    stream = b"".join(msg_frame(2, i, p) for i, p in enumerate(payloads, 1))
    stream += b"+OK\r\n" + other + status + msg_frame(2, 9, b"last\n")
    for at in range(0, len(stream), cut):
        await nc._ps.parse(stream[at : at + cut])
    assert nc._ps.buf == b""
    plain = [a for a in arrived if isinstance(a, tuple)]
    assert plain == [raw(i, p) for i, p in enumerate(payloads, 1)] + [raw(9, b"last\n")]
    assert [a.headers for a in arrived if isinstance(a, Msg)] == [
        {"Status": "408", "Description": "Request Timeout"}
    ]
    assert isinstance(arrived[5], Msg)  # in its place, before the last message
    assert nc.stats["in_msgs"] == 8  # the client counts the other two
    undo()
    assert "parse" not in nc._ps.__dict__


def test_a_batch_is_taken_at_once_as_one_by_one() -> None:
    batches = [
        [raw(10), raw(11), raw(12)],  # at once
        [raw(10), raw(12)],  # a gap
        [raw(9), raw(10)],  # a redelivery
        [raw(10), delivered(11)],  # a Msg
        [raw(10), (b"$JS.ACK.dom.hash.IN.d.1.11.11.11000000000.0.tok", b"{}")],  # long form
    ]
    for arrivals in batches:
        at_once, one_by_one = fetcher_at(10), fetcher_at(10)
        taken = at_once._take(arrivals)
        expected = [one_by_one._take([a]) for a in arrivals if not one_by_one._reopen]
        assert taken == [m for ms in expected for m in ms]
        assert (at_once.next_seq, at_once._reopen) == (one_by_one.next_seq, one_by_one._reopen)
    assert fetcher_at(10)._take_plain(batches[0]) is not None
