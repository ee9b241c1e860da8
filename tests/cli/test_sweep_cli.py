"""``xce sweep`` end to end: study files, the results table, the cache, plots,
bad input (one line, exit 2) and Ctrl-C (exit 130, finished runs cached)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from xce_core.cli._main import main
from xce_core.cli._study import read_study
from xce_core.sim import WorkloadModel, generate_jobs, write_swf
from xce_core.sim.sweep import ResultCache, SweepError, run_sweep

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write_trace(path: Path, seed: int, jobs: int = 120) -> None:
    with path.open("w", encoding="utf-8") as out:
        write_swf(out, generate_jobs(WorkloadModel(jobs=jobs, procs=16, seed=seed, load=0.9)))


@pytest.fixture
def study(tmp_path: Path) -> Path:
    write_trace(tmp_path / "a.swf", 1)
    write_trace(tmp_path / "b.swf", 2)
    (tmp_path / "limits.toml").write_text(
        '[[limits]]\nname = "u"\nper_user = ["all"]\nslots = 4\n'
    )
    path = tmp_path / "study.toml"
    path.write_text(
        """
trace = ["a.swf", { path = "b.swf", name = "b", limit = 100 }]

[[cluster]]
hosts = 8
slots = 2

[[policy]]

[[policy]]
backfill = "easy"

