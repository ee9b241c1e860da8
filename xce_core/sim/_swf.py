"""Standard Workload Format (SWF) traces: read and write files of records.

The Parallel Workloads Archive's format: one job per line, 18 whitespace-separated
numeric fields, ``-1`` meaning "not recorded" (the fields and their limits:
:mod:`xce_core.sim._swf_record`). Lines starting with ``;`` are comments; those
of the form ``; Key: value`` at any place in the file form the header
(``MaxProcs``, ``MaxNodes``, ``Note``...). A comment line without a key
(``;       more text``) right after a header line continues its value; other
keyless comments are ignored.

A line is **malformed** when it is a data line that does not parse into a
record within the limits, a header line whose integer key has a bad value, not
UTF-8, or longer than ``MAX_LINE_BYTES``. A malformed line raises
:class:`TraceError` naming the file and the 1-based line number, unless
``skip_bad=True``: then it is skipped (a skipped header line is as if absent)
and counted in :attr:`SwfTrace.skipped`.

:func:`read_swf` reads plain or gzip-compressed files (detected by the gzip magic
bytes, whatever the suffix). A file that cannot be read to its end (a corrupt or
truncated gzip stream, another compression format, an I/O error) is always a
:class:`TraceError`, even with ``skip_bad``: what follows the damage is lost.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Final

import msgspec

from xce_core import XceError
from xce_core.sim._swf_record import INTEGER_HEADER_KEYS, SwfJob, header_int, parse_swf_line

__all__ = [
    "MAX_LINE_BYTES",
    "SwfJob",  # re-exported from _swf_record, with the two below
    "SwfTrace",
    "TraceError",
    "header_int",
    "iter_swf",
    "parse_swf_line",
    "read_swf",
    "skip_reason",
    "write_swf",
]

MAX_LINE_BYTES: Final = 1 << 16
"""A longer line is malformed (a data line is under 400 bytes); so a binary file
given by mistake is never held in memory whole."""

_CHUNK: Final = 1 << 20
_GZIP_MAGIC: Final = b"\x1f\x8b"
# How files compressed in formats read_swf does not decompress start.
_OTHER_FORMATS: Final = (
    (re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)"), "bzip2"),  # a block, or the end
    (re.compile(rb"\xfd7zXZ\x00"), "xz"),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd"),
    (re.compile(rb"PK\x03\x04"), "zip"),
)


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


class SwfTrace(msgspec.Struct, frozen=True):
    """A whole trace: its header, its jobs in file order, the number of malformed
    lines skipped, the message of the first of them (``""`` when none) and their
    number by kind (:func:`skip_reason`)."""

    path: str
    header: dict[str, str]
    jobs: list[SwfJob]
    skipped: int = 0
    first_skipped: str = ""
    skipped_by_reason: dict[str, int] = msgspec.field(default_factory=dict)


def skip_reason(message: str) -> str:
    """The kind of a malformed line, from its :attr:`TraceError.message`:
    ``bad_<field>`` (a field out of its limits or not a number), ``field_count``,
    ``bad_header``, ``too_long``, ``not_utf8``, ``non_ascii``, else ``other``."""
    if message.startswith("field "):
        return f"bad_{message.split()[1]}"
    for start, kind in _SKIP_KINDS:
        if message.startswith(start):
            return kind
    return "other"


_SKIP_KINDS: Final = (
    ("expected ", "field_count"),
    ("header ", "bad_header"),
    ("line longer", "too_long"),
    ("not valid UTF-8", "not_utf8"),
    ("non-ASCII", "non_ascii"),
)


def _decode(line: str | bytes) -> str:
    """A line as text; raises ``ValueError`` when too long or not UTF-8."""
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"line longer than {MAX_LINE_BYTES} bytes")
    if isinstance(line, str):
        return line
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"not valid UTF-8: byte 0x{line[exc.start]:02x} at offset {exc.start}"
        ) from None


def iter_swf(
    lines: Iterable[str | bytes],
    header: dict[str, str],
    *,
    path: str = "<trace>",
    skip_bad: bool = False,
    on_bad: Callable[[TraceError], None] | None = None,
) -> Iterator[SwfJob]:
    """Parse SWF ``lines`` (text, or UTF-8 bytes) lazily, filling ``header`` with the
    ``; Key: value`` comments as they are met. Blank lines are ignored.

    A malformed line (see the module docstring) raises :class:`TraceError` naming
    ``path`` and its 1-based number; with ``skip_bad`` the error is passed to
    ``on_bad`` (when given) instead and the line is skipped."""
    last_key: str | None = None
    for number, line in enumerate(lines, start=1):
        try:
            text = _decode(line).strip()
            if not text:
                continue
            if text.startswith(";"):
                continuing, last_key = last_key, None  # stays None if this line is bad
                last_key = _header_line(text[1:], header, continuing)
                continue
            last_key = None
            job = parse_swf_line(text)
        except ValueError as exc:
            error = TraceError(str(exc), path, number)
            if not skip_bad:
                raise error from None
            if on_bad is not None:
                on_bad(error)
            continue
        yield job


def _header_line(comment: str, header: dict[str, str], last_key: str | None) -> str | None:
    """Record one comment line; returns the key later continuation lines extend.
    Raises ``ValueError``, recording nothing, for a bad integer key value."""
    body = comment.strip()
    if not body:
        return None
    key, sep, value = body.partition(":")
    key = key.strip()
    if sep and key and " " not in key and not comment.startswith((" " * 3, "\t")):
        value = value.strip()
        if key in INTEGER_HEADER_KEYS:
            header_int({key: value}, key)
        header[key] = f"{header[key]}\n{value}" if key in header else value
        return key
    if last_key is not None:
        header[last_key] = f"{header[last_key]}\n{body}"
    return last_key


class _Lines:
    """The lines of a binary stream (universal newlines), counted as they are read.

    Reads big chunks and splits them: far faster than a ``readline`` per line. A
    line longer than MAX_LINE_BYTES is cut there and the rest of it dropped as it
    is read: it is reported as too long, never held whole."""

    __slots__ = ("_chunk", "_longest", "_stream", "count")

    def __init__(
        self, stream: io.BufferedIOBase, chunk: int = _CHUNK, longest: int = MAX_LINE_BYTES
    ) -> None:
        self._stream = stream
        self._chunk = chunk
        self._longest = longest
        self.count = 0

    def __iter__(self) -> Iterator[bytes]:
        read = self._stream.read
        size, longest = self._chunk, self._longest
        carry = b""  # the start of a line the next chunk ends
        dropping = False  # inside a line already reported as too long
        while chunk := read(size):
            if b"\r" in chunk:  # "\r\n" and a lone "\r" end lines too, as in text mode
                while chunk.endswith(b"\r") and (more := read(1)):
                    chunk += more  # so a "\r\n" is never cut in two
                chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = chunk.split(b"\n")
            lines[0] = carry + lines[0]
            carry = lines.pop()
            if dropping and lines:
                del lines[0]
                dropping = False
            if len(carry) > longest:
                if not dropping:
                    lines.append(carry[: longest + 1])
                    dropping = True
                carry = b""
            self.count += len(lines)
            yield from lines
        if carry and not dropping:
            self.count += 1
            yield carry


def read_swf(path: str | Path, *, skip_bad: bool = False, limit: int | None = None) -> SwfTrace:
    """Read a whole ``.swf`` or ``.swf.gz`` file.

    ``limit`` keeps only the first that many jobs (header comments after them are
    not read). Raises :class:`TraceError` for a malformed line (unless
    ``skip_bad``) and for a file that cannot be read to its end (never skipped),
    ``FileNotFoundError`` when the file does not exist.
    """
    path = Path(path)
    where = str(path)
    header: dict[str, str] = {}
    jobs: list[SwfJob] = []
    skipped = 0
    first_skipped = ""
    by_reason: dict[str, int] = {}

    def on_bad(error: TraceError) -> None:
        nonlocal skipped, first_skipped
        skipped += 1
        first_skipped = first_skipped or str(error)
        kind = skip_reason(error.message)
        by_reason[kind] = by_reason.get(kind, 0) + 1

    lines: _Lines | None = None
    try:
        with contextlib.ExitStack() as stack:
            raw = stack.enter_context(path.open("rb"))
            magic = raw.peek(10)[:10]
            for start, name in _OTHER_FORMATS:
                if start.match(magic):
                    raise TraceError(
                        f"compressed with {name}, which xce does not read:"
                        " decompress it, or recompress it with gzip",
                        where,
                    )
            stream: io.BufferedIOBase = raw
            if magic.startswith(_GZIP_MAGIC):
                stream = stack.enter_context(gzip.GzipFile(fileobj=raw))
            lines = _Lines(stream)
            for job in iter_swf(lines, header, path=where, skip_bad=skip_bad, on_bad=on_bad):
                if limit is not None and len(jobs) >= limit:
                    break
                jobs.append(job)
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise TraceError(_read_error(exc, lines.count if lines else 0), where) from None
    return SwfTrace(
        path=where,
        header=header,
        jobs=jobs,
        skipped=skipped,
        first_skipped=first_skipped,
        skipped_by_reason=dict(sorted(by_reason.items())),
    )


def _read_error(exc: OSError | EOFError | zlib.error, lines: int) -> str:
    """Why reading stopped, after how many lines."""
    after = f" after line {lines}" if lines else ""
    if isinstance(exc, EOFError):
        return f"corrupt or truncated gzip data{after}: the compressed stream ends early"
    if isinstance(exc, zlib.error | gzip.BadGzipFile):
        return f"corrupt gzip data{after}: {exc}"
    return f"cannot read the trace{after}: {exc.strerror or exc}"


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
