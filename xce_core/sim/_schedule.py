"""A replay's outputs for analysis: the schedule (one row per job) and the time
series (one row per change), in JSON Lines, CSV or Parquet (by the file's
suffix; Parquet needs the optional ``parquet`` extra, pyarrow).

**Schedule** columns, one row per job in trace order (a replay stopped early
leaves out the jobs it never submitted):

- ``job_id``, ``user``, ``queue`` (as the replay names them: ``u<N>``,
  ``q<N>``), ``size`` (tasks), ``status`` (``started``, ``rejected``,
  ``never_started``; ``pending`` in a replay stopped early);
- ``submit``, ``start``, ``end`` (seconds of virtual time), ``wait`` (start -
  submit), ``run`` (the trace's run time), ``turnaround`` (end - submit),
  ``slowdown`` (turnaround / run; empty when run is 0), ``bounded_slowdown``
  (``max(1, turnaround / max(run, 10 s))``): empty for a job that did not start
  (``run`` is always given);
- ``hosts``: where the job ran. JSON Lines: ``[[host, slots], ...]``; CSV:
  ``host:slots`` pairs separated by spaces; Parquet: a list of
  ``{host, slots}`` structs;
- ``reason`` and ``detail``: for a job that never started (or was pending when
  the replay stopped), the category and detail of the last ``job_pended`` the
  core sent for it; for a rejected job, the rejection's kind (``no_runtime``,
  ``too_big``, ``core``...) and its detail.

Empty values are ``null`` in JSON Lines and Parquet, empty fields in CSV.

**Time series** columns, a row at every instant where one of the values
changed (the values just after it): ``time``, ``used_slots``, ``running_jobs``,
``queue_length`` (jobs submitted and not started), ``queued_slot_demand`` (the
tasks those jobs ask for). A job that never started stays queued to the end.
A replay stopped early ends its series at the instant it reached.

Files are written to a temporary name beside the target, then renamed: a
reader never sees half a file.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain, compress
from operator import add, ne, sub, truediv
from pathlib import Path
from typing import IO, Any, Final, Literal, TypeVar

import msgspec

from events import HostSlots
from xce_core.sim._outcomes import STATUS_NAMES, JobOutcome, OutcomeArrays, OutcomeTable
from xce_core.sim._parquet import check_parquet, schedule_table, timeseries_table, write_table
from xce_core.sim._report import BOUNDED_SLOWDOWN_TAU

__all__ = [
    "SCHEDULE_COLUMNS",
    "SCHEDULE_FORMATS",
    "TIMESERIES_COLUMNS",
    "TIMESERIES_FORMATS",
    "OutputFormat",
    "as_table",
    "check_parquet",
    "output_format",
    "schedule_columns",
    "timeseries_columns",
    "write_schedule",
    "write_timeseries",
]

OutputFormat = Literal["jsonl", "csv", "parquet"]
SCHEDULE_FORMATS: Final[dict[str, OutputFormat]] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
}
TIMESERIES_FORMATS: Final[dict[str, OutputFormat]] = {".csv": "csv", ".parquet": "parquet"}
SCHEDULE_COLUMNS: Final = (
    "job_id",
    "user",
    "queue",
    "size",
    "status",
    "submit",
    "start",
    "end",
    "wait",
    "run",
    "turnaround",
    "slowdown",
    "bounded_slowdown",
    "hosts",
    "reason",
    "detail",
)
TIMESERIES_COLUMNS: Final = (
    "time",
    "used_slots",
    "running_jobs",
    "queue_length",
    "queued_slot_demand",
)
_STARTED: Final = STATUS_NAMES.index("started")
_REJECTED: Final = STATUS_NAMES.index("rejected")
_NEVER_STARTED: Final = STATUS_NAMES.index("never_started")
_UNREPLAYED: Final = STATUS_NAMES.index("unreplayed")


def output_format(path: Path, formats: dict[str, OutputFormat]) -> OutputFormat:
    """The format of ``path`` by its suffix (case-insensitive) among ``formats``;
    ``ValueError`` naming the suffixes known otherwise."""
    found = formats.get(path.suffix.lower())
    if found is None:
        known = ", ".join(formats)
        suffix = f"suffix {path.suffix!r}" if path.suffix else "no suffix"
        raise ValueError(f"{path}: {suffix}: the format is chosen by the suffix ({known})")
    return found


# --------------------------------------------------------------------------- schedule


def _split_reason(reason: str) -> tuple[str, str]:
    kind, _, detail = reason.partition(": ")
    return kind, detail


_Run = tuple[int, int, int]  # first host (an index into the names), hosts, slots each
_T = TypeVar("_T")
_U = TypeVar("_U")


def schedule_columns(outcomes: Sequence[JobOutcome]) -> dict[str, list[Any]]:
    """The schedule of ``outcomes`` (an :class:`OutcomeTable`, or outcome objects)
    by column (see the module docstring); ``hosts`` as lists of ``(host, slots)``
    pairs, empty values ``None``. Pure."""
    columns, hosts = _columns(as_table(outcomes))
    names = hosts.names
    columns["hosts"] = [
        [(names[h], slots) for host, length, slots in job for h in range(host, host + length)]
        for job in hosts.rows()
    ]
    return columns


# A frozen Struct, not a dataclass: the same record, defined in about 0.02 ms
# instead of 0.6 ms of every `xce simulate`.
class _RowHosts(msgspec.Struct, frozen=True):
    """Where each row's job ran: row ``i`` holds the table's runs ``first[i]`` to
    ``first[i] + count[i]`` (none for a job that did not start), each run
    ``(first host, hosts, slots each)`` indexing ``names``."""

    first: Sequence[int]
    count: Sequence[int]
    runs: list[_Run]
    names: Sequence[str]

    def rows(self) -> Iterator[list[_Run]]:
        """Each row's runs."""
        runs = self.runs
        return (runs[f : f + c] for f, c in zip(self.first, self.count, strict=True))

    def rendered(
        self, render: Callable[[int, int, int], _T], join: Callable[[list[_T]], _U]
    ) -> list[_U]:
        """Each row's runs rendered and joined. Runs repeat (the same hosts for
        many jobs), so each distinct run is rendered once, and joined alone
        once for the rows of that one run, the usual row
        (benchmarks/bench_outputs.py)."""
        runs = self.runs
        texts = {run: render(*run) for run in dict.fromkeys(runs)}
        alone = {run: join([text]) for run, text in texts.items()}
        nothing = join([])
        return [
            alone[runs[f]]
            if c == 1
            else join([texts[run] for run in runs[f : f + c]])
            if c
            else nothing
            for f, c in zip(self.first, self.count, strict=True)
        ]


