"""B10 (issue #12, backfill): a live session with EASY against one without.

    python benchmarks/bench_backfill.py [--scale 0.1]

B1's cluster (10,000 workers x 32 slots), 500,000 pending jobs in B1's 20
shapes, 10% of them wide (64 to 512 tasks), every job with a run limit (1 min
to 10 h). The same stream goes to a core with ``backfill="none"`` and one with
``backfill="easy"``; each runs two sessions: the first fills the cluster, then
2,000 running jobs finish and the second runs. Prints each session's time for
both and the ratio (target: EASY within 3x of none).
"""

from __future__ import annotations

import argparse
import random

import anyio
from bench_alloc import SHAPES, report, timed_session, workers

from events import JobFinished, JobSubmitted
from xce_core import SchedulerConfig, SchedulerCore, VirtualClock
from xce_core.runtime import loop_options


def stream(n: int) -> list[JobSubmitted]:
    rng = random.Random(10)
    out = []
    for i in range(n):
        wide = rng.random() < 0.1
        tasks = rng.randint(64, 512) if wide else 1
        out.append(
            JobSubmitted(
                job_id=f"j{i}",
                user=f"u{rng.randrange(2000)}",
                submit_time=float(i),
                resreq=SHAPES[i % len(SHAPES)] if not wide else "",
                max_tasks=tasks,
                run_limit=float(rng.randint(60, 36_000)),
            )
        )
    return out


async def sessions(backfill: str, scale: float, jobs: list[JobSubmitted]) -> tuple[float, float]:
    clock = VirtualClock()
    core = SchedulerCore(SchedulerConfig(backfill=backfill), clock=clock)
    workers(core, int(10_000 * scale), 32)
    for job in jobs:
        core.apply(job)
    core.take_decisions()
    first, _ = await timed_session(core)
    clock.advance_to(100.0)
    rng = random.Random(11)
    running = [j for j, job in core.state.jobs.items() if job.state.value == "running"]
    for job_id in rng.sample(running, min(int(2000 * scale) or 1, len(running))):
        core.apply(JobFinished(job_id=job_id))
    core.take_decisions()
    second, _ = await timed_session(core)
    return first, second


async def b10(scale: float) -> None:
    jobs = stream(int(500_000 * scale))
    none = await sessions("none", scale, jobs)
    easy = await sessions("easy", scale, jobs)
    for i, what in enumerate(("session 1 (fills)", "after 2,000 finishes")):
        report(
            "B10",
            f"{what}: none {none[i]:.3f} s, easy {easy[i]:.3f} s ({easy[i] / none[i]:.1f}x)",
            "easy <= 3x none",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    anyio.run(b10, args.scale, backend="asyncio", backend_options=loop_options())


if __name__ == "__main__":
    main()
