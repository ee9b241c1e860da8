"""``xce run --nats`` against a real ``nats-server -js`` (started per test).

Each case gets its own streams, subjects and durable name (:class:`Names`), so
cases of one test run side by side on one server.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("nats")
import nats
from nats.js.errors import KeyNotFoundError

from events import EventEncoder, JobFinished, JobSubmitted, SessionBegin, WorkerUp
from tests.cli.nats_server import NatsServer, publish_lines, read_decisions
from tests.cli.xce_process import XCE_RUN, run

pytestmark = pytest.mark.timeout(90)
LOGS = Path(os.environ.get("XCE_TEST_LOGS", "/tmp"))


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    global LOGS
    LOGS = tmp_path
    server = NatsServer(tmp_path / "nats")
    server.start()
    yield server
    server.stop()


@dataclass(frozen=True)
class Names:
    """One case's streams, subjects and durable name."""

    tag: str

    @property
    def stream(self) -> str:
        return f"IN_{self.tag}"

    @property
    def decisions(self) -> str:
        return f"OUT_{self.tag}"

    def args(self, url: str, *extra: str) -> list[str]:
        return [
            *XCE_RUN,
            "--nats",
            url,
            "--stream",
            self.stream,
            "--subject",
            f"in.{self.tag}",
            "--decisions-stream",
            self.decisions,
            "--decisions-subject",
            f"out.{self.tag}",
            "--durable",
            f"d_{self.tag}",
            "--lease-ttl",
            "1",
            *extra,
        ]

    def start(self, url: str, *extra: str, crash: str | None = None) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.pop("XCE_NATS_CRASH_AT", None)
        if crash is not None:
            env["XCE_NATS_CRASH_AT"] = crash
        with open(LOGS / f"{self.tag}.log", "ab") as log:
            return subprocess.Popen(
                self.args(url, *extra), env=env, stdin=subprocess.DEVNULL, stderr=log
            )

    async def publish(self, url: str, payloads: list[bytes]) -> None:
        await publish_lines(url, payloads, stream=self.stream, subject=f"in.{self.tag}")

    async def decisions_of(self, url: str, headers: bool = False) -> list[dict[str, Any]]:
        return await read_decisions(url, stream=self.decisions, headers=headers)


def scripted_stream(seed: int = 1, jobs: int = 60) -> list[bytes]:
    """Workers, jobs of several sizes, sessions, finishes and one malformed line."""
    rng = random.Random(seed)
    encoder = EventEncoder("ndjson")
    events: list[Any] = [WorkerUp(name=f"h{i}", slots=rng.choice([2, 4, 8])) for i in range(4)]
    running: list[str] = []
    for i in range(jobs):
        tasks = rng.choice([1, 1, 2, 4, 6])
        events.append(JobSubmitted(job_id=f"j{i}", min_tasks=tasks, max_tasks=tasks))
        running.append(f"j{i}")
        if i % 11 == 4:  # rejected submissions amid accepted ones
            events.append(JobSubmitted(job_id=f"j{i}"))  # a duplicate id
            events.append(JobSubmitted(job_id=f"bad{i}", resreq="select[mem>"))
        if i % 7 == 6:
            events.append(SessionBegin())
            for job_id in rng.sample(running, 3):
                running.remove(job_id)
                events.append(JobFinished(job_id=job_id))
    events.append(SessionBegin())
    payloads = [encoder.encode(event) for event in events]
    payloads.insert(9, b'{"type":"worker_up","name":"bad","slots":-1}\n')
    return payloads