def _spread(values: Iterable[_T], present: Sequence[bool]) -> list[_T | None]:
    """``values`` (one per true entry of ``present``) at those places, ``None``
    elsewhere."""
    if all(present):
        return list(values)
    it = iter(values)
    return [next(it) if here else None for here in present]


def _columns(table: OutcomeTable) -> tuple[dict[str, list[Any]], _RowHosts]:
    """The schedule's columns but ``hosts``; where each row's job ran."""
    a = table.arrays()
    status = a.status
    rows = _replayed(a)
    if isinstance(rows, range):

        def pick(column: Sequence[_T]) -> list[_T]:
            return list(column)
    else:  # a replay stopped early: the replayed rows only

        def pick(column: Sequence[_T]) -> list[_T]:
            return [column[i] for i in rows]

    # Column by column, with C loops (map, compress) over the started jobs'
    # values, spread back to their rows: a few times faster than row by row
    # (benchmarks/bench_outputs.py).
    row_status = pick(status)
    started = list(map(_STARTED.__eq__, row_status))
    submit, run = pick(a.submit), pick(a.run_time)
    go_submit, go_run = list(compress(submit, started)), list(compress(run, started))
    go_start = list(compress(pick(a.start), started))
    go_end = list(map(add, go_start, go_run))
    go_turnaround = list(map(sub, go_end, go_submit))
    tau = BOUNDED_SLOWDOWN_TAU
    go_slowdown = [t / r if r > 0 else None for t, r in zip(go_turnaround, go_run, strict=True)]
    # max(1, t / max(r, tau)) as conditional expressions: max() parses its
    # arguments on every call, three times the cost of this column
    # (benchmarks/bench_outputs.py).
    go_bounded = [
        b if b > 1.0 else 1.0
        for b in map(truediv, go_turnaround, [tau if tau > r else r for r in go_run])
    ]
    reason, detail = _reasons(a, rows)
    columns: dict[str, list[Any]] = {
        "job_id": pick(a.ids),
        "user": pick(a.users),
        "queue": pick(a.queues),
        "size": pick(a.procs),
        "status": list(map(STATUS_NAMES.__getitem__, row_status)),
        "submit": submit,
        "start": _spread(go_start, started),
        "end": _spread(go_end, started),
        "wait": _spread(map(sub, go_start, go_submit), started),
        "run": run,
        "turnaround": _spread(go_turnaround, started),
        "slowdown": _spread(go_slowdown, started),
        "bounded_slowdown": _spread(go_bounded, started),
        "hosts": [],
        "reason": reason,
        "detail": detail,
    }
    runs = list(zip(a.run_host, a.run_length, a.run_slots, strict=True))
    hosts = _RowHosts(pick(a.run_first), pick(a.run_count), runs, a.host_names)
    return columns, hosts


