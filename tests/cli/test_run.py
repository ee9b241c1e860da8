"""``xce run`` end to end, through a subprocess: pipes, files, sockets, signals."""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import struct
import subprocess
from pathlib import Path

import msgspec
import pytest

from events import Decision, EventDecoder, EventEncoder, JobSubmitted, SessionBegin, WorkerUp
from tests.cli.xce_process import (
    MSGPACK_EVENTS,
    SESSION,
    TIMEOUT,
    WORKERS,
    XCE_RUN,
    Consumer,
    job,
    ndjson,
    parse,
    run,
    start,
)

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
    assert all("job_id" not in r for r in rejected)  # none of them names a job
    allocated = {d["job_id"]: d["hosts"] for d in decisions if d["type"] == "job_allocated"}
    assert set(allocated) == {"a", "b", "c"}
    assert decisions[-1]["type"] == "session_end"
    assert decisions[-1]["allocated"] == 3


def test_a_bad_submission_is_rejected_under_its_job_id() -> None:
    data = ndjson(
        WORKERS[0],
        '{"type":"job_submitted","job_id":"bad","min_tasks":0}',
        '{"type":"job_finished","job_id":"ghost"}',
        SESSION,
    )
    result = run(input=data)
    assert result.returncode == 0, result.stderr
    rejected = [d for d in parse(result.stdout) if d["type"] == "event_rejected"]
    assert [(r["index"], r["job_id"]) for r in rejected] == [(1, "bad"), (2, "ghost")]


def test_rejections_the_core_raises_name_their_input_line() -> None:
    # The core knows an event's index only; xce run adds the line (blank lines
    # count as lines, not events), as the decoder does for malformed ones.
    data = ndjson(
        WORKERS[0],
        job("a", 1),
        "",
        job("a", 1),  # duplicate id: line 4, index 2
        "{not json",  # line 5, index 3
        "",
        "",
        '{"type":"job_finished","job_id":"ghost"}',  # line 8, index 4
        SESSION,
    )
    result = run(input=data)
    assert result.returncode == 0, result.stderr
    rejected = [d for d in parse(result.stdout) if d["type"] == "event_rejected"]
    assert [(r["index"], r["line"]) for r in rejected] == [(2, 4), (3, 5), (4, 8)]
    assert rejected[0]["error"] == "duplicate job id 'a'"


def test_a_connection_s_rejections_name_its_lines(consumer_factory: list[Consumer]) -> None:
    consumer = start(consumer_factory, "--listen", "tcp://:0", "--once")
    match = re.fullmatch(
        r"xce run: listening on tcp://127\.0\.0\.1:(\d+)\n", consumer.stderr_line()
    )
    assert match
    with socket.create_connection(("127.0.0.1", int(match[1])), timeout=TIMEOUT) as conn:
        conn.sendall(ndjson(*WORKERS, "", job("a", 2), job("a", 2), SESSION))
    assert consumer.wait() == 0
    (rejected,) = [d for d in consumer.rest() if d["type"] == "event_rejected"]
    assert (rejected["index"], rejected["line"]) == (3, 5)


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


