"""Fairshare and limits benchmarks (issue "Policies that sites run"). Run by hand:

    python benchmarks/bench_fairshare.py [--scale 0.1] [--only B11,B12] [--rounds 5]

B11: B1's cluster and stream (10,000 workers x 32 slots, 500,000 one-task jobs
of 20 shapes) with the jobs spread over 2,000 users, once with the ``fcfs``
picker and once with ``fairshare`` (every user an equal share). Target: the
fairshare rate at least 70% of the fcfs rate.

B12: B9's deep queue (400,000 jobs from 2,000 users; session 1 fills the
cluster, 1,000 jobs finish, session 2 runs) with ``fcfs`` and no limit, then
with ``fairshare`` and a per-user slot limit (SLOTS=200 PER_USER). Target: the
second session within 2x of the fcfs figure. One such session takes tens of
milliseconds, within this machine's noise: B12 runs ``--rounds`` of them (1,000
finishes, then a session; the first is B9's) and compares the medians, giving
each side's spread and the first round's ratio too.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from bench_alloc import SHAPES, report, timed_session, workers
from bench_queue import deep_queue, more_rounds

from events import JobSubmitted, Limit, LimitsConfig
from xce_core import SchedulerConfig, SchedulerCore, VirtualClock
from xce_core.runtime import loop_options


def core_for(picker: str) -> SchedulerCore:
    return SchedulerCore(SchedulerConfig(picker=picker), clock=VirtualClock())


async def b11(scale: float, rounds: int) -> None:
    rates = {}
    for picker in ("fcfs", "fairshare"):
        core = core_for(picker)
        workers(core, int(10_000 * scale), 32)
        njobs = int(500_000 * scale)
        for i in range(njobs):
            core.apply(
                JobSubmitted(
                    job_id=f"j{i}",
                    user=f"u{i % 2000}",
                    queue="normal",
                    submit_time=float(i),
                    resreq=SHAPES[i % len(SHAPES)],
                )
            )
        core.take_decisions()
        elapsed, decisions = await timed_session(core)
        rates[picker] = njobs / elapsed
        report(
            "B11",
            f"{picker}: {rates[picker]:,.0f} jobs/s ({decisions:,} decisions, {elapsed:.2f} s)",
            "(information)",
        )
    ratio = rates["fairshare"] / rates["fcfs"]
    report("B11", f"fairshare / fcfs: {ratio:.0%}", ">= 70%")


async def fair_queue(
    scale: float, picker: str, limit: bool, rounds: int
) -> tuple[float, list[float], float]:
    """The session that fills the cluster, ``rounds`` sessions after 1,000
    finishes (the first is B9's), and the one with nothing changed after B9's."""
    core = core_for(picker)
    if limit:
        core.apply(LimitsConfig(limits=[Limit(name="per_user", per_user=["all"], slots=200)]))
    (fill, _), (after, _), (unchanged, _) = await deep_queue(core, scale)
    return fill, [after, *await more_rounds(core, rounds - 1)], unchanged


async def b12(scale: float, rounds: int) -> None:
    base = await fair_queue(scale, "fcfs", limit=False, rounds=rounds)
    fair = await fair_queue(scale, "fairshare", limit=True, rounds=rounds)
    for name, (fill, after, unchanged) in (("fcfs", base), ("fairshare+limit", fair)):
        ms = sorted(seconds * 1000 for seconds in after)
        report(
            "B12",
            f"{name}: fill {fill:.2f} s; after 1,000 finishes median"
            f" {statistics.median(ms):.1f} ms ({ms[0]:.1f}-{ms[-1]:.1f}, {len(ms)} rounds);"
            f" unchanged {unchanged * 1000:.2f} ms",
            "(information)",
        )
    ratio = statistics.median(fair[1]) / statistics.median(base[1])
    first = fair[1][0] / base[1][0]
    report("B12", f"after 1,000 finishes: {ratio:.2f}x fcfs (first round {first:.2f}x)", "<= 2x")


BENCHES: dict[str, Callable[[float, int], Coroutine[Any, Any, None]]] = {"B11": b11, "B12": b12}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated names")
    parser.add_argument(
        "--rounds", type=int, default=5, help="B12: sessions after 1,000 finishes, per picker"
    )
    args = parser.parse_args()
    for name in args.only.split(","):
        anyio.run(
            BENCHES[name.strip().upper()],
            args.scale,
            args.rounds,
            backend="asyncio",
            backend_options=loop_options(),
        )


if __name__ == "__main__":
    main()
