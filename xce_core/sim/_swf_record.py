"""One Standard Workload Format (SWF) record, its fields and their limits.

Fields, in order (1-based numbers as in the SWF definition)::

     1 job_id          7 used_mem (KB/proc)   13 group
     2 submit (s)      8 req_procs            14 executable
     3 wait (s)        9 req_time (s)         15 queue
     4 run_time (s)   10 req_mem (KB/proc)    16 partition
     5 alloc_procs    11 status               17 preceding_job
     6 avg_cpu (s)    12 user                 18 think_time (s)

Times and memory sizes are read as ``float`` (some archive logs carry decimals
there); the other fields must be integers (``3.0`` is accepted as 3).

**Limits.** Every field lies between -1 (not recorded; the replay takes any
negative value so) and a limit:

- times (submit, wait, run_time, avg_cpu, req_time, think_time):
  ``MAX_SECONDS`` = 10**10 s (317 years);
- memory (used_mem, req_mem, KB per processor): ``MAX_MEMORY_KB`` = 2**40
  (1 PiB per processor);
- integers (ids, sizes, status...): ``MAX_INTEGER`` = 2**53 - 1, the largest
  integer a float holds exactly.

``inf``, ``nan`` and numbers too large for a float (``1e999``) are outside them.
A run time above 0 is at least ``MIN_RUN_TIME`` = 10**-6 s (a microsecond): a
job's slowdown divides by it. So every sum of times, every product of a size by
a time and every slowdown stays finite: a replay's figures are always finite.
:class:`SwfJob` enforces the limits on construction, whatever builds it; the
reader reports a line that breaks them as malformed.

**Integer header keys** start with an integer (words after it are a free
comment: ``128 (guess)``) or ``-1`` (not recorded; so is ``UNKNOWN``, ``N/A``
or ``NONE`` in any case, as some archive conversions write): ``MaxProcs``, ``MaxNodes``
from 1 to MAX_INTEGER; ``MaxJobs``, ``MaxRecords``, ``MaxQueues``,
``MaxPartitions`` from 0 to MAX_INTEGER; ``MaxRuntime``, ``UnixStartTime`` from 0
to MAX_SECONDS; ``MaxMemory`` from 0 to MAX_MEMORY_KB; ``TimeZone`` from -86400
to 86400.
"""

from __future__ import annotations

import math
import operator
from typing import Annotated, Any, Final, cast

import msgspec

__all__ = [
    "INTEGER_HEADER_KEYS",
    "MAX_INTEGER",
    "MAX_MEMORY_KB",
    "MAX_SECONDS",
    "MIN_RUN_TIME",
    "SWF_FIELDS",
    "SwfJob",
    "field_limit",
    "header_int",
    "parse_swf_line",
]

MAX_SECONDS: Final = 10**10
MIN_RUN_TIME: Final = 1e-6
MAX_MEMORY_KB: Final = 2**40
MAX_INTEGER: Final = 2**53 - 1

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

_TIMES: Final = frozenset({"submit", "wait", "run_time", "avg_cpu", "req_time", "think_time"})
_MEMORY: Final = frozenset({"used_mem", "req_mem"})
# Fields read as float; all others are integers.
_IS_FLOAT: Final = tuple(name in _TIMES | _MEMORY for name in SWF_FIELDS)
_INT_INDEXES: Final = tuple(i for i, is_float in enumerate(_IS_FLOAT) if not is_float)
_GET_INTEGERS: Final = operator.itemgetter(*_INT_INDEXES)
_LIMITS: Final[tuple[int, ...]] = tuple(
    MAX_SECONDS if name in _TIMES else MAX_MEMORY_KB if name in _MEMORY else MAX_INTEGER
    for name in SWF_FIELDS
)
_HEADER_RANGES: Final = {
    "MaxProcs": (1, MAX_INTEGER),
    "MaxNodes": (1, MAX_INTEGER),
    "MaxJobs": (0, MAX_INTEGER),
    "MaxRecords": (0, MAX_INTEGER),
    "MaxQueues": (0, MAX_INTEGER),
    "MaxPartitions": (0, MAX_INTEGER),
    "MaxRuntime": (0, MAX_SECONDS),
    "UnixStartTime": (0, MAX_SECONDS),
    "MaxMemory": (0, MAX_MEMORY_KB),
    "TimeZone": (-86400, 86400),
}
_FLOAT_LIMITS: Final = tuple(map(float, _LIMITS))  # exact: each limit fits a float
INTEGER_HEADER_KEYS: Final = frozenset(_HEADER_RANGES)
# Words that mean "not recorded" in an integer header key, as -1 does (the MIT
# SuperCloud conversion writes "; UnixStartTime: UNKNOWN").
_NOT_RECORDED: Final = frozenset({"unknown", "n/a", "none"})
_SHOWN: Final = 40  # characters of a bad token quoted in an error message


