"""Fuzzing the decoders: arbitrary bytes and mutated valid streams, in any chunking.

A decoder never raises on input, only ever returns input events and
:class:`BadEvent` items, agrees with the reference (each line or frame decoded
on its own), and keeps every good event around a bad one. The quick suite runs
a bounded number of examples; ``-m slow`` runs many more, on larger inputs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import INPUT_TYPES, BadEvent, EventDecoder, EventEncoder, EventFormat
from tests import strategies as strat
from tests.events.chunks import chunked, decode_all
from tests.events.reference import msgpack_alone, ndjson_alone

QUICK = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_FRAME = 512
FORMATS: tuple[EventFormat, ...] = ("ndjson", "msgpack")
REFERENCE = {"ndjson": ndjson_alone, "msgpack": msgpack_alone}
CUTS = st.lists(st.integers(0, 1 << 16), max_size=40)


def decode_in_chunks(fmt: EventFormat, data: bytes, cuts: list[int]) -> list[Any]:
    return decode_all(EventDecoder(fmt, max_frame=MAX_FRAME), chunked(data, cuts))


def check_agrees_with_reference(fmt: EventFormat, data: bytes, cuts: list[int]) -> list[Any]:
    out = decode_in_chunks(fmt, data, cuts)
    assert all(isinstance(item, (BadEvent, *INPUT_TYPES)) for item in out)
    assert out == REFERENCE[fmt](data, MAX_FRAME)
    return out


# ------------------------------------------------------------------ arbitrary bytes

# Bytes that matter to the framers and to JSON, so that short inputs hit them.
_SPECIAL = st.sampled_from([b"\n", b"\r\n", b"{", b"}", b"[", b"]", b",", b'"', b"\x00\x00"])
_NOISE = st.lists(st.binary(max_size=12) | _SPECIAL, max_size=60).map(b"".join)


def _arbitrary_bytes(fmt: EventFormat, data: bytes, cuts: list[int]) -> None:
    check_agrees_with_reference(fmt, data, cuts)


@pytest.mark.parametrize("fmt", FORMATS)
@QUICK
@given(data=_NOISE, cuts=CUTS)
def test_arbitrary_bytes(fmt: EventFormat, data: bytes, cuts: list[int]) -> None:
    _arbitrary_bytes(fmt, data, cuts)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@SLOW
@given(data=st.binary(max_size=8192) | _NOISE, cuts=CUTS)
def test_arbitrary_bytes_slow(fmt: EventFormat, data: bytes, cuts: list[int]) -> None:
    _arbitrary_bytes(fmt, data, cuts)


# ------------------------------------------------------------------ mutated valid streams

_MUTATION = st.tuples(
    st.sampled_from(["flip", "insert", "delete", "truncate"]),
    st.integers(0, 1 << 16),
    st.binary(min_size=1, max_size=4),
)


def _mutate(item: bytes, mutations: list[tuple[str, int, bytes]], json: bool) -> bytes:
    data = bytearray(item)
    for op, where, noise in mutations:
        if json:
            noise = noise.replace(b"\n", b"\x00")  # a mutated line stays one line
        at = where % (len(data) + 1)
        if op == "flip" and at < len(data):
            data[at] ^= noise[0] or 1
        elif op == "insert":
            data[at:at] = noise
        elif op == "delete":
            del data[at : at + len(noise)]
        elif op == "truncate":
            del data[at:]
    if json:
        data = data.replace(b"\n", b"\x00")  # a flip can make a newline too
    if json and not data.strip(b" \t\r"):
        data += b"x"  # a blank line would be no item at all
    return bytes(data)


def _mutated_items(
    fmt: EventFormat,
    events: list[Any],
    bad: set[int],
    mutations: list[tuple[str, int, bytes]],
    cuts: list[int],
) -> None:
    encoder = EventEncoder(fmt)
    json = fmt == "ndjson"
    items = [encoder.encode(event) for event in events]
    if json:
        items = [item[:-1] for item in items]
    else:
        items = [item[4:] for item in items]
    for index in bad & set(range(len(items))):
        items[index] = _mutate(items[index], mutations, json)
    if json:
        data = b"".join(item + b"\n" for item in items)
    else:
        data = b"".join(len(item).to_bytes(4, "big") + item for item in items)
    out = check_agrees_with_reference(fmt, data, cuts)
    assert len(out) == len(events)
    for index, (event, item) in enumerate(zip(events, out, strict=True)):
        if index not in bad and len(items[index]) <= MAX_FRAME:
            assert item == event  # the good events around bad ones survive


@pytest.mark.parametrize("fmt", FORMATS)
@QUICK
@given(
    events=st.lists(strat.input_events, min_size=1, max_size=25),
    bad=st.sets(st.integers(0, 24), max_size=5),
    mutations=st.lists(_MUTATION, min_size=1, max_size=4),
    cuts=CUTS,
)
def test_mutated_events(
    fmt: EventFormat,
    events: list[Any],
    bad: set[int],
    mutations: list[tuple[str, int, bytes]],
    cuts: list[int],
) -> None:
    _mutated_items(fmt, events, bad, mutations, cuts)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@SLOW
@given(
    events=st.lists(strat.input_events, min_size=1, max_size=200),
    bad=st.sets(st.integers(0, 199), max_size=40),
    mutations=st.lists(_MUTATION, min_size=1, max_size=8),
    cuts=CUTS,
)
def test_mutated_events_slow(
    fmt: EventFormat,
    events: list[Any],
    bad: set[int],
    mutations: list[tuple[str, int, bytes]],
    cuts: list[int],
) -> None:
    _mutated_items(fmt, events, bad, mutations, cuts)


@pytest.mark.parametrize("fmt", FORMATS)
@QUICK
@given(
    events=st.lists(strat.input_events, min_size=1, max_size=25),
    mutations=st.lists(_MUTATION, min_size=1, max_size=6),
    cuts=CUTS,
)
def test_mutated_streams(
    fmt: EventFormat, events: list[Any], mutations: list[tuple[str, int, bytes]], cuts: list[int]
) -> None:
    # Anything may break here, newlines and length prefixes included.
    data = _mutate(EventEncoder(fmt).encode_many(events), mutations, json=False)
    check_agrees_with_reference(fmt, data, cuts)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@SLOW
@given(
    events=st.lists(strat.input_events, min_size=1, max_size=200),
    mutations=st.lists(_MUTATION, min_size=1, max_size=12),
    cuts=CUTS,
)
def test_mutated_streams_slow(
    fmt: EventFormat, events: list[Any], mutations: list[tuple[str, int, bytes]], cuts: list[int]
) -> None:
    data = _mutate(EventEncoder(fmt).encode_many(events), mutations, json=False)
    check_agrees_with_reference(fmt, data, cuts)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@SLOW
@given(data=st.data(), cuts=CUTS)
def test_hostile_streams_slow(fmt: EventFormat, data: st.DataObject, cuts: list[int]) -> None:
    if fmt == "ndjson":
        stream = b"\n".join(data.draw(strat.hostile_ndjson_lines()))
    else:
        stream = data.draw(strat.hostile_msgpack_stream(MAX_FRAME))
    check_agrees_with_reference(fmt, stream, cuts)
