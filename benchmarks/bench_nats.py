"""``xce run --nats`` throughput and failover time, on a real ``nats-server -js``.

    python benchmarks/bench_nats.py [--scale 1.0] [--profile FILE] [--skip-failover]

**Throughput.** The B1 stream shape (``bench_alloc.py``): 10,000 ``worker_up``
(32 slots), 500,000 one-task ``job_submitted`` in B1's 20 shapes, one
``session_begin``, as NDJSON messages, published first (acked; one client
cannot publish faster than the service consumes, and unacked publishes at
that rate are dropped by the server). ``xce run --nats`` is then started on
the backlog, and the clock runs from the moment it has created its consumer
until the session's last decision is stored in the decisions stream.
Reported: events/s end to end, the two phases apart (ingest: all events but
the ``session_begin`` applied and acked; then the session, its decisions
computed and stored), and the CPU time of xce and of the server.
``--profile FILE`` runs the service under cProfile (``python -m pstats
FILE``) to see where its time goes.

**Failover.** Two processes on a small stream, ``--lease-ttl`` 1 and 5 s: the
active one is killed (SIGKILL) and the time until the standby has published
the decision of an event sent right after the kill is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats
from bench_alloc import SHAPES
from nats.js.api import StreamConfig

from events import EventEncoder, JobSubmitted, SessionBegin, WorkerUp
from tests.cli.nats_server import NatsServer

MAIN = "from xce_core.cli._main import main; main()"


def b1_payloads(scale: float) -> list[bytes]:
    encoder = EventEncoder("ndjson")
    rng = random.Random(1)
    out = []
    for i in range(int(10_000 * scale)):
        attrs: dict[str, Any] = {
            "type": rng.choice("abc"),
            "model": rng.choice(["m1", "m2"]),
            "ncpus": 32,
        }
        if i % 7 == 0:
            attrs["fast"] = True
        worker = WorkerUp(
            name=f"h{i:06d}", slots=32, attrs=attrs, resources={"mem": 64000.0, "tmp": 10000.0}
        )
        out.append(encoder.encode(worker))
    for i in range(int(500_000 * scale)):
        job = JobSubmitted(
            job_id=f"j{i}",
            user=f"u{i % 5}",
            queue="normal",
            submit_time=float(i),
            resreq=SHAPES[i % len(SHAPES)],
            min_tasks=1,
            max_tasks=1,
        )
        out.append(encoder.encode(job))
    out.append(encoder.encode(SessionBegin()))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_xce(url: str, *extra: str, profile: str | None = None) -> subprocess.Popen[bytes]:
    args = ["run", "--nats", url, *extra]
    if profile is None:
        command = [sys.executable, "-c", MAIN, *args]
    else:
        code = (
            "import cProfile, sys; from xce_core.cli._main import main; "
            f"sys.argv = ['xce', *{args!r}]; cProfile.run('main()', {profile!r})"
        )
        command = [sys.executable, "-c", code]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)


async def last_decision(js: Any, stream: str) -> tuple[int, dict[str, Any] | None]:
    try:
        info = await js.stream_info(stream)
    except nats.js.errors.NotFoundError:
        return 0, None
    if info.state.messages == 0:
        return 0, None
    msg = await js.get_msg(stream, info.state.last_seq)
    return info.state.messages, json.loads(msg.data)


async def decisions_reach(js: Any, stream: str, count: int) -> None:
    while True:
        if (await last_decision(js, stream))[0] >= count:
            return
        await asyncio.sleep(0.01)


async def throughput(url: str, server_pid: int, scale: float, profile: str | None) -> None:
    payloads = b1_payloads(scale)
    nc = await nats.connect(url, pending_size=256 << 20)
    js = nc.jetstream(publish_async_max_pending=20_000)
    await js.add_stream(StreamConfig(name="XCE_EVENTS", subjects=["xce.events"]))
    started = time.perf_counter()
    futures = [await js.publish_async("xce.events", p) for p in payloads]
    await asyncio.gather(*futures)
    publish_rate = len(payloads) / (time.perf_counter() - started)
    process = start_xce(url, "--snapshot-every", "10000000", profile=profile)
    try:
        while True:  # the service creates its consumer once it holds the lease
            try:
                await js.consumer_info("XCE_EVENTS", "xce")
                break
            except nats.js.errors.NotFoundError:
                await asyncio.sleep(0.01)
        started = time.perf_counter()
        xce_cpu, server_cpu = cpu_seconds(process.pid), cpu_seconds(server_pid)
        while True:  # every input message acked but the session_begin's
            info = await js.consumer_info("XCE_EVENTS", "xce")
            if info.ack_floor.stream_seq >= len(payloads) - 1:
                break
            await asyncio.sleep(0.05)
        ingested = time.perf_counter()
        xce_ingest_cpu = cpu_seconds(process.pid) - xce_cpu
        while True:
            count, last = await last_decision(js, "XCE_DECISIONS")
            if last is not None and last["type"] == "session_end":
                break
            await asyncio.sleep(0.05)
        done = time.perf_counter()
        xce_cpu = cpu_seconds(process.pid) - xce_cpu
        server_cpu = cpu_seconds(server_pid) - server_cpu
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        await nc.close()
    events = len(payloads)
    print(f"events                {events:,} (B1 x {scale}), published at {publish_rate:,.0f}/s")
    print(f"ingest                {events / (ingested - started):,.0f} events/s (applied, acked)")
    print(
        f"session + decisions   {count:,} decisions stored {done - ingested:.2f} s later "
        f"({count / (done - ingested):,.0f} decisions/s)"
    )
    print(
        f"end to end            {events / (done - started):,.0f} events/s "
        f"({done - started:.2f} s from the service starting on the backlog to the last "
        "decision stored)"
    )
    print(
        f"cpu                   xce {xce_cpu:.2f} s (ingest {xce_ingest_cpu:.2f} s, "
        f"session {xce_cpu - xce_ingest_cpu:.2f} s), nats-server {server_cpu:.2f} s"
    )


async def failover(url: str, ttl: float) -> float:
    tag = f"fo{int(ttl * 10)}"
    extra = [
        "--stream", f"IN_{tag}", "--subject", f"in.{tag}",
        "--decisions-stream", f"OUT_{tag}", "--decisions-subject", f"out.{tag}",
        "--durable", tag, "--lease-ttl", str(ttl),
    ]  # fmt: skip
    encoder = EventEncoder("ndjson")
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=f"IN_{tag}", subjects=[f"in.{tag}"]))
    for event in [WorkerUp(name="h1", slots=1_000_000), JobSubmitted(job_id="a"), SessionBegin()]:
        await js.publish(f"in.{tag}", encoder.encode(event))
    active = start_xce(url, *extra)
    standby = None
    try:
        await decisions_reach(js, f"OUT_{tag}", 2)
        standby = start_xce(url, *extra)
        await asyncio.sleep(1.0)
        active.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        await js.publish(f"in.{tag}", encoder.encode(JobSubmitted(job_id="b")))
        await js.publish(f"in.{tag}", encoder.encode(SessionBegin()))
        await decisions_reach(js, f"OUT_{tag}", 4)
        return time.perf_counter() - killed
    finally:
        for process in (active, standby):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(10)
        await nc.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--profile", metavar="FILE")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as store:
        server = NatsServer(Path(store))
        server.start()
        try:
            if not args.skip_throughput:
                assert server.process is not None
                await throughput(server.url, server.process.pid, args.scale, args.profile)
        finally:
            server.stop()
        for ttl in () if args.skip_failover else (1.0, 5.0):
            # A server each: the lease bucket's TTL is set when it is created.
            server = NatsServer(Path(store) / f"ttl{ttl:g}")
            server.start()
            try:
                took = await failover(server.url, ttl)
            finally:
                server.stop()
            print(
                f"failover (TTL {ttl:g} s)   {took:.2f} s from SIGKILL of the active to "
                "the standby's first new decision stored"
            )


if __name__ == "__main__":
    asyncio.run(main())