@pytest.mark.parametrize("closed", [0, 1])
def test_a_closed_stdin_or_stdout_is_an_io_error_naming_it(tmp_path: Path, closed: int) -> None:
    # A file opened later must not take the closed number (uvloop aborted
    # when it closed such a file), and using the closed stream fails cleanly.
    source = tmp_path / "events.ndjson"
    source.write_bytes(ndjson(*WORKERS, job("a"), SESSION))
    args = [*XCE_RUN] + (["--input", str(source)] if closed == 1 else [])
    result = subprocess.run(
        args,
        capture_output=closed == 0,
        stderr=subprocess.PIPE if closed == 1 else None,
        preexec_fn=lambda: os.close(closed),
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 1
    name = "stdin" if closed == 0 else "stdout"
    assert result.stderr.decode().strip() == f"xce run: [Errno 9] Bad file descriptor: {name!r}"


def test_an_input_that_is_a_directory_is_an_io_error_naming_it(tmp_path: Path) -> None:
    result = run("--input", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.decode().strip().endswith(f"Is a directory: {str(tmp_path)!r}")


def test_missing_input_file_is_an_io_error(tmp_path: Path) -> None:
    result = run("--input", str(tmp_path / "missing"))
    assert result.returncode == 1
    assert result.stderr.decode().startswith("xce run: ")


@pytest.mark.parametrize(
    "args",
    [
        ["--picker", "nope"],
        ["--listen", "http://x"],
        ["--once"],
        # NaN passes click's range checks (it compares false with any bound).
        ["--interval", "nan"],
        ["--listen", "tcp://127.0.0.1:0", "--idle-timeout", "nan"],
        ["--state-dir", "sd", "--snapshot-interval", "NaN"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert b"Error" in result.stderr
    assert b"Traceback" not in result.stderr


# --------------------------------------------------------------------------- hostile input


def test_deeply_nested_input_is_rejected_and_the_consumer_carries_on() -> None:
    deep = '{"type":"job_finished","job_id":"x","x":' + "[" * 5000 + "]" * 5000 + "}"
    result = run(input=ndjson(*WORKERS, deep, job("a", 2), SESSION))
    assert result.returncode == 0, result.stderr
    decisions = parse(result.stdout)
    assert [d["type"] for d in decisions] == ["event_rejected", "job_allocated", "session_end"]
    assert decisions[0]["line"] == 3
    assert "nested too deeply" in decisions[0]["error"]


def test_non_finite_and_huge_msgpack_numbers_are_rejected_before_the_core() -> None:
    encoder = EventEncoder("msgpack")
    frames = [
        msgspec.msgpack.encode(
            {"type": "worker_up", "name": "h1", "slots": 4, "resources": {"mem": math.inf}}
        ),
        msgspec.msgpack.encode({"type": "worker_up", "name": "h2", "slots": 2**64 - 1}),
        msgspec.msgpack.encode({"type": "job_submitted", "job_id": "p", "priority": 10**18}),
    ]
    data = b"".join(len(f).to_bytes(4, "big") + f for f in frames) + encoder.encode_many(
        [
            WorkerUp(name="h3", slots=4, resources={"mem": 100.0}),
            JobSubmitted(
                job_id="a", min_tasks=2, max_tasks=4, resreq="rusage[mem=10] span[stripe]"
            ),
            SessionBegin(),
        ]
    )
    # parjob_pack divides free amounts: an infinite one used to raise ValueError there.
    result = run(
        "--format",
        "msgpack",
        "--output-format",
        "ndjson",
        "--parallel-allocator",
        "parjob_pack",
        input=data,
    )
    assert result.returncode == 0, result.stderr
    decisions = parse(result.stdout)
    assert [(d["type"], d.get("index")) for d in decisions] == [
        ("event_rejected", 0),
        ("event_rejected", 1),
        ("event_rejected", 2),
        ("job_allocated", None),
        ("session_end", None),
    ]
    assert [d["error"].rsplit("at ", 1)[1] for d in decisions[:3]] == [
        "`$.resources[...]`",
        "`$.slots`",
        "`$.priority`",
    ]


def test_a_lying_msgpack_length_is_reported_at_once_and_at_the_end() -> None:
    data = MSGPACK_EVENTS + b"\xff\xff\xff\xff" + MSGPACK_EVENTS
    result = run("--format", "msgpack", "--output-format", "ndjson", input=data)
    assert result.returncode == 0, result.stderr
    decisions = parse(result.stdout)
    assert [d["type"] for d in decisions] == [
        "job_allocated",
        "session_end",
        "event_rejected",
        "event_rejected",
    ]
    assert "4294967295 bytes exceeds the 1048576-byte limit" in decisions[2]["error"]
    assert "truncated frame: input ended" in decisions[3]["error"]
    # Two items, each under its own index, and the text's index is the decision's.
    assert [d["index"] for d in decisions[2:]] == [3, 4]
    assert decisions[3]["error"].startswith("event 4: ")
    assert decisions[3]["error"].endswith("skipped as over the limit (event 3)")


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
