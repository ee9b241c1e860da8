"""Sweeps: the same runs give the same rows serially, on worker processes and
on a Dask LocalCluster; the cache makes a sweep resume where it stopped."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from xce_core.sim import WorkloadModel, generate_jobs, write_swf
from xce_core.sim.sweep import (
    TIMING_COLUMNS,
    ClusterVariant,
    PolicyVariant,
    ResultCache,
    RunFinished,
    RunRecord,
    SweepInterrupted,
    SweepRun,
    TraceInput,
    file_sha256,
    queue_length,
    result_rows,
    run_sweep,
)

POLICIES = (
    PolicyVariant(name="fcfs"),
    PolicyVariant(name="strict", strict_fifo=True),
    PolicyVariant(name="easy", backfill="easy"),
)


def small_trace(directory: Path, seed: int, jobs: int = 150) -> TraceInput:
    path = directory / f"t{seed}.swf"
    with path.open("w", encoding="utf-8") as out:
        write_swf(out, generate_jobs(WorkloadModel(jobs=jobs, procs=16, seed=seed, load=0.9)))
    return TraceInput(name=path.name, path=str(path), sha256=file_sha256(path))


def study(tmp_path: Path) -> list[SweepRun]:
    """2 traces x 3 policies on 8 hosts of 2 slots."""
    cluster = ClusterVariant(name="8x2", hosts=8, slots=2)
    traces = [small_trace(tmp_path, seed) for seed in (1, 2)]
    return [SweepRun(trace=t, cluster=cluster, policy=p) for t in traces for p in POLICIES]


def comparable(rows: list[tuple[SweepRun, RunRecord]]) -> list[dict[str, object]]:
    """The rows without their timings, and each run's per-job columns (NaN as None)."""
    out: list[dict[str, object]] = []
    for row, (_, record) in zip(result_rows(rows), rows, strict=True):
        kept: dict[str, object] = {k: v for k, v in row.items() if k not in TIMING_COLUMNS}
        kept["start"] = [None if math.isnan(s) else s for s in record.start]
        kept["submit"] = record.submit
        out.append(kept)
    return out


@pytest.fixture
def serial(tmp_path: Path) -> tuple[list[SweepRun], list[dict[str, object]]]:
    runs = study(tmp_path)
    outcome = run_sweep(runs, ResultCache(tmp_path / "serial"), jobs=1)
    assert outcome.ran == 6
    assert not outcome.failures
    return runs, comparable(outcome.rows)


def test_dask_local_cluster_equals_serial(
    tmp_path: Path, serial: tuple[list[SweepRun], list[dict[str, object]]]
) -> None:
    distributed = pytest.importorskip("distributed")
    runs, expected = serial
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,  # worker threads in this process: quick to start
        protocol="tcp",  # as a real cluster is reached, on 127.0.0.1
        host="127.0.0.1",
        scheduler_port=0,
        dashboard_address=None,
    ) as cluster:
        outcome = run_sweep(runs, ResultCache(tmp_path / "dask"), dask=cluster.scheduler_address)
    assert outcome.ran == 6
    assert not outcome.failures
    assert comparable(outcome.rows) == expected
    # Differences between the policies are real (the comparison means something).
    waits = {row["policy"]: row["wait_mean"] for row in expected[:3]}
    assert waits["strict"] > waits["fcfs"]


def test_worker_processes_equal_serial(
    tmp_path: Path, serial: tuple[list[SweepRun], list[dict[str, object]]]
) -> None:
    runs, expected = serial
    outcome = run_sweep(runs, ResultCache(tmp_path / "pool"), jobs=2)
    assert outcome.ran == 6
    assert not outcome.failures
    assert comparable(outcome.rows) == expected


def test_resume_runs_only_what_is_missing(tmp_path: Path) -> None:
    runs = study(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    first = run_sweep(runs[:2], cache)
    assert (first.ran, first.cached) == (2, 0)
    cache.path(runs[2].key).write_bytes(b"torn")  # unreadable: computed again
    seen: list[RunFinished] = []
    second = run_sweep(runs, cache, on_finished=seen.append)
    assert (second.ran, second.cached) == (4, 2)
    assert [e.run for e in seen if e.cached] == runs[:2]
    assert [e.run for e in seen if not e.cached] == runs[2:]
    assert [e.done for e in seen] == [1, 2, 3, 4, 5, 6]
    assert [run for run, _ in second.rows] == runs  # study order, cached or not
    third = run_sweep(runs, cache)
    assert (third.ran, third.cached) == (0, 6)
    assert comparable(third.rows) == comparable(second.rows)


def test_interrupt_keeps_finished_runs_and_resumes(tmp_path: Path) -> None:
    runs = study(tmp_path)
    cache = ResultCache(tmp_path / "cache")

    def interrupt_after_two(event: RunFinished) -> None:
        if event.done == 2:
            raise KeyboardInterrupt

    with pytest.raises(SweepInterrupted) as caught:
        run_sweep(runs, cache, on_finished=interrupt_after_two)
    assert (caught.value.finished, caught.value.total) == (2, 6)
    assert sorted(p.name for p in cache.directory.iterdir()) == sorted(
        f"{run.key}.msgpack" for run in runs[:2]
    )
    resumed = run_sweep(runs, cache)
    assert (resumed.ran, resumed.cached) == (4, 2)


def test_a_failing_run_does_not_stop_the_others(tmp_path: Path) -> None:
    runs = study(tmp_path)[:2]
    # The header's MaxProcs (16) makes more hosts than max_hosts allows.
    broken = SweepRun(
        trace=runs[0].trace,
        cluster=ClusterVariant(name="huge", slots=1, max_hosts=2),
        policy=POLICIES[0],
    )
    outcome = run_sweep([runs[0], broken, runs[1]], ResultCache(tmp_path / "c"))
    assert [run for run, _ in outcome.rows] == runs
    [(run, error)] = outcome.failures
    assert run == broken
    assert "--max-hosts" in error


def test_key_names_what_changes_a_result_and_nothing_else(tmp_path: Path) -> None:
    [run, *_] = study(tmp_path)
    renamed = SweepRun(
        trace=TraceInput(name="other", path="/elsewhere.swf", sha256=run.trace.sha256),
        cluster=ClusterVariant(name="x", hosts=8, slots=2),
        policy=PolicyVariant(name="y"),
    )
    assert renamed.key == run.key
    easy = PolicyVariant(name="fcfs", backfill="easy")
    wider = ClusterVariant(name="8x2", hosts=8, slots=3)
    for changed in (
        SweepRun(trace=run.trace, cluster=run.cluster, policy=easy),
        SweepRun(trace=run.trace, cluster=wider, policy=run.policy),
        SweepRun(trace=small_trace(tmp_path, 3), cluster=run.cluster, policy=run.policy),
    ):
        assert changed.key != run.key


def test_a_trace_changed_after_planning_is_a_failure(tmp_path: Path) -> None:
    [run, *_] = study(tmp_path)
    Path(run.trace.path).write_text("; nothing\n")
    outcome = run_sweep([run], ResultCache(tmp_path / "c"))
    assert "changed since the sweep was planned" in outcome.failures[0][1]


def test_queue_length_steps() -> None:
    record = RunRecord(
        key="k",
        description="",
        metrics=None,  # type: ignore[arg-type]  # not read
        submit=[0.0, 0.0, 5.0],
        start=[0.0, 10.0, math.nan],
        run_time=[1.0, 1.0, 1.0],
    )
    assert queue_length(record) == ([0.0, 5.0, 10.0], [1, 2, 1])
