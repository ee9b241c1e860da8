"""Allocation benchmarks B1–B8 (issue "Allocation layer"). Run by hand:

    python benchmarks/bench_alloc.py [--loop uvloop|asyncio|both] [--only B1,B4] [--scale 0.1]

Prints one line per figure. ``--scale`` shrinks job and worker counts for a
quick look (the targets are stated for scale 1).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from events import JobSubmitted, WorkerUp
from xce_core import SchedulerConfig, SchedulerCore

SHAPES = [
    "",
    "select[type==a]",
    "select[type==b]",
    "rusage[mem=100]",
    "select[type==a] rusage[mem=500]",
    "select[type==b] rusage[mem=1000]",
    "select[mem>2000]",
    "select[type==c && mem>100]",
    "order[-mem]",
    "select[type==a] order[mem]",
    "rusage[mem=50:tmp=10]",
    "select[model==m1]",
    "select[model==m2] rusage[mem=200]",
    "select[type==a || type==b]",
    "select[!(type==c)]",
    "select[ncpus>=32]",
    "rusage[tmp=100]",
    "select[defined(fast)]",
    "select[type==b && model==m1]",
    "select[model!=m1] rusage[mem=10]",
]


def workers(core: SchedulerCore, n: int, slots: int) -> None:
    rng = random.Random(1)
    for i in range(n):
        attrs: dict[str, Any] = {
            "type": rng.choice("abc"),
            "model": rng.choice(["m1", "m2"]),
            "ncpus": slots,
        }
        if i % 7 == 0:
            attrs["fast"] = True
        core.apply(
            WorkerUp(
                name=f"h{i:06d}",
                slots=slots,
                attrs=attrs,
                resources={"mem": 64000.0, "tmp": 10000.0},
            )
        )


def submit(core: SchedulerCore, n: int, shapes: list[str], tasks: Callable[[int], int]) -> None:
    for i in range(n):
        t = tasks(i)
        core.apply(
            JobSubmitted(
                job_id=f"j{i}",
                user=f"u{i % 5}",
                queue="normal",
                submit_time=float(i),
                resreq=shapes[i % len(shapes)],
                min_tasks=t,
                max_tasks=t,
            )
        )
    core.take_decisions()


async def timed_session(core: SchedulerCore) -> tuple[float, int]:
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        await core.run_session()
        elapsed = time.perf_counter() - started
    finally:
        gc.enable()
    return elapsed, len(core.take_decisions()) - 1


def report(name: str, value: str, target: str) -> None:
    print(f"{name:<4} {value:<46} target {target}")


async def b1(scale: float) -> None:
    core = SchedulerCore()
    workers(core, int(10_000 * scale), 32)
    njobs = int(500_000 * scale)
    submit(core, njobs, SHAPES, lambda i: 1)
    elapsed, decisions = await timed_session(core)
    report(
        "B1",
        f"{njobs / elapsed:,.0f} jobs decided/s ({decisions:,} decisions, {elapsed:.2f} s)",
        ">= 100,000 decisions/s",
    )
    # The next session compacts the groups B1 emptied; then steady state.
    elapsed, _ = await timed_session(core)
    steady, _ = await timed_session(core)
    report(
        "B1'",
        f"next session {elapsed * 1000:.0f} ms (compaction), then {steady * 1000:.1f} ms",
        "(information)",
    )


async def b8(scale: float) -> None:
    """500,000 pending jobs of 20 shapes on a full cluster: none can run."""
    core = SchedulerCore()
    nworkers = int(10_000 * scale)
    workers(core, nworkers, 32)
    submit(core, nworkers, [""], lambda i: 32)  # fill every slot
    await timed_session(core)
    njobs = int(500_000 * scale)
    for i in range(njobs):
        core.apply(
            JobSubmitted(
                job_id=f"p{i}",
                user=f"u{i % 5}",
                queue="normal",
                submit_time=float(i),
                resreq=SHAPES[i % len(SHAPES)],
                min_tasks=1 + (i % 20 == 0),
                max_tasks=1 + (i % 20 == 0),
            )
        )
    core.take_decisions()
    first, decisions = await timed_session(core)
    steady, _ = await timed_session(core)
    report(
        "B8",
        f"{steady * 1000:.1f} ms per session over {njobs:,} pending "
        f"(first one, reporting {decisions:,} pends: {first:.2f} s)",
        "<= 50 ms",
    )


async def b2(scale: float) -> None:
    core = SchedulerCore()
    workers(core, int(10_000 * scale), 32)
    rng = random.Random(2)
    sizes = [rng.choice([2, 4, 8, 16, 32, 64, 128, 256, rng.randint(2, 256)]) for _ in range(64)]
    njobs = int(50_000 * scale)
    submit(core, njobs, SHAPES[:4], lambda i: sizes[i % len(sizes)])
    elapsed, decisions = await timed_session(core)
    report(
        "B2",
        f"{njobs / elapsed:,.0f} jobs decided/s ({decisions:,} decisions, {elapsed:.2f} s)",
        ">= 20,000 decisions/s",
    )


async def b3(scale: float) -> None:
    """Identical unsatisfiable jobs, cache on vs off. With the cache off every job
    pays a full attempt and a full reason (a pass over the hosts), so the off run
    is measured on fewer jobs and scaled linearly to the same count."""
    njobs = int(100_000 * scale)
    results = {}
    for cache in (True, False):
        core = SchedulerCore(SchedulerConfig(unsatisfiable_cache=cache))
        workers(core, int(10_000 * scale), 32)
        measured = njobs if cache else max(1, njobs // 50)
        submit(core, measured, ["rusage[mem=100000]"], lambda i: 1)
        first, _ = await timed_session(core)
        steady, _ = await timed_session(core)
        factor = njobs / measured
        results[cache] = (first * factor, steady * factor)
    (on1, on2), (off1, off2) = results[True], results[False]
    report(
        "B3",
        f"steady session {off2 / on2:,.0f}x faster with cache "
        f"({on2 * 1000:.1f} ms vs {off2:.1f} s)",
        ">= 100x",
    )
    report(
        "B3'",
        f"first session {off1 / on1:,.0f}x faster "
        f"({on1 * 1000:.0f} ms vs {off1:.1f} s, every pend reported)",
        "(information)",
    )


async def b4(scale: float) -> None:
    core = SchedulerCore()
    workers(core, int(10_000 * scale), 1)
    submit(core, 1, [""], lambda i: 1024)
    elapsed, _ = await timed_session(core)
    report("B4", f"{elapsed * 1000:.1f} ms for one 1,024-task job", "<= 20 ms")


async def b7(scale: float) -> None:
    core = SchedulerCore()
    workers(core, int(10_000 * scale), 32)
    submit(core, int(200_000 * scale), SHAPES, lambda i: 1 + i % 3)
    stopped_at = 0.0
    cancel_at = 0.0

    async def run() -> None:
        nonlocal stopped_at
        await core.run_session()
        stopped_at = time.perf_counter()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.sleep(0.2)
        cancel_at = time.perf_counter()
        core.cancel_session()
    allocated = core.last_session.allocated if core.last_session else 0
    report(
        "B7",
        f"{(stopped_at - cancel_at) * 1000:.3f} ms from cancel to stop ({allocated:,} committed)",
        "<= 1 ms",
    )


BENCHES: dict[str, Callable[[float], Coroutine[Any, Any, None]]] = {
    "B1": b1,
    "B2": b2,
    "B3": b3,
    "B4": b4,
    "B7": b7,
    "B8": b8,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", choices=["uvloop", "asyncio", "both"], default="both")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated names")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    loops = ["uvloop", "asyncio"] if args.loop == "both" else [args.loop]
    for loop in loops:
        print(f"--- {loop} (scale {args.scale})")
        for name in args.only.split(","):
            bench = BENCHES[name.strip().upper()]
            options = {"use_uvloop": loop == "uvloop"}
            anyio.run(bench, args.scale, backend="asyncio", backend_options=options)
    _ = asyncio


if __name__ == "__main__":
    main()
