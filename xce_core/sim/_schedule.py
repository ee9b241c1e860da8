"""A replay's schedule for analysis (one row per job), in JSON Lines, CSV or
Parquet (by the file's suffix; Parquet needs the optional ``parquet`` extra,
pyarrow). The time series is in :mod:`xce_core.sim._timeseries`.

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

Files are written to a temporary name beside the target, then renamed: a
reader never sees half a file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress
from operator import add, sub, truediv
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import msgspec

from events import HostSlots
from xce_core.sim._files import replacing, write_csv
from xce_core.sim._outcomes import STATUS_NAMES, JobOutcome, OutcomeArrays, OutcomeTable
from xce_core.sim._parquet import check_parquet, schedule_table, write_table
from xce_core.sim._report import BOUNDED_SLOWDOWN_TAU

__all__ = [
    "SCHEDULE_COLUMNS",
    "SCHEDULE_FORMATS",
    "OutputFormat",
    "as_table",
    "check_parquet",
    "output_format",
    "schedule_columns",
    "write_schedule",
]

OutputFormat = Literal["jsonl", "csv", "parquet"]
SCHEDULE_FORMATS: Final[dict[str, OutputFormat]] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
}
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
        with replacing(path, "wb") as out:
            write_table(arrow, out)
        return len(replayed)
    columns, hosts = _columns(table)
    if fmt == "csv":
        columns["hosts"] = _hosts_text(hosts)
        write_csv(path, SCHEDULE_COLUMNS, columns)
    else:
        columns["hosts"] = _hosts_json(hosts)
        rows = list(
            itertools.starmap(_JsonRow, zip(*(columns[k] for k in SCHEDULE_COLUMNS), strict=True))
        )
        with replacing(path, "wb") as out:
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
