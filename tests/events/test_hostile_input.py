"""Hostile input: what a decoder returns never depends on read boundaries, lying
length prefixes are reported at once and at the end, deep nesting is a rejected
item (never a RecursionError), and decoding stays linear in small chunks."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import BadEvent, EventDecoder, EventFormat, JobFinished, SessionBegin
from tests import strategies as strat
from tests.events.chunks import chunked, decode_all, frame
from tests.events.reference import msgpack_alone, ndjson_alone

HOSTILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL_FRAME = 256  # so that "long" lines and oversize frames are common
GOOD = b'{"type":"job_finished","job_id":"j"}'
CUTS = st.lists(st.integers(0, 1 << 16), max_size=30)


def deep_json(depth: int) -> bytes:
    return b'{"type":"job_finished","job_id":"d","x":' + b"[" * depth + b"]" * depth + b"}"


def deep_msgpack(depth: int) -> bytes:
    head = msgspec.msgpack.encode({"type": "job_finished", "job_id": "d", "x": None})[:-1]
    return head + b"\x91" * depth + b"\x90"  # fixarray(1) ... fixarray(0)


# ------------------------------------------------------------------ read boundaries


@HOSTILE
@given(lines=strat.hostile_ndjson_lines(), cuts=CUTS, crlf=st.booleans(), end=st.booleans())
def test_ndjson_any_chunking_gives_what_each_line_gives_alone(
    lines: list[bytes], cuts: list[int], crlf: bool, end: bool
) -> None:
    newline = b"\r\n" if crlf else b"\n"
    data = newline.join(lines) + (newline if end else b"")
    decoder = EventDecoder(max_frame=SMALL_FRAME)
    assert decode_all(decoder, chunked(data, cuts)) == ndjson_alone(data, SMALL_FRAME)


@HOSTILE
@given(lines=strat.hostile_ndjson_lines(), cuts=CUTS, crlf=st.booleans(), end=st.booleans())
def test_ndjson_lines_name_each_item_s_input_line_whatever_the_chunking(
    lines: list[bytes], cuts: list[int], crlf: bool, end: bool
) -> None:
    # Each item's line as the reference finds it line by line (bad items carry
    # it; a good one's is the line it alone was decoded from).
    newline = b"\r\n" if crlf else b"\n"
    data = newline.join(lines) + (newline if end else b"")
    expected = [
        number
        for number, line in enumerate(data.split(b"\n"), start=1)
        for _ in ndjson_alone(line + b"\n", SMALL_FRAME)
    ]
    decoder = EventDecoder(max_frame=SMALL_FRAME)
    got: list[int] = []
    for chunk in chunked(data, cuts):
        items = decoder.feed(chunk)
        runs = decoder.lines()
        assert runs is not None
        got += [number for run in runs for number in run]
        assert sum(len(run) for run in runs) == len(items)
    items = decoder.close()
    runs = decoder.lines()
    assert runs is not None
    assert sum(len(run) for run in runs) == len(items)
    got += [number for run in runs for number in run]
    assert got == expected
    assert EventDecoder("msgpack").lines() is None


@HOSTILE
@given(data=strat.hostile_msgpack_stream(SMALL_FRAME), cuts=CUTS)
def test_msgpack_any_chunking_gives_what_each_frame_gives_alone(
    data: bytes, cuts: list[int]
) -> None:
    decoder = EventDecoder("msgpack", max_frame=SMALL_FRAME)
    assert decode_all(decoder, chunked(data, cuts)) == msgpack_alone(data, SMALL_FRAME)


def test_a_line_split_in_two_is_not_balanced_by_a_line_holding_two() -> None:
    # Joined by a comma, the first two lines are one valid event; the third holds
    # two. A batch of the three has as many values as lines.
    hostile = [b'{"type":"job_finished","job_id":"a","x":[{}', b"{}]}", GOOD + b"," + GOOD]
    data = b"\n".join([GOOD, *hostile, GOOD]) + b"\n"
    whole = decode_all(EventDecoder(), [data])
    assert whole == decode_all(EventDecoder(), [data[i : i + 1] for i in range(len(data))])
    assert [(item.index, item.line) for item in whole if isinstance(item, BadEvent)] == [
        (1, 2),
        (2, 3),
        (3, 4),
    ]
    assert whole[0] == whole[4] == JobFinished(job_id="j")


def test_a_split_frame_is_not_balanced_by_a_frame_holding_two() -> None:
    event = msgspec.msgpack.encode({"type": "job_finished", "job_id": "a"})
    two = msgspec.msgpack.encode(SessionBegin()) * 2
    good = frame(msgspec.msgpack.encode(SessionBegin()))
    data = good + frame(event[:5]) + frame(event[5:]) + frame(two) + good
    whole = decode_all(EventDecoder("msgpack"), [data])
    assert whole == decode_all(
        EventDecoder("msgpack"), [data[i : i + 1] for i in range(len(data))]
    )
    assert [type(item) for item in whole] == [
        SessionBegin,
        BadEvent,
        BadEvent,
        BadEvent,
        SessionBegin,
    ]


# ------------------------------------------------------------------ msgpack length prefixes


def test_a_lying_length_prefix_is_reported_at_once_and_again_at_the_end() -> None:
    good = frame(msgspec.msgpack.encode(SessionBegin()))
    decoder = EventDecoder("msgpack")
    swallowed = good * 10  # whatever follows the lie is taken as its payload
    assert decoder.feed(good + b"\xff\xff\xff\xff" + swallowed) == [
        SessionBegin(),
        BadEvent(
            1,
            None,
            "frame of 4294967295 bytes exceeds the 1048576-byte limit; skipping that many bytes",
        ),
    ]
    assert decoder.feed(good) == []
    missing = 4294967295 - len(swallowed) - len(good)
    assert decoder.close() == [
        BadEvent(
            2,  # an item of its own, naming the frame's index
            None,
            f"truncated frame: input ended {missing} bytes before the end of the"
            " 4294967295-byte frame skipped as over the limit (event 1)",
        )
    ]
    # The decoder is fresh again.
    assert decoder.feed(good) == [SessionBegin()]


@pytest.mark.parametrize("cut", [1, 3, 4, 9])
def test_a_truncated_final_frame_is_reported_at_the_end(cut: int) -> None:
    good = frame(msgspec.msgpack.encode(SessionBegin()))
    out = decode_all(EventDecoder("msgpack"), [good, good[:cut]])
    assert out[0] == SessionBegin()
    assert isinstance(out[1], BadEvent)
    assert out[1].error.startswith("truncated frame:")


# ------------------------------------------------------------------ nesting


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("one_byte_reads", [False, True])
def test_deep_json_nesting_is_a_rejected_line_not_a_recursion_error(
    depth: int, one_byte_reads: bool
) -> None:
    data = b"\n".join([GOOD] * 20 + [deep_json(depth)] + [GOOD] * 20) + b"\n"
    step = 1 if one_byte_reads and depth < 10_000 else len(data)
    out = decode_all(EventDecoder(), [data[i : i + step] for i in range(0, len(data), step)])
    assert out[:20] == out[21:] == [JobFinished(job_id="j")] * 20
    assert out[20].line == 21
    assert out[20].error.startswith("value nested too deeply: maximum recursion depth")


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deep_msgpack_nesting_is_a_rejected_frame_not_a_recursion_error(depth: int) -> None:
    good = frame(msgspec.msgpack.encode(SessionBegin()))
    data = good * 20 + frame(deep_msgpack(depth)) + good * 20
    out = decode_all(EventDecoder("msgpack", max_frame=1 << 20), [data])
    assert out[:20] == out[21:] == [SessionBegin()] * 20
    assert out[20].index == 20
    assert out[20].error.startswith("value nested too deeply: maximum recursion depth")


def test_moderate_nesting_in_an_ignored_field_is_fine() -> None:
    out = decode_all(EventDecoder(), [deep_json(100) + b"\n"])
    assert out == [JobFinished(job_id="d")]


# ------------------------------------------------------------------ linear time


def megabyte_event(fmt: EventFormat) -> bytes:
    """One valid event of about 1 MB (an ignored field holds the bulk)."""
    event = {"type": "job_finished", "job_id": "big", "note": "n" * 1_000_000}
    if fmt == "ndjson":
        return msgspec.json.encode(event) + b"\n"
    return frame(msgspec.msgpack.encode(event))


@pytest.mark.timeout(20)
@pytest.mark.parametrize("fmt", ["ndjson", "msgpack"])
@pytest.mark.parametrize("size", [1, 7, 512, 4096])
def test_a_megabyte_item_in_small_chunks_decodes_in_linear_time(
    fmt: EventFormat, size: int
) -> None:
    # Copying the partial item at every read made 1-byte reads of a 1 MiB frame
    # take about three minutes of CPU; a linear decoder takes about a second.
    data = megabyte_event(fmt)
    decoder = EventDecoder(fmt, max_frame=1 << 20)
    out: list[Any] = []
    for offset in range(0, len(data), size):
        out += decoder.feed(data[offset : offset + size])
    assert out == [JobFinished(job_id="big")]
    assert decoder.buffered == 0
