"""Standard Workload Format (SWF) traces: read and write.

The Parallel Workloads Archive's format: one job per line, 18 whitespace-separated
numeric fields, ``-1`` meaning "not recorded". Lines starting with ``;`` are
comments; those of the form ``; Key: value`` at any place in the file form the
header (``MaxProcs``, ``MaxNodes``, ``Note``...). A comment line without a key
(``;       more text``) right after a header line continues its value; other
keyless comments are ignored.

Fields, in order (1-based numbers as in the SWF definition)::

     1 job_id          7 used_mem (KB/proc)   13 group
     2 submit (s)      8 req_procs            14 executable
     3 wait (s)        9 req_time (s)         15 queue
     4 run_time (s)   10 req_mem (KB/proc)    16 partition
     5 alloc_procs    11 status               17 preceding_job
     6 avg_cpu (s)    12 user                 18 think_time (s)

Times and memory sizes are read as ``float`` (some archive logs carry decimals
there); the other fields must be integers (``3.0`` is accepted as 3).

:func:`read_swf` reads plain or gzip-compressed files (detected by the gzip
magic bytes, whatever the suffix). A malformed line raises :class:`TraceError`
naming the file and the 1-based line number, unless ``skip_bad=True``, in which
case it is counted in :attr:`SwfTrace.skipped` and skipped.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final, cast

import msgspec

from xce_core import XceError

__all__ = [
    "SWF_FIELDS",
    "SwfJob",
    "SwfTrace",
    "TraceError",
    "header_int",
    "iter_swf",
    "read_swf",
    "write_swf",
]

SWF_FIELDS: Final = (
    "job_id",
    "submit",
    "wait",
    "run_time",
    "alloc_procs",
    "avg_cpu",
    "used_mem",
    "req_procs",
    "req_time",
    "req_mem",
    "status",
    "user",
    "group",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)

# Fields read as float; all others are integers.
_FLOAT_FIELDS: Final = frozenset(
    {"submit", "wait", "run_time", "avg_cpu", "used_mem", "req_time", "req_mem", "think_time"}
)
_IS_FLOAT: Final = tuple(name in _FLOAT_FIELDS for name in SWF_FIELDS)
_INT_INDEXES: Final = tuple(i for i, name in enumerate(SWF_FIELDS) if name not in _FLOAT_FIELDS)
_GZIP_MAGIC: Final = b"\x1f\x8b"


class TraceError(XceError):
    """A workload trace is malformed: says which file and, when known, which line."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        where = path or "<trace>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")


class SwfJob(msgspec.Struct, frozen=True, gc=False):
    """One SWF record. ``-1`` means "not recorded", as in the file."""

    job_id: int
    submit: float
    wait: float
    run_time: float
    alloc_procs: int
    avg_cpu: float
    used_mem: float
    req_procs: int
    req_time: float
    req_mem: float
    status: int
    user: int
    group: int
    executable: int
    queue: int
    partition: int
    preceding_job: int
    think_time: float

    @property
    def size(self) -> int:
        """Processors the job asks for: requested (field 8) when > 0, else allocated
        (field 5); may be <= 0 when neither was recorded."""
        return self.req_procs if self.req_procs > 0 else self.alloc_procs

    def to_line(self) -> str:
        """The record as one SWF line (no newline); integral floats print as integers."""
        return " ".join(_format_value(getattr(self, name)) for name in SWF_FIELDS)


class SwfTrace(msgspec.Struct, frozen=True):
    """A whole trace: its header, its jobs in file order, and lines skipped as bad."""

    path: str
    header: dict[str, str]
    jobs: list[SwfJob]
    skipped: int = 0


def header_int(header: dict[str, str], key: str) -> int | None:
    """``header[key]`` as a positive integer (first word), or ``None`` when absent,
    not a number, or not positive."""
    value = header.get(key)
    if not value:
        return None
    try:
        number = int(float(value.split()[0]))
    except ValueError:
        return None
    return number if number > 0 else None


