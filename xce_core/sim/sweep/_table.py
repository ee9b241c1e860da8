"""The results table of a sweep: one row per run, as CSV, or Parquet when the
name ends in ``.parquet`` (through ``pyarrow``)."""

from __future__ import annotations

import csv
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from xce_core import XceError
from xce_core.sim.sweep._runs import RunMetrics, RunRecord, SweepRun

__all__ = ["RESULT_COLUMNS", "Row", "check_results_format", "result_rows", "write_results"]

Row = dict[str, str | int | float | bool | None]

# Labels of the run first, then its figures (RunMetrics, in field order).
LABEL_COLUMNS: Final = (
    "run_key",
    "trace",
    "cluster",
    "policy",
    "picker",
    "backfill",
    "backfill_depth",
    "strict_fifo",
    "sequential_allocator",
    "parallel_allocator",
    "resreq",
    "limits",
)
RESULT_COLUMNS: Final = LABEL_COLUMNS + RunMetrics.__struct_fields__


def result_rows(rows: Sequence[tuple[SweepRun, RunRecord]]) -> list[Row]:
    """One row per run, in the order given; the columns of :data:`RESULT_COLUMNS`."""
    out: list[Row] = []
    for run, record in rows:
        policy = run.policy
        row: Row = {
            "run_key": record.key,
            "trace": run.trace.name,
            "cluster": run.cluster.name,
            "policy": policy.name,
            "picker": policy.picker,
            "backfill": policy.backfill,
            "backfill_depth": policy.backfill_depth,
            "strict_fifo": policy.strict_fifo,
            "sequential_allocator": policy.sequential_allocator,
            "parallel_allocator": policy.parallel_allocator,
            "resreq": policy.resreq,
            "limits": policy.limits_file,
        }
        for name in RunMetrics.__struct_fields__:
            row[name] = getattr(record.metrics, name)
        out.append(row)
    return out


def _pyarrow() -> tuple[Any, Any]:
    try:
        return (
            importlib.import_module("pyarrow"),
            importlib.import_module("pyarrow.parquet"),
        )
    except ImportError:
        raise XceError(
            "a .parquet results table needs pyarrow: pip install pyarrow (or name it .csv)"
        ) from None


def check_results_format(path: Path) -> None:
    """Before a sweep: raises :class:`XceError` when writing ``path`` needs
    ``pyarrow`` and it does not import."""
    if path.suffix.lower() == ".parquet":
        _pyarrow()


def write_results(path: Path, rows: Sequence[Row]) -> None:
    """Write ``rows`` to ``path``: Parquet if its suffix is ``.parquet``, else
    CSV (a header line, empty cells for ``None``). Raises ``OSError`` when it
    cannot be written, :class:`XceError` when pyarrow is missing."""
    if path.suffix.lower() == ".parquet":
        pyarrow, parquet = _pyarrow()
        columns = {name: [row[name] for row in rows] for name in RESULT_COLUMNS}
        parquet.write_table(pyarrow.table(columns), path)
        return
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=RESULT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
