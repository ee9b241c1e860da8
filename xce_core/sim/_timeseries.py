"""A replay's time series for analysis (one row per change), in CSV or Parquet
(by the file's suffix; Parquet needs the optional ``parquet`` extra, pyarrow).

**Time series** columns, a row at every instant where one of the values
changed (the values just after it): ``time``, ``used_slots``, ``running_jobs``,
``queue_length`` (jobs submitted and not started), ``queued_slot_demand`` (the
tasks those jobs ask for). A job that never started stays queued to the end.
A replay stopped early ends its series at the instant it reached.

Files are written to a temporary name beside the target, then renamed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain, compress
from operator import add, ne
from pathlib import Path
from typing import Any, Final

from xce_core.sim._files import replacing, whole_numbers, write_csv, write_int_rows
from xce_core.sim._outcomes import STATUS_NAMES, JobOutcome, OutcomeTable
from xce_core.sim._parquet import timeseries_table, write_table
from xce_core.sim._schedule import OutputFormat, as_table

__all__ = ["TIMESERIES_COLUMNS", "TIMESERIES_FORMATS", "timeseries_columns", "write_timeseries"]

TIMESERIES_FORMATS: Final[dict[str, OutputFormat]] = {".csv": "csv", ".parquet": "parquet"}
TIMESERIES_COLUMNS: Final = (
    "time",
    "used_slots",
    "running_jobs",
    "queue_length",
    "queued_slot_demand",
)


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


_STARTED_FLAGS: Final = _flags([STATUS_NAMES.index("started")])
# Queued at some time: every job the replay submitted and the core accepted.
_QUEUED_FLAGS: Final = _flags(
    s for s, name in enumerate(STATUS_NAMES) if name not in ("rejected", "unreplayed")
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
        with replacing(path, "wb") as out:
            write_table(arrow, out)
        return len(recorded[0])
    if recorded is not None and (times := whole_numbers(recorded[0])) is not None:
        # The replay's rows as they are, each behind its time: no columns built
        # and taken apart again (benchmarks/bench_outputs.py).
        write_int_rows(path, TIMESERIES_COLUMNS, list(map(add, zip(times), recorded[1])))
        return len(times)
    columns = timeseries_columns(outcomes, until)
    write_csv(path, TIMESERIES_COLUMNS, columns)
    return len(columns["time"])