def _replayed(a: OutcomeArrays) -> Sequence[int]:
    """The rows of the schedule of ``a``: every job's but a stopped replay's
    unreplayed jobs."""
    status = a.status
    if _UNREPLAYED in status:
        return [i for i, s in enumerate(status) if s != _UNREPLAYED]
    return range(len(status))


def _reasons(a: OutcomeArrays, rows: Sequence[int]) -> tuple[list[str | None], list[str | None]]:
    """The ``reason`` and ``detail`` columns of ``rows``."""
    status = a.status
    if status.count(_STARTED) == len(status):
        return [None] * len(rows), [None] * len(rows)
    reason: list[str | None] = []
    detail: list[str | None] = []
    for i in rows:
        s = status[i]
        if s == _STARTED:
            kind = why = ""
        elif s == _REJECTED:
            kind, why = _split_reason(a.reasons.get(i, ""))
        else:
            default = a.never_reason if s == _NEVER_STARTED else ""
            kind, why = a.reasons.get(i, default), a.details.get(i, "")
        reason.append(kind or None)
        detail.append(why or None)
    return reason, detail


def _hosts_text(hosts: _RowHosts) -> list[str]:
    """CSV: ``host:slots`` separated by spaces."""
    names = hosts.names
    # By slot count, every host's "host:slots", so that a run is a slice joined
    # (two thirds of writing the NASA schedule's hosts went to formatting
    # them one by one, benchmarks/bench_outputs.py); built once as many were
    # formatted one by one, so never more than twice the labels written.
    labels: dict[int, list[str]] = {}
    formatted: dict[int, int] = {}

    def text(host: int, length: int, slots: int) -> str:
        every = labels.get(slots)
        if every is None:
            formatted[slots] = count = formatted.get(slots, 0) + length
            if count < len(names):
                return " ".join(f"{names[h]}:{slots}" for h in range(host, host + length))
            every = labels[slots] = [f"{name}:{slots}" for name in names]
        return " ".join(every[host : host + length])

    return hosts.rendered(text, " ".join)


def _hosts_json(hosts: _RowHosts) -> list[msgspec.Raw]:
    """JSON Lines: ``[[host, slots], ...]``, already encoded."""
    encode = msgspec.json.encode
    names = hosts.names

    def text(host: int, length: int, slots: int) -> bytes:
        return encode([(names[h], slots) for h in range(host, host + length)])[1:-1]

    def join(parts: list[bytes]) -> msgspec.Raw:
        return msgspec.Raw(b"[" + b",".join(parts) + b"]")

    return hosts.rendered(text, join)


@contextlib.contextmanager
def _replacing(path: Path, mode: Literal["w", "wb"]) -> Iterator[IO[Any]]:
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


def as_table(outcomes: Sequence[JobOutcome]) -> OutcomeTable:
    """``outcomes`` as an :class:`OutcomeTable` (itself when it is one). Pure."""
    if isinstance(outcomes, OutcomeTable):
        return outcomes
    table = OutcomeTable(())
    for i, o in enumerate(outcomes):
        table.append(o.job_id, o.submit, o.run_time, o.procs, o.user, o.queue)
        if o.status == "started" and o.start is not None:
            hosts = [HostSlots(host=h, slots=n) for h, n in o.hosts]
            table.started(i, o.start, o.slots, hosts)
        elif o.status == "rejected":
            table.rejected(i, o.reason)
        else:
            if o.reason:
                table.pended(i, o.reason, o.detail)
            if o.status == "pending":
                table.pending(i)
            elif o.status == "unreplayed":
                table.unreplayed(i)
    return table


