"""``xce simulate`` and ``xce generate-trace`` through click's test runner."""

from __future__ import annotations

import bz2
import gzip
import json
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from xce_core.cli._generate import generate_trace_command
from xce_core.cli._simulate import simulate_command
from xce_core.sim import SWF_FIELDS, read_swf

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/synthetic.swf"


def run(*args: str | Path) -> str:
    result = CliRunner().invoke(simulate_command, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def fails(*args: str | Path, code: int = 1, command: click.Command = simulate_command) -> str:
    """Run a command that must fail cleanly: exit status ``code``, no exception
    escaping, and the error as one ``Error:`` line ending stderr (only line for an
    input error, exit 1). Returns that line."""
    result = CliRunner().invoke(command, [str(a) for a in args])
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: "), result.stderr
    if code == 1:
        assert len(lines) == 1, result.stderr
    return lines[-1]


def test_bundled_trace_json_is_consistent() -> None:
    summary = json.loads(run(EXAMPLE, "--json"))
    assert summary["jobs"] == 2000
    assert summary["started"] + summary["rejected"] + summary["never_started"] == 2000
    assert summary["total_slots"] == 64  # MaxProcs of the header
    assert 0.5 <= summary["utilisation"] <= 0.85
    assert summary["wait_mean"] <= summary["wait_max"]
    assert summary["wait_median"] <= summary["wait_p95"] <= summary["wait_max"]
    assert summary["bounded_slowdown_mean"] >= 1.0


def test_table_and_schedule(tmp_path: Path) -> None:
    schedule = tmp_path / "s.jsonl"
    out = run(EXAMPLE, "--limit", "200", "--hosts", "16", "--slots", "4", "--schedule", schedule)
    assert "utilisation" in out
    assert "16 hosts, 64 slots" in out
    rows = [json.loads(line) for line in schedule.read_text().splitlines()]
    assert len(rows) == 200
    started = [r for r in rows if r["status"] == "started"]
    assert all(r["end"] - r["start"] == r["run"] for r in started)
    assert all(sum(n for _, n in r["hosts"]) == r["size"] for r in started)


def test_strict_fifo_waits_at_least_as_long_on_average() -> None:
    fcfs = json.loads(run(EXAMPLE, "--limit", "300", "--json"))
    fifo = json.loads(run(EXAMPLE, "--limit", "300", "--json", "--strict-fifo"))
    assert fifo["policy"] == "fcfs strict-fifo"
    assert fifo["wait_mean"] >= fcfs["wait_mean"]


def test_cluster_file_and_exclusive_options(tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text("[[group]]\ncount = 8\nslots = 8\n")
    out = json.loads(run(EXAMPLE, "--limit", "50", "--cluster", cluster, "--json"))
    assert out["total_slots"] == 64
    result = CliRunner().invoke(
        simulate_command, [str(EXAMPLE), "--cluster", str(cluster), "--hosts", "2"]
    )
    assert result.exit_code == 2
    assert "--cluster excludes" in result.output


def test_bad_resreq_and_bad_trace(tmp_path: Path) -> None:
    result = CliRunner().invoke(simulate_command, [str(EXAMPLE), "--resreq", "select[a=="])
    assert result.exit_code == 2
    assert "--resreq" in result.output
    bad = tmp_path / "bad.swf"
    bad.write_text("; MaxProcs: 4\n1 2 3\n")
    result = CliRunner().invoke(simulate_command, [str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:2: expected 18 fields" in result.output


def test_unknown_picker_is_a_clean_error() -> None:
    result = CliRunner().invoke(simulate_command, [str(EXAMPLE), "--picker", "nope"])
    assert result.exit_code == 2  # a usage error, as in `xce run`
    assert "--picker" in result.output
    assert "unknown picker 'nope'" in result.output


def test_plot_without_matplotlib_says_how_to_install_before_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    schedule = tmp_path / "s.jsonl"
    error = fails(
        EXAMPLE, "--limit", "20", "--schedule", schedule, "--plot", tmp_path / "p.png", code=2
    )
    assert error.startswith("Error: --plot: plots need matplotlib: pip install 'xce[plot]'")
    assert not schedule.exists()  # refused before the replay, which would have written it


def test_generate_trace_is_reproducible(tmp_path: Path) -> None:
    args = ["--jobs", "100", "--procs", "32", "--seed", "4"]
    for name in ("a.swf", "b.swf.gz"):
        result = CliRunner().invoke(generate_trace_command, [str(tmp_path / name), *args])
        assert result.exit_code == 0, result.output
    a, b = read_swf(tmp_path / "a.swf"), read_swf(tmp_path / "b.swf.gz")
    assert a.jobs == b.jobs
    assert len(a.jobs) == 100
    assert a.header["MaxProcs"] == "32"
    note = a.header["Note"].splitlines()[0]
    assert (
        note
        == f"generated by `xce generate-trace {tmp_path / 'a.swf'} {' '.join(args)} --load 0.7`"
    )


def test_bundled_trace_is_what_the_generator_makes(tmp_path: Path) -> None:
    out = tmp_path / "synthetic.swf"
    CliRunner().invoke(generate_trace_command, [str(out), "--jobs", "2000", "--procs", "64"])
    assert read_swf(out).jobs == read_swf(EXAMPLE).jobs


def test_plot_writes_an_image(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "p.png"
    run(EXAMPLE, "--limit", "100", "--plot", out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- bad input (#10)
# Every case: a clean exit status, one line on stderr naming what and where, and
# never a traceback.

GOOD_JOB = "1 0 -1 100 4 -1 -1 4 -1 -1 1 1 1 -1 1 -1 -1 -1"
MEM_CLUSTER = "[[group]]\ncount = 4\nslots = 1\nresources = { mem = 4096 }\n"


def job_line(**fields: str) -> str:
    tokens = GOOD_JOB.split()
    for name, value in fields.items():
        tokens[SWF_FIELDS.index(name)] = value
    return " ".join(tokens)


def trace_file(tmp_path: Path, *lines: str, name: str = "t.swf") -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def xce(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``xce simulate ARGS`` in a child process limited to 2 GiB of address space:
    a command that tried to build 10**11 hosts dies there, not in the test run."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [sys.executable, "-c", "from xce_core.cli import main; main()", "simulate"]
        + [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit_memory,
        check=False,
    )


@pytest.mark.parametrize("value", ["inf", "1e999", "nan", "-inf", "0", "many"])
def test_header_integers_must_be_finite_integers(tmp_path: Path, value: str) -> None:
    path = trace_file(tmp_path, "; Version: 2.2", f"; MaxProcs: {value}", GOOD_JOB)
    error = fails(path)
    assert error.startswith(f"Error: {path}:2: header MaxProcs: expected -1 (not recorded)")
    assert repr(value) in error


def test_an_absurd_max_procs_is_refused_not_built(tmp_path: Path) -> None:
    path = trace_file(tmp_path, "; MaxProcs: 100000000000", GOOD_JOB)
    done = xce(path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"Error: {path}: the header's MaxProcs (100000000000 processors)")
    assert "(--max-hosts): describe the cluster with --hosts and --slots, or --cluster" in line
    assert xce(path, "--hosts", "4").returncode == 0  # the way out the message names
    error = fails(trace_file(tmp_path, "; MaxProcs: 128", GOOD_JOB), "--max-hosts", "100")
    assert "128 hosts of 1 slot, more than the limit of 100 (--max-hosts)" in error
    error = fails(path, "--hosts", "2000000", code=2)
    assert "--hosts" in error
    assert "more than --max-hosts (1000000)" in error


def test_a_huge_cluster_file_is_refused_not_built(tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text("[[group]]\ncount = 100000000000\nslots = 1\n")
    done = xce(trace_file(tmp_path, GOOD_JOB), "--cluster", cluster)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line == (
        f"Error: {cluster}: 100000000000 hosts in all, more than the limit of 1000000"
        " (--max-hosts)"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"run_time": "1e999"}, "field run_time is not a finite number: '1e999'"),
        ({"submit": "inf"}, "field submit is not a finite number: 'inf'"),
        ({"wait": "nan"}, "field wait is not a finite number: 'nan'"),
        ({"run_time": "2e10"}, "field run_time must be from -1 to 10000000000: '2e10'"),
        ({"alloc_procs": "1e300"}, f"field alloc_procs must be from -1 to {2**53 - 1}: '1e300'"),
        ({"req_mem": "1e999"}, "field req_mem is not a finite number: '1e999'"),
        ({"req_mem": "2e12"}, "field req_mem must be from -1 to 1099511627776: '2e12'"),
    ],
)
def test_bad_fields_are_malformed_lines(
    tmp_path: Path, fields: dict[str, str], message: str
) -> None:
    path = trace_file(tmp_path, "; MaxProcs: 4", GOOD_JOB, job_line(job_id="2", **fields))
    cluster = tmp_path / "c.toml"
    cluster.write_text(MEM_CLUSTER)
    assert fails(path, "--cluster", cluster) == f"Error: {path}:3: {message}"
    result = CliRunner().invoke(
        simulate_command, [str(path), "--cluster", str(cluster), "--skip-bad", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == f"skipped 1 malformed line (first {path}:3: {message})\n"
    summary = json.loads(result.stdout)
    assert (summary["jobs"], summary["started"]) == (1, 1)
    assert (summary["makespan"], summary["utilisation"]) == (100.0, 1.0)


def test_results_are_always_finite(tmp_path: Path) -> None:
    far = 10_000_000_000  # the limit of a time field
    path = trace_file(
        tmp_path,
        job_line(submit=str(far), run_time=str(far)),
        job_line(job_id="2", run_time="1e999"),
        job_line(job_id="3", run_time="inf"),
    )
    summary = json.loads(run(path, "--skip-bad", "--json", "--hosts", "4"))
    assert summary["makespan"] == far
    for name, value in summary.items():
        if isinstance(value, float):
            assert math.isfinite(value), name
    table = run(path, "--skip-bad", "--hosts", "4")
    assert "utilisation       100.0%" in table
    assert "nan" not in table
    assert "inf" not in table


def damaged_gzip(at: int) -> bytes:
    """A gzip trace with the byte at ``at`` (negative: from the end) flipped."""
    data = bytearray(gzip.compress(f"; MaxProcs: 4\n{GOOD_JOB}\n".encode() * 500, mtime=0))
    data[at] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize("skip_bad", [[], ["--skip-bad"]])
def test_a_corrupt_gzip_trace_is_an_error_never_skipped(
    tmp_path: Path, skip_bad: list[str]
) -> None:
    path = tmp_path / "t.swf.gz"
    for data, problem in [
        (damaged_gzip(20), "corrupt gzip data: Error -3 while decompressing data: "),
        (damaged_gzip(-8), "corrupt gzip data: CRC check failed"),
        (b"\x1f\x8b" + b"garbage" * 10, "corrupt gzip data: "),
    ]:
        path.write_bytes(data)
        assert fails(path, *skip_bad).startswith(f"Error: {path}: {problem}")
    path.write_bytes(gzip.compress(f"{GOOD_JOB}\n".encode() * 50_000)[:-300])
    error = fails(path, *skip_bad)
    assert error.startswith(f"Error: {path}: corrupt or truncated gzip data after line ")
    assert error.endswith(": the compressed stream ends early")


def test_a_corrupt_gzip_trace_in_a_real_process(tmp_path: Path) -> None:
    path = tmp_path / "t.swf.gz"
    path.write_bytes(damaged_gzip(20))
    done = xce(path)
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: {path}: corrupt gzip data: Error -3")
    assert done.stderr.count("\n") == 1


def test_bytes_that_are_not_utf8_are_malformed_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_bytes(f"; Computer: caf\xe9\n{GOOD_JOB}\n{GOOD_JOB}\xff\n".encode("latin-1"))
    assert fails(path) == f"Error: {path}:1: not valid UTF-8: byte 0xe9 at offset 15"
    result = CliRunner().invoke(simulate_command, [str(path), "--skip-bad"])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"skipped 2 malformed lines (first {path}:1: not valid")


def test_overlong_lines_and_other_compressions_are_named(tmp_path: Path) -> None:
    path = trace_file(tmp_path, GOOD_JOB, "1 " * 100_000)
    assert fails(path) == f"Error: {path}:2: line longer than 65536 bytes"
    compressed = tmp_path / "t.swf.bz2"
    compressed.write_bytes(bz2.compress(path.read_bytes()))
    assert fails(compressed, "--skip-bad") == (
        f"Error: {compressed}: compressed with bzip2, which xce does not read:"
        " decompress it, or recompress it with gzip"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("resources = { mem = inf }", "resources.mem must be a non-negative finite"),
        (
            "attrs = { speed = nan }",
            "attrs.speed must be a finite number, got nan - at `$.group[0]`",
        ),
        ('attrs = { partition = "2" }', "attrs.partition must be an integer"),
        ('name = "two words"', "Expected `str` matching regex '^\\\\S+$' - at `$.group[0].name`"),
        (
            "slots = 1\n[[group]]\ncount = 1\nslots = 4000000",
            "Expected `int` <= 1000000 - at `$.group[1].slots`",
        ),
        ("slots = 1\ncolour = 3", "Object contains unknown field `colour` - at `$.group[0]`"),
        (
            "slots = 1\n[licences]\nmatlab = true",
            "Expected `float`, got `bool` - at `$.licences[...]`",
        ),
        (
            "slots = 1\n[[queue]]\nname = 'q1'\npriority = 'high'",
            "Expected `int`, got `str` - at `$.queue[0].priority`",
        ),
    ],
)
def test_cluster_file_values_are_checked(tmp_path: Path, extra: str, message: str) -> None:
    cluster = tmp_path / "c.toml"
    slots = "" if "slots" in extra else "slots = 1\n"
    cluster.write_text(f"[[group]]\ncount = 4\n{extra}\n{slots}")
    error = fails(trace_file(tmp_path, GOOD_JOB), "--cluster", cluster)
    assert error.startswith(f"Error: {cluster}: {message}")


def test_cluster_file_size_follows_max_hosts(tmp_path: Path) -> None:
    cluster = tmp_path / "c.toml"
    cluster.write_text("[[group]]\ncount = 11\nslots = 1\n")
    trace = trace_file(tmp_path, GOOD_JOB)
    error = fails(trace, "--cluster", cluster, "--max-hosts", "10")
    assert error == f"Error: {cluster}: 11 hosts in all, more than the limit of 10 (--max-hosts)"
    summary = json.loads(run(trace, "--cluster", cluster, "--max-hosts", "11", "--json"))
    assert summary["hosts"] == 11


def test_output_paths_are_checked_before_the_trace_is_read(tmp_path: Path) -> None:
    broken = trace_file(tmp_path, "not a trace")  # would fail at line 1 if it were read
    missing = tmp_path / "no" / "such" / "s.jsonl"
    error = fails(broken, "--schedule", missing, code=2)
    assert "--schedule" in error
    assert f"directory {missing.parent} does not exist" in error
    error = fails(broken, "--plot", broken / "p.png", code=2)
    assert "--plot" in error
    assert f"{broken} is not a directory" in error
    assert not missing.parent.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_directory_is_refused_before_the_replay(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    error = fails(EXAMPLE, "--schedule", locked / "s.jsonl", code=2)
    assert "cannot be created: Permission denied" in error


def test_plot_format_is_checked_before_the_replay(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    schedule = tmp_path / "s.jsonl"
    error = fails(EXAMPLE, "--schedule", schedule, "--plot", tmp_path / "p.xyz", code=2)
    assert "matplotlib does not write 'xyz' files" in error
    assert not schedule.exists()


def test_generate_trace_refuses_what_the_reader_would(tmp_path: Path) -> None:
    out = tmp_path / "g.swf"
    error = fails(out, "--load", "1e-9", code=2, command=generate_trace_command)
    assert "--load" in error
    error = fails(
        out, "--jobs", "10000", "--procs", "1", "--load", "0.001",
        code=2, command=generate_trace_command,
    )  # fmt: skip
    assert "past the SWF limit of 1e+10 s: raise the load" in error
    assert not out.exists()
    nowhere = tmp_path / "no" / "g.swf"
    error = fails(nowhere, code=2, command=generate_trace_command)
    assert error.endswith(f"{nowhere}: directory {nowhere.parent} does not exist")


def test_help_states_the_limits() -> None:
    result = CliRunner().invoke(simulate_command, ["--help"])
    text = " ".join(result.stdout.split())
    assert "--max-hosts" in text
    assert "never inf or nan" in text
    assert "A corrupt or truncated gzip file is always an error" in text


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (simulate_command, [str(EXAMPLE), "--progress-interval", "nan"]),
        (generate_trace_command, ["out.swf", "--load", "nan"]),
        # Made in memory before any is written: bounded, not a hang.
        (generate_trace_command, ["out.swf", "--jobs", "99999999999999999999"]),
    ],
)
def test_an_option_value_out_of_range_is_a_usage_error(
    command: click.Command, args: list[str]
) -> None:
    # NaN compares false with every bound, so a range check alone lets it in.
    assert "Invalid value for" in fails(*args, code=2, command=command)


def test_an_output_that_is_an_input_is_refused_before_the_replay(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_bytes(EXAMPLE.read_bytes())
    cluster = tmp_path / "c.toml"
    cluster.write_text("[[group]]\ncount = 64\nslots = 1\n")
    line = fails(trace, "--schedule", trace, code=2)
    assert "is the trace: it would be overwritten" in line
    line = fails(trace, "--cluster", cluster, "--plot", tmp_path / "." / "c.toml", code=2)
    assert "is the cluster file" in line
    assert trace.read_bytes() == EXAMPLE.read_bytes()


def test_a_trace_name_that_is_not_utf8_is_escaped_in_the_json_summary(tmp_path: Path) -> None:
    trace = tmp_path / os.fsdecode(b"bad\xffname.swf")
    trace.write_bytes(EXAMPLE.read_bytes())
    summary = json.loads(run(trace, "--limit", "20", "--json", "-q"))
    assert summary["provenance"]["trace"]["name"] == "bad\\xffname.swf"
    assert summary["provenance"]["options"]["trace"].endswith("bad\\xffname.swf")


@pytest.mark.parametrize("where", ["closed", "full"])
def test_a_summary_that_cannot_be_written_is_an_error(tmp_path: Path, where: str) -> None:
    # The schedule is written all the same; the exit status says the summary
    # was lost (it was 0 with stdout closed, and a traceback on a full disk).
    schedule = tmp_path / "s.jsonl"
    args = [sys.executable, "-c", "from xce_core.cli import main; main()", "simulate"]
    args += [str(EXAMPLE), "-q", "--schedule", str(schedule)]
    with open("/dev/full", "w") if where == "full" else open(os.devnull, "w") as full:
        result = subprocess.run(
            args,
            stdout=full if where == "full" else None,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=(lambda: os.close(1)) if where == "closed" else None,
            timeout=120,
            check=False,
        )
    assert result.returncode == 1
    problem = "stdout is closed" if where == "closed" else "stdout: No space left on device"
    assert result.stderr.strip() == f"Error: cannot write the summary: {problem}"
    assert schedule.read_text().count("\n") > 0