def field_limit(name: str) -> int:
    """The largest value SWF field ``name`` may hold (see the module docstring)."""
    return _LIMITS[SWF_FIELDS.index(name)]


class SwfJob(msgspec.Struct, frozen=True, gc=False):
    """One SWF record. ``-1`` means "not recorded", as in the file.

    Construction checks every field against the limits of the module docstring
    and raises ``ValueError`` naming the first field outside them (``inf`` and
    ``nan`` included): a record that exists is safe to replay.
    """

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

    def __post_init__(self) -> None:
        values = msgspec.structs.astuple(self)
        # Both false for nan; one of them for inf and -inf.
        if not (all(map(operator.le, values, _FLOAT_LIMITS)) and min(values) >= -1):
            raise _value_error(values)
        if 0 < self.run_time < MIN_RUN_TIME:
            raise ValueError(_TOO_SHORT + repr(self.run_time))

    @property
    def size(self) -> int:
        """Processors the job asks for: requested (field 8) when > 0, else allocated
        (field 5); may be <= 0 when neither was recorded."""
        return self.req_procs if self.req_procs > 0 else self.alloc_procs

    def to_line(self) -> str:
        """The record as one SWF line (no newline); integral floats print as integers."""
        return " ".join(_format_value(getattr(self, name)) for name in SWF_FIELDS)