def _format_value(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _open_text(path: Path) -> IO[str]:
    """Open ``path`` for reading text, decompressing when it starts with the gzip magic."""
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == _GZIP_MAGIC:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


def _field_error(tokens: list[str]) -> ValueError:
    """The precise complaint about a line the fast path refused."""
    for name, is_float, token in zip(SWF_FIELDS, _IS_FLOAT, tokens, strict=True):
        try:
            number = float(token)
        except ValueError:
            return ValueError(f"field {name} is not a number: {token!r}")
        if not math.isfinite(number):
            return ValueError(f"field {name} is not a finite number: {token!r}")
        if not is_float and not number.is_integer():
            return ValueError(f"field {name} must be an integer: {token!r}")
    return ValueError("malformed line")  # pragma: no cover - the fast path accepted it


def parse_swf_line(line: str) -> SwfJob:
    """One data line as a record. Raises ``ValueError`` saying what is wrong."""
    tokens = line.split()
    if len(tokens) != len(SWF_FIELDS):
        raise ValueError(f"expected {len(SWF_FIELDS)} fields, found {len(tokens)}")
    try:
        values: list[float | int] = [float(token) for token in tokens]
    except ValueError:
        raise _field_error(tokens) from None
    # "nan" and "inf" are the only accepted spellings containing an n.
    if ("n" in line or "N" in line) and not all(math.isfinite(v) for v in values):
        raise _field_error(tokens)
    for index in _INT_INDEXES:
        number = values[index]
        assert isinstance(number, float)
        if not number.is_integer():
            raise _field_error(tokens)
        values[index] = int(number)
    return SwfJob(*cast(list[Any], values))


def iter_swf(
    lines: Iterable[str],
    header: dict[str, str],
    *,
    path: str = "<trace>",
    skip_bad: bool = False,
    bad_lines: list[int] | None = None,
) -> Iterator[SwfJob]:
    """Parse SWF ``lines`` lazily, filling ``header`` with the ``; Key: value`` comments
    as they are met. Blank lines are ignored. A malformed line raises
    :class:`TraceError`; with ``skip_bad`` its 1-based number is appended to
    ``bad_lines`` (when given) instead."""
    last_key: str | None = None
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        if text.startswith(";"):
            last_key = _header_line(text[1:], header, last_key)
            continue
        last_key = None
        try:
            job = parse_swf_line(text)
        except ValueError as exc:
            if not skip_bad:
                raise TraceError(str(exc), path, number) from None
            if bad_lines is not None:
                bad_lines.append(number)
            continue
        yield job


def _header_line(comment: str, header: dict[str, str], last_key: str | None) -> str | None:
    """Record one comment line; returns the key later continuation lines extend."""
    body = comment.strip()
    if not body:
        return None
    key, sep, value = body.partition(":")
    key = key.strip()
    if sep and key and " " not in key and not comment.startswith((" " * 3, "\t")):
        value = value.strip()
        header[key] = f"{header[key]}\n{value}" if key in header else value
        return key
    if last_key is not None:
        header[last_key] = f"{header[last_key]}\n{body}"
    return last_key


def read_swf(path: str | Path, *, skip_bad: bool = False, limit: int | None = None) -> SwfTrace:
    """Read a whole ``.swf`` or ``.swf.gz`` file.

    ``limit`` keeps only the first that many jobs (header comments after them are
    not read). Raises :class:`TraceError` for a malformed line
    (unless ``skip_bad``) or an unreadable/corrupt file, ``FileNotFoundError``
    when the file does not exist.
    """
    path = Path(path)
    header: dict[str, str] = {}
    bad: list[int] = []
    jobs: list[SwfJob] = []
    try:
        with _open_text(path) as stream:
            for job in iter_swf(stream, header, path=str(path), skip_bad=skip_bad, bad_lines=bad):
                if limit is not None and len(jobs) >= limit:
                    break
                jobs.append(job)
    except (OSError, EOFError, UnicodeError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise TraceError(f"cannot read trace: {exc}", str(path)) from exc
    return SwfTrace(path=str(path), header=header, jobs=jobs, skipped=len(bad))


def write_swf(out: IO[str], jobs: Iterable[SwfJob], header: Iterable[tuple[str, str]] = ()) -> int:
    """Write ``; Key: value`` header lines (multi-line values continue on ``;`` lines),
    then one line per job. Returns the number of jobs written."""
    for key, value in header:
        first, *rest = value.split("\n")
        out.write(f"; {key}: {first}\n")
        pad = " " * (len(key) + 2)
        for more in rest:
            out.write(f";{pad} {more}\n")
    count = 0
    for job in jobs:
        out.write(job.to_line())
        out.write("\n")
        count += 1
    return count
