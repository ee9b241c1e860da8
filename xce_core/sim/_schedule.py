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

import contextlib
import csv
import importlib
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final, Literal

import msgspec

from events import HostSlots
from xce_core import XceError
from xce_core.sim._outcomes import STATUS_NAMES, JobOutcome, OutcomeTable
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


def _pyarrow() -> tuple[Any, Any]:
    """pyarrow and pyarrow.parquet; :class:`XceError` saying how to install them."""
    try:
        # Imported by name: an optional extra, without type stubs here.
        return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise XceError(
            "Parquet output needs pyarrow: pip install 'xce[parquet]' (or pip install pyarrow)"
        ) from None


def check_parquet() -> None:
    """Raise :class:`XceError` (saying how to install it) unless pyarrow imports."""
    _pyarrow()


# --------------------------------------------------------------------------- schedule


def _split_reason(reason: str) -> tuple[str, str]:
    kind, _, detail = reason.partition(": ")
    return kind, detail


def schedule_columns(table: OutcomeTable) -> dict[str, list[Any]]:
    """The schedule of ``table`` by column (see the module docstring); ``hosts``
    as lists of ``(host, slots)`` pairs, empty values ``None``. Pure."""
    a = table.arrays()
    status, start_at, submit_at, run_at = a.status, a.start, a.submit, a.run_time
    rows = [i for i in range(len(status)) if status[i] != _UNREPLAYED]
    start: list[float | None] = []
    end: list[float | None] = []
    wait: list[float | None] = []
    turnaround: list[float | None] = []
    slowdown: list[float | None] = []
    bounded: list[float | None] = []
    reason: list[str | None] = []
    detail: list[str | None] = []
    hosts: list[list[tuple[str, int]]] = []
    tau = BOUNDED_SLOWDOWN_TAU
    for i in rows:
        s = status[i]
        run = run_at[i]
        if s == _STARTED:
            t0 = start_at[i]
            turn = t0 + run - submit_at[i]
            start.append(t0)
            end.append(t0 + run)
            wait.append(t0 - submit_at[i])
            turnaround.append(turn)
            slowdown.append(turn / run if run > 0 else None)
            bounded.append(max(1.0, turn / max(run, tau)))
            hosts.append(table.hosts(i))
            reason.append(None)
            detail.append(None)
            continue
        start.append(None)
        end.append(None)
        wait.append(None)
        turnaround.append(None)
        slowdown.append(None)
        bounded.append(None)
        hosts.append([])
        if s == _REJECTED:
            kind, why = _split_reason(a.reasons.get(i, ""))
        else:
            default = a.never_reason if s == _NEVER_STARTED else ""
            kind, why = a.reasons.get(i, default), a.details.get(i, "")
        reason.append(kind or None)
        detail.append(why or None)
    return {
        "job_id": [a.ids[i] for i in rows],
        "user": [a.users[i] for i in rows],
        "queue": [a.queues[i] for i in rows],
        "size": [a.procs[i] for i in rows],
        "status": [STATUS_NAMES[status[i]] for i in rows],
        "submit": [submit_at[i] for i in rows],
        "start": start,
        "end": end,
        "wait": wait,
        "run": [run_at[i] for i in rows],
        "turnaround": turnaround,
        "slowdown": slowdown,
        "bounded_slowdown": bounded,
        "hosts": hosts,
        "reason": reason,
        "detail": detail,
    }


def _hosts_text(hosts: list[tuple[str, int]]) -> str:
    return " ".join(f"{host}:{slots}" for host, slots in hosts)


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
    columns = schedule_columns(as_table(outcomes))
    if fmt == "parquet":
        _write_parquet(path, _schedule_arrow(columns))
    elif fmt == "csv":
        columns["hosts"] = list(map(_hosts_text, columns["hosts"]))
        _write_csv(path, SCHEDULE_COLUMNS, columns)
    else:
        encoder = msgspec.json.Encoder()
        names = SCHEDULE_COLUMNS
        with _replacing(path, "wb") as out:
            for row in zip(*(columns[name] for name in names), strict=True):
                out.write(encoder.encode(dict(zip(names, row, strict=True))))
                out.write(b"\n")
    return len(columns["job_id"])


