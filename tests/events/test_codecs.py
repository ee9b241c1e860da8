"""EventDecoder / EventEncoder: round trips, exact bad-input reports, stream iteration."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import (
    BadEvent,
    Decision,
    EventDecoder,
    EventEncoder,
    EventFormat,
    EventRejected,
    JobFinished,
    JobSubmitted,
    SessionBegin,
    WireEvent,
    WorkerUp,
)
from tests import strategies as strat
from tests.events.chunks import chunked, decode_all, frame

FORMATS: tuple[EventFormat, ...] = ("ndjson", "msgpack")
ROUND_TRIP = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

EVENT_STRATEGIES = {
    "worker_up": strat.worker_up_events,
    "worker_down": strat.worker_down_events,
    "worker_removed": strat.worker_removed_events,
    "shared_resource": strat.shared_resource_events,
    "job_submitted": strat.job_submitted_events,
    "job_finished": strat.job_finished_events,
    "job_cancelled": strat.job_cancelled_events,
    "queue_config": strat.queue_config_events,
    "session_begin": strat.session_begin_events,
    "job_allocated": strat.job_allocated_decisions,
    "job_pended": strat.job_pended_decisions,
    "job_rejected": strat.job_rejected_decisions,
    "event_rejected": strat.event_rejected_decisions,
    "session_end": strat.session_end_decisions,
}


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("fmt", FORMATS)
@ROUND_TRIP
@given(events=st.lists(strat.input_events, max_size=30), cuts=st.lists(st.integers(0, 1 << 16)))
def test_input_events_round_trip_in_random_chunks(
    fmt: EventFormat, events: list[Any], cuts: list[int]
) -> None:
    data = EventEncoder(fmt).encode_many(events)
    assert decode_all(EventDecoder(fmt), chunked(data, cuts)) == events


@pytest.mark.parametrize("fmt", FORMATS)
@ROUND_TRIP
@given(events=st.lists(strat.decisions, max_size=30), cuts=st.lists(st.integers(0, 1 << 16)))
def test_decisions_round_trip_in_random_chunks(
    fmt: EventFormat, events: list[Any], cuts: list[int]
) -> None:
    data = EventEncoder(fmt).encode_many(events)
    assert decode_all(EventDecoder(fmt, type=Decision), chunked(data, cuts)) == events


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("tag", sorted(EVENT_STRATEGIES))
@ROUND_TRIP
@given(data=st.data())
def test_every_event_type_round_trips_byte_by_byte(
    fmt: EventFormat, tag: str, data: st.DataObject
) -> None:
    events = data.draw(st.lists(EVENT_STRATEGIES[tag], min_size=1, max_size=3))
    encoder = EventEncoder(fmt)
    wire = encoder.encode_many(events)
    assert wire == b"".join(encoder.encode(e) for e in events)
    one_byte_chunks = [wire[i : i + 1] for i in range(len(wire))]
    assert decode_all(EventDecoder(fmt, type=WireEvent), one_byte_chunks) == events


@pytest.mark.parametrize("fmt", FORMATS)
def test_large_batches_round_trip(fmt: EventFormat) -> None:
    events = [JobFinished(job_id=str(i)) for i in range(5000)]
    data = EventEncoder(fmt).encode_many(events)
    assert decode_all(EventDecoder(fmt), chunked(data, [7, 4096, 30_000])) == events


# ------------------------------------------------------------------ NDJSON bad input

GOOD = b'{"type":"job_finished","job_id":"j"}'


def test_malformed_line_among_good_ones_keeps_both_sides_in_order() -> None:
    lines = [b'{"type":"job_finished","job_id":"%d"}' % i for i in range(20)]
    lines[11] = b'{"type":"job_finished",'
    out = decode_all(EventDecoder(), [b"\n".join(lines) + b"\n"])
    assert out[:11] == [JobFinished(job_id=str(i)) for i in range(11)]
    assert out[11] == BadEvent(11, 12, "malformed JSON: input data was truncated")
    assert out[12:] == [JobFinished(job_id=str(i)) for i in range(12, 20)]


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b'{"type":"worker_up","name":"a","slots":-1}', "Expected `int` >= 0 - at `$.slots`"),
        (
            b'{"type":"worker_up","name":"a","slots":"x"}',
            "Expected `int`, got `str` - at `$.slots`",
        ),
        (
            b'{"type":"worker_up","name":"a","slots":1,"resources":{"mem":-2}}',
            "Expected `float` >= 0.0 - at `$.resources[...]`",
        ),
        (b'{"type":"nope"}', "Invalid value 'nope' - at `$.type`"),
        (b'{"type":"worker_up","slots":1}', "Object missing required field `name`"),
        (b"[1]", "Expected `object`, got `array`"),
        (b"xyz", "malformed JSON: invalid character (byte 0)"),
        (GOOD + b" " + GOOD, "malformed JSON: trailing characters (byte 38)"),
    ],
)
def test_bad_line_reports_msgspec_error_with_position(line: bytes, error: str) -> None:
    stream = b"\n".join([GOOD, b"", line, b"  ", GOOD]) + b"\n"
    good = JobFinished(job_id="j")
    expected = [good, BadEvent(1, 3, error), good]
    assert decode_all(EventDecoder(), [stream]) == expected
    assert decode_all(EventDecoder(), [stream[i : i + 1] for i in range(len(stream))]) == expected


BAD_LINES = [
    b"{",
    b"}",
    b'{"type":"nope"}',
    b'{"type":"worker_up","name":"","slots":1}',
    GOOD + b"," + GOOD,
    GOOD + b" " + GOOD,
    b'{"type":"job_finished","job_id":',
    b'"job_id":"j"}',
    b"\xff\xfe",
]


@ROUND_TRIP
@given(
    items=st.lists(
        st.one_of(strat.input_events, st.sampled_from(BAD_LINES), st.sampled_from([b"", b" \r"])),
        max_size=60,
    ),
    cuts=st.lists(st.integers(0, 1 << 16)),
    crlf=st.booleans(),
)
def test_bad_lines_are_reported_exactly_and_never_cost_good_ones(
    items: list[Any], cuts: list[int], crlf: bool
) -> None:
    encoder = EventEncoder()
    lines = [it if isinstance(it, bytes) else encoder.encode(it)[:-1] for it in items]
    data = b"".join(line + (b"\r\n" if crlf else b"\n") for line in lines)
    out = decode_all(EventDecoder(), chunked(data, cuts))
    expected: list[Any] = []
    for lineno, item in enumerate(items, start=1):
        if not isinstance(item, bytes):
            expected.append(item)
        elif item.strip():
            expected.append((len(expected), lineno))
    assert len(out) == len(expected)
    for got, want in zip(out, expected, strict=True):
        if isinstance(want, tuple):
            assert isinstance(got, BadEvent)
            assert (got.index, got.line) == want
        else:
            assert got == want


def test_line_over_max_frame_is_rejected_and_not_buffered() -> None:
    long_line = b'{"type":"job_finished","job_id":"' + b"x" * 200 + b'"}'
    data = b"\n".join([GOOD, long_line, GOOD]) + b"\n"
    good = JobFinished(job_id="j")
    expected = [good, BadEvent(1, 2, "line exceeds the 64-byte limit"), good]
    assert decode_all(EventDecoder(max_frame=64), [data]) == expected
    decoder = EventDecoder(max_frame=64)
    out: list[Any] = []
    for i in range(0, len(data), 5):
        out += decoder.feed(data[i : i + 5])
        # The partial line held never grows past the limit plus one chunk.
        assert decoder.buffered <= 64 + 5
    assert out + decoder.close() == expected


def test_line_of_exactly_max_frame_is_accepted() -> None:
    assert decode_all(EventDecoder(max_frame=len(GOOD)), [GOOD + b"\n"]) == [
        JobFinished(job_id="j")
    ]


def test_trailing_line_without_newline_is_decoded_at_close() -> None:
    decoder = EventDecoder()
    assert decoder.feed(GOOD + b"\n" + GOOD) == [JobFinished(job_id="j")]
    assert decoder.close() == [JobFinished(job_id="j")]
    assert decoder.feed(b'{"type":') == []
    assert decoder.close() == [BadEvent(0, 1, "malformed JSON: input data was truncated")]


def test_crlf_and_blank_lines_count_as_lines_not_events() -> None:
    data = b"\r\n  \r\n" + GOOD + b"\r\n\r\n" + b"{}\r\n"
    assert decode_all(EventDecoder(), [data]) == [
        JobFinished(job_id="j"),
        BadEvent(1, 5, "Object missing required field `type`"),
    ]


def test_to_decision_prefixes_where() -> None:
    assert BadEvent(4, 7, "boom").to_decision() == EventRejected(
        index=4, line=7, error="line 7: boom"
    )
    assert BadEvent(4, None, "boom").to_decision() == EventRejected(
        index=4, line=None, error="event 4: boom"
    )
    assert BadEvent(4, 7, "boom", "j1").to_decision() == EventRejected(
        index=4, line=7, error="line 7: boom", job_id="j1"
    )


BAD_ITEMS_AND_THE_JOB_THEY_NAME = [
    # A job event malformed elsewhere names its job.
    ({"type": "job_submitted", "job_id": "j7", "user": "u", "min_tasks": 0}, "j7"),
    ({"type": "job_submitted", "job_id": "j8", "user": "u", "resreq": "x" * 70_000}, "j8"),
    ({"type": "job_submitted", "job_id": "j9", "user": "u", "priority": 2**40}, "j9"),
    ({"type": "job_submitted", "job_id": "j10", "max_tasks": "2"}, "j10"),
    # Not a job event, or no valid job id: nothing named.
    ({"type": "worker_up", "name": "h", "slots": -1, "job_id": "j11"}, None),
    ({"type": "job_submitted", "job_id": 5, "user": "u"}, None),
    ({"type": "job_submitted", "job_id": "", "user": "u"}, None),
    ({"type": "job_submitted", "job_id": "j" * 5000, "user": "u"}, None),
    ({"type": ["job_submitted"], "job_id": "j12"}, None),
    ({"job_id": "j13"}, None),
    ([1, 2, 3], None),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("item", "job_id"), BAD_ITEMS_AND_THE_JOB_THEY_NAME)
def test_a_bad_job_event_names_its_job(fmt: EventFormat, item: Any, job_id: str | None) -> None:
    # A controller learns which submission failed without matching indexes.
    module = msgspec.json if fmt == "ndjson" else msgspec.msgpack
    good = module.encode(JobFinished(job_id="ok"))
    bad = module.encode(item)
    if fmt == "ndjson":
        data = good + b"\n" + bad + b"\n" + good + b"\n"
    else:
        data = frame(good) + frame(bad) + frame(good)
    out = decode_all(EventDecoder(fmt), [data])
    assert out[0] == out[2] == JobFinished(job_id="ok")
    assert isinstance(out[1], BadEvent)
    assert out[1].job_id == job_id
    assert out[1].to_decision().job_id == (msgspec.UNSET if job_id is None else job_id)


def test_a_rejection_naming_no_job_encodes_as_before() -> None:
    # Without a job the field is left out: the wire form of every other
    # rejection is what it always was.
    encoded = msgspec.json.encode(EventRejected(index=3, error="boom"))
    assert encoded == b'{"type":"event_rejected","index":3,"error":"boom","line":null}'
    named = msgspec.json.encode(EventRejected(index=3, error="boom", job_id="j"))
    assert named.endswith(b',"job_id":"j"}')


def test_malformed_json_names_no_job() -> None:
    data = b'{"type":"job_submitted","job_id":"j1",\n'
    (bad,) = decode_all(EventDecoder(), [data])
    assert isinstance(bad, BadEvent)
    assert bad.job_id is None


# ------------------------------------------------------------------ msgpack bad input


def test_msgpack_oversize_frame_is_skipped_by_its_length_prefix() -> None:
    good = frame(msgspec.msgpack.encode(SessionBegin()))
    data = good + (2_000_000).to_bytes(4, "big") + b"\x00" * 2_000_000 + good
    error = "frame of 2000000 bytes exceeds the 1048576-byte limit; skipping that many bytes"
    expected = [SessionBegin(), BadEvent(1, None, error), SessionBegin()]
    assert decode_all(EventDecoder("msgpack"), [data]) == expected
    assert decode_all(EventDecoder("msgpack"), chunked(data, [3, 10, 50_000, 1_999_990])) == (
        expected
    )


def test_msgpack_truncated_frames_are_reported_at_close() -> None:
    good = frame(msgspec.msgpack.encode(SessionBegin()))
    decoder = EventDecoder("msgpack")
    assert decoder.feed(good + good[:9]) == [SessionBegin()]
    assert decoder.close() == [
        BadEvent(1, None, f"truncated frame: 5 of {len(good) - 4} payload bytes")
    ]
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.close() == [BadEvent(0, None, "truncated frame: 2 of 4 length-prefix bytes")]


@ROUND_TRIP
@given(
    items=st.lists(
        st.one_of(
            strat.input_events,
            st.sampled_from(
                [
                    b"\xc1",
                    b"",
                    msgspec.msgpack.encode({"type": "nope"}),
                    msgspec.msgpack.encode(SessionBegin()) * 2,
                    msgspec.msgpack.encode({"type": "worker_up", "name": "a", "slots": -1}),
                ]
            ),
        ),
        max_size=60,
    ),
    cuts=st.lists(st.integers(0, 1 << 16)),
)
def test_msgpack_bad_frames_are_reported_exactly(items: list[Any], cuts: list[int]) -> None:
    encoder = EventEncoder("msgpack")
    data = b"".join(frame(it) if isinstance(it, bytes) else encoder.encode(it) for it in items)
    out = decode_all(EventDecoder("msgpack"), chunked(data, cuts))
    assert len(out) == len(items)
    for index, (got, item) in enumerate(zip(out, items, strict=True)):
        if isinstance(item, bytes):
            assert isinstance(got, BadEvent)
            assert (got.index, got.line) == (index, None)
        else:
            assert got == item


def test_msgpack_bad_frame_messages() -> None:
    frames = [msgspec.msgpack.encode(JobFinished(job_id=str(i))) for i in range(12)]
    frames[3] = b"\xc1"
    frames[9] = msgspec.msgpack.encode({"type": "worker_up", "name": "a", "slots": -1})
    out = decode_all(EventDecoder("msgpack"), [b"".join(map(frame, frames))])
    assert out[3] == BadEvent(3, None, "malformed msgpack: invalid opcode '\\xc1' (byte 0)")
    assert out[9] == BadEvent(9, None, "Expected `int` >= 0 - at `$.slots`")
    assert [e.job_id for e in out if isinstance(e, JobFinished)] == [
        str(i) for i in range(12) if i not in (3, 9)
    ]


# ------------------------------------------------------------------ construction


def test_unknown_format_and_bad_limit_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown event format"):
        EventDecoder("xml")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="unknown event format"):
        EventEncoder("xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_frame"):
        EventDecoder(max_frame=0)


def test_close_resets_numbering() -> None:
    decoder = EventDecoder()
    assert decoder.feed(b"x\n") == [BadEvent(0, 1, "malformed JSON: invalid character (byte 0)")]
    decoder.close()
    assert decoder.feed(b"\ny\n") == [BadEvent(0, 2, "malformed JSON: invalid character (byte 0)")]


def test_mixed_realistic_events_round_trip() -> None:
    events: list[Any] = [
        WorkerUp(
            name="h1", slots=8, attrs={"type": "LINUX64", "bigmem": True}, resources={"mem": 1.5}
        ),
        JobSubmitted(job_id="1", resreq="select[mem>100] span[hosts=1]", max_tasks=4),
        JobFinished(job_id="1"),
    ]
    for fmt in FORMATS:
        assert decode_all(EventDecoder(fmt), [EventEncoder(fmt).encode_many(events)]) == events


def test_two_values_on_a_line_are_not_balanced_by_a_blank_line() -> None:
    data = GOOD + b" " + GOOD + b"\n\n" + GOOD + b"," + GOOD + b"\n \n"
    out = decode_all(EventDecoder(), [data])
    assert [(e.index, e.line) for e in out if isinstance(e, BadEvent)] == [(0, 1), (1, 3)]
    assert len(out) == 2


def test_msgpack_empty_frame_does_not_balance_a_two_value_frame() -> None:
    two = msgspec.msgpack.encode(SessionBegin()) * 2
    frames = [frame(msgspec.msgpack.encode(SessionBegin()))] * 10 + [frame(two), frame(b"")]
    out = decode_all(EventDecoder("msgpack"), [b"".join(frames)])
    assert out[:10] == [SessionBegin()] * 10
    assert out[10] == BadEvent(10, None, "malformed msgpack: trailing characters (byte 20)")
    assert out[11] == BadEvent(11, None, "empty frame")
