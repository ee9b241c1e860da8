"""The SWF reader: header, quirks, compression, errors with line numbers."""

from __future__ import annotations

import bz2
import gzip
import io
import math
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xce_core import XceError
from xce_core.sim import (
    MAX_MEMORY_KB,
    MAX_SECONDS,
    SWF_FIELDS,
    SwfJob,
    TraceError,
    field_limit,
    header_int,
    parse_swf_line,
    read_swf,
    write_swf,
)
from xce_core.sim._swf import _Lines
from xce_core.sim._swf_record import parse_exact

TRACE = """\
; Version: 2.2
; Computer: Test machine
; MaxNodes: 8
; MaxProcs: 16
; Note: first line of a note
;       its continuation: with a colon
;
; Note: a second note

    1    0   5  100  4  90.5  1024  4  200  2048  1  3  2  7  1  1 -1 -1
    2   10  -1   -1  1  -1    -1   -1   -1   -1 0  4  1  -1 -1 -1 -1 -1

; a comment in the middle, without a key
    3   20   0    0  -1  -1   -1   -1   -1   -1 1  -1 -1 -1 -1 -1 -1 -1
"""


def write(tmp_path: Path, text: str, name: str = "t.swf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_header_and_jobs(tmp_path: Path) -> None:
    trace = read_swf(write(tmp_path, TRACE))
    assert trace.header["MaxProcs"] == "16"
    assert header_int(trace.header, "MaxNodes") == 8
    assert trace.header["Note"] == (
        "first line of a note\nits continuation: with a colon\na second note"
    )
    assert [j.job_id for j in trace.jobs] == [1, 2, 3]
    assert trace.skipped == 0
    first = trace.jobs[0]
    assert first == SwfJob(
        job_id=1,
        submit=0.0,
        wait=5.0,
        run_time=100.0,
        alloc_procs=4,
        avg_cpu=90.5,
        used_mem=1024.0,
        req_procs=4,
        req_time=200.0,
        req_mem=2048.0,
        status=1,
        user=3,
        group=2,
        executable=7,
        queue=1,
        partition=1,
        preceding_job=-1,
        think_time=-1.0,
    )


def test_minus_one_fields_are_kept_and_size_falls_back(tmp_path: Path) -> None:
    jobs = read_swf(write(tmp_path, TRACE)).jobs
    assert jobs[1].run_time == -1.0
    assert jobs[1].req_procs == -1
    assert jobs[1].size == 1  # allocated processors when none were requested
    assert jobs[0].size == 4
    assert jobs[2].size == -1  # neither recorded


def test_header_int_reads_the_first_word_and_refuses_nonsense() -> None:
    assert header_int({}, "MaxProcs") is None
    assert header_int({"MaxProcs": "-1"}, "MaxProcs") is None  # not recorded
    assert header_int({"MaxProcs": "128 (guess)"}, "MaxProcs") == 128
    assert header_int({"MaxProcs": "1e3"}, "MaxProcs") == 1000
    assert header_int({"TimeZone": "-28800"}, "TimeZone") == -28800
    for unknown in ["UNKNOWN", "unknown", "N/A", "None (lost)"]:  # as -1
        assert header_int({"UnixStartTime": unknown}, "UnixStartTime") is None
    for value in ["many", "inf", "nan", "1e999", "0", "-5", "2.5", "", "9007199254740992"]:
        with pytest.raises(ValueError, match=r"header MaxProcs: expected -1 .* or an integer"):
            header_int({"MaxProcs": value}, "MaxProcs")


@pytest.mark.parametrize("name", ["t.swf.gz", "t.swf"])
def test_gzip_is_detected_by_magic(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with gzip.open(path, "wt") as out:
        out.write(TRACE)
    trace = read_swf(path)
    assert len(trace.jobs) == 3
    assert trace.header["Computer"] == "Test machine"


def test_a_header_that_says_unknown_reads(tmp_path: Path) -> None:
    # As the MIT SuperCloud conversion writes it.
    text = "; UnixStartTime: UNKNOWN\n; TimeZoneString: UNKNOWN\n" + TRACE
    trace = read_swf(write(tmp_path, text))
    assert len(trace.jobs) == 3
    assert header_int(trace.header, "UnixStartTime") is None


def test_limit_keeps_the_first_jobs(tmp_path: Path) -> None:
    assert [j.job_id for j in read_swf(write(tmp_path, TRACE), limit=2).jobs] == [1, 2]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1 0 5 100 4", "expected 18 fields, found 5"),
        ("1 0 5 100 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1 9", "expected 18 fields, found 19"),
        ("1 0 5 100 x -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "field alloc_procs is not a number"),
        ("1 0 5 100 2.5 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "alloc_procs must be an integer"),
        ("1 0 5 nan 2 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "run_time is not a finite number"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, TRACE.replace("\n\n; a comment", f"\n{line}\n; a comment"))
    with pytest.raises(TraceError) as info:
        read_swf(path)
    assert info.value.line == 12  # counting comments and blank lines
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}:12: ")
    assert message in str(info.value)
    assert isinstance(info.value, XceError)


def test_skip_bad_counts_and_skips(tmp_path: Path) -> None:
    path = write(tmp_path, TRACE + "garbage here\n4 1 2\n")
    trace = read_swf(path, skip_bad=True)
    assert [j.job_id for j in trace.jobs] == [1, 2, 3]
    assert trace.skipped == 2


def test_integral_floats_are_accepted_for_integer_fields() -> None:
    job = parse_swf_line("7 0 0 10 4.0 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1")
    assert job.alloc_procs == 4
    assert isinstance(job.alloc_procs, int)


def gzipped(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


@pytest.mark.parametrize("skip_bad", [False, True])
def test_corrupt_gzip_is_a_trace_error_even_with_skip_bad(tmp_path: Path, skip_bad: bool) -> None:
    path = tmp_path / "bad.swf.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really gzip" * 4)
    with pytest.raises(TraceError, match="corrupt gzip data") as info:
        read_swf(path, skip_bad=skip_bad)
    assert info.value.path == str(path)
    data = bytearray(gzipped(TRACE * 50))
    data[len(data) // 2] ^= 0xFF  # a flipped byte inside the deflate stream
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=r"(corrupt|truncated) gzip data"):
        read_swf(path, skip_bad=skip_bad)


def test_truncated_gzip_says_how_far_it_got(tmp_path: Path) -> None:
    path = tmp_path / "cut.swf.gz"
    data = gzipped(TRACE * 20_000)  # several chunks of lines before the cut
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError) as info:
        read_swf(path, skip_bad=True)
    message = str(info.value)
    assert message.startswith(f"{path}: corrupt or truncated gzip data after line ")
    assert int(message.split("after line ")[1].split(":")[0]) > 1000


def test_other_compression_formats_are_named(tmp_path: Path) -> None:
    path = tmp_path / "t.swf.bz2"
    path.write_bytes(bz2.compress(TRACE.encode()))
    with pytest.raises(TraceError, match="compressed with bzip2"):
        read_swf(path, skip_bad=True)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"1 0 5 1e999 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "run_time is not a finite number"),
        (b"1 inf 5 100 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "submit is not a finite number"),
        (b"1 0 5 100 1e300 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "alloc_procs must be from -1 to"),
        (b"1 0 5 100 4 -1 -1 4 -1 2e12 1 3 2 7 1 1 -1 -1", "req_mem must be from -1 to"),
        (b"1 0 5 1e11 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "run_time must be from -1 to"),
        (b"1 0 5 1_00 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "run_time is not a number: '1_00'"),
        # Its slowdown would overflow: a positive run time is at least 1 us.
        (b"1 0 5 1e-308 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "run_time must be 0 or at least"),
        (b"1 -5 5 100 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "submit must be from -1 to"),
        (b"9007199254740993 0 5 100 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1", "job_id must be"),
        (b"1 0 5 100 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 \xd9\xa1", "non-ASCII character"),
        (b"1 0 5 100 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 \xe9", "not valid UTF-8: byte 0xe9"),
        (b"; Note: caf\xe9", "not valid UTF-8"),
        (b"; MaxProcs: inf", "header MaxProcs: expected -1 (not recorded) or an integer"),
        (b"; MaxNodes: 1e999", "header MaxNodes"),
        (b"; MaxRuntime: nan", "header MaxRuntime"),
        (b"; MaxProcs: 0", "header MaxProcs"),
        (b"1 " * 40_000, "line longer than 65536 bytes"),
    ],
)
def test_bad_values_are_malformed_lines(tmp_path: Path, line: bytes, message: str) -> None:
    path = tmp_path / "t.swf"
    path.write_bytes(TRACE.encode() + line + b"\n" + TRACE.encode().split(b"\n\n")[1])
    with pytest.raises(TraceError) as info:
        read_swf(path)
    assert info.value.line == 15  # after the 14 lines of TRACE
    assert str(info.value).startswith(f"{path}:15: ")
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    trace = read_swf(path, skip_bad=True)
    assert trace.skipped == 1
    assert trace.first_skipped == str(info.value)
    assert [j.job_id for j in trace.jobs] == [1, 2, 3, 1, 2]  # nothing else lost


def test_a_skipped_header_line_is_as_if_absent(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text("; MaxProcs: inf\n;          continued\n; MaxNodes: 8\n")
    trace = read_swf(path, skip_bad=True)
    assert trace.header == {"MaxNodes": "8"}
    assert trace.skipped == 1


def test_records_refuse_values_outside_the_limits() -> None:
    job = parse_swf_line("7 0 0 10 4 -1 -1 4 -1 -1 1 3 2 7 1 1 -1 -1")
    fields = {name: getattr(job, name) for name in SWF_FIELDS}
    for name, value in [("run_time", math.inf), ("submit", math.nan), ("req_mem", 2.0**41)]:
        with pytest.raises(ValueError, match=f"field {name} "):
            SwfJob(**{**fields, name: value})
    at_limits = {**fields, "submit": MAX_SECONDS, "run_time": MAX_SECONDS}
    assert SwfJob(**at_limits).run_time == MAX_SECONDS
    assert field_limit("req_mem") == MAX_MEMORY_KB


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_line_endings_as_in_text_mode(tmp_path: Path, ending: bytes) -> None:
    path = tmp_path / "t.swf"
    path.write_bytes(TRACE.encode().replace(b"\n", ending))
    trace = read_swf(path)
    assert [j.job_id for j in trace.jobs] == [1, 2, 3]
    assert trace.header["MaxProcs"] == "16"


_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])
_LINE_BODIES = st.binary(max_size=12).map(lambda b: b.translate(None, b"\r\n"))


@settings(max_examples=300)
@given(
    st.lists(st.tuples(_LINE_BODIES, _ENDINGS)),
    st.booleans(),
    st.integers(1, 9),
    st.integers(1, 9),
)
def test_chunked_lines_are_the_lines(
    pieces: list[tuple[bytes, bytes]], ends: bool, chunk: int, longest: int
) -> None:
    data = b"".join(line + ending for line, ending in pieces)
    if not ends and pieces:
        data = data[: -len(pieces[-1][1])]
    lines = _Lines(io.BytesIO(data), chunk=chunk, longest=longest)
    got = list(lines)
    assert lines.count == len(got)
    assert all(len(line) <= chunk + longest + 1 for line in got)  # never a whole long line

    def mark(line: bytes) -> bytes | None:
        return None if len(line) > longest else line

    assert [mark(line) for line in got] == [mark(line) for line in data.splitlines()]


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    jobs = read_swf(write(tmp_path, TRACE)).jobs
    out = io.StringIO()
    assert write_swf(out, jobs, [("MaxProcs", "16"), ("Note", "two\nlines: here")]) == 3
    again = read_swf(write(tmp_path, out.getvalue(), "again.swf"))
    assert again.jobs == jobs
    assert again.header == {"MaxProcs": "16", "Note": "two\nlines: here"}


_TOKENS = [
    "0", "-1", "7", "-0", "3.25", "1e3", "1E+05", "5.0", "+1", ".5", "5.", "01", "1_0",
    "1,2", "[1", "1]", "[]", "true", '"1"', "nan", "inf", "1e400", "9007199254740993",
    "1e-7", "[" * 3000,
]  # fmt: skip
_READ_AS_FLOAT_DOES = (
    st.sampled_from(_TOKENS)
    | st.integers(-3, 2**54).map(str)
    | st.floats(allow_nan=True).map(repr)
)


@given(st.lists(_READ_AS_FLOAT_DOES, min_size=18, max_size=18))
def test_the_fast_path_reads_a_line_as_float_reads_its_tokens(tokens: list[str]) -> None:
    """parse_swf_line decodes a line as one JSON array first: whatever it reads,
    and whatever it refuses, must be what reading each token with float()
    (parse_exact) gives, error message included."""

    def outcome(read: Callable[[], SwfJob]) -> list[tuple[object, type]] | str:
        try:
            job = read()
        except ValueError as exc:
            return str(exc)
        # Each value with its type: 5 == 5.0, but an int time would print apart.
        return [(value, type(value)) for value in msgspec.structs.astuple(job)]

    line = " ".join(tokens)
    assert outcome(lambda: parse_swf_line(line)) == outcome(lambda: parse_exact(tokens))