def write_schedule(
    path: Path, outcomes: Sequence[JobOutcome], fmt: OutputFormat | None = None
) -> int:
    """Write the schedule of ``outcomes`` (an :class:`OutcomeTable`, or outcome
    objects) to ``path`` in ``fmt`` (by default, by the suffix; an unknown one
    is JSON Lines); returns the rows written. Raises ``OSError``, or
    :class:`XceError` for Parquet without pyarrow."""
    if fmt is None:
        fmt = SCHEDULE_FORMATS.get(path.suffix.lower(), "jsonl")
    table = as_table(outcomes)
    if fmt == "parquet":
        a = table.arrays()
        replayed = _replayed(a)
        arrow = schedule_table(a, *_reasons(a, replayed))
        with _replacing(path, "wb") as out:
            write_table(arrow, out)
        return len(replayed)
    columns, hosts = _columns(table)
    if fmt == "csv":
        columns["hosts"] = _hosts_text(hosts)
        _write_csv(path, SCHEDULE_COLUMNS, columns)
    else:
        columns["hosts"] = _hosts_json(hosts)
        rows = list(
            itertools.starmap(_JsonRow, zip(*(columns[k] for k in SCHEDULE_COLUMNS), strict=True))
        )
        with _replacing(path, "wb") as out:
            out.write(msgspec.json.Encoder().encode_lines(rows))
    return len(columns["job_id"])


class _JsonRow(msgspec.Struct, gc=False):
    """A schedule row as JSON Lines writes it (faster to build than a dict)."""

    job_id: str
    user: str
    queue: str
    size: int
    status: str
    submit: float
    start: float | None
    end: float | None
    wait: float | None
    run: float
    turnaround: float | None
    slowdown: float | None
    bounded_slowdown: float | None
    hosts: msgspec.Raw
    reason: str | None
    detail: str | None


def _write_csv(path: Path, names: Sequence[str], columns: dict[str, list[Any]]) -> None:
    """RFC 4180 CSV, as :mod:`csv` writes it, but built column by column (the
    csv module's writer took twice as long). A float with an integral value is
    written as an integer (``3871``), any other as Python's shortest repr."""
    whole = [_whole(columns[name]) for name in names]
    if all(ints is not None for ints in whole):
        _write_int_rows(path, names, list(zip(*whole, strict=True)))
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
    with _replacing(path, "w") as out:
        out.write(",".join(names) + "\n")
        rows = zip(*parts, strict=True)
        while chunk := list(itertools.islice(rows, _CSV_CHUNK)):
            out.write("\n".join(map(",".join, chunk)))
            out.write("\n")


def _write_int_rows(path: Path, names: Sequence[str], rows: list[tuple[int, ...]]) -> None:
    """CSV of whole numbers only (the time series, as a rule): the rows encoded
    as JSON arrays by msgspec, whose text between the brackets is the CSV rows'
    (half the time of the general path, benchmarks/bench_outputs.py)."""
    body = _ENCODE(rows)[2:-2].replace(b"],[", b"\n")
    with _replacing(path, "wb") as out:
        out.write(",".join(names).encode() + b"\n")
        if body:
            out.write(body + b"\n")


def _whole(values: list[Any]) -> list[int] | None:
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
    """The cells of a column that is not whole numbers (:func:`_whole`)."""
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


_ENCODE: Final = msgspec.json.Encoder().encode


# --------------------------------------------------------------------------- time series