def _write_csv(path: Path, names: Sequence[str], columns: dict[str, list[Any]]) -> None:
    with _replacing(path, "w") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        # repr() of a float is the shortest text that reads back as the same float.
        writer.writerows(zip(*(columns[name] for name in names), strict=True))


def _schedule_arrow(columns: dict[str, list[Any]]) -> Any:
    pa, _ = _pyarrow()
    offsets = [0]
    host_names: list[str] = []
    host_slots: list[int] = []
    for hosts in columns["hosts"]:
        for host, slots in hosts:
            host_names.append(host)
            host_slots.append(slots)
        offsets.append(len(host_names))
    entries = pa.StructArray.from_arrays(
        [pa.array(host_names, pa.string()), pa.array(host_slots, pa.int64())],
        names=["host", "slots"],
    )
    arrays = {name: columns[name] for name in SCHEDULE_COLUMNS if name != "hosts"}
    types = {"size": pa.int64(), "job_id": pa.string(), "user": pa.string()}
    fields = []
    data = []
    for name in SCHEDULE_COLUMNS:
        if name == "hosts":
            array = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries)
        else:
            kind = types.get(name)
            if kind is None:
                kind = pa.float64() if name in _FLOAT_COLUMNS else pa.string()
            array = pa.array(arrays[name], kind)
        fields.append(pa.field(name, array.type))
        data.append(array)
    return pa.Table.from_arrays(data, schema=pa.schema(fields))


_FLOAT_COLUMNS: Final = frozenset(
    ("submit", "start", "end", "wait", "run", "turnaround", "slowdown", "bounded_slowdown")
)


def _write_parquet(path: Path, table: Any) -> None:
    _, pq = _pyarrow()
    with _replacing(path, "wb") as out:
        pq.write_table(table, out)


# --------------------------------------------------------------------------- time series


def timeseries_columns(
    outcomes: Sequence[JobOutcome], until: float | None = None
) -> dict[str, list[Any]]:
    """The time series of ``outcomes`` (an :class:`OutcomeTable`, or outcome
    objects) by column (see the module docstring), up to ``until`` (the instant
    a stopped replay reached) when given. Pure."""
    a = as_table(outcomes).arrays()
    status, procs, start_at, run_at = a.status, a.procs, a.start, a.run_time
    # time -> [used slots, running jobs, queue length, queued demand] changes
    changes: dict[float, list[int]] = {}
    for i, submit in enumerate(a.submit):
        s = status[i]
        if s in (_REJECTED, _UNREPLAYED):
            continue
        size = procs[i]
        change = changes.get(submit)
        if change is None:
            change = changes[submit] = [0, 0, 0, 0]
        change[2] += 1
        change[3] += size
        if s == _STARTED:
            t0 = start_at[i]
            change = changes.get(t0)
            if change is None:
                change = changes[t0] = [0, 0, 0, 0]
            change[0] += size
            change[1] += 1
            change[2] -= 1
            change[3] -= size
            t1 = t0 + run_at[i]
            change = changes.get(t1)
            if change is None:
                change = changes[t1] = [0, 0, 0, 0]
            change[0] -= size
            change[1] -= 1
    out: dict[str, list[Any]] = {name: [] for name in TIMESERIES_COLUMNS}
    time, used, running, queued, demand = (out[name] for name in TIMESERIES_COLUMNS)
    u = r = q = d = 0
    limit = math.inf if until is None else until
    for t in sorted(changes):
        if t > limit:
            break
        du, dr, dq, dd = changes[t]
        if not (du or dr or dq or dd):
            continue
        u += du
        r += dr
        q += dq
        d += dd
        time.append(t)
        used.append(u)
        running.append(r)
        queued.append(q)
        demand.append(d)
    return out


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
    columns = timeseries_columns(outcomes, until)
    if fmt == "parquet":
        pa, _ = _pyarrow()
        types = [pa.float64()] + [pa.int64()] * (len(TIMESERIES_COLUMNS) - 1)
        schema = pa.schema(
            [pa.field(n, t) for n, t in zip(TIMESERIES_COLUMNS, types, strict=True)]
        )
        data = [pa.array(columns[n], t) for n, t in zip(TIMESERIES_COLUMNS, types, strict=True)]
        _write_parquet(path, pa.Table.from_arrays(data, schema=schema))
    else:
        _write_csv(path, TIMESERIES_COLUMNS, columns)
    return len(columns["time"])
