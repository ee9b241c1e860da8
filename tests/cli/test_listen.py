"""``xce run --listen`` over real sockets: concurrent clients, the idle timeout,
the connection limit, and ``--reply``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.xce_process import (
    SESSION,
    TIMEOUT,
    WORKERS,
    Consumer,
    connect,
    job,
    listen_port,
    ndjson,
    run,
    start,
)

Connect = Callable[[], socket.socket]


def unix_connector(path: Path) -> Connect:
    def open_unix() -> socket.socket:
        conn = socket.socket(socket.AF_UNIX)
        conn.settimeout(TIMEOUT)
        conn.connect(str(path))
        return conn

    return open_unix


def listening(
    started: list[Consumer], transport: str, tmp_path: Path, *args: str
) -> tuple[Consumer, Connect]:
    """A consumer listening on TCP (port 0) or a Unix socket, and a connector."""
    if transport == "tcp":
        consumer = start(started, "--listen", "tcp://:0", *args)
        port = listen_port(consumer)
        return consumer, lambda: connect(port)
    path = tmp_path / "xce.sock"
    consumer = start(started, "--listen", f"unix:{path}", *args)
    assert consumer.stderr_line() == f"xce run: listening on unix:{path}\n"
    return consumer, unix_connector(path)


class Replies:
    """Decisions read back from a connection, one JSON line at a time."""

    def __init__(self, conn: socket.socket) -> None:
        self.reader = conn.makefile("rb")

    def until(self, decision_type: str) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while not got or got[-1]["type"] != decision_type:
            line = self.reader.readline()
            assert line, f"connection closed before a {decision_type}; got {got}"
            got.append(json.loads(line))
        return got

    def rest(self) -> list[dict[str, Any]]:
        """Every line until the server closes the connection."""
        return [json.loads(line) for line in iter(self.reader.readline, b"")]


def stop(consumer: Consumer) -> None:
    consumer.proc.send_signal(signal.SIGTERM)
    assert consumer.wait() == 143


# --------------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_an_idle_client_does_not_block_another(
    consumer_factory: list[Consumer], tmp_path: Path, transport: str
) -> None:
    consumer, open_connection = listening(consumer_factory, transport, tmp_path)
    with open_connection() as idle:
        idle.sendall(b'{"type":"worker_up",')  # half a line, then nothing
        with open_connection() as busy:
            busy.sendall(ndjson(*WORKERS, job("a", 4), SESSION))
            decisions = consumer.read_until("session_end")
        assert [d["type"] for d in decisions] == ["job_allocated", "session_end"]
    # The idle client's half line is rejected when it leaves, as at end of input.
    (rejected,) = consumer.read_until("event_rejected")
    assert rejected["line"] == 1
    assert "truncated" in rejected["error"]
    stop(consumer)


def test_events_of_concurrent_clients_share_one_core(
    consumer_factory: list[Consumer], tmp_path: Path
) -> None:
    consumer, open_connection = listening(consumer_factory, "tcp", tmp_path)
    with open_connection() as first, open_connection() as second:
        first.sendall(ndjson(WORKERS[0]))
        second.sendall(ndjson(job("a", 4), "oops"))
        consumer.read_until("event_rejected")  # the second client's batch is applied
        first.sendall(ndjson(SESSION))
        decisions = consumer.read_until("session_end")
    assert decisions[0]["hosts"] == [{"host": "h1", "slots": 4}]
    stop(consumer)


# --------------------------------------------------------------------------- idle timeout


def test_the_idle_timeout_closes_a_silent_connection_with_a_note(
    consumer_factory: list[Consumer], tmp_path: Path
) -> None:
    consumer, open_connection = listening(
        consumer_factory, "tcp", tmp_path, "--idle-timeout", "0.3"
    )
    with open_connection() as conn:
        conn.sendall(ndjson(*WORKERS))
        note = consumer.stderr_line()
        assert note.startswith("xce run: closing connection 1 (tcp://127.0.0.1:")
        assert note.endswith("): idle for 0.3 s\n")
        assert conn.recv(100) == b""  # closed by the server
    with open_connection() as conn:  # the server carries on
        conn.sendall(ndjson(job("a", 2), SESSION))
        assert consumer.read_until("session_end")[0]["job_id"] == "a"
    stop(consumer)


# --------------------------------------------------------------------------- limit


def test_connections_beyond_the_limit_are_refused_with_a_note(
    consumer_factory: list[Consumer], tmp_path: Path
) -> None:
    consumer, open_connection = listening(
        consumer_factory, "tcp", tmp_path, "--max-connections", "1"
    )
    with open_connection() as served:
        served.sendall(ndjson(*WORKERS, "not json"))
        consumer.read_until("event_rejected")  # accepted and read
        with open_connection() as refused:
            (refusal,) = Replies(refused).rest()  # one line, then closed
        assert refusal["type"] == "event_rejected"
        assert refusal["index"] == -1
        assert refusal["error"] == (
            "connection refused: limit of 1 open connection(s) reached (--max-connections)"
        )
        note = consumer.stderr_line()
        assert note.startswith("xce run: refusing connection 2 (tcp://127.0.0.1:")
        served.sendall(ndjson(job("a", 4), SESSION))  # the served one is unaffected
        assert consumer.read_until("session_end")[0]["job_id"] == "a"
    with admitted(consumer, open_connection) as later:  # its place is free again
        later.sendall(ndjson(job("b", 2), SESSION))
        assert consumer.read_until("session_end")[0]["job_id"] == "b"
    stop(consumer)


def admitted(consumer: Consumer, open_connection: Connect) -> socket.socket:
    """A connection the server serves, once the one before has been let go
    (the server sees it close a moment after the client does)."""
    for _ in range(100):  # up to about 10 s: a refusal comes back at once
        conn = open_connection()
        conn.settimeout(0.2)
        try:
            refusal = conn.recv(1)
        except TimeoutError:  # nothing sent: served
            conn.settimeout(TIMEOUT)
            return conn
        conn.close()
        assert refusal
        assert "refusing" in consumer.stderr_line()
        time.sleep(0.1)  # the server has not seen the earlier client go yet
    raise AssertionError("never admitted")


# --------------------------------------------------------------------------- replies


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_reply_returns_a_connections_decisions_to_it(
    consumer_factory: list[Consumer], tmp_path: Path, transport: str
) -> None:
    consumer, open_connection = listening(consumer_factory, transport, tmp_path, "--reply")
    with open_connection() as first, open_connection() as second:
        first.sendall(ndjson(*WORKERS, job("a", 4), "bad", SESSION))
        replies = Replies(first).until("session_end")
        assert [d["type"] for d in replies] == ["event_rejected", "job_allocated", "session_end"]
        assert replies[0]["line"] == 4
        # ...and the same decisions, in the same order, on stdout.
        assert consumer.read_until("session_end") == replies
        second.sendall(ndjson("{}"))
        (theirs,) = Replies(second).until("event_rejected")
        assert theirs["line"] == 1
        first.settimeout(0.3)
        with pytest.raises(TimeoutError):
            first.recv(1)  # nothing of the second client's goes to the first
    stop(consumer)


def test_reply_a_session_belongs_to_the_connection_that_began_it(
    consumer_factory: list[Consumer], tmp_path: Path
) -> None:
    consumer, open_connection = listening(consumer_factory, "tcp", tmp_path, "--reply")
    with open_connection() as submitter, open_connection() as scheduler:
        submitter.sendall(ndjson(*WORKERS, job("theirs", 2), "ack"))
        Replies(submitter).until("event_rejected")  # its batch has been applied
        scheduler.sendall(ndjson(SESSION))
        replies = Replies(scheduler).until("session_end")
        assert [(d["type"], d.get("job_id")) for d in replies] == [
            ("job_allocated", "theirs"),
            ("session_end", None),
        ]
        submitter.settimeout(0.3)
        with pytest.raises(TimeoutError):
            submitter.recv(1)
    stop(consumer)


def test_reply_once_a_client_that_shuts_down_its_side_still_gets_every_decision(
    consumer_factory: list[Consumer], tmp_path: Path
) -> None:
    consumer, open_connection = listening(consumer_factory, "tcp", tmp_path, "--reply", "--once")
    with open_connection() as conn:
        conn.sendall(ndjson(*WORKERS, job("a", 2), job("b", 9), SESSION))
        conn.shutdown(socket.SHUT_WR)
        replies = Replies(conn).rest()
    assert [(d["type"], d.get("job_id")) for d in replies] == [
        ("job_allocated", "a"),
        ("job_pended", "b"),
        ("session_end", None),
    ]
    assert consumer.wait() == 0
    assert consumer.rest() == replies


def test_reply_a_client_that_does_not_read_is_closed_and_stalls_no_one(
    consumer_factory: list[Consumer],
) -> None:
    args = ["--reply", "--idle-timeout", "0.5", "--output", os.devnull]
    consumer = start(consumer_factory, "--listen", "tcp://:0", *args)
    port = listen_port(consumer)
    deaf = socket.socket()
    deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting
    deaf.settimeout(TIMEOUT)
    deaf.connect(("127.0.0.1", port))
    # About 20 MB of rejections for it to read, more than any socket buffers.
    flood = threading.Thread(target=send_quietly, args=(deaf, b"x\n" * 200_000), daemon=True)
    flood.start()
    note = consumer.stderr_line()
    assert note.startswith("xce run: closing connection 1 (tcp://127.0.0.1:")
    assert note.endswith(("replies left unread for 0.5 s\n", "bytes of replies unread\n"))
    with connect(port) as other:
        other.sendall(ndjson(*WORKERS, job("a", 2), SESSION))
        assert Replies(other).until("session_end")[0]["job_id"] == "a"
    flood.join(TIMEOUT)
    deaf.close()
    stop(consumer)


def send_quietly(conn: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(data)


@pytest.mark.parametrize(
    "option", [["--reply"], ["--idle-timeout", "5"], ["--max-connections", "2"]]
)
def test_listen_options_without_listen_are_usage_errors(option: list[str]) -> None:
    result = run(*option)
    assert result.returncode == 2
    assert b"needs --listen" in result.stderr
