"""The input side of ``xce run --nats`` in-process: taking delivered messages
in order (:class:`InputFetcher`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("nats")
from nats.aio.msg import Msg

from xce_core.cli._nats_input import InputFetcher
from xce_core.cli._nats_streams import NatsOptions


def delivered(seq: int, data: bytes = b"{}") -> Msg:
    reply = f"$JS.ACK.IN.d.1.{seq}.{seq}.{seq * 1_000_000_000}.0"
    return Msg(_client=None, subject="_INBOX.x", reply=reply, data=data)  # type: ignore[arg-type]


class FakeSub:
    def __init__(self, msgs: list[Msg]) -> None:
        self._pending_queue: asyncio.Queue[Msg] = asyncio.Queue()
        self._pending_size = 0
        for msg in msgs:
            self._pending_queue.put_nowait(msg)


def fetcher_at(expected: int) -> InputFetcher:
    fetcher = InputFetcher(None, None, NatsOptions(), expected)  # type: ignore[arg-type]
    fetcher._fresh = False
    return fetcher


async def test_a_gap_keeps_what_came_before_it() -> None:
    fetcher = fetcher_at(10)
    sub: Any = FakeSub([delivered(11), delivered(13), delivered(14)])
    taken = fetcher._take(delivered(10), sub)
    assert [m.seq for m in taken] == [10, 11]
    assert taken[0].time == 10.0
    assert fetcher.next_seq == 12  # the consumer is recreated there
    assert fetcher._reopen


async def test_redeliveries_are_dropped() -> None:
    fetcher = fetcher_at(10)
    sub: Any = FakeSub([delivered(9), delivered(10), delivered(11)])
    taken = fetcher._take(delivered(8), sub)
    assert [m.seq for m in taken] == [10, 11]
    assert not fetcher._reopen
