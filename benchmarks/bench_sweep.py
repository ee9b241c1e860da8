"""A sweep of 8 runs, serially and on worker processes: wall times and their ratio.

Usage: ``python benchmarks/bench_sweep.py [TRACE] [--jobs N] [--limit N]``.
TRACE defaults to ``shared/traces/NASA-iPSC-1993-3.1-cln.swf.gz`` beside the
checkout (else a generated 10,000-job trace). The 8 runs: fcfs, strict FIFO,
EASY and fcfs with ``parjob_pack``, each on the trace's default cluster and on
half as many hosts of 2 slots. Each sweep starts from an empty cache; the
serial one runs in this process (``--jobs 1``), the other on ``--jobs``
worker processes (default 2), as ``xce sweep`` does. The target (issue #15):
8 runs on 2 processes at least 1.6 times faster than serially. On a machine
whose cores other work is using, the ratio says as much about that work.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from xce_core.sim import WorkloadModel, generate_jobs, read_swf, write_swf
from xce_core.sim.sweep import (
    ClusterVariant,
    PolicyVariant,
    ResultCache,
    SweepRun,
    TraceInput,
    file_sha256,
    run_sweep,
)

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared/traces/NASA-iPSC-1993-3.1-cln.swf.gz"

POLICIES = (
    PolicyVariant(name="fcfs"),
    PolicyVariant(name="strict-fifo", strict_fifo=True),
    PolicyVariant(name="easy", backfill="easy"),
    PolicyVariant(name="pack", parallel_allocator="parjob_pack"),
)


def runs(trace: Path, limit: int | None) -> list[SweepRun]:
    swf = read_swf(trace, limit=limit)
    procs = int(swf.header.get("MaxProcs", "0").split()[0] or 0) or max(j.size for j in swf.jobs)
    clusters = (
        ClusterVariant(name="default"),
        ClusterVariant(name=f"{procs // 2}x2", hosts=procs // 2, slots=2),
    )
    source = TraceInput(name=trace.name, path=str(trace), sha256=file_sha256(trace), limit=limit)
    return [SweepRun(trace=source, cluster=c, policy=p) for c in clusters for p in POLICIES]


def timed(sweep: list[SweepRun], jobs: int) -> tuple[float, float, float]:
    """Wall time of the sweep, and the sums of its runs' replay times and CPU
    times (when CPU time is well below wall time, other work had the cores)."""
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        outcome = run_sweep(sweep, ResultCache(Path(cache)), jobs=jobs)
        wall = time.perf_counter() - start
    assert outcome.ran == len(sweep), outcome.failures
    metrics = [record.metrics for _, record in outcome.rows]
    return wall, sum(m.wall_time_s for m in metrics), sum(m.cpu_time_s for m in metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        trace = args.trace
        if trace is None and DEFAULT_TRACE.exists():
            trace = DEFAULT_TRACE
        if trace is None:
            trace = Path(scratch, "generated.swf")
            with trace.open("w", encoding="utf-8") as out:
                write_swf(out, generate_jobs(WorkloadModel(jobs=10_000, procs=128, seed=1)))
        sweep = runs(trace, args.limit)
        print(f"{len(sweep)} runs of {trace.name}; load average {os.getloadavg()[0]:.1f}")
        serial, replays, cpu = timed(sweep, 1)
        print(f"serial         {serial:6.1f} s  (replays {replays:.1f} s, CPU {cpu:.1f} s)")
        parallel, replays, cpu = timed(sweep, args.jobs)
        label = f"{args.jobs} processes"
        print(f"{label:<14} {parallel:6.1f} s  (replays {replays:.1f} s, CPU {cpu:.1f} s)")
        print(f"speed-up       {serial / parallel:6.2f}x  (target 1.6x on 2 processes)")
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
