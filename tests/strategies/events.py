"""Strategies for the wire events of ``events._schema`` (used by tests/events)."""

from __future__ import annotations

import msgspec as _msgspec
from hypothesis import strategies as st

import events as _events

# Input events are drawn within the schema's limits (their edges included), so
# every one of them survives a round trip through a decoder.
_EV_I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_EV_SLOTS = st.integers(min_value=0, max_value=_events.MAX_SLOTS)
_EV_TASKS = st.integers(min_value=1, max_value=_events.MAX_TASKS)
_EV_PRIORITY = st.integers(min_value=_events.MIN_PRIORITY, max_value=_events.MAX_PRIORITY)
_EV_FLOAT = st.floats(allow_nan=False, allow_infinity=False)
_EV_AMOUNT = st.floats(min_value=0, max_value=_events.MAX_AMOUNT)
_EV_TEXT = st.text(max_size=20)
_EV_NAME = st.text(min_size=1, max_size=20)
_EV_ATTR_VALUE = st.one_of(_EV_TEXT, st.booleans(), _EV_I64, _EV_FLOAT)

worker_up_events = st.builds(
    _events.WorkerUp,
    name=_EV_NAME,
    slots=_EV_SLOTS,
    attrs=st.dictionaries(_EV_TEXT, _EV_ATTR_VALUE, max_size=4),
    resources=st.dictionaries(_EV_TEXT, _EV_AMOUNT, max_size=4),
)
worker_down_events = st.builds(_events.WorkerDown, name=_EV_NAME)
worker_removed_events = st.builds(_events.WorkerRemoved, name=_EV_NAME)
shared_resource_events = st.builds(_events.SharedResource, name=_EV_NAME, total=_EV_AMOUNT)
job_submitted_events = st.builds(
    _events.JobSubmitted,
    job_id=_EV_NAME,
    user=_EV_TEXT,
    queue=_EV_TEXT,
    project=_EV_TEXT,
    priority=_EV_PRIORITY,
    submit_time=_EV_FLOAT,
    min_tasks=_EV_TASKS,
    max_tasks=_EV_TASKS,
    resreq=_EV_TEXT,
)
job_finished_events = st.builds(_events.JobFinished, job_id=_EV_NAME)
job_cancelled_events = st.builds(_events.JobCancelled, job_id=_EV_NAME)
queue_config_events = st.builds(
    _events.QueueConfig, name=_EV_TEXT, priority=_EV_PRIORITY, picker=st.none() | _EV_TEXT
)
session_begin_events = st.builds(_events.SessionBegin)

input_events = st.one_of(
    worker_up_events,
    worker_down_events,
    worker_removed_events,
    shared_resource_events,
    job_submitted_events,
    job_finished_events,
    job_cancelled_events,
    queue_config_events,
    session_begin_events,
)

job_allocated_decisions = st.builds(
    _events.JobAllocated,
    session=_EV_I64,
    job_id=_EV_TEXT,
    hosts=st.lists(st.builds(_events.HostSlots, host=_EV_TEXT, slots=_EV_I64), max_size=4),
)
job_pended_decisions = st.builds(
    _events.JobPended,
    session=_EV_I64,
    job_id=_EV_TEXT,
    reason=_EV_TEXT,
    detail=_EV_TEXT,
    cached=st.booleans(),
)
job_rejected_decisions = st.builds(_events.JobRejected, job_id=_EV_TEXT, error=_EV_TEXT)
event_rejected_decisions = st.builds(
    _events.EventRejected, index=_EV_I64, error=_EV_TEXT, line=st.none() | _EV_I64
)
session_end_decisions = st.builds(
    _events.SessionEnd, session=_EV_I64, allocated=_EV_I64, pended=_EV_I64, elapsed_s=_EV_FLOAT
)

decisions = st.one_of(
    job_allocated_decisions,
    job_pended_decisions,
    job_rejected_decisions,
    event_rejected_decisions,
    session_end_decisions,
)
wire_events = st.one_of(input_events, decisions)

# Hostile input: streams built to make a batching decoder disagree with decoding
# each line (or frame) on its own. Each helper draws the items of one stream.

_EV_ENCODE_JSON = _msgspec.json.Encoder().encode
_EV_ENCODE_MSGPACK = _msgspec.msgpack.Encoder().encode
_HOSTILE_KINDS = st.sampled_from(
    ["event", "event", "event", "split", "two", "blank", "garbage", "deep", "long", "limit"]
)


