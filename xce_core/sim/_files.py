"""Writing a replay's output files: each to a temporary name beside its
target, renamed when whole (a reader never sees half a file), and CSV built
column by column."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final, Literal

import msgspec

__all__ = ["replacing", "whole_numbers", "write_csv", "write_int_rows"]

_ENCODE: Final = msgspec.json.Encoder().encode


@contextlib.contextmanager
def replacing(path: Path, mode: Literal["w", "wb"]) -> Iterator[IO[Any]]:
    """A file open on a temporary name beside ``path``, renamed to ``path`` when
    the block ends without an exception (removed otherwise)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        f: IO[Any]
        with tmp.open("w", newline="", encoding="utf-8") if mode == "w" else tmp.open("wb") as f:
            yield f
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_csv(path: Path, names: Sequence[str], columns: dict[str, list[Any]]) -> None:
    """RFC 4180 CSV, as :mod:`csv` writes it, but built column by column (the
    csv module's writer took twice as long). A float with an integral value is
    written as an integer (``3871``), any other as Python's shortest repr."""
    whole = [whole_numbers(columns[name]) for name in names]
    if all(ints is not None for ints in whole):
        write_int_rows(path, names, list(zip(*whole, strict=True)))
        return
    # Each row in parts: adjacent whole-number columns make one part, encoded
    # together (the schedule's six times: a third of their cost,
    # benchmarks/bench_outputs.py); any other column is a part of its own.
    parts: list[list[str]] = []
    adjacent: list[list[int]] = []
    for name, ints in zip(names, whole, strict=True):
        if ints is not None:
            adjacent.append(ints)
            continue
        if adjacent:
            parts.append(_int_row_texts(adjacent))
            adjacent = []
        parts.append(_csv_cells(columns[name]))
    if adjacent:
        parts.append(_int_row_texts(adjacent))
    with replacing(path, "w") as out:
        out.write(",".join(names) + "\n")
        rows = zip(*parts, strict=True)
        while chunk := list(itertools.islice(rows, _CSV_CHUNK)):
            out.write("\n".join(map(",".join, chunk)))
            out.write("\n")


def write_int_rows(path: Path, names: Sequence[str], rows: list[tuple[int, ...]]) -> None:
    """CSV of whole numbers only (the time series, as a rule): the rows encoded
    as JSON arrays by msgspec, whose text between the brackets is the CSV rows'
    (half the time of the general path, benchmarks/bench_outputs.py)."""
    body = _ENCODE(rows)[2:-2].replace(b"],[", b"\n")
    with replacing(path, "wb") as out:
        out.write(",".join(names).encode() + b"\n")
        if body:
            out.write(body + b"\n")


def whole_numbers(values: list[Any]) -> list[int] | None:
    """``values`` as ints when all are ints, or all floats with an integral
    value (as CSV writes them); else ``None`` (an empty value, another type)."""
    if not values or type(values[0]) not in (int, float):  # text, at once
        return None
    kinds = set(map(type, values))
    if kinds == {int}:
        return values
    if kinds != {float}:
        return None
    try:
        # One C loop, a third of is_integer and int() a value (the schedule's
        # six time columns and the series' times, benchmarks/bench_outputs.py);
        # it takes integral floats up to 2**53 only, the rest go on below.
        return msgspec.convert(values, list[int], strict=False)
    except msgspec.ValidationError:
        pass
    if all(map(float.is_integer, values)):
        return list(map(int, values))
    return None


_CSV_CHUNK: Final = 8192
_NEEDS_QUOTES: Final = re.compile(r'[",\r\n]').search


def _csv_cells(values: list[Any]) -> list[str]:
    """The cells of a column that is not whole numbers (:func:`whole_numbers`)."""
    kind = next((type(v) for v in values if v is not None), None)
    if kind is None:  # empty cells only: the reasons when every job started
        return [""] * len(values)
    if kind is float:
        texts = _float_texts(values)
        if texts is not None:
            return texts
        return ["" if v is None else str(int(v)) if v.is_integer() else repr(v) for v in values]
    if kind is int:
        return ["" if v is None else str(v) for v in values]
    if None not in values:
        column = " ".join(values)
        if not ('"' in column or "," in column or "\r" in column or "\n" in column):
            # No cell needs quotes (the usual): four scans of the column (memchr),
            # not a regex search a cell (a tenth of writing the NASA schedule,
            # benchmarks/bench_outputs.py).
            return values
    return [
        "" if v is None else '"' + v.replace('"', '""') + '"' if _NEEDS_QUOTES(v) else v
        for v in values
    ]


def _float_texts(values: list[float | None]) -> list[str] | None:
    """The cells of a column of floats (or ``None``: empty) as the general rule
    writes them (:func:`_csv_cells`), by one msgspec encode: its shortest
    round-trip digits are ``repr``'s, and so is its notation but for the values
    told apart below (an exponent, ``-0.0``, magnitudes under 1e-4 and NaN or
    infinity, which it writes as null), for which it returns ``None``. A
    third less than a cell at a time on the NASA schedule's slowdowns
    (benchmarks/bench_outputs.py)."""
    if not values:
        return []
    text = _ENCODE(values)[1:-1].decode()
    cells = f",{text},"
    if "e" in text or ",-0.0," in cells or ",0.0000" in cells or ",-0.0000" in cells:
        return None
    nulls = text.count("null")
    if nulls and nulls != values.count(None):  # NaN or infinity among them
        return None
    # A cell ends in ".0" exactly when its value is integral: written as an int.
    return cells.replace(".0,", ",").replace("null", "")[1:-1].split(",")


def _int_row_texts(columns: list[list[int]]) -> list[str]:
    """Each row of int ``columns`` as CSV text: one msgspec encode (a C loop)
    split into rows, twice as fast as ``map(str, ...)`` a column
    (benchmarks/bench_outputs.py)."""
    if len(columns) == 1:
        return _ENCODE(columns[0])[1:-1].decode().split(",") if columns[0] else []
    rows = list(zip(*columns, strict=True))
    return _ENCODE(rows)[2:-2].decode().split("],[") if rows else []