def timeseries_columns(
    outcomes: Sequence[JobOutcome], until: float | None = None
) -> dict[str, list[Any]]:
    """The time series of ``outcomes`` (an :class:`OutcomeTable`, or outcome
    objects) by column (see the module docstring), up to ``until`` (the instant
    a stopped replay reached) when given. Pure."""
    table = as_table(outcomes)
    recorded = _recorded(table, until)
    if recorded is not None:
        times, rows = recorded
        by_column = list(zip(*rows, strict=True)) or [()] * 4
        columns: dict[str, list[Any]] = {"time": times}
        columns.update(zip(TIMESERIES_COLUMNS[1:], map(list, by_column), strict=True))
        return columns
    a = table.arrays()
    status, procs, start_at, run_at = a.status, a.procs, a.start, a.run_time
    # As flags, one byte per job (bytes.translate: a C loop).
    queued = status.translate(_QUEUED_FLAGS)
    started = status.translate(_STARTED_FLAGS)
    sizes = list(compress(procs, started))
    starts = list(compress(start_at, started))
    ends = [t + r for t, r in zip(starts, compress(run_at, started), strict=True)]
    demand = list(compress(procs, queued))
    # Every change as (time, used slots, running jobs, queue length, queued demand),
    # sorted by time (stable: a job's start comes after its submit at one instant).
    times = list(compress(a.submit, queued)) + starts + ends
    n_submit, n_start = len(demand), len(starts)
    d_used = [0] * n_submit + sizes + [-s for s in sizes]
    d_running = [0] * n_submit + [1] * n_start + [-1] * n_start
    d_queue = [1] * n_submit + [-1] * n_start + [0] * n_start
    d_demand = demand + [-s for s in sizes] + [0] * n_start
    # In time order, each column's running total (accumulate: C loops, the
    # time series' share of benchmarks/bench_outputs.py).
    order = sorted(range(len(times)), key=times.__getitem__)
    at = list(map(times.__getitem__, order))
    totals = [
        list(accumulate(map(deltas.__getitem__, order)))
        for deltas in (d_used, d_running, d_queue, d_demand)
    ]
    # A row per instant, after its last change, and only where a total moved
    # (compress and map over the columns: C loops, as above).
    count = len(at) if until is None else bisect.bisect_right(at, until)
    instants = list(compress(range(count), chain(map(ne, at, at[1:count]), (True,))))
    values = list(zip(*(map(column.__getitem__, instants) for column in totals), strict=True))
    kept = list(compress(instants, chain((True,), map(ne, values[1:], values))))
    out: dict[str, list[Any]] = {"time": list(map(at.__getitem__, kept))}
    for name, column in zip(TIMESERIES_COLUMNS[1:], totals, strict=True):
        out[name] = list(map(column.__getitem__, kept))
    return out


def _recorded(
    table: OutcomeTable, until: float | None
) -> tuple[list[float], list[tuple[int, int, int, int]]] | None:
    """The time series the replay recorded in ``table`` (SeriesRecorder), up to
    ``until``: its times and its rows of totals; ``None`` if it recorded none.
    Equal to what the outcomes give, without a pass over every job (most of
    writing the series, benchmarks/bench_outputs.py)."""
    recorded = table.recorded_series()
    if recorded is None:
        return None
    times = recorded.times
    count = len(times) if until is None else bisect.bisect_right(times, until)
    return times[:count], recorded.rows[:count]


def _flags(statuses: Iterable[int]) -> bytes:
    """A ``bytes.translate`` table: 1 for each of ``statuses``, 0 otherwise."""
    chosen = set(statuses)
    return bytes(1 if s in chosen else 0 for s in range(256))


_STARTED_FLAGS: Final = _flags([_STARTED])
_QUEUED_FLAGS: Final = _flags(
    s for s in range(len(STATUS_NAMES)) if s not in (_REJECTED, _UNREPLAYED)
)


def write_timeseries(
    path: Path,
    outcomes: Sequence[JobOutcome],
    until: float | None = None,
    fmt: OutputFormat | None = None,
) -> int:
    """Write the time series of ``outcomes`` (up to ``until``) to ``path`` in ``fmt``
    (by default, by the suffix; an unknown one is CSV); returns the rows
    written. Raises ``OSError``, or :class:`XceError` for Parquet without pyarrow."""
    if fmt is None:
        fmt = TIMESERIES_FORMATS.get(path.suffix.lower(), "csv")
    recorded = _recorded(outcomes, until) if isinstance(outcomes, OutcomeTable) else None
    if fmt == "parquet":
        if recorded is None:
            columns = timeseries_columns(outcomes, until)
            counts = zip(*(columns[name] for name in TIMESERIES_COLUMNS[1:]), strict=True)
            recorded = columns["time"], list(counts)
        # The replay's rows as they are (benchmarks/bench_outputs.py, as below).
        arrow = timeseries_table(TIMESERIES_COLUMNS, *recorded)
        with _replacing(path, "wb") as out:
            write_table(arrow, out)
        return len(recorded[0])
    if recorded is not None and (times := _whole(recorded[0])) is not None:
        # The replay's rows as they are, each behind its time: no columns built
        # and taken apart again (benchmarks/bench_outputs.py).
        _write_int_rows(path, TIMESERIES_COLUMNS, list(map(add, zip(times), recorded[1])))
        return len(times)
    columns = timeseries_columns(outcomes, until)
    _write_csv(path, TIMESERIES_COLUMNS, columns)
    return len(columns["time"])