def _ev_deep(depth: int, json: bool) -> bytes:
    """A job_finished whose ignored field ``x`` nests ``depth`` arrays (built as
    bytes: the encoders refuse to nest that deep)."""
    if json:
        return b'{"type":"job_finished","job_id":"deep","x":' + b"[" * depth + b"]" * depth + b"}"
    head = _EV_ENCODE_MSGPACK({"type": "job_finished", "job_id": "deep", "x": None})[:-1]
    return head + b"\x91" * (depth - 1) + b"\x90"


def _ev_hostile_item(draw: st.DrawFn, kind: str, json: bool) -> bytes:
    """One encoded value of the kinds that decode to one whole (good or bad) value."""
    if kind == "deep":
        return _ev_deep(draw(st.sampled_from([2, 100, 3000])), json)
    value: object
    if kind == "long":
        value = {"type": "job_finished", "job_id": "x" * draw(st.integers(100, 400))}
    elif kind == "limit":
        value = {"type": "worker_up", "name": "h", "slots": draw(st.sampled_from([-1, 2**64 - 1]))}
    else:
        value = draw(input_events)
    return _EV_ENCODE_JSON(value) if json else _EV_ENCODE_MSGPACK(value)


@st.composite
def hostile_ndjson_lines(draw: st.DrawFn) -> list[bytes]:
    """Lines (without newlines): good events, events split over two lines, two
    events on a line, blank and garbage lines, deep nesting, out-of-range fields,
    long lines, and a line split inside an array of objects (whose halves joined
    by a comma are one valid event)."""
    lines: list[bytes] = []
    for kind in draw(st.lists(_HOSTILE_KINDS | st.just("span"), max_size=40)):
        if kind == "split":
            text = _EV_ENCODE_JSON(draw(input_events))
            cut = draw(st.integers(1, len(text) - 1))
            lines += [text[:cut], text[cut:]]
        elif kind == "two":
            joint = draw(st.sampled_from([b",", b", ", b" ", b""]))
            first, second = draw(input_events), draw(input_events)
            lines.append(_EV_ENCODE_JSON(first) + joint + _EV_ENCODE_JSON(second))
        elif kind == "span":
            lines += [b'{"type":"job_finished","job_id":"s","x":[{}', b"{}]}"]
        elif kind == "blank":
            lines.append(draw(st.sampled_from([b"", b" ", b"\t", b"\r", b" \r "])))
        elif kind == "garbage":
            lines.append(draw(st.binary(max_size=30)).replace(b"\n", b""))
        else:
            lines.append(_ev_hostile_item(draw, kind, json=True))
    return lines


def _ev_frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@st.composite
def hostile_msgpack_stream(draw: st.DrawFn, max_frame: int) -> bytes:
    """Frames: good events, a payload split over two frames, two payloads in one
    frame, empty frames, garbage, deep nesting, out-of-range fields, frames over
    ``max_frame`` (their bytes present), and at the end maybe a truncated frame
    or a length prefix far beyond the limit with little behind it."""
    out = bytearray()
    for kind in draw(st.lists(_HOSTILE_KINDS | st.just("oversize"), max_size=40)):
        if kind == "split":
            payload = _EV_ENCODE_MSGPACK(draw(input_events))
            cut = draw(st.integers(0, len(payload)))
            out += _ev_frame(payload[:cut]) + _ev_frame(payload[cut:])
        elif kind == "two":
            first, second = draw(input_events), draw(input_events)
            out += _ev_frame(_EV_ENCODE_MSGPACK(first) + _EV_ENCODE_MSGPACK(second))
        elif kind == "blank":
            out += _ev_frame(b"")
        elif kind == "garbage":
            out += _ev_frame(draw(st.binary(max_size=30)))
        elif kind == "oversize":
            out += _ev_frame(b"\xc1" * draw(st.integers(max_frame + 1, max_frame + 64)))
        else:
            out += _ev_frame(_ev_hostile_item(draw, kind, json=False))
    ending = draw(st.sampled_from(["none", "none", "truncated", "lying"]))
    if ending == "truncated":
        last = _ev_frame(_EV_ENCODE_MSGPACK(draw(input_events)))
        out += last[: draw(st.integers(1, len(last) - 1))]
    elif ending == "lying":
        out += (2**32 - 1).to_bytes(4, "big") + draw(st.binary(max_size=50))
    return bytes(out)
