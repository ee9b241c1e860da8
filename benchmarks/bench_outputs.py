"""What writing ``xce simulate``'s outputs adds to a replay (default: NASA iPSC/860).

Usage: ``python benchmarks/bench_outputs.py [TRACE] [--limit N] [--repeat R]``.

For each output format it measures, best of ``--repeat`` runs (CPU time, the
figure to compare on a busy machine):

- the replay as ``xce simulate`` runs it without outputs (hosts not kept);
- the replay keeping where jobs ran and recording the time series (what
  ``--schedule`` and ``--timeseries`` ask of it), plus writing the schedule
  and the time series in that format.

and prints the added cost as a share of the plain replay. The target is at most
10% on the NASA trace. Parquet's figure includes importing pyarrow the first
time (a few hundred ms that a fresh ``xce simulate`` process pays once).

With ``--command`` it also times the whole ``xce simulate`` command (a fresh
process: start-up, reading the trace, the replay, the summary) without and
with ``--schedule``/``--timeseries``: what a user waits for (children's CPU
time, best of ``--repeat``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from xce_core.runtime import tune_gc
from xce_core.sim import (
    SimResult,
    SwfJob,
    default_cluster,
    read_swf,
    simulate,
    write_schedule,
    write_timeseries,
)

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared/traces/NASA-iPSC-1993-3.1-cln.swf.gz"
FORMATS = (("jsonl", "csv"), ("csv", "csv"), ("parquet", "parquet"))


def replay(jobs: list[SwfJob], header: dict[str, str], outputs: bool) -> SimResult:
    """The replay as ``xce simulate`` runs it: with ``outputs``, keeping where
    jobs ran and recording the time series, as --schedule and --timeseries ask."""
    cluster = default_cluster(header, jobs)

    async def main() -> SimResult:
        return await simulate(jobs, cluster, keep_hosts=outputs, keep_series=outputs)

    tune_gc()  # as `xce simulate` does
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N jobs")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (best kept)")
    parser.add_argument("--command", action="store_true", help="also time `xce simulate`")
    args = parser.parse_args()
    trace = read_swf(args.trace, limit=args.limit)
    print(f"{args.trace.name}: {len(trace.jobs)} jobs")

    base = min(_cpu(lambda: replay(trace.jobs, trace.header, False)) for _ in range(args.repeat))
    print(f"{'replay, no outputs':<34} {base:>7.3f} s cpu")
    with tempfile.TemporaryDirectory() as tmp:
        for schedule_fmt, series_fmt in FORMATS:
            schedule = Path(tmp) / f"schedule.{schedule_fmt}"
            series = Path(tmp) / f"series.{series_fmt}"
            best = write_best = rows = None
            for _ in range(args.repeat):
                started = time.process_time()
                result = replay(trace.jobs, trace.header, True)
                replayed = time.process_time()
                rows = write_schedule(schedule, result.jobs)
                write_timeseries(series, result.jobs)
                done = time.process_time()
                if best is None or done - started < best:
                    best, write_best = done - started, done - replayed
            assert best is not None
            assert write_best is not None
            label = f"replay + {schedule_fmt} schedule + {series_fmt} series"
            print(
                f"{label:<34} {best:>7.3f} s cpu  (+{best - base:.3f} s, {best / base - 1:+.1%};"
                f" writing {write_best:.3f} s, {rows:,} rows,"
                f" {schedule.stat().st_size / 1e6:.1f} MB + {series.stat().st_size / 1e6:.1f} MB)"
            )
    if args.command:
        command(args.trace, args.repeat)


def command(trace: Path, repeat: int) -> None:
    """The whole ``xce simulate`` command, without and with each format's outputs."""
    xce = [str(Path(sys.executable).with_name("xce"))]  # the venv's console script

    def best(extra: list[str]) -> float:
        times = []
        for _ in range(repeat):
            before = os.times()
            subprocess.run([*xce, "simulate", str(trace), "-q", *extra], check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            after = os.times()
            times.append(
                after.children_user + after.children_system
                - before.children_user - before.children_system
            )  # fmt: skip
        return min(times)

    base = best([])
    print(f"{'xce simulate, no outputs':<34} {base:>7.3f} s cpu")
    with tempfile.TemporaryDirectory() as tmp:
        for schedule_fmt, series_fmt in FORMATS:
            out = [
                "--schedule", str(Path(tmp) / f"schedule.{schedule_fmt}"),
                "--timeseries", str(Path(tmp) / f"series.{series_fmt}"),
            ]  # fmt: skip
            cost = best(out)
            label = f"xce simulate + {schedule_fmt} + {series_fmt}"
            added = cost - base
            print(f"{label:<34} {cost:>7.3f} s cpu  (+{added:.3f} s, {added / base:+.1%})")


def _cpu(run: object) -> float:
    assert callable(run)
    started = time.process_time()
    run()
    return time.process_time() - started


if __name__ == "__main__":
    main()
