"""The SWF reader: header, quirks, compression, errors with line numbers."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from xce_core import XceError
from xce_core.sim._swf import (
    SwfJob,
    TraceError,
    header_int,
    parse_swf_line,
    read_swf,
    write_swf,
)

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


def test_header_int_ignores_missing_and_nonsense() -> None:
    assert header_int({}, "MaxProcs") is None
    assert header_int({"MaxProcs": "-1"}, "MaxProcs") is None
    assert header_int({"MaxProcs": "many"}, "MaxProcs") is None
    assert header_int({"MaxProcs": "128 (guess)"}, "MaxProcs") == 128


@pytest.mark.parametrize("name", ["t.swf.gz", "t.swf"])
def test_gzip_is_detected_by_magic(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with gzip.open(path, "wt") as out:
        out.write(TRACE)
    trace = read_swf(path)
    assert len(trace.jobs) == 3
    assert trace.header["Computer"] == "Test machine"


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


def test_corrupt_gzip_is_a_trace_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.swf.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really gzip" * 4)
    with pytest.raises(TraceError, match="cannot read trace"):
        read_swf(path)


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    jobs = read_swf(write(tmp_path, TRACE)).jobs
    out = io.StringIO()
    assert write_swf(out, jobs, [("MaxProcs", "16"), ("Note", "two\nlines: here")]) == 3
    again = read_swf(write(tmp_path, out.getvalue(), "again.swf"))
    assert again.jobs == jobs
    assert again.header == {"MaxProcs": "16", "Note": "two\nlines: here"}
