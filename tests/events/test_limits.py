"""The schema's field limits: the largest legal value decodes, the next is rejected
with its field path, in both wire formats; non-finite numbers never get through."""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec
import pytest

from events import (
    MAX_AMOUNT,
    MAX_ENTRIES,
    MAX_NAME_LENGTH,
    MAX_PRIORITY,
    MAX_RESREQ_LENGTH,
    MAX_SLOTS,
    MAX_TASKS,
    MIN_PRIORITY,
    BadEvent,
    EventDecoder,
    EventFormat,
    InputEvent,
)

FORMATS: tuple[EventFormat, ...] = ("ndjson", "msgpack")

UP = {"type": "worker_up", "name": "h", "slots": 1}
JOB = {"type": "job_submitted", "job_id": "j"}
SHARED = {"type": "shared_resource", "name": "lic", "total": 1}
QUEUE = {"type": "queue_config", "name": "q"}


def entries(count: int, value: Any) -> dict[str, Any]:
    return {f"k{i}": value for i in range(count)}


# (base event, field, largest legal value, first illegal value, path in the error)
EDGES = [
    (UP, "slots", MAX_SLOTS, MAX_SLOTS + 1, "$.slots"),
    (UP, "name", "n" * MAX_NAME_LENGTH, "n" * (MAX_NAME_LENGTH + 1), "$.name"),
    (UP, "resources", {"mem": MAX_AMOUNT}, {"mem": MAX_AMOUNT * 2}, "$.resources[...]"),
    (UP, "resources", entries(MAX_ENTRIES, 1.0), entries(MAX_ENTRIES + 1, 1.0), "$.resources"),
    (UP, "attrs", entries(MAX_ENTRIES, True), entries(MAX_ENTRIES + 1, True), "$.attrs"),
    (UP, "attrs", {"n": 2**63 - 1}, {"n": 2**63}, "$.attrs[...]"),
    (UP, "attrs", {"n": -(2**63)}, {"n": -(2**63) - 1}, "$.attrs[...]"),  # JSON only
    (UP, "attrs", {"k" * MAX_NAME_LENGTH: 1}, {"k" * (MAX_NAME_LENGTH + 1): 1}, "$.attrs"),
    (SHARED, "total", MAX_AMOUNT, MAX_AMOUNT * 2, "$.total"),
    (JOB, "max_tasks", MAX_TASKS, MAX_TASKS + 1, "$.max_tasks"),
    (JOB, "min_tasks", MAX_TASKS, MAX_TASKS + 1, "$.min_tasks"),
    (JOB, "priority", MAX_PRIORITY, MAX_PRIORITY + 1, "$.priority"),
    (JOB, "priority", MIN_PRIORITY, MIN_PRIORITY - 1, "$.priority"),
    (JOB, "resreq", " " * MAX_RESREQ_LENGTH, " " * (MAX_RESREQ_LENGTH + 1), "$.resreq"),
    (JOB, "job_id", "j" * MAX_NAME_LENGTH, "j" * (MAX_NAME_LENGTH + 1), "$.job_id"),
    (JOB, "user", "u" * MAX_NAME_LENGTH, "u" * (MAX_NAME_LENGTH + 1), "$.user"),
    (JOB, "queue", "q" * MAX_NAME_LENGTH, "q" * (MAX_NAME_LENGTH + 1), "$.queue"),
    (JOB, "project", "p" * MAX_NAME_LENGTH, "p" * (MAX_NAME_LENGTH + 1), "$.project"),
    (QUEUE, "name", "q" * MAX_NAME_LENGTH, "q" * (MAX_NAME_LENGTH + 1), "$.name"),
    (QUEUE, "priority", MAX_PRIORITY, MAX_PRIORITY + 1, "$.priority"),
    (QUEUE, "picker", "p" * MAX_NAME_LENGTH, "p" * (MAX_NAME_LENGTH + 1), "$.picker"),
]


def encode(fmt: EventFormat, event: dict[str, Any]) -> bytes:
    if fmt == "ndjson":
        return msgspec.json.encode(event) + b"\n"
    payload = msgspec.msgpack.encode(event)
    return len(payload).to_bytes(4, "big") + payload


def decode_one(fmt: EventFormat, event: dict[str, Any]) -> Any:
    decoder = EventDecoder(fmt)
    (item,) = decoder.feed(encode(fmt, event)) + decoder.close()
    return item


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("base", "field", "legal", "illegal", "path"), EDGES)
def test_each_limit_accepts_its_edge_and_rejects_beyond_with_the_path(
    fmt: EventFormat, base: dict[str, Any], field: str, legal: Any, illegal: Any, path: str
) -> None:
    accepted = decode_one(fmt, {**base, field: legal})
    assert not isinstance(accepted, BadEvent), accepted
    assert getattr(accepted, field) == legal
    if fmt == "msgpack" and illegal == {"n": -(2**63) - 1}:
        return  # msgpack cannot even carry it
    rejected = decode_one(fmt, {**base, field: illegal})
    assert isinstance(rejected, BadEvent)
    assert f"`{path}`" in rejected.error, rejected.error


# msgpack carries IEEE specials natively; JSON cannot (1e400 is out of range).
NON_FINITE = [
    (UP, "resources", lambda x: {"mem": x}, "$.resources[...]"),
    (UP, "attrs", lambda x: {"speed": x}, "$.attrs[...]"),
    (SHARED, "total", lambda x: x, "$.total"),
    (JOB, "submit_time", lambda x: x, "$.submit_time"),
]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize(("base", "field", "wrap", "path"), NON_FINITE)
def test_msgpack_infinities_and_nan_are_rejected_with_the_path(
    base: dict[str, Any], field: str, wrap: Any, path: str, value: float
) -> None:
    rejected = decode_one("msgpack", {**base, field: wrap(value)})
    assert isinstance(rejected, BadEvent)
    assert f"`{path}`" in rejected.error, rejected.error


def test_json_numbers_beyond_a_double_are_rejected() -> None:
    decoder = EventDecoder()
    line = b'{"type":"job_submitted","job_id":"j","submit_time":1e400}\n'
    (item,) = decoder.feed(line)
    assert isinstance(item, BadEvent)
    assert "out of range" in item.error


@pytest.mark.parametrize(
    ("line", "path"),
    [
        (b'{"type":"job_submitted","job_id":"a","run_limit":0}', "$.run_limit"),
        (b'{"type":"job_submitted","job_id":"a","run_limit":-5}', "$.run_limit"),
        (b'{"type":"job_submitted","job_id":"a","run_limit":"1h"}', "$.run_limit"),
        (b'{"type":"limits_config","limits":[{"name":"x","slots":-1}]}', "$.limits[0].slots"),
        (b'{"type":"limits_config","limits":[{"name":"","jobs":1}]}', "$.limits[0].name"),
    ],
)
def test_run_limits_and_limits_out_of_bounds_are_rejected_with_the_path(
    line: bytes, path: str
) -> None:
    with pytest.raises(msgspec.ValidationError, match=re.escape(path)):
        msgspec.json.decode(line, type=InputEvent)


def test_a_run_limit_decodes_as_seconds_and_defaults_to_none() -> None:
    with_limit = msgspec.json.decode(
        b'{"type":"job_submitted","job_id":"a","run_limit":3600}', type=InputEvent
    )
    without = msgspec.json.decode(b'{"type":"job_submitted","job_id":"a"}', type=InputEvent)
    assert getattr(with_limit, "run_limit", None) == 3600.0
    assert getattr(without, "run_limit", "missing") is None
