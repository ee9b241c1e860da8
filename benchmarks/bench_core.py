"""Core benchmarks (issue "Scheduling core"). Run by hand:

    python benchmarks/bench_core.py [--loop uvloop|asyncio|both]

Prints events applied per second (batched through ``SchedulerCore.apply``, and
decoded from NDJSON then applied), and the cost of a session with an empty
queue (small and 10,000-worker clusters).
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

import anyio
import msgspec

from events import EventDecoder, InputEvent, JobFinished, JobSubmitted, WorkerUp
from xce_core import SchedulerCore


def event_mix(n_jobs: int, n_workers: int) -> list[InputEvent]:
    events: list[InputEvent] = [
        WorkerUp(
            name=f"h{i:05d}",
            slots=32,
            attrs={"type": "x86_64", "model": "m1"},
            resources={"mem": 64000.0},
        )
        for i in range(n_workers)
    ]
    shapes = ["", "select[type==x86_64] rusage[mem=100]", "span[ptile=4]", "order[-mem]"]
    for i in range(n_jobs):
        events.append(
            JobSubmitted(
                job_id=f"j{i}",
                user=f"u{i % 50}",
                queue="normal",
                submit_time=float(i),
                resreq=shapes[i % len(shapes)],
                min_tasks=1 + i % 4,
                max_tasks=1 + i % 4,
            )
        )
    return events


def bench_apply(events: list[InputEvent]) -> float:
    core = SchedulerCore()
    gc.collect()
    started = time.perf_counter()
    for event in events:
        core.apply(event)
    return len(events) / (time.perf_counter() - started)


def bench_decode_apply(events: list[InputEvent]) -> float:
    payload = msgspec.json.Encoder().encode_lines(events)
    core = SchedulerCore()
    decoder: EventDecoder[Any] = EventDecoder("ndjson")
    gc.collect()
    started = time.perf_counter()
    for offset in range(0, len(payload), 1 << 16):
        for item in decoder.feed(payload[offset : offset + (1 << 16)]):
            core.apply(item)
    for item in decoder.close():
        core.apply(item)
    return len(events) / (time.perf_counter() - started)


async def bench_empty_sessions(workers: int, sessions: int) -> float:
    core = SchedulerCore()
    for event in event_mix(0, workers):
        core.apply(event)
    started = time.perf_counter()
    for _ in range(sessions):
        await core.run_session()
    core.take_decisions()
    return (time.perf_counter() - started) / sessions


def bench_finish_cycle(n: int) -> float:
    """submit + finish event pairs applied (the simulator's steady diet)."""
    core = SchedulerCore()
    for event in event_mix(0, 100):
        core.apply(event)
    started = time.perf_counter()
    for i in range(n):
        core.apply(JobSubmitted(job_id=f"x{i}", submit_time=float(i)))
        core.apply(JobFinished(job_id=f"x{i}"))  # rejected (pending): exercises the error path
    core.take_decisions()
    return 2 * n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", choices=["uvloop", "asyncio", "both"], default="both")
    args = parser.parse_args()
    events = event_mix(200_000, 10_000)
    print(f"events applied/s (batched apply)            {bench_apply(events):>12,.0f}")
    print(f"events applied/s (NDJSON decode + apply)    {bench_decode_apply(events):>12,.0f}")
    print(f"events applied/s (submit + bad finish)      {bench_finish_cycle(50_000):>12,.0f}")
    loops = ["uvloop", "asyncio"] if args.loop == "both" else [args.loop]
    for loop in loops:
        options = {"use_uvloop": loop == "uvloop"}
        for workers, sessions in ((100, 5000), (10_000, 500)):
            cost = anyio.run(
                bench_empty_sessions, workers, sessions, backend="asyncio", backend_options=options
            )
            print(f"empty session, {workers:>6,} workers ({loop:<7})    {cost * 1e6:>12,.1f} µs")


if __name__ == "__main__":
    main()