def _format_value(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _problem(value: float, is_float: bool, limit: int) -> str | None:
    """What is wrong with one field value, or ``None``."""
    if not math.isfinite(value):
        return "is not a finite number"
    if not is_float and not float(value).is_integer():
        return "must be an integer"
    if not -1 <= value <= limit:
        return f"must be from -1 to {limit}"
    return None


def _value_error(values: tuple[Any, ...]) -> ValueError:
    """The complaint about the first field of a record outside its limits."""
    for name, is_float, limit, value in zip(SWF_FIELDS, _IS_FLOAT, _LIMITS, values, strict=True):
        problem = _problem(value, is_float, limit)
        if problem is not None:
            return ValueError(f"field {name} {problem}: {value!r}")
    return ValueError("malformed record")  # pragma: no cover - every value was in range


_TOO_SHORT: Final = f"field run_time must be 0 or at least {MIN_RUN_TIME:g} s: "


def _show(token: str) -> str:
    """``token`` quoted for a one-line message, shortened when long."""
    if len(token) > _SHOWN:
        token = token[: _SHOWN - 3] + "..."
    return repr(token)


def _field_error(tokens: list[str]) -> ValueError:
    """The precise complaint about a line the fast path refused."""
    for name, is_float, limit, token in zip(SWF_FIELDS, _IS_FLOAT, _LIMITS, tokens, strict=True):
        try:
            if "_" in token:
                raise ValueError
            number = float(token)
        except ValueError:
            return ValueError(f"field {name} is not a number: {_show(token)}")
        problem = _problem(number, is_float, limit)
        if problem is not None:
            return ValueError(f"field {name} {problem}: {_show(token)}")
        if name == "run_time" and 0 < number < MIN_RUN_TIME:
            return ValueError(_TOO_SHORT + _show(token))
    return ValueError("malformed line")  # pragma: no cover - the fast path accepted it


# The fields as one JSON array, each of its type and within its limits, checked
# by msgspec in C: a line's 18 numbers in one call instead of 18 float() calls
# and the checks after them (a third of the time `xce simulate` takes before its
# replay starts: 11 us a line, 4.7 with it, on the NASA trace of
# benchmarks/bench_simulate.py).
_ROW: Final = msgspec.json.Decoder(
    tuple[  # type: ignore[misc]
        tuple(
            Annotated[float if is_float else int, msgspec.Meta(ge=-1, le=limit)]
            for is_float, limit in zip(_IS_FLOAT, _LIMITS, strict=True)
        )
    ]
).decode


def parse_swf_line(line: str) -> SwfJob:
    """One data line as a record. Raises ``ValueError`` saying what is wrong: a
    non-ASCII character, a wrong number of fields, a field that is not a number,
    a value outside the limits of the module docstring."""
    if not line.isascii():
        column = next(i for i, char in enumerate(line, start=1) if not char.isascii())
        raise ValueError(f"non-ASCII character {line[column - 1]!r} at column {column}")
    tokens = line.split()
    if len(tokens) != len(SWF_FIELDS):
        raise ValueError(f"expected {len(SWF_FIELDS)} fields, found {len(tokens)}")
    try:
        # JSON's numbers are a subset of what float() reads, and each token is
        # one element only if it is one number (a comma or bracket in a token
        # makes more or fewer elements, or one that is not a number): a line
        # read so is read as parse_exact() reads it. The others ("+1", ".5",
        # "5.0" in an integer field, "1e3" there, digit separators, too deep a
        # nesting...) are read by parse_exact(), which accepts them or says why not.
        values: Any = _ROW(f"[{','.join(tokens)}]")
    except (msgspec.DecodeError, RecursionError):
        return parse_exact(tokens)
    try:
        return SwfJob(*values)
    except ValueError:
        raise _field_error(tokens) from None


def parse_exact(tokens: list[str]) -> SwfJob:
    """A data line's 18 ASCII ``tokens`` as a record, each read by ``float()``
    (the rule :func:`parse_swf_line`'s faster path follows). Raises
    ``ValueError`` saying what is wrong."""
    try:
        if any("_" in token for token in tokens):  # float() reads 5_0 as 50
            raise ValueError
        values = [float(token) for token in tokens]
    except ValueError:
        raise _field_error(tokens) from None
    integers = _GET_INTEGERS(values)
    if not all(map(float.is_integer, integers)):  # also false for inf and nan
        raise _field_error(tokens)
    for index, integer in zip(_INT_INDEXES, map(int, integers), strict=True):
        values[index] = integer
    try:
        return SwfJob(*cast(list[Any], values))
    except ValueError:
        raise _field_error(tokens) from None


def header_int(header: dict[str, str], key: str) -> int | None:
    """``header[key]`` as an integer (its first word), or ``None`` when absent or
    not recorded (``-1``, ``UNKNOWN``, ``N/A`` or ``NONE``).

    Raises ``ValueError`` naming the key when the value is not an integer within
    the key's range (module docstring; other keys: 0 to MAX_INTEGER). The reader
    checks the integer keys as it meets them, so its headers never raise here.
    """
    value = header.get(key)
    if value is None:
        return None
    low, high = _HEADER_RANGES.get(key, (0, MAX_INTEGER))
    words = value.split(maxsplit=1)
    word = words[0] if words else ""
    try:
        number = float(word) if word.isascii() and "_" not in word else math.nan
    except ValueError:
        number = math.nan
    if number == -1 or word.lower() in _NOT_RECORDED:
        return None
    if not (math.isfinite(number) and number.is_integer() and low <= number <= high):
        raise ValueError(
            f"header {key}: expected -1 (not recorded) or an integer from {low} to {high},"
            f" found {_show(word)}"
        )
    return int(number)
