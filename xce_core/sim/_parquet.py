"""Parquet outputs: the schedule and the time series (see :mod:`._schedule`) as
arrow tables, written by pyarrow (the optional ``parquet`` extra).

The schedule is built from an :class:`OutcomeTable`'s own arrays by arrow
kernels, not from the Python lists the JSON Lines and CSV writers format: on
the NASA schedule that took 26 ms of Python per write, this 5 ms
(benchmarks/bench_outputs.py). Its columns follow the rules of
:func:`~xce_core.sim.schedule_columns`; a property test holds the two together.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import IO, Any, Final

from xce_core import XceError
from xce_core.sim._outcomes import STATUS_NAMES, OutcomeArrays
from xce_core.sim._report import BOUNDED_SLOWDOWN_TAU

__all__ = ["check_parquet", "schedule_table", "timeseries_table", "write_table"]

_STARTED: Final = STATUS_NAMES.index("started")
_UNREPLAYED: Final = STATUS_NAMES.index("unreplayed")


def _pyarrow() -> Any:
    """pyarrow; :class:`XceError` saying how to install it."""
    try:
        # Imported by name: an optional extra, without type stubs here.
        return importlib.import_module("pyarrow")
    except ImportError:
        raise XceError(
            "Parquet output needs pyarrow: pip install 'xce[parquet]' (or pip install pyarrow)"
        ) from None


def check_parquet() -> None:
    """Raise :class:`XceError` (saying how to install it) unless pyarrow imports."""
    _pyarrow()


def write_table(table: Any, out: IO[bytes]) -> None:
    """Write the arrow ``table`` to ``out`` as Parquet, as
    ``pyarrow.parquet.write_table`` does by default (one row group up to a
    million rows) but for the arrow schema, not stored: the columns' types
    (strings, int64, double, lists of structs) read back the same from
    Parquet's own, and a dictionary-encoded column (the schedule's host names)
    reads back as strings. Raises ``OSError``."""
    options = {"version": "2.6", "compression": "snappy", "store_schema": False}
    try:
        # The writer of pyarrow's extension module, which pyarrow.parquet wraps:
        # importing pyarrow.parquet imports its file systems (S3, GCS, Azure,
        # HDFS, ssl) too, 61 M instructions (benchmarks/bench_outputs.py).
        opened = importlib.import_module("pyarrow._parquet").ParquetWriter(
            out, table.schema, writer_engine_version="V2", **options
        )
    except (ImportError, AttributeError, TypeError):  # another layout: the public one
        opened = importlib.import_module("pyarrow.parquet").ParquetWriter(
            out, table.schema, **options
        )
    try:
        opened.write_table(table)
    finally:
        opened.close()


def timeseries_table(
    names: Sequence[str], times: Sequence[float], rows: Sequence[tuple[int, ...]]
) -> Any:
    """The time series as an arrow table: column ``names[0]`` holds ``times``
    (floats), the others the ``rows`` of ints behind them. Converted as structs,
    a row at a time: half the time of splitting them into columns first
    (benchmarks/bench_outputs.py). Pure."""
    pa = _pyarrow()
    ints = pa.struct([(name, pa.int64()) for name in names[1:]])
    return pa.table(
        [pa.array(times, pa.float64()), *pa.array(rows, ints).flatten()], names=list(names)
    )


def _compute() -> Any:
    """pyarrow's compute functions, called by name through its extension
    module: importing ``pyarrow.compute`` builds a Python wrapper for every
    function, 0.19 G instructions, more than the schedule's kernels save on
    the NASA schedule (benchmarks/bench_outputs.py). So are casts: an arrow
    array's ``cast`` imports it."""
    try:
        return importlib.import_module("pyarrow._compute")
    except ImportError:  # another layout: the public module
        return importlib.import_module("pyarrow.compute")


def _kernel(name: str, *args: Any) -> Any:
    """Arrow's compute function ``name`` on ``args`` (see :func:`_compute`)."""
    return _compute().call_function(name, list(args))


def _int32(array: Any) -> Any:
    """``array`` (of ints) as 32-bit ints; raises if one does not fit."""
    compute = _compute()
    return compute.call_function("cast", [array], compute.CastOptions.safe(_pyarrow().int32()))


def _from_buffer(pa: Any, kind: Any, values: Any, validity: Any = None) -> Any:
    """An arrow array of ``kind`` holding a copy of ``values`` (an ``array`` of
    that type's width, or bytes): one copy, no conversion a value."""
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(bytes(values))])


