"""``xce run`` end to end, through a subprocess: pipes, files, sockets, signals."""

from __future__ import annotations

import json
import queue
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from events import Decision, EventDecoder, EventEncoder, JobSubmitted, SessionBegin, WorkerUp

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


@pytest.fixture
def consumer_factory() -> Iterator[list[Consumer]]:
    started: list[Consumer] = []
    yield started
    for consumer in started:
        consumer.close()


def start(started: list[Consumer], *args: str) -> Consumer:
    consumer = Consumer(*args)
    started.append(consumer)
    return consumer


# --------------------------------------------------------------------------- pipes


def test_good_and_bad_lines_end_to_end() -> None:
    data = ndjson(
        WORKERS[0],
        '{"type":"worker_up","name":"hx","slots":"four"}',
        job("a", 2),
        "{not json",
        "",
        '{"type":"job_submitted"}',
        WORKERS[1],
        job("b", 2),
        job("c", 2),
        SESSION,
    )
    result = run(input=data)
    assert result.returncode == 0, result.stderr
    decisions = parse(result.stdout)
    rejected = [d for d in decisions if d["type"] == "event_rejected"]
    assert [(r["index"], r["line"]) for r in rejected] == [(1, 2), (3, 4), (4, 6)]
    assert "$.slots" in rejected[0]["error"]
    assert "job_id" in rejected[2]["error"]
    allocated = {d["job_id"]: d["hosts"] for d in decisions if d["type"] == "job_allocated"}
    assert set(allocated) == {"a", "b", "c"}
    assert decisions[-1]["type"] == "session_end"
    assert decisions[-1]["allocated"] == 3


def test_interactive_session_decisions_arrive_before_end_of_input(
    consumer_factory: list[Consumer],
) -> None:
    consumer = start(consumer_factory)
    consumer.send(ndjson(*WORKERS, job("a", 4), SESSION))
    first = consumer.read_until("session_end")
    assert [d["type"] for d in first] == ["job_allocated", "session_end"]
    assert first[0]["hosts"] == [{"host": "h1", "slots": 4}]

    consumer.send(ndjson(job("b", 4), '{"type":"job_finished","job_id":"a"}', SESSION))
    second = consumer.read_until("session_end")
    assert [(d["type"], d.get("job_id")) for d in second] == [
        ("job_allocated", "b"),
        ("session_end", None),
    ]
    assert second[-1]["session"] == 2
    assert consumer.wait() == 0


def test_strict_stops_with_status_2_and_one_line_on_stderr() -> None:
    data = ndjson(WORKERS[0], job("a"), SESSION, '{"type":"nope"}', job("b"), SESSION)
    result = run("--strict", input=data)
    assert result.returncode == 2
    decisions = parse(result.stdout)
    assert [d["type"] for d in decisions] == ["job_allocated", "session_end", "event_rejected"]
    assert decisions[-1]["line"] == 4
    message = result.stderr.decode()
    assert message.count("\n") == 1
    assert message.startswith("xce run: line 4:")


def test_msgpack_in_and_out() -> None:
    result = run("--format", "msgpack", input=MSGPACK_EVENTS)
    assert result.returncode == 0, result.stderr
    decoder: EventDecoder[Decision] = EventDecoder("msgpack", type=Decision)
    decisions = decoder.feed(result.stdout) + decoder.close()
    assert [type(d).__name__ for d in decisions] == ["JobAllocated", "SessionEnd"]


def test_msgpack_in_ndjson_out_with_a_truncated_frame() -> None:
    data = MSGPACK_EVENTS + MSGPACK_EVENTS[:3]
    result = run("--format", "msgpack", "--output-format", "ndjson", input=data)
    assert result.returncode == 0, result.stderr
    decisions = parse(result.stdout)
    assert [d["type"] for d in decisions] == ["job_allocated", "session_end", "event_rejected"]
    assert decisions[-1]["index"] == 3
    assert decisions[-1]["line"] is None
    assert "truncated frame" in decisions[-1]["error"]


