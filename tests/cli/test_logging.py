"""Logs go to stderr only, in the format asked for, never into decisions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

XCE_RUN = [sys.executable, "-c", "from xce_core.cli._main import main; main()", "run"]
EVENTS = b'{"type":"worker_up","name":"h1","slots":2}\n{"type":"session_begin"}\n'


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*XCE_RUN, *args], input=EVENTS.decode(), capture_output=True, text=True, timeout=60
    )


def test_json_log_lines() -> None:
    done = run("-v", "--log-format", "json")
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in done.stderr.splitlines()]
    assert entries
    assert {e["logger"] for e in entries} == {"xce.run"}
    assert entries[0]["level"] == "info"
    assert entries[0]["msg"].startswith("reading ndjson events from stdin")
    assert entries[-1]["msg"] == "exit status 0"
    assert all(e["time"].endswith("Z") for e in entries)
    # Decisions alone on stdout.
    assert [json.loads(line)["type"] for line in done.stdout.splitlines()] == ["session_end"]


def test_key_value_log_lines() -> None:
    done = run("-v", "--log-format", "kv")
    first = done.stderr.splitlines()[0]
    assert first.startswith("time=")
    assert ' level=info logger=xce.run msg="reading ndjson events from stdin' in first


@pytest.mark.parametrize("args", [[], ["-q"]])
def test_quiet_by_default(args: list[str]) -> None:
    done = run(*args)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_bad_log_format_is_a_usage_error() -> None:
    done = run("--log-format", "xml")
    assert done.returncode == 2
    assert "Invalid value for '--log-format'" in done.stderr