def normal(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decisions without what legitimately differs between runs and inputs."""
    out = []
    for decision in decisions:
        decision = {k: v for k, v in decision.items() if k not in ("elapsed_s", "_id", "_pos")}
        if decision["type"] == "event_rejected":
            decision = {"type": "event_rejected", "index": decision["index"]}
        out.append(decision)
    return out


def stdin_decisions(payloads: list[bytes]) -> list[dict[str, Any]]:
    result = run(input=b"".join(payloads))
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


async def wait_for(names: Names, url: str, count: int, patience: float = 30.0) -> list[Any]:
    deadline = time.monotonic() + patience
    while True:
        decisions = await names.decisions_of(url)
        if len(decisions) >= count or time.monotonic() > deadline:
            return decisions
        await anyio.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    return process.wait(10)


async def test_same_decisions_as_stdin_and_everything_acked(nats_server: NatsServer) -> None:
    payloads = scripted_stream()
    expected = stdin_decisions(payloads)
    names = Names("same")
    await names.publish(nats_server.url, payloads)
    process = names.start(nats_server.url, "--fetch-batch", "7")
    try:
        got = await wait_for(names, nats_server.url, len(expected))
        assert normal(got) == normal(expected)
        # The malformed message was rejected as on stdin, acked, and did not block.
        rejected = [d for d in got if d["type"] == "event_rejected" and d["index"] == 9]
        assert rejected[0]["error"] == "event 9: message 10: Expected `int` >= 0 - at `$.slots`"
        # A rejected submission's decision is its own message's: the position
        # is that message's stream sequence, the id names its event index.
        positioned = await names.decisions_of(nats_server.url, headers=True)
        submitted = {
            json.loads(p)["job_id"]: seq
            for seq, p in enumerate(payloads, 1)
            if p.startswith(b'{"type":"job_submitted"')
        }
        refused = [d for d in positioned if d["type"] == "job_rejected"]
        assert len(refused) == 6  # the bad requirements
        for decision in refused:
            seq = submitted[decision["job_id"]]
            assert decision["_pos"] == f"{seq}.0"
            assert decision["_id"] == f"e{seq - 1}.job.{decision['job_id']}"
        duplicates = [d for d in positioned if "duplicate job id" in d.get("error", "")]
        assert len(duplicates) == 6
        for decision in duplicates:
            assert decision["_pos"] == f"{decision['index'] + 1}.0"
            assert decision["_id"] == f"e{decision['index']}.rejected"
        nc = await nats.connect(nats_server.url)
        try:
            for _ in range(50):
                info = await nc.jetstream().consumer_info(names.stream, "d_same")
                if info.num_ack_pending == 0 and info.ack_floor.stream_seq == len(payloads):
                    break
                await anyio.sleep(0.1)
            assert info.num_ack_pending == 0
            assert info.ack_floor.stream_seq == len(payloads)
        finally:
            await nc.close()
    finally:
        assert stop(process) == 143


async def test_msgpack_payloads(nats_server: NatsServer) -> None:
    encoder = EventEncoder("msgpack")
    events = [WorkerUp(name="h1", slots=2), JobSubmitted(job_id="a"), SessionBegin()]
    names = Names("mp")
    await names.publish(nats_server.url, [encoder.encode(e)[4:] for e in events] + [b"\xc1"])
    process = names.start(nats_server.url, "--format", "msgpack", "--output-format", "ndjson")
    try:
        got = await wait_for(names, nats_server.url, 3)
        assert [d["type"] for d in got] == ["job_allocated", "session_end", "event_rejected"]
        assert got[2]["index"] == 3
    finally:
        stop(process)


CRASHES = [
    "fetched:1",
    "fetched:3",
    "applied:1",
    "applied:12",
    "applied:40",
    "mid_publish:1",
    "mid_publish:3",
    "published:2",
    "published:6",
    "acked:1",
    "acked:4",
    "input_acked:2",
    "input_acked:5",
    "leased:1",
    "snapshot_taken:2",
    "snapshot_stored:1",
    "snapshot_stored:3",
]


async def restarts_publish_the_same(
    url: str,
    reference: Names,
    cases: list[Names],
    crashes: list[str],
    expected: list[dict[str, Any]],
    extra: tuple[str, ...],
    reference_process: subprocess.Popen[bytes],
) -> None:
    """Restart each killed case: it must publish exactly the reference's
    decisions, ids included. Stops every process."""
    restarted = [names.start(url, *extra) for names in cases]
    try:
        want_ids = [d["_id"] for d in await reference.decisions_of(url, headers=True)]
        for names, crash in zip(cases, crashes, strict=True):
            await wait_for(names, url, len(expected))
            await anyio.sleep(0.2)  # nothing more may come
            got = await names.decisions_of(url, headers=True)
            assert normal(got) == expected, crash
            assert [d["_id"] for d in got] == want_ids, crash
    finally:
        for process in [reference_process, *restarted]:
            stop(process)


async def test_kill_at_crash_points_loses_and_doubles_nothing(nats_server: NatsServer) -> None:
    """Each case is killed (SIGKILL) at one named point, restarted (from its
    newest snapshot), and must publish exactly the decisions of an
    uninterrupted run, with their ids."""
    url = nats_server.url
    payloads = scripted_stream(seed=2)
    expected = normal(stdin_decisions(payloads))
    cases = [Names(f"c{i}") for i in range(len(CRASHES))]
    reference = Names("ref")
    for names in [reference, *cases]:
        await names.publish(url, payloads)
    extra = ("--fetch-batch", "5", "--snapshot-every", "10")
    processes = [reference.start(url, *extra)]
    for names, crash in zip(cases, CRASHES, strict=True):
        processes.append(names.start(url, *extra, crash=crash))
    want = await wait_for(reference, url, len(expected))
    assert normal(want) == expected
    crashed = []
    for process in processes[1:]:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(20)
        crashed.append(process.returncode == -signal.SIGKILL)
        stop(process)
    assert sum(crashed) >= 10, list(zip(CRASHES, crashed, strict=True))
    await restarts_publish_the_same(url, reference, cases, CRASHES, expected, extra, processes[0])


def big_session_stream(jobs: int = 6000, rounds: int = 1) -> list[bytes]:
    """Sessions that start thousands of jobs each (handed over while they run),
    each followed by a few more events."""
    encoder = EventEncoder("ndjson")
    events: list[Any] = [WorkerUp(name=f"h{i}", slots=64) for i in range(100 * rounds)]
    for r in range(rounds):
        ids = [f"j{r}.{i}" for i in range(jobs)]
        events += [
            JobSubmitted(job_id=job_id, max_tasks=1 + i % 2) for i, job_id in enumerate(ids)
        ]
        events += [SessionBegin(), JobFinished(job_id=ids[0]), SessionBegin()]
    return [encoder.encode(event) for event in events]


async def test_kill_while_a_big_session_is_handed_over(nats_server: NatsServer) -> None:
    """A session's decisions go out while it runs: killed after some of them
    are stored (or half of one hand-over is sent), a restart publishes exactly
    the uninterrupted run's decisions, ids included."""
    url = nats_server.url
    payloads = big_session_stream()
    expected = normal(stdin_decisions(payloads))
    crashes = ["published:1", "published:3", "mid_publish:2", "acked:1"]
    cases = [Names(f"big{i}") for i in range(len(crashes))]
    reference = Names("bigref")
    for names in [reference, *cases]:
        await names.publish(url, payloads)
    extra = ("--fetch-batch", "500")
    processes = [reference.start(url, *extra)]
    processes += [
        names.start(url, *extra, crash=crash) for names, crash in zip(cases, crashes, strict=True)
    ]
    want = await wait_for(reference, url, len(expected))
    assert normal(want) == expected
    for process in processes[1:]:
        process.wait(30)
        assert process.returncode == -signal.SIGKILL
    await restarts_publish_the_same(url, reference, cases, crashes, expected, extra, processes[0])


async def test_standby_takes_over_when_the_active_is_killed(nats_server: NatsServer) -> None:
    url = nats_server.url
    payloads = scripted_stream(seed=3)
    expected = normal(stdin_decisions(payloads))
    names = Names("fo")
    cut = len(payloads) // 2
    await names.publish(url, payloads[:cut])
    first = names.start(url)
    await wait_for(names, url, 1)
    second = names.start(url)
    await anyio.sleep(0.5)  # the standby is waiting for the lease
    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value("xce_leases")
        holder = (await kv.get("d_fo")).value
        assert holder is not None
        assert int(holder.decode().split(":")[1]) == first.pid
        first.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        while True:
            with contextlib.suppress(KeyNotFoundError):
                entry = await kv.get("d_fo")
                if entry.value is not None and entry.value != holder:
                    break
            await anyio.sleep(0.02)
        took_over = time.monotonic() - killed
        assert int(entry.value.decode().split(":")[1]) == second.pid
        await names.publish(url, payloads[cut:])
        got = await wait_for(names, url, len(expected))
        answered = time.monotonic() - killed
        assert normal(got) == expected
        # TTL 1 s: the key expires, a poll (0.25 s) later the standby has it.
        assert took_over < 3.0
        print(
            f"failover: lease taken {took_over:.2f} s after the kill, "
            f"all decisions {answered:.2f} s after it"
        )
    finally:
        await nc.close()
        stop(first)
        stop(second)


async def test_server_restart_loses_nothing(nats_server: NatsServer) -> None:
    url = nats_server.url
    payloads = scripted_stream(seed=4)
    expected = normal(stdin_decisions(payloads))
    names = Names("rs")
    cut = len(payloads) // 2
    await names.publish(url, payloads[:cut])
    process = names.start(url, "--fetch-batch", "3")
    try:
        before = await wait_for(names, url, 1)
        assert before
        nats_server.restart()
        await names.publish(url, payloads[cut:])
        got = await wait_for(names, url, len(expected))
        await anyio.sleep(0.3)
        got = await names.decisions_of(url)
        assert normal(got) == expected
        assert process.poll() is None
    finally:
        stop(process)


async def kills_then_a_clean_run(
    url: str, names: Names, payloads: list[bytes], extra: tuple[str, ...], seed: int, kills: int
) -> None:
    """Publish ``payloads``; start ``names``' service and SIGKILL it at random
    times (``$XCE_NATS_KILLS`` times, default ``kills``), then run it clean: its
    decisions stream must equal an uninterrupted run's, ids unique."""
    expected = normal(stdin_decisions(payloads))
    await names.publish(url, payloads)
    rng = random.Random(seed)
    for _ in range(int(os.environ.get("XCE_NATS_KILLS", str(kills)))):
        process = names.start(url, *extra)
        await anyio.sleep(rng.uniform(0.3, 1.5))
        process.send_signal(signal.SIGKILL)
        process.wait()
        await anyio.sleep(rng.choice([0, 0.5, 1.1]))  # the lease may still be held
    process = names.start(url, *extra)
    try:
        await wait_for(names, url, len(expected), patience=120)
        await anyio.sleep(0.5)
        got = await names.decisions_of(url, headers=True)
        assert normal(got) == expected
        assert len({d["_id"] for d in got}) == len(got)
    finally:
        stop(process)


@pytest.mark.slow
@pytest.mark.timeout(7200)
async def test_many_random_kills(nats_server: NatsServer) -> None:
    """``$XCE_NATS_KILLS`` (default 1000) SIGKILLs at random times, with
    snapshots every 50 events, then a clean run: the decisions stream equals an
    uninterrupted run's, ids included."""
    url = nats_server.url
    payloads = scripted_stream(seed=5, jobs=1500)
    extra = ("--fetch-batch", "20", "--snapshot-every", "50")
    await kills_then_a_clean_run(url, Names("many"), payloads, extra, seed=5, kills=1000)


@pytest.mark.slow
@pytest.mark.timeout(7200)
async def test_many_random_kills_while_big_sessions_are_handed_over(
    nats_server: NatsServer,
) -> None:
    """``$XCE_NATS_KILLS`` (default 200) SIGKILLs at random times over a stream
    of big sessions (each handed over while it runs), then a clean run: the
    decisions stream equals an uninterrupted run's, ids included."""
    url = nats_server.url
    payloads = big_session_stream(jobs=4000, rounds=4)
    extra = ("--fetch-batch", "500", "--snapshot-every", "3000")
    await kills_then_a_clean_run(url, Names("bigmany"), payloads, extra, seed=6, kills=200)