[[policy]]
name = "per-user"
limits = "limits.toml"
"""
    )
    return path


def sweep(*args: str | Path, code: int = 0) -> tuple[str, str]:
    result = CliRunner().invoke(main, ["sweep", *map(str, args)])
    assert result.exit_code == code, (result.output, result.exception)
    return result.stdout, result.stderr


def test_end_to_end_table_cache_and_plots(study: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    _, stderr = sweep(study, "--jobs", "1", "--plots", tmp_path / "plots")
    table = tmp_path / "study.csv"
    with table.open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert [(r["trace"], r["cluster"], r["policy"]) for r in rows] == [
        (trace, "8x2", policy)
        for trace in ("a.swf", "b")
        for policy in ("fcfs", "fcfs easy", "per-user")
    ]
    assert [r["jobs"] for r in rows] == ["120"] * 3 + ["100"] * 3
    assert rows[2]["limits"] == "limits.toml"
    assert rows[1]["backfill"] == "easy"
    assert all(float(r["makespan"]) > 0 and 0 < float(r["utilisation"]) <= 1 for r in rows)
    assert "6 runs: 6 ran, 0 cached, 0 failed" in stderr
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "queue.png",
        "slowdown.png",
        "wait.png",
    ]
    assert len(list((tmp_path / "study.cache").glob("*.msgpack"))) == 6
    # Again, into another table: everything from the cache, the same figures.
    again = tmp_path / "again.csv"
    _, stderr = sweep(study, "-o", again, "--cache", tmp_path / "study.cache", "-j", "2")
    assert "6 runs: 0 ran, 6 cached" in stderr
    with again.open(newline="") as file:
        assert list(csv.DictReader(file)) == rows


def test_run_list_selects_runs(study: Path, tmp_path: Path) -> None:
    text = study.read_text() + '\n[[run]]\ntrace = "b"\ncluster = "8x2"\npolicy = "per-user"\n'
    study.write_text(text)
    sweep(study, "-q", "-j", "1")
    with (tmp_path / "study.csv").open(newline="") as file:
        assert [(r["trace"], r["policy"]) for r in csv.DictReader(file)] == [("b", "per-user")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('trace = ["a.swf"]\ncolour = 1', "unknown field `colour`"),
        ('trace = ["a.swf"]\n[[policy]]\nbackfil = "easy"', "`backfil` - at `$.policy[0]`"),
        ('trace = ["a.swf"]\n[[policy]]\nbackfill = "eager"', "at `$.policy[0].backfill`"),
        ('trace = ["a.swf"]\n[[cluster]]\nhosts = "8"', "got `str` - at `$.cluster[0].hosts`"),
        ('trace = ["a.swf"]\n[[cluster]]\nhosts = 0', "at `$.cluster[0].hosts`"),
        ("trace = []", "at `$.trace`"),
        ('[[policy]]\nname = "x"', "missing required field `trace`"),
        ('trace = ["missing.swf"]', "$.trace[0]: "),
        ('trace = ["a.swf"]\n[[policy]]\npicker = "nope"', ".picker: unknown picker 'nope'"),
        ('trace = ["a.swf"]\n[[policy]]\nresreq = "select[a=="', "$.policy[0].resreq:"),
        ('trace = ["a.swf"]\n[[policy]]\nlimits = "study.toml"', "$.policy[0].limits:"),
        ('trace = ["a.swf"]\n[[cluster]]\nfile = "c.toml"\nhosts = 2', "file excludes hosts"),
        ('trace = ["a.swf"]\n[[cluster]]\nfile = "study.toml"', "$.cluster[0].file:"),
        ('trace = ["a.swf", "a.swf"]', "two trace entries are named 'a.swf'"),
        ('trace = ["a.swf"]\n[[run]]\ntrace = "a.swf"\ncluster = "default"\npolicy = "x"',
         "$.run[0].policy: none is named 'x' (known: 'fcfs')"),
        ('trace = ["a.swf"', "Unclosed array"),
    ],
)  # fmt: skip
def test_bad_study_is_one_line_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    write_trace(tmp_path / "a.swf", 1, jobs=5)
    path = tmp_path / "study.toml"
    path.write_text(text)
    _, stderr = sweep(path, code=2)
    assert stderr.count("\n") == 1
    assert "Traceback" not in stderr
    assert stderr.startswith(f"Error: {path}: ")
    assert expected in stderr


def test_missing_extras_and_bad_outputs_fail_before_any_run(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for args, expected in (
        (["--dask", "tcp://127.0.0.1:1"], "pip install 'xce[dask]'"),
        (["-o", tmp_path / "r.parquet"], "needs pyarrow"),
        (["--plots", tmp_path / "p"], "pip install 'xce[plot]'"),
        (["--dask", "tcp://127.0.0.1:1", "-j", "2"], "exclude each other"),
    ):
        _, stderr = sweep(study, *args, code=2)
        assert expected in stderr
        assert stderr.count("\n") == 1
    _, stderr = sweep(study, "-o", tmp_path / "nowhere" / "r.csv", code=2)
    assert "does not exist" in stderr
    assert not (tmp_path / "study.cache").exists()


def test_dask_scheduler_unreachable(study: Path) -> None:
    pytest.importorskip("distributed")
    runs = read_study(study)
    with pytest.raises(SweepError, match=r"cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        run_sweep(
            runs, ResultCache(study.parent / "c"), dask="tcp://127.0.0.1:9", dask_timeout=0.5
        )


def test_failed_run_exit_1_with_the_others_in_the_table(study: Path, tmp_path: Path) -> None:
    text = study.read_text().replace(
        "hosts = 8", "hosts = 8\n[[cluster]]\nname = 'tiny'\nmax_hosts = 2"
    )
    study.write_text(text)
    _, stderr = sweep(study, "-j", "1", "-q", code=1)
    assert stderr.count("failed: ") == 6
    assert "--max-hosts" in stderr
    with (tmp_path / "study.csv").open(newline="") as file:
        assert len(list(csv.DictReader(file))) == 6


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a process group")
def test_ctrl_c_exits_130_and_keeps_finished_runs(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "synthetic.swf", tmp_path / "s.swf")
    study = tmp_path / "study.toml"
    # One quick run, then slow ones (conservative backfill on the whole trace).
    study.write_text(
        'trace = ["s.swf"]\n[[run]]\ntrace = "s.swf"\ncluster = "default"\npolicy = "quick"\n'
        + "".join(
            f'[[run]]\ntrace = "s.swf"\ncluster = "default"\npolicy = "slow{d}"\n'
            for d in range(4)
        )
        + '[[policy]]\nname = "quick"\nstrict_fifo = true\n'
        + "".join(
            f'[[policy]]\nname = "slow{d}"\nbackfill = "conservative"\n'
            f"backfill_depth = {200 + d}\n"
            for d in range(4)
        )
    )
    xce = Path(sys.executable).with_name("xce")
    command = [str(xce)] if xce.exists() else [sys.executable, "-m", "xce_core.cli"]
    with subprocess.Popen(
        [*command, "sweep", str(study), "-j", "2"],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job
    ) as process:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("[1/5]"), first
        os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C: the sweep and its workers
        stopped = time.monotonic()
        rest = process.stderr.read()
        assert process.wait(timeout=30) == 130, rest
    assert time.monotonic() - stopped < 10  # the slow runs were stopped, not awaited
    assert "Traceback" not in rest
    assert "run the same command again to resume" in rest
    cached = list((tmp_path / "study.cache").glob("*.msgpack"))
    assert 1 <= len(cached) < 5


def test_parquet_table_holds_the_csv_rows(study: Path, tmp_path: Path) -> None:
    parquet = pytest.importorskip("pyarrow.parquet")
    sweep(study, "-q", "-j", "1")
    sweep(study, "-q", "-o", tmp_path / "r.parquet", "--cache", tmp_path / "study.cache")
    table = parquet.read_table(tmp_path / "r.parquet").to_pylist()
    with (tmp_path / "study.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(table) == len(rows) == 6
    for got, want in zip(table, rows, strict=True):
        assert list(got) == list(want)
        assert {k: "" if v is None else str(v) for k, v in got.items()} == want


def test_a_cluster_files_licences_and_queues_reach_the_runs(tmp_path: Path) -> None:
    # As `xce simulate --cluster` replays them: every job needs the one licence.
    write_trace(tmp_path / "a.swf", 1, jobs=40)
    (tmp_path / "c.toml").write_text(
        "[[group]]\ncount = 8\nslots = 2\n[licences]\nlic = 1\n"
        '[[queue]]\nname = "q1"\npriority = 50\n'
    )
    (tmp_path / "study.toml").write_text(
        'trace = ["a.swf"]\n[[cluster]]\nfile = "c.toml"\n[[policy]]\nresreq = "rusage[lic=1]"\n'
    )
    sweep(tmp_path / "study.toml", "-j", "1", "-o", tmp_path / "t.csv")
    with (tmp_path / "t.csv").open() as table:
        (row,) = csv.DictReader(table)
    args = ["simulate", str(tmp_path / "a.swf"), "--json", "-q", "--resreq", "rusage[lic=1]"]
    result = CliRunner().invoke(main, [*args, "--cluster", str(tmp_path / "c.toml")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert int(row["started"]) == summary["started"] > 0
    assert float(row["makespan"]) == summary["makespan"]


def test_a_table_that_is_an_input_is_refused(study: Path, tmp_path: Path) -> None:
    before = study.read_bytes()
    _, err = sweep(study, "-o", study, code=2)
    assert "is the study file: it would be overwritten" in err
    _, err = sweep(study, "-o", tmp_path / "a.swf", code=2)
    assert "is the trace" in err
    assert study.read_bytes() == before


def test_a_cache_that_cannot_be_used_is_refused_before_any_run(
    study: Path, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    _, err = sweep(study, "--cache", tmp_path / "file" / "cache", code=2)
    assert "--cache:" in err
    assert "cannot cache results there" in err
    assert not (tmp_path / "study.csv").exists()


def test_results_that_cannot_be_cached_are_still_in_the_table(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: ResultCache, record: object) -> None:
        raise OSError(27, "File too large")

    monkeypatch.setattr(ResultCache, "put", full)
    _, err = sweep(study, "-j", "1", "-o", tmp_path / "t.csv", code=1)
    with (tmp_path / "t.csv").open() as table:
        assert len(list(csv.DictReader(table))) == 6  # 2 traces x 3 policies
    assert "Error: 6 results not cached" in err
    assert "File too large" in err
