"""Issue #11 item 5: the cost of ``xce simulate`` on a big synthetic trace.

    python benchmarks/bench_simulate_big.py [--jobs 200000] [--procs 1024]
        [--seed 3] [--load 0.7] [--trace PATH] [--repeat R] [--strict-fifo]
        [--schedule]

Makes the trace with ``xce generate-trace`` (into ``--trace``, default a file in
the temporary directory, reused when it exists), then runs ``xce simulate`` on
it in a fresh process per run, as a user would. Per run prints the wall time of
the whole command, its CPU time, its peak resident memory, and the replay's own
loop time and jobs/s (from ``--json``). Targets for the default trace: at most
10 s and 300 MB. ``--schedule`` also writes every job's outcome (to the
temporary directory), which keeps where every job ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# ``xce`` from this interpreter, wherever its script is installed.
XCE = [sys.executable, "-c", "import sys; from xce_core.cli import main; sys.exit(main())"]


def make_trace(path: Path, jobs: int, procs: int, seed: int, load: float) -> None:
    if path.exists():
        print(f"{path}: reused")
        return
    started = time.perf_counter()
    options = ["--jobs", str(jobs), "--procs", str(procs), "--seed", str(seed)]
    subprocess.run([*XCE, "generate-trace", str(path), *options, "--load", str(load)], check=True)
    print(f"{path}: generated in {time.perf_counter() - started:.1f} s")


def run_once(trace: Path, extra: list[str]) -> tuple[float, float, float, dict[str, Any]]:
    """One ``xce simulate --json`` in a child process: its wall s, CPU s, peak MB
    and summary. Peak memory is read from the child's own rusage, so each run
    needs a fresh process (the maximum over children only grows)."""
    script = (
        "import json, resource, sys\n"
        "from xce_core.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    usage = resource.getrusage(resource.RUSAGE_SELF)\n"
        "    print(json.dumps([usage.ru_maxrss, usage.ru_utime + usage.ru_stime]),"
        " file=sys.stderr)\n"
        "    raise\n"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, "simulate", str(trace), "--json", *extra],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    peak_kb, cpu = json.loads(done.stderr.strip().splitlines()[-1])
    return wall, cpu, peak_kb / 1024, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--procs", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--load", type=float, default=0.7)
    parser.add_argument("--trace", type=Path, help="where the trace is made (or reused)")
    parser.add_argument("--repeat", type=int, default=1, help="runs, at least 1 (each printed)")
    parser.add_argument("--strict-fifo", action="store_true")
    parser.add_argument("--schedule", action="store_true", help="also write --schedule")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    tmp = Path(tempfile.gettempdir())
    name = f"xce-big-{args.jobs}-{args.procs}-{args.seed}-{args.load:g}.swf.gz"
    trace = args.trace or tmp / name
    make_trace(trace, args.jobs, args.procs, args.seed, args.load)
    extra = ["--strict-fifo"] if args.strict_fifo else []
    schedule = tmp / f"xce-big-schedule-{os.getpid()}.jsonl"
    if args.schedule:
        extra += ["--schedule", str(schedule)]
    print(f"{'run':>3} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'loop s':>7} {'jobs/s':>7}")
    try:
        for run in range(1, args.repeat + 1):
            wall, cpu, peak, summary = run_once(trace, extra)
            loop, rate = summary["wall_time_s"], summary["jobs_per_s"]
            print(f"{run:>3} {wall:>7.1f} {cpu:>7.1f} {peak:>8.0f} {loop:>7.1f} {rate:>7.0f}")
    finally:
        schedule.unlink(missing_ok=True)
    print(f"policy {summary['policy']}, {summary['jobs']} jobs, {summary['sessions']} sessions")


if __name__ == "__main__":
    main()
