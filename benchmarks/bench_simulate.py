"""Replay a trace (default: NASA iPSC/860): jobs/s for fcfs, strict FIFO, EASY and fairshare.

Usage: ``python benchmarks/bench_simulate.py [TRACE] [--limit N] [--every-instant]
[--repeat R]``. TRACE defaults to ``shared/traces/NASA-iPSC-1993-3.1-cln.swf.gz``
beside the checkout. Prints wall and CPU time (the CPU figure is the one to
compare on a busy machine) and the session counts; the best of ``--repeat`` runs.
For a big synthetic trace, with the whole command's time and memory, see
``bench_simulate_big.py``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import anyio

from xce_core import SchedulerConfig
from xce_core.runtime import tune_gc
from xce_core.sim._cluster import default_cluster
from xce_core.sim._replay import simulate
from xce_core.sim._report import SimResult
from xce_core.sim._swf import SwfJob, read_swf

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared/traces/NASA-iPSC-1993-3.1-cln.swf.gz"


POLICIES = {
    "fcfs": SchedulerConfig(),
    "strict-fifo": SchedulerConfig(strict_fifo=True),
    "easy": SchedulerConfig(backfill="easy"),
    "fairshare": SchedulerConfig(picker="fairshare"),
}


def replay(
    jobs: list[SwfJob], header: dict[str, str], config: SchedulerConfig, every: bool
) -> SimResult:
    cluster = default_cluster(header, jobs)

    async def main() -> SimResult:
        # As `xce simulate` without --schedule: where jobs ran is not kept.
        return await simulate(jobs, cluster, config=config, every_instant=every, keep_hosts=False)

    tune_gc()  # as `xce simulate` does
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N jobs")
    parser.add_argument("--every-instant", action="store_true", help="never skip sessions")
    parser.add_argument("--repeat", type=int, default=1, help="runs per policy (best kept)")
    args = parser.parse_args()

    started = time.perf_counter()
    trace = read_swf(args.trace, limit=args.limit)
    print(
        f"{args.trace.name}: {len(trace.jobs)} jobs, read in {time.perf_counter() - started:.2f} s"
    )
    print(f"{'policy':<22} {'wall s':>7} {'cpu s':>7} {'jobs/s':>8} {'sessions':>9} {'skipped':>8}"
          f" {'util':>6} {'wait mean':>10}")  # fmt: skip
    for config in POLICIES.values():
        best: tuple[float, float, SimResult] | None = None
        for _ in range(args.repeat):
            cpu = time.process_time()
            result = replay(trace.jobs, trace.header, config, args.every_instant)
            cpu = time.process_time() - cpu
            wall = result.summary.wall_time_s
            if best is None or wall < best[0]:
                best = (wall, cpu, result)
        assert best is not None
        wall, cpu, result = best
        s = result.summary
        print(
            f"{s.policy:<22} {wall:>7.2f} {cpu:>7.2f} {s.jobs / wall:>8.0f} {s.sessions:>9}"
            f" {s.sessions_skipped:>8} {s.utilisation:>6.1%} {s.wait_mean:>10.1f}"
        )


if __name__ == "__main__":
    main()
