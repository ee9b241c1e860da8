"""The SWF reader against a reference model of the documented rules, on valid
lines, damaged lines, arbitrary bytes and integer header lines: every line is
either a job whose fields are finite and within the limits, or reported as
malformed with its own line number; nothing else is ever raised.

The quick variants run with the suite; ``-m slow`` runs many more examples.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import (
    SWF_INTEGER_HEADERS,
    SWF_MEMORY_FIELDS,
    SWF_TIME_FIELDS,
    swf_damaged_lines,
    swf_header_lines,
    swf_junk_lines,
    swf_limit,
    swf_valid_lines,
)
from xce_core.sim import MAX_LINE_BYTES, SWF_FIELDS, SwfJob, TraceError, iter_swf, read_swf

_FLOAT_FIELDS = SWF_TIME_FIELDS | SWF_MEMORY_FIELDS
# The starts of bzip2, xz, zstd and zip files: refused as a whole, as documented.
COMPRESSED = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)|\xfd7zXZ\x00|\x28\xb5\x2f\xfd|PK\x03\x04")


def _header_ok(key: str, value: str) -> bool:
    words = value.split()
    word = words[0] if words else ""
    if "_" in word:  # a number as SWF writes it: no digit separators
        return False
    try:
        number = float(word)
    except ValueError:
        return False
    low, high = SWF_INTEGER_HEADERS[key]
    return word.isascii() and (
        number == -1 or (math.isfinite(number) and number.is_integer() and low <= number <= high)
    )


def reference(raw: bytes) -> tuple[str, list[Any]]:
    """What the documentation says a line is: ("blank" | "comment" | "bad", [])
    or ("job", the field values)."""
    if len(raw) > MAX_LINE_BYTES:
        return "bad", []
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return "bad", []
    if not text:
        return "blank", []
    if text.startswith(";"):
        comment = text[1:]
        key, sep, value = comment.strip().partition(":")
        key = key.strip()
        is_header = sep and key and " " not in key and not comment.startswith(("   ", "\t"))
        if is_header and key in SWF_INTEGER_HEADERS and not _header_ok(key, value):
            return "bad", []
        return "comment", []
    tokens = text.split()
    if not text.isascii() or len(tokens) != len(SWF_FIELDS):
        return "bad", []
    values: list[Any] = []
    for name, token in zip(SWF_FIELDS, tokens, strict=True):
        if "_" in token:
            return "bad", []
        try:
            number = float(token)
        except ValueError:
            return "bad", []
        if not (math.isfinite(number) and -1 <= number <= swf_limit(name)):
            return "bad", []
        if name == "run_time" and 0 < number < 1e-6:  # its slowdown would overflow
            return "bad", []
        if name not in _FLOAT_FIELDS:
            if not number.is_integer():
                return "bad", []
            number = int(number)
        values.append(number)
    return "job", values


def assert_sane(job: SwfJob) -> None:
    for name in SWF_FIELDS:
        value = getattr(job, name)
        assert isinstance(value, float if name in _FLOAT_FIELDS else int), name
        assert math.isfinite(value), name
        assert -1 <= value <= swf_limit(name), name


def check_reader(lines: list[bytes]) -> None:
    lines = [line.replace(b"\n", b" ").replace(b"\r", b" ") for line in lines]
    expected = [reference(line) for line in lines]
    bad = [number for number, (kind, _) in enumerate(expected, start=1) if kind == "bad"]
    want = [values for kind, values in expected if kind == "job"]

    errors: list[TraceError] = []
    jobs = list(iter_swf(lines, {}, path="t.swf", skip_bad=True, on_bad=errors.append))
    assert [e.line for e in errors] == bad
    for error in errors:
        assert str(error).startswith(f"t.swf:{error.line}: ")
        assert "\n" not in str(error)
    assert [list(fields_of(job)) for job in jobs] == want
    for job in jobs:
        assert_sane(job)

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.swf"
        path.write_bytes(b"\n".join(lines) + b"\n")
        data = path.read_bytes()
        if COMPRESSED.match(data):
            with pytest.raises(TraceError, match="compressed with"):
                read_swf(path, skip_bad=True)
            return
        if data.startswith(b"\x1f\x8b"):  # gzip magic: the rest must decompress
            with pytest.raises(TraceError, match="gzip data"):
                read_swf(path, skip_bad=True)
            return
        trace = read_swf(path, skip_bad=True)
        assert trace.jobs == jobs
        assert trace.skipped == len(bad)
        if bad:
            assert trace.first_skipped == f"{path}:{bad[0]}: {errors[0].message}"
            with pytest.raises(TraceError) as info:
                read_swf(path)
            assert info.value.line == bad[0]
        else:
            assert read_swf(path).jobs == jobs


def fields_of(job: SwfJob) -> tuple[Any, ...]:
    return tuple(getattr(job, name) for name in SWF_FIELDS)


any_lines = st.lists(
    st.one_of(
        swf_valid_lines.map(str.encode),
        swf_damaged_lines(),
        swf_junk_lines,
        swf_header_lines,
    ),
    max_size=12,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(any_lines)
def test_every_line_is_a_sane_job_or_reported_where_it_is(lines: list[bytes]) -> None:
    check_reader(lines)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(max_examples=5_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_lines)
def test_every_line_is_a_sane_job_or_reported_where_it_is_at_length(lines: list[bytes]) -> None:
    check_reader(lines)


@settings(max_examples=100)
@given(swf_valid_lines)
def test_valid_lines_always_parse(line: str) -> None:
    check_reader([line.encode()])
    assert reference(line.encode())[0] == "job"
