"""``examples/controller.py`` run as a real process: agents connect, jobs are
dispatched, finish, and the controller exits by itself (``--max-jobs``)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CONTROLLER_ARGS = [
    sys.executable,
    str(Path(__file__).resolve().parents[2] / "examples" / "controller.py"),
]
TIMEOUT = 5.0

EVENTS = [
    {"type": "worker_up", "name": "h1", "slots": 4},
    {"type": "worker_up", "name": "h2", "slots": 4},
    # Six tasks over two 4-slot hosts: parjob balances them, 3 + 3.
    {"type": "job_submitted", "job_id": "j1", "min_tasks": 6, "max_tasks": 6},
    # Needs one whole host, so it waits until j1 has finished.
    {
        "type": "job_submitted",
        "job_id": "j2",
        "min_tasks": 4,
        "max_tasks": 4,
        "resreq": "span[hosts=1]",
    },
    # Never runs, so every session reports it: decisions keep coming right up to
    # the shutdown, which must still drain cleanly.
    {"type": "job_submitted", "job_id": "j3", "resreq": "select[maxslots>8]"},
]


@pytest.fixture
def controller() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A running controller that stops after two finished jobs, and its port."""
    proc = subprocess.Popen(
        [*CONTROLLER_ARGS, "0", "--max-jobs", "2", "--run-time", "0.05", "--interval", "0.005"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # ends early (empty) if the controller dies
        if not first.startswith("listening on "):
            pytest.fail(f"controller did not start: {first}{proc.communicate()[1]}")
        yield proc, int(first.removeprefix("listening on "))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_dispatches_finishes_and_exits(controller: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = controller
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as agent:
        # Split mid-line on purpose: the controller must reassemble lines.
        data = "".join(json.dumps(event) + "\n" for event in EVENTS).encode()
        data += b'{"type": "worker_up"}\n'  # malformed: reported, skipped, not fatal
        agent.sendall(data[:50])
        agent.sendall(data[50:])
        out, err = proc.communicate(timeout=TIMEOUT)

    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines.index("dispatch j1 -> h1:3,h2:3") < lines.index("finished j1")
    assert any(line.startswith("pending j2: not_enough_slots") for line in lines)
    assert any(line.startswith("pending j3: no_matching_host") for line in lines)
    assert lines.index("finished j1") < lines.index("dispatch j2 -> h1:4")
    assert any(line.startswith("bad event on line 6: ") for line in lines)
    assert lines[-1] == "2 jobs finished"


def test_sigterm_stops_it_cleanly(controller: tuple[subprocess.Popen[str], int]) -> None:
    proc, _ = controller
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert out.splitlines() == ["stopping on SIGTERM", "0 jobs finished"]
