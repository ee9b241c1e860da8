"""Running ``xce run`` as a subprocess in tests: the command, input builders, and
:class:`Consumer`, a running process whose output lines are read by threads."""

from __future__ import annotations

import json
import queue
import re
import socket
import subprocess
import sys
import threading
from typing import IO, Any

from events import EventEncoder, JobSubmitted, SessionBegin, WorkerUp

__all__ = [
    "MSGPACK_EVENTS",
    "SESSION",
    "TIMEOUT",
    "WORKERS",
    "XCE_RUN",
    "Consumer",
    "connect",
    "job",
    "listen_port",
    "ndjson",
    "parse",
    "run",
    "start",
]

XCE_RUN = [sys.executable, "-c", "from xce_core.cli._main import main; main()", "run"]
TIMEOUT = 4.0

WORKERS = [
    '{"type":"worker_up","name":"h1","slots":4}',
    '{"type":"worker_up","name":"h2","slots":2,"attrs":{"type":"x86"}}',
]
SESSION = '{"type":"session_begin"}'
MSGPACK_EVENTS = EventEncoder("msgpack").encode_many(
    [WorkerUp(name="h1", slots=2), JobSubmitted(job_id="a"), SessionBegin()]
)


def job(job_id: str, tasks: int = 1) -> str:
    return json.dumps(
        {"type": "job_submitted", "job_id": job_id, "min_tasks": tasks, "max_tasks": tasks}
    )


def ndjson(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def parse(output: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines()]


def run(*args: str, input: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*XCE_RUN, *args], input=input, capture_output=True, timeout=TIMEOUT, check=False
    )


def _pump(stream: IO[bytes], into: queue.Queue[bytes]) -> None:
    for line in iter(stream.readline, b""):
        into.put(line)


class Consumer:
    """A running ``xce run`` whose stdout and stderr lines are read by threads."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*XCE_RUN, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.out: queue.Queue[bytes] = queue.Queue()
        self.err: queue.Queue[bytes] = queue.Queue()
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.pumps = [
            threading.Thread(target=_pump, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for pump in self.pumps:
            pump.start()

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read_until(self, decision_type: str) -> list[dict[str, Any]]:
        """Decisions up to and including the next one of ``decision_type``."""
        got: list[dict[str, Any]] = []
        while not got or got[-1]["type"] != decision_type:
            got.append(json.loads(self.out.get(timeout=TIMEOUT)))
        return got

    def stderr_line(self) -> str:
        return self.err.get(timeout=TIMEOUT).decode()

    def wait(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout=TIMEOUT)

    def close(self) -> None:
        """Kill the process if still running, and release every pipe."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pump in self.pumps:
            pump.join(timeout=TIMEOUT)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def rest(self) -> list[dict[str, Any]]:
        """Every decision not yet read; call after the process has exited."""
        for pump in self.pumps:
            pump.join(timeout=TIMEOUT)
        return [json.loads(self.out.get_nowait()) for _ in range(self.out.qsize())]


def start(started: list[Consumer], *args: str) -> Consumer:
    consumer = Consumer(*args)
    started.append(consumer)
    return consumer


def listen_port(consumer: Consumer) -> int:
    """The port a ``--listen tcp://...`` consumer announced on stderr."""
    line = consumer.stderr_line()
    match = re.fullmatch(r"xce run: listening on tcp://127\.0\.0\.1:(\d+)\n", line)
    assert match, line
    return int(match[1])


def connect(port: int) -> socket.socket:
    """A TCP connection to ``127.0.0.1:port`` with the test timeout."""
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