def schedule_table(
    a: OutcomeArrays, reason: Sequence[str | None], detail: Sequence[str | None]
) -> Any:
    """The schedule of the outcomes ``a`` as an arrow table (see
    :mod:`._schedule`), given the ``reason`` and ``detail`` of each replayed
    row. Pure."""
    pa = _pyarrow()
    f64, i64 = pa.float64(), pa.int64()
    status = _from_buffer(pa, pa.uint8(), a.status)
    started = _kernel("equal", status, pa.scalar(_STARTED, pa.uint8()))
    submit, run = _from_buffer(pa, f64, a.submit), _from_buffer(pa, f64, a.run_time)
    # Valid where the job started (a fresh boolean array's values are a bitmap
    # from offset 0): every time computed from it is null elsewhere.
    start = _from_buffer(pa, f64, a.start, started.buffers()[1])
    end = _kernel("add", start, run)
    turnaround = _kernel("subtract", end, submit)
    # slowdown: turnaround / run where run > 0, else null; bounded slowdown:
    # max(1, turnaround / max(run, tau)), as schedule_columns compares them.
    no_run = pa.scalar(None, f64)
    positive = _kernel("if_else", _kernel("greater", run, pa.scalar(0.0)), run, no_run)
    tau = pa.scalar(float(BOUNDED_SLOWDOWN_TAU))
    at_least_tau = _kernel("if_else", _kernel("less", run, tau), tau, run)
    bounded = _kernel("divide", turnaround, at_least_tau)
    one = pa.scalar(1.0)
    columns = {
        "job_id": pa.array(a.ids, pa.string()),
        "user": pa.array(a.users, pa.string()),
        "queue": pa.array(a.queues, pa.string()),
        "size": _from_buffer(pa, i64, a.procs),
        "status": _kernel("take", pa.array(STATUS_NAMES, pa.string()), status),
        "submit": submit,
        "start": start,
        "end": end,
        "wait": _kernel("subtract", start, submit),
        "run": run,
        "turnaround": turnaround,
        "slowdown": _kernel("divide", turnaround, positive),
        "bounded_slowdown": _kernel("if_else", _kernel("greater", bounded, one), bounded, one),
        "hosts": _hosts(pa, a),
    }
    if _UNREPLAYED in a.status:  # a replay stopped early: the replayed rows only
        replayed = _kernel("not_equal", status, pa.scalar(_UNREPLAYED, pa.uint8()))
        columns = {name: _kernel("filter", array, replayed) for name, array in columns.items()}
    columns["reason"] = pa.array(reason, pa.string())
    columns["detail"] = pa.array(detail, pa.string())
    return pa.table(columns)


def _hosts(pa: Any, a: OutcomeArrays) -> Any:
    """Each job's hosts as a list of ``{host, slots}`` structs, expanded from
    the runs by arrow (list views put the runs in row order, run-end decoding
    repeats a run's values for its hosts): converting a name and a slot count
    a host from Python objects was half the cost of writing the NASA schedule
    (300,000 hosts, benchmarks/bench_outputs.py)."""
    i64 = pa.int64()
    runs = pa.StructArray.from_arrays(
        [_from_buffer(pa, i64, column) for column in (a.run_host, a.run_length, a.run_slots)],
        names=["first", "length", "slots"],
    )
    count = _from_buffer(pa, i64, a.run_count)
    first_run = _from_buffer(pa, i64, a.run_first)
    in_rows = pa.LargeListViewArray.from_arrays(first_run, count, runs).flatten()
    first, length, slots = (in_rows.field(i) for i in range(3))
    ends = _kernel("cumulative_sum", length)  # each run's end among all the hosts

    def per_host(values: Any) -> Any:
        """One value a run, repeated for each of its hosts."""
        return _kernel("run_end_decode", pa.RunEndEncodedArray.from_arrays(ends, values))

    # A host's index in the names: its run's first host, plus how far into the
    # run it is (its number among all the hosts, 1, 2..., less the run's end
    # and plus its length, less one).
    one = pa.scalar(1, i64)
    number = _kernel("cumulative_sum", per_host(pa.repeat(one, len(ends))))
    shift = _kernel("subtract", _kernel("add", first, length), _kernel("add", ends, one))
    index = _kernel("add", number, per_host(shift))
    # The names by index, not taken into a string a host: Parquet encodes the
    # column by a dictionary either way, so the writer need not hash 300,000
    # names nor compare them for its statistics (about 0.1 G instructions on
    # NASA, benchmarks/bench_outputs.py); it reads back as strings (write_table).
    host = pa.DictionaryArray.from_arrays(index, pa.array(a.host_names, pa.string()))
    entries = pa.StructArray.from_arrays([host, per_host(slots)], names=["host", "slots"])
    # Row i ends where its last run does: the runs of rows 0..i in.
    zero = pa.array([0], i64)
    row_runs = pa.concat_arrays([zero, _kernel("cumulative_sum", count)])
    offsets = _kernel("take", pa.concat_arrays([zero, ends]), row_runs)
    return pa.ListArray.from_arrays(_int32(offsets), entries)
