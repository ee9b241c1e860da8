"""The schedule and the time series: every format reads back as the in-memory
schedule; never-started jobs keep the core's pend reason; a stopped replay is
partial and keeps what was decided."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xce_core import SchedulerConfig
from xce_core.sim import (
    SCHEDULE_COLUMNS,
    SCHEDULE_FORMATS,
    TIMESERIES_COLUMNS,
    ClusterSpec,
    HostGroup,
    JobOutcome,
    SimResult,
    SwfJob,
    as_table,
    default_cluster,
    output_format,
    parse_swf_line,
    read_swf,
    schedule_columns,
    simulate,
    timeseries_columns,
    write_schedule,
    write_timeseries,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/synthetic.swf"


def swf(job_id: int, submit: float, run: float, procs: int, **fields: float) -> SwfJob:
    values = dict.fromkeys(SwfJob.__struct_fields__, -1)
    values.update(job_id=job_id, submit=submit, run_time=run, alloc_procs=procs, **fields)
    return parse_swf_line(" ".join(str(values[name]) for name in SwfJob.__struct_fields__))


async def replay(limit: int = 400, **options: Any) -> SimResult:
    trace = read_swf(EXAMPLE, limit=limit)
    cluster = default_cluster(trace.header, trace.jobs, hosts=12, slots=4)
    return await simulate(trace.jobs, cluster, **options)


def as_rows(columns: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def expected_rows(result: SimResult) -> list[dict[str, Any]]:
    rows = as_rows(schedule_columns(result.jobs))
    for row in rows:
        row["hosts"] = [list(pair) for pair in row["hosts"]]
    return rows


def from_csv(value: str, name: str) -> Any:
    if value == "":
        return [] if name == "hosts" else None
    if name == "hosts":
        return [[host, int(slots)] for host, slots in (p.rsplit(":", 1) for p in value.split())]
    if name in ("size", "used_slots", "running_jobs", "queue_length", "queued_slot_demand"):
        return int(value)
    if name in ("job_id", "user", "queue", "status", "reason", "detail"):
        return value
    return float(value)


async def test_schedule_columns_agree_with_the_outcomes() -> None:
    result = await replay()
    columns = schedule_columns(result.jobs)
    assert tuple(columns) == SCHEDULE_COLUMNS
    for outcome, row in zip(result.jobs, as_rows(columns), strict=True):
        assert (row["job_id"], row["size"], row["status"]) == (
            outcome.job_id,
            outcome.procs,
            outcome.status,
        )
        assert row["user"].startswith("u")
        assert row["queue"].startswith("q")
        if outcome.status != "started":
            assert row["start"] is None
            assert row["hosts"] == []
            continue
        assert row["hosts"] == outcome.hosts
        assert row["turnaround"] == row["wait"] + row["run"] == row["end"] - row["submit"]
        run = row["run"]
        assert row["slowdown"] == (row["turnaround"] / run if run > 0 else None)
        assert row["bounded_slowdown"] == max(1.0, row["turnaround"] / max(run, 10.0))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
async def test_every_schedule_format_reads_back_as_the_schedule(
    tmp_path: Path, suffix: str
) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow.parquet")  # the parquet extra
    result = await replay()
    path = tmp_path / f"schedule{suffix}"
    assert write_schedule(path, result.jobs) == len(result.jobs)
    expected = expected_rows(result)
    if suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    elif suffix == ".csv":
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            assert tuple(reader.fieldnames or ()) == SCHEDULE_COLUMNS
            rows = [{k: from_csv(v, k) for k, v in row.items()} for row in reader]
    else:
        pq = pytest.importorskip("pyarrow.parquet")
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            row["hosts"] = [[h["host"], h["slots"]] for h in row["hosts"]]
    assert rows == expected
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left  # noqa: ASYNC240


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
async def test_every_timeseries_format_reads_back(tmp_path: Path, suffix: str) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow.parquet")  # the parquet extra
    result = await replay()
    path = tmp_path / f"series{suffix}"
    columns = timeseries_columns(result.jobs)
    assert write_timeseries(path, result.jobs) == len(columns["time"])
    if suffix == ".csv":
        with path.open(newline="") as f:
            rows = [{k: from_csv(v, k) for k, v in row.items()} for row in csv.DictReader(f)]
    else:
        pq = pytest.importorskip("pyarrow.parquet")
        rows = pq.read_table(path).to_pylist()
    assert rows == as_rows(columns)


async def test_the_time_series_steps_at_every_change() -> None:
    # Two one-slot hosts: 1 (2 procs, 10 s) at 0; 2 (1 proc, 5 s) at 1 waits for 1.
    jobs = [swf(1, 0, 10, 2), swf(2, 1, 5, 1), swf(3, 1, 0, 5)]  # 3 is too big: rejected
    result = await simulate(jobs, ClusterSpec((HostGroup(count=2, slots=1),)))
    series = as_rows(timeseries_columns(result.jobs))
    assert [tuple(r.values()) for r in series] == [
        (0.0, 2, 1, 0, 0),
        (1.0, 2, 1, 1, 1),
        (10.0, 1, 1, 0, 0),
        (15.0, 0, 0, 0, 0),
    ]
    assert tuple(series[0]) == TIMESERIES_COLUMNS
    assert as_rows(timeseries_columns(result.jobs, until=5.0)) == series[:2]


async def test_a_never_started_job_keeps_the_cores_pend_reason(tmp_path: Path) -> None:
    cluster = ClusterSpec(
        (HostGroup(count=2, slots=8, attrs={"partition": 1}),
         HostGroup(count=1, slots=16, name="p", attrs={"partition": 2})),
    )  # fmt: skip
    # 20 tasks in partition 1 (16 slots): never fits, though the cluster has 32.
    jobs = [swf(1, 0, 10, 20, partition=1), swf(2, 0, 10, 4, partition=1)]
    result = await simulate(jobs, cluster)
    never = result.jobs[0]
    assert never.status == "never_started"
    assert never.reason not in ("", "still pending when nothing could change any more")
    assert never.detail
    path = tmp_path / "s.csv"
    write_schedule(path, result.jobs)
    with path.open(newline="") as f:
        row = next(csv.DictReader(f))
    assert (row["status"], row["reason"], row["detail"]) == (
        "never_started",
        never.reason,
        never.detail,
    )


async def test_a_rejection_reads_as_kind_and_detail() -> None:
    result = await simulate([swf(1, 0, 10, 9)], ClusterSpec((HostGroup(count=2, slots=4),)))
    (row,) = as_rows(schedule_columns(result.jobs))
    assert (row["status"], row["reason"]) == ("rejected", "too_big")
    assert row["detail"] == "9 processors, the cluster has 8 slots"


async def test_a_stopped_replay_is_partial_and_keeps_what_was_decided(tmp_path: Path) -> None:
    full = await replay(limit=600, config=SchedulerConfig())
    calls = 0

    def stop() -> bool:
        nonlocal calls
        calls += 1
        return calls > 150

    part = await replay(limit=600, stop=stop)
    s = part.summary
    assert s.partial
    assert not full.summary.partial
    assert s.stopped_at is not None
    assert s.pending + s.unreplayed > 0
    statuses = [o.status for o in part.jobs]
    assert statuses.count("unreplayed") == s.unreplayed
    assert statuses.count("pending") == s.pending
    # What was decided is what the whole replay decided up to then.
    for p, f in zip(part.jobs, full.jobs, strict=True):
        if p.status == "started":
            assert (p.start, p.hosts) == (f.start, f.hosts)
    path = tmp_path / "s.jsonl"
    rows = write_schedule(path, part.jobs)
    assert rows == len(part.jobs) - s.unreplayed
    series = timeseries_columns(part.jobs, until=s.stopped_at)
    assert max(series["time"]) <= s.stopped_at


async def test_objects_and_tables_give_the_same_schedule() -> None:
    result = await replay(limit=200)
    objects = list(result.jobs)
    assert schedule_columns(objects) == schedule_columns(result.jobs)
    assert as_table(result.jobs) is result.jobs


def test_the_format_comes_from_the_suffix() -> None:
    assert output_format(Path("a.CSV"), SCHEDULE_FORMATS) == "csv"
    assert output_format(Path("a.ndjson"), SCHEDULE_FORMATS) == "jsonl"
    with pytest.raises(ValueError, match=r"suffix '\.txt': the format is chosen by the suffix"):
        output_format(Path("a.txt"), SCHEDULE_FORMATS)
    with pytest.raises(ValueError, match="no suffix"):
        output_format(Path("schedule"), SCHEDULE_FORMATS)


async def test_summary_figures() -> None:
    result = await replay()
    s = result.summary
    rows = [r for r in as_rows(schedule_columns(result.jobs)) if r["status"] == "started"]
    assert s.turnaround_max == max(r["turnaround"] for r in rows)
    assert math.isclose(s.turnaround_mean, sum(r["turnaround"] for r in rows) / len(rows))
    assert s.slowdown_max == max(r["slowdown"] for r in rows if r["slowdown"] is not None)
    assert s.bounded_slowdown_max == max(r["bounded_slowdown"] for r in rows)
    assert sum(f.started for f in s.by_size.values()) == s.started
    assert sum(f.jobs for f in s.by_size.values()) == s.jobs - s.rejected


_outcome = st.builds(
    lambda submit, wait, run, procs, status: JobOutcome(
        job_id="j",
        submit=float(submit),
        run_time=float(run),
        procs=procs,
        status=status,
        start=float(submit + wait) if status == "started" else None,
        hosts=[("h", procs)] if status == "started" else [],
    ),
    st.integers(0, 20),
    st.sampled_from([0, 0, 1, 3, 7]),  # waits and run times: often 0, so that
    st.sampled_from([0, 0, 1, 3, 7]),  # an instant may change nothing
    st.integers(1, 4),
    st.sampled_from(["started", "started", "never_started", "rejected", "pending"]),
)


@given(st.lists(_outcome, max_size=12), st.none() | st.integers(0, 40))
def test_the_time_series_matches_a_state_at_every_instant(
    outcomes: list[JobOutcome], until: int | None
) -> None:
    # Reference: the state just after each instant where anything happened,
    # counted from scratch; a row wherever it differs from the row before.
    queued = [o for o in outcomes if o.status not in ("rejected", "unreplayed")]
    started = [o for o in queued if o.start is not None]
    instants = sorted(
        {o.submit for o in queued}
        | {o.start for o in started if o.start is not None}
        | {o.start + o.run_time for o in started if o.start is not None}
    )
    expected: list[tuple[float, int, int, int, int]] = []
    for t in instants:
        if until is not None and t > until:
            break
        running = [
            o for o in started if o.start is not None and o.start <= t < o.start + o.run_time
        ]
        waiting = [o for o in queued if o.submit <= t and (o.start is None or o.start > t)]
        row = (
            t,
            sum(o.procs for o in running),
            len(running),
            len(waiting),
            sum(o.procs for o in waiting),
        )
        if not expected or row[1:] != expected[-1][1:]:
            expected.append(row)
    columns = timeseries_columns(outcomes, until)
    assert list(zip(*columns.values(), strict=True)) == expected


_CELL = st.text(alphabet=st.sampled_from('ab ,"\r\n:'), max_size=6)


def _written_csv(
    tmp_path_factory: pytest.TempPathFactory, columns: list[list[Any]]
) -> tuple[list[str], Path]:
    """``columns`` (named c0, c1...) written by the schedule's CSV writer; the
    names and the file."""
    from xce_core.sim._files import write_csv as _write_csv

    names = [f"c{i}" for i in range(len(columns))]
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    _write_csv(path, names, dict(zip(names, columns, strict=True)))
    return names, path


@given(
    columns=st.lists(
        st.lists(st.one_of(_CELL, st.none()) | _CELL, min_size=3, max_size=3),
        min_size=1,
        max_size=4,
    )
)
def test_csv_text_columns_read_back_whatever_they_hold(
    tmp_path_factory: pytest.TempPathFactory, columns: list[list[str | None]]
) -> None:
    # Columns with and without empty values, with and without cells that need
    # quotes: each reads back cell for cell (empty for None), by the csv module.
    # An id column first, as in the schedule (a row of one empty cell is a
    # blank line).
    columns = [["1", "2", "3"], *columns]
    names, path = _written_csv(tmp_path_factory, columns)
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == names
    assert [list(col) for col in zip(*rows[1:], strict=True)] == [
        ["" if v is None else v for v in col] for col in columns
    ]


_any_outcome = st.builds(
    lambda submit, wait, run, hosts, status, reason: JobOutcome(
        job_id=f"j{submit}",
        submit=float(submit),
        run_time=float(run),
        procs=max(1, len(hosts)),
        status=status,
        start=float(submit + wait) if status == "started" else None,
        hosts=hosts if status == "started" else [],
        reason=reason if status != "started" else "",
        detail="why" if status in ("never_started", "pending") and reason else "",
    ),
    st.integers(0, 50),
    st.integers(0, 9),
    st.sampled_from([0, 0.5, 3, 10, 25]),
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 2)), max_size=4),
    st.sampled_from(["started", "started", "never_started", "rejected", "pending", "unreplayed"]),
    st.sampled_from(["", "not_enough_slots", "too_big: 9 tasks"]),
)


@given(st.lists(_any_outcome, max_size=10))
def test_schedule_columns_follow_each_outcome(outcomes: list[JobOutcome]) -> None:
    # Reference: each row computed from its outcome alone, as the module
    # docstring defines the columns (unreplayed jobs left out).
    expected = []
    for o in outcomes:
        if o.status == "unreplayed":
            continue
        go = o.status == "started" and o.start is not None
        start = o.start if go else None
        end = start + o.run_time if start is not None else None
        turnaround = end - o.submit if end is not None else None
        if o.status == "rejected":
            kind, _, why = o.reason.partition(": ")
        elif go:
            kind = why = ""
        else:
            kind, why = o.reason, o.detail
        expected.append(
            {
                "job_id": o.job_id,
                "size": o.procs,
                "status": o.status,
                "submit": o.submit,
                "start": start,
                "end": end,
                "wait": start - o.submit if start is not None else None,
                "run": o.run_time,
                "turnaround": turnaround,
                "slowdown": turnaround / o.run_time
                if turnaround is not None and o.run_time > 0
                else None,
                "bounded_slowdown": max(1.0, turnaround / max(o.run_time, 10.0))
                if turnaround is not None
                else None,
                "hosts": o.hosts if go else [],
                "reason": kind or None,
                "detail": why or None,
            }
        )
    rows = as_rows(schedule_columns(outcomes))
    compared = [name for name in SCHEDULE_COLUMNS if name not in ("user", "queue")]
    assert [{k: row[k] for k in compared} for row in rows] == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(_any_outcome, max_size=10))
def test_parquet_rows_follow_each_outcome(
    tmp_path_factory: pytest.TempPathFactory, outcomes: list[JobOutcome]
) -> None:
    # Arrow computes the columns from the table's arrays (times null where a
    # job did not start, slowdowns, unreplayed rows left out) and expands the
    # runs of hosts (list views, run-end decoding, a take of the names): jobs
    # of no host, of scattered hosts, of several runs, rows without one between
    # them; each row reads back as schedule_columns gives it.
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path_factory.mktemp("parquet") / "s.parquet"
    assert write_schedule(path, outcomes) == sum(o.status != "unreplayed" for o in outcomes)
    table = pq.read_table(path)
    assert tuple(table.column_names) == SCHEDULE_COLUMNS
    rows = table.to_pylist()
    for row in rows:
        row["hosts"] = [(h["host"], h["slots"]) for h in row["hosts"]]
    assert rows == as_rows(schedule_columns(outcomes))


@given(
    st.integers(0, 4).flatmap(
        lambda rows: st.lists(
            # A column holds ints or floats (as the schedule's and the time
            # series' do): small, beyond 64 bits, integral, or any.
            st.one_of(
                st.lists(st.integers(0, 2**40), min_size=rows, max_size=rows),
                st.lists(st.integers(-(2**65), 2**65), min_size=rows, max_size=rows),
                st.lists(st.integers(0, 2**40).map(float), min_size=rows, max_size=rows),
                st.lists(
                    st.floats(allow_nan=False, allow_infinity=False), min_size=rows, max_size=rows
                ),
            ),
            min_size=1,
            max_size=4,
        )
    ),
    st.booleans(),
)
def test_csv_number_columns_are_written_as_the_csv_module_would(
    tmp_path_factory: pytest.TempPathFactory, columns: list[list[Any]], text: bool
) -> None:
    # Whole-number tables take a fast path, and so do whole-number columns
    # (beside a text column); whatever the path, the file is the csv
    # module's, each number as an int when it is integral, else its repr.
    from xce_core.sim._files import write_csv as _write_csv

    if text:
        columns = [[f"j{i}" for i in range(len(columns[0]))], *columns]
    names = [f"c{i}" for i in range(len(columns))]
    path = tmp_path_factory.mktemp("csv") / "n.csv"
    _write_csv(path, names, dict(zip(names, columns, strict=True)))

    def cell(v: float | str) -> str:
        if isinstance(v, str):
            return v
        return str(int(v)) if isinstance(v, float) and v.is_integer() else repr(v)

    with (path.parent / "ref.csv").open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([list(map(cell, row)) for row in zip(*columns, strict=True)])
    assert path.read_text() == (path.parent / "ref.csv").read_text()


_FLOAT_CELL = st.one_of(
    st.none(),
    st.floats(),  # NaN, infinities, -0.0, subnormals, exponents
    st.floats(-1e17, 1e17),
    st.integers(-(10**6), 10**6).map(lambda i: i / 8),  # integral or not, no exponent
    st.sampled_from([0.0, -0.0, 1e16, 1e-7, 5e-324, 1e-4, 1e-5, -1e-5, 2.0**53, 1e15 + 0.5]),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)


@given(st.lists(st.lists(_FLOAT_CELL, min_size=3, max_size=3), min_size=1, max_size=3))
def test_csv_float_columns_are_written_as_the_csv_module_would(
    tmp_path_factory: pytest.TempPathFactory, columns: list[list[float | None]]
) -> None:
    # Float columns with empty values (None), as the schedule's slowdowns:
    # written by one msgspec encode unless it cannot tell a value apart, a
    # cell at a time then; either way each cell is what the csv module
    # writes: empty for None, an integral value as an int, any other float
    # as the csv module formats it.
    columns = [["1", "2", "3"], *columns]
    names, path = _written_csv(tmp_path_factory, columns)

    def cell(v: float | str | None) -> float | int | str | None:
        return int(v) if isinstance(v, float) and v.is_integer() else v

    with (path.parent / "ref.csv").open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([list(map(cell, row)) for row in zip(*columns, strict=True)])
    assert path.read_text() == (path.parent / "ref.csv").read_text()


_SERIES_POLICIES = {
    "fcfs": SchedulerConfig(),
    "strict": SchedulerConfig(strict_fifo=True),
    "easy": SchedulerConfig(backfill="easy"),
}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 20),  # submit: ties are common
            st.integers(0, 6),  # size: 0 has none, 5 and 6 are too big for 4 slots
            st.sampled_from([-1, 0, 0, 1, 2, 5]),  # run time: often 0
        ),
        max_size=25,
    ),
    st.sampled_from(sorted(_SERIES_POLICIES)),
    st.none() | st.integers(1, 30),  # stop before this many instants
    st.sampled_from(
        [
            None,
            None,
            "select[",  # the core rejects every job
            "2*{select[type==any]} + 1*{select[type==any]}",  # and here jobs of 2 and 4 tasks
            "select[type==any] rusage[mem=1]",  # no host has memory: none starts
        ]
    ),
)
def test_the_recorded_time_series_equals_the_one_computed_from_the_outcomes(
    rows: list[tuple[int, int, int]], policy: str, stop_after: int | None, resreq: str | None
) -> None:
    # The replay's record (keep_series) against the outcome-based computation,
    # on replays with rejections by the replay (too big, no size) and by the
    # core (a requirement that does not parse, or task counts a compound
    # requirement does not allow), zero-second jobs,
    # jobs that never start (memory no host has), and stopped replays.
    jobs = [swf(i + 1, submit, run, size) for i, (submit, size, run) in enumerate(rows)]
    calls = 0

    def stop() -> bool:
        nonlocal calls
        calls += 1
        return stop_after is not None and calls > stop_after

    async def run() -> SimResult:
        cluster = ClusterSpec((HostGroup(count=4, slots=1),))
        config = _SERIES_POLICIES[policy]
        return await simulate(
            jobs, cluster, config=config, resreq=resreq, keep_series=True, stop=stop
        )

    result = anyio.run(run)
    table = as_table(result.jobs)
    assert table.recorded_series() is not None
    until = result.summary.stopped_at
    computed = timeseries_columns(list(result.jobs), until)  # objects: no record
    assert timeseries_columns(table, until) == computed


async def test_changing_an_outcome_drops_the_recorded_series() -> None:
    result = await replay(limit=50, keep_series=True)
    table = as_table(result.jobs)
    assert table.recorded_series() is not None
    table.rejected(0, "by hand")
    assert table.recorded_series() is None
    assert timeseries_columns(table) == timeseries_columns(list(table))


@pytest.mark.parametrize("stop_after", [None, 120])
async def test_a_recorded_time_series_is_written_as_the_computed_one(
    tmp_path: Path, stop_after: int | None
) -> None:
    calls = 0

    def stop() -> bool:
        nonlocal calls
        calls += 1
        return stop_after is not None and calls > stop_after

    result = await replay(limit=400, keep_series=True, stop=stop)
    until = result.summary.stopped_at
    recorded, computed = tmp_path / "recorded.csv", tmp_path / "computed.csv"
    assert as_table(result.jobs).recorded_series() is not None
    rows = write_timeseries(recorded, result.jobs, until)
    assert write_timeseries(computed, list(result.jobs), until) == rows > 10
    assert recorded.read_bytes() == computed.read_bytes()


async def test_parquet_columns_read_back_with_their_types(tmp_path: Path) -> None:
    # The arrow schema is not stored in the files (the host names are written
    # from a dictionary array): each column's type comes back from Parquet's own.
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    result = await replay()
    write_schedule(tmp_path / "s.parquet", result.jobs)
    write_timeseries(tmp_path / "t.parquet", result.jobs)
    text, ints, floats = pa.string(), pa.int64(), pa.float64()
    hosts = pa.list_(pa.field("element", pa.struct([("host", text), ("slots", ints)])))
    kinds = {"job_id": text, "user": text, "queue": text, "size": ints, "status": text}
    kinds |= {name: floats for name in SCHEDULE_COLUMNS[5:13]}
    kinds |= {"hosts": hosts, "reason": text, "detail": text}
    assert pq.read_schema(tmp_path / "s.parquet") == pa.schema(kinds.items())
    series = [(name, ints) for name in TIMESERIES_COLUMNS[1:]]
    assert pq.read_schema(tmp_path / "t.parquet") == pa.schema([("time", floats), *series])
