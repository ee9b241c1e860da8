"""B9 (issue "Sessions that cost what they decide"): a deep, diverse queue.

    python benchmarks/bench_queue.py [--scale 0.1]

10,000 workers x 32 slots; 400,000 sequential jobs from 2,000 users (user drawn
at random per job), the 20 shapes of B1. Session 1 fills the cluster; then
1,000 running jobs finish and session 2 runs (target <= 50 ms); then session 3
runs with nothing changed (target <= 1 ms). Prints one line per figure.
"""

from __future__ import annotations

import argparse
import random

import anyio
from bench_alloc import SHAPES, report, timed_session, workers

from events import JobFinished, JobSubmitted
from xce_core import SchedulerCore
from xce_core.runtime import loop_options


async def deep_queue(
    core: SchedulerCore, scale: float
) -> tuple[tuple[float, int], tuple[float, int], tuple[float, int]]:
    """B9's three sessions on ``core``: (seconds, decisions) of the one that
    fills the cluster, the one after 1,000 finishes, and one with nothing
    changed. Also ``bench_fairshare.py``'s B12."""
    workers(core, int(10_000 * scale), 32)
    rng = random.Random(9)
    for i in range(int(400_000 * scale)):
        core.apply(
            JobSubmitted(
                job_id=f"j{i}",
                user=f"u{rng.randrange(2000)}",
                submit_time=float(i),
                resreq=SHAPES[i % len(SHAPES)],
                max_tasks=1,
            )
        )
    core.take_decisions()
    fill = await timed_session(core)
    running = [job_id for job_id, job in core.state.jobs.items() if job.state.value == "running"]
    for job_id in rng.sample(running, min(1000, len(running))):
        core.apply(JobFinished(job_id=job_id))
    core.take_decisions()
    after = await timed_session(core)
    return fill, after, await timed_session(core)


async def more_rounds(core: SchedulerCore, rounds: int, seed: int = 10) -> list[float]:
    """``rounds`` more of B9's second session on ``core`` (after
    :func:`deep_queue`): each time 1,000 running jobs finish, then a session
    runs. Its seconds, one per round."""
    rng = random.Random(seed)
    times = []
    for _ in range(rounds):
        jobs = core.state.jobs.items()
        running = [job_id for job_id, job in jobs if job.state.value == "running"]
        for job_id in rng.sample(running, min(1000, len(running))):
            core.apply(JobFinished(job_id=job_id))
        core.take_decisions()
        times.append((await timed_session(core))[0])
    return times


async def b9(scale: float) -> None:
    (first, started), (second, decided), (third, _) = await deep_queue(SchedulerCore(), scale)
    report("B9", f"session 1: {first:.2f} s ({started:,} decisions)", "(information)")
    report(
        "B9", f"after 1,000 finishes: {second * 1000:.1f} ms ({decided:,} decisions)", "<= 50 ms"
    )
    report("B9'", f"nothing changed: {third * 1000:.2f} ms", "<= 1 ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    anyio.run(b9, args.scale, backend="asyncio", backend_options=loop_options())


if __name__ == "__main__":
    main()
