"""``xce simulate`` never loses a run: outputs and extras checked before the
replay (one line, exit 2), Ctrl-C writes what was decided (exit 130), progress
and logs on stderr only, provenance in the summary."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from xce_core.cli._simulate import simulate_command

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/synthetic.swf"
XCE = [sys.executable, "-c", "from xce_core.cli._main import main; main()"]


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(simulate_command, [str(a) for a in args])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def usage_error(*args: str | Path) -> str:
    """Exit status 2 with exactly one line on stderr; returns it."""
    code, out, err = invoke(*args)
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith("Error: ")
    return line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--schedule", "{d}/missing/s.jsonl"],
            "Error: --schedule: {d}/missing/s.jsonl: directory",
        ),
        (["--schedule", "{d}/s.txt"], "Error: --schedule: {d}/s.txt: suffix '.txt': the format"),
        (
            ["--schedule", "/dev/null/s.csv"],
            "Error: --schedule: /dev/null/s.csv: /dev/null is not",
        ),
        (["--schedule", "{d}/s"], "Error: --schedule: {d}/s: no suffix"),
        (["--timeseries", "{d}/t.jsonl"], "Error: --timeseries: {d}/t.jsonl: suffix '.jsonl'"),
        (["--timeseries", "{d}/x/t.csv"], "Error: --timeseries: {d}/x/t.csv: directory"),
        (["--plot", "{d}/p.xyz"], "Error: --plot: {d}/p.xyz: matplotlib does not write 'xyz'"),
        (
            ["--schedule", "{d}/a.csv", "--timeseries", "{d}/a.csv"],
            "Error: --timeseries: {d}/a.csv is also the --schedule file",
        ),
    ],
)
def test_bad_outputs_are_one_line_and_exit_2_before_the_replay(
    tmp_path: Path, args: list[str], message: str
) -> None:
    if "--plot" in args:
        pytest.importorskip("matplotlib")
    d = str(tmp_path)
    good = tmp_path / "good.csv"
    line = usage_error(EXAMPLE, "--timeseries" if "--schedule" in args else "--schedule",
                       good, *(a.format(d=d) for a in args))  # fmt: skip
    assert line.startswith(message.format(d=d)), line
    assert not good.exists()  # refused before the replay, which would have written it


@pytest.mark.parametrize("option", ["--schedule", "--timeseries"])
def test_parquet_without_pyarrow_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    line = usage_error(EXAMPLE, option, tmp_path / "out.parquet")
    assert line == (
        f"Error: {option}: Parquet output needs pyarrow: pip install 'xce[parquet]'"
        " (or pip install pyarrow)"
    )


def test_a_missing_extra_in_a_fresh_process(tmp_path: Path) -> None:
    # A real interpreter where importing pyarrow fails, as on a machine without it.
    code = "import sys; sys.modules['pyarrow'] = None; from xce_core.cli._main import main; main()"
    out = tmp_path / "s.parquet"
    done = subprocess.run(
        [sys.executable, "-c", code, "simulate", str(EXAMPLE), "--schedule", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: --schedule: Parquet output needs pyarrow: pip install 'xce[parquet]'"
        " (or pip install pyarrow)"
    ]


def test_json_summary_keeps_skipped_lines_and_provenance(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    lines = EXAMPLE.read_text().splitlines()
    bad_run_time = " ".join(["7", "0", "-1", "1e999", *["-1"] * 14])
    trace.write_text("\n".join([*lines[:40], "1 2 3", bad_run_time, *lines[40:80]]) + "\n")
    code, out, err = invoke(trace, "--skip-bad", "--json", "--hosts", "16", "--slots", "4")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["skipped_lines"] == 2
    assert summary["skipped_by_reason"] == {"bad_run_time": 1, "field_count": 1}
    assert err.startswith("skipped 2 malformed lines")
    p = summary["provenance"]
    assert p["xce_version"]
    assert p["trace"]["name"] == "t.swf"
    assert len(p["trace"]["sha256"]) == 64
    assert p["options"]["hosts"] == 16
    assert p["options"]["skip_bad"] is True
    assert p["options"]["trace"] == str(trace)
    assert p["cluster"]["groups"] == [
        {"count": 16, "slots": 4, "name": "h", "attrs": {}, "resources": {}}
    ]
    for key in ("turnaround_mean", "slowdown_max", "bounded_slowdown_max", "by_size"):
        assert key in summary
    assert summary["partial"] is False


def test_table_shows_the_new_figures() -> None:
    code, out, _ = invoke(EXAMPLE, "--limit", "300")
    assert code == 0
    for row in ("trace ", "xce ", "turnaround mean", "slowdown max", "size 1 "):
        assert f"\n{row}" in out, row
    assert "PARTIAL" not in out


def test_a_cluster_file_with_licences_and_queues(tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text(
        "[[group]]\ncount = 8\nslots = 8\n[licences]\nmatlab = 2\n"
        '[[queue]]\nname = "q1"\npriority = 10\n'
    )
    schedule = tmp_path / "s.csv"
    options = ["--cluster", cluster, "--resreq", "rusage[matlab=1]", "--schedule", schedule]
    code, out, err = invoke(EXAMPLE, "--limit", "100", *options, "--json")
    assert code == 0, err
    assert json.loads(out)["provenance"]["cluster"]["licences"] == {"matlab": 2.0}
    with schedule.open(newline="") as f:
        rows = list(csv.DictReader(f))
    started = [r for r in rows if r["status"] == "started"]
    # At most two jobs hold a licence at any time.
    events = sorted(
        [(float(r["start"]), 1) for r in started] + [(float(r["end"]), -1) for r in started]
    )
    held = peak = 0
    for _, change in events:
        held += change
        peak = max(peak, held)
    assert peak == 2


def test_quiet_and_verbose(tmp_path: Path) -> None:
    code, _, err = invoke(EXAMPLE, "--limit", "100", "-q")
    assert (code, err) == (0, "")
    code, _, err = invoke(EXAMPLE, "--limit", "100", "-v", "--schedule", tmp_path / "s.jsonl")
    assert code == 0
    assert "xce.simulate: INFO: read 100 jobs from" in err
    assert "xce.simulate: INFO: wrote the schedule to" in err


def test_progress_lines_without_a_terminal(tmp_path: Path) -> None:
    code, out, err = invoke(EXAMPLE, "--progress-interval", "0")
    assert code == 0
    lines = err.splitlines()
    assert lines
    assert all(line.startswith("replaying: ") and "jobs/s" in line for line in lines), err
    assert "replaying" not in out


def big_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "big.swf"
    subprocess.run(
        [*XCE, "generate-trace", str(trace), "--jobs", "40000", "--procs", "128"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return trace


def test_ctrl_c_writes_what_was_decided_and_exits_130(tmp_path: Path) -> None:
    trace = big_trace(tmp_path)
    schedule, series = tmp_path / "s.csv", tmp_path / "t.csv"
    process = subprocess.Popen(
        [*XCE, "simulate", str(trace), "--schedule", str(schedule), "--timeseries", str(series),
         "--json", "--progress-interval", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stderr is not None
    # Progress lines (every 512 instants) say the replay is under way.
    line = process.stderr.readline()
    assert line.startswith("replaying: "), line
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "xce.simulate: WARNING: stopped by SIGINT at t=" in err
    summary = json.loads(out)
    assert summary["partial"] is True
    assert summary["unreplayed"] > 0
    with schedule.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert 0 < len(rows) == summary["jobs"] - summary["unreplayed"]
    assert sum(r["status"] == "started" for r in rows) == summary["started"]
    assert sum(r["status"] == "pending" for r in rows) == summary["pending"]
    with series.open(newline="") as f:
        times = [float(r["time"]) for r in csv.DictReader(f)]
    assert times == sorted(times)
    assert times[-1] <= summary["stopped_at"]


def test_sigterm_is_143_with_a_partial_table(tmp_path: Path) -> None:
    trace = big_trace(tmp_path)
    process = subprocess.Popen(
        [*XCE, "simulate", str(trace), "--progress-interval", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    process.stderr.readline()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert out.startswith("PARTIAL ")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    leader, follower = os.openpty()
    try:
        done = subprocess.run(
            [*XCE, "simulate", str(EXAMPLE)],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=60,
            check=True,
            env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
        )
        os.close(follower)
        follower = -1
        seen = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert b"replaying" in seen
    assert b"policy" in done.stdout