def test_input_and_output_files(tmp_path: Path) -> None:
    source = tmp_path / "events.ndjson"
    source.write_bytes(ndjson(*WORKERS, job("a"), "oops", SESSION))
    target = tmp_path / "decisions.ndjson"
    result = run("--input", str(source), "--output", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert [d["type"] for d in parse(target.read_bytes())] == [
        "event_rejected",
        "job_allocated",
        "session_end",
    ]


def test_missing_input_file_is_an_io_error(tmp_path: Path) -> None:
    result = run("--input", str(tmp_path / "missing"))
    assert result.returncode == 1
    assert result.stderr.decode().startswith("xce run: ")


@pytest.mark.parametrize("args", [["--picker", "nope"], ["--listen", "http://x"], ["--once"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert b"Error" in result.stderr


# --------------------------------------------------------------------------- sockets


def test_tcp_listen_once(consumer_factory: list[Consumer]) -> None:
    consumer = start(consumer_factory, "--listen", "tcp://:0", "--once")
    line = consumer.stderr_line()
    match = re.fullmatch(r"xce run: listening on tcp://127\.0\.0\.1:(\d+)\n", line)
    assert match, line
    with socket.create_connection(("127.0.0.1", int(match[1])), timeout=TIMEOUT) as conn:
        conn.sendall(ndjson(*WORKERS, job("a", 2), "bad", SESSION))
    assert consumer.wait() == 0
    decisions = consumer.rest()
    assert [d["type"] for d in decisions] == ["event_rejected", "job_allocated", "session_end"]


def test_unix_listen_serves_connections_in_order(
    consumer_factory: list[Consumer], tmp_path: Path
) -> None:
    path = tmp_path / "xce.sock"
    consumer = start(consumer_factory, "--listen", f"unix:{path}")
    assert consumer.stderr_line() == f"xce run: listening on unix:{path}\n"
    for payload in (ndjson(*WORKERS), ndjson(job("a", 4), SESSION)):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(TIMEOUT)
            conn.connect(str(path))
            conn.sendall(payload)
    decisions = consumer.read_until("session_end")
    assert decisions[0]["hosts"] == [{"host": "h1", "slots": 4}]
    consumer.proc.send_signal(signal.SIGTERM)
    assert consumer.wait() == 143
    assert not path.exists()


def test_unix_listen_once(consumer_factory: list[Consumer], tmp_path: Path) -> None:
    path = tmp_path / "once.sock"
    consumer = start(consumer_factory, "--listen", f"unix:{path}", "--once")
    consumer.stderr_line()
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(TIMEOUT)
        conn.connect(str(path))
        conn.sendall(ndjson(*WORKERS, job("a"), SESSION))
    assert consumer.wait() == 0
    assert [d["type"] for d in consumer.rest()] == ["job_allocated", "session_end"]


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_exits_with_128_plus_signal_and_flushed_output(
    consumer_factory: list[Consumer], signum: int, status: int
) -> None:
    consumer = start(consumer_factory)
    consumer.send(ndjson(*WORKERS, job("a"), SESSION))
    assert consumer.read_until("session_end")[0]["job_id"] == "a"
    # A rejected event is flushed with its chunk, before any signal.
    consumer.send(ndjson(job("b"), "junk"))
    assert consumer.read_until("event_rejected")[0]["line"] == 6
    consumer.proc.send_signal(signum)
    assert consumer.proc.wait(timeout=TIMEOUT) == status  # stdin still open
    assert consumer.rest() == []
    assert consumer.err.empty()


def test_tcp_a_reset_connection_does_not_stop_the_server(
    consumer_factory: list[Consumer],
) -> None:
    consumer = start(consumer_factory, "--listen", "tcp://127.0.0.1:0")
    port = int(consumer.stderr_line().rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as conn:
        conn.sendall(ndjson(*WORKERS))
        # Linger 0: close() sends RST instead of FIN.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as conn:
        conn.sendall(ndjson(WORKERS[0], job("a"), SESSION))
    decisions = consumer.read_until("session_end")
    assert [d["type"] for d in decisions] == ["job_allocated", "session_end"]
    consumer.proc.send_signal(signal.SIGINT)
    assert consumer.wait() == 130
