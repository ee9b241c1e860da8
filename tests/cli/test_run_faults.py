"""``xce run`` survives faults (issue #10): a plugin that raises, a state method
that raises. Decisions on stdout stay clean JSON, every good event is decided,
the exit status is normal, and the traceback goes to stderr through logging."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.cli.xce_process import SESSION, WORKERS, job, ndjson
from xce_core._state import ClusterState
from xce_core.cli._run_command import run_command

ROOT = Path(__file__).resolve().parents[2]
# `xce run` whose registry has the allocators of tests/core/test_faults.py,
# which raise for jobs whose id starts with "bad".
FAULTY_XCE_RUN = [
    sys.executable,
    "-c",
    textwrap.dedent(
        """
        import xce_core.cli._run_command
        from tests.core.test_faults import exploding_registry
        xce_core.cli._run_command.default_registry = exploding_registry
        from xce_core.cli._main import main
        main()
        """
    ),
    "run",
    "--sequential-allocator=boom_seq",
    "--parallel-allocator=boom_par",
]


def test_a_raising_allocator_through_xce_run() -> None:
    data = ndjson(
        *WORKERS,
        job("a"),
        job("bad1"),
        job("b", 2),
        SESSION,
        job("bad2", 2),
        job("c"),
        SESSION,
    )
    result = subprocess.run(
        FAULTY_XCE_RUN, input=data, capture_output=True, timeout=10, check=False, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    # Every stdout line is a decision: no traceback there.
    decisions = [json.loads(line) for line in result.stdout.splitlines()]
    allocated = {d["job_id"] for d in decisions if d["type"] == "job_allocated"}
    assert allocated == {"a", "b", "c"}
    faults = [d for d in decisions if d["type"] == "job_pended"]
    assert [(d["session"], d["job_id"], d["reason"]) for d in faults] == [
        (1, "bad1", "internal_error"),
        (2, "bad2", "internal_error"),
    ]
    assert faults[1]["detail"] == "internal error: RuntimeError: allocator exploded on bad2"
    assert [d["session"] for d in decisions if d["type"] == "session_end"] == [1, 2]
    # The tracebacks went to stderr, one per fault (bad1 raised again in session 2).
    stderr = result.stderr.decode()
    assert stderr.count("Traceback (most recent call last)") == 3
    assert "xce.run: ERROR: internal error, reported as {" in stderr
    assert "RuntimeError: allocator exploded on bad2" in stderr


def test_a_raising_state_method_through_xce_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: ClusterState, name: str) -> None:
        raise RuntimeError("worker_down is broken")

    monkeypatch.setattr(ClusterState, "worker_down", broken)
    events = tmp_path / "events.ndjson"
    events.write_bytes(
        ndjson(
            WORKERS[0],
            job("a"),
            '{"type":"worker_down","name":"h1"}',
            job("b"),
            SESSION,
        )
    )
    out = tmp_path / "decisions.ndjson"
    result = CliRunner().invoke(run_command, ["--input", str(events), "--output", str(out)])
    assert result.exit_code == 0, result.output
    decisions = [json.loads(line) for line in out.read_bytes().splitlines()]
    assert decisions[0] == {
        "type": "event_rejected",
        "index": 2,
        "error": "internal error: RuntimeError: worker_down is broken",
        "line": 3,
    }
    assert [d["job_id"] for d in decisions if d["type"] == "job_allocated"] == ["a", "b"]
    (record,) = [r for r in caplog.records if r.name == "xce.run"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert '"event_rejected"' in record.getMessage()
