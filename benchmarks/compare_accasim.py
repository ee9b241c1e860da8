"""Replay one SWF trace through AccaSim's FIFO and ``xce simulate --strict-fifo``
side by side: compare every start time, and the wall times. Run by hand:

    pip install accasim      # not a dependency of xce; any venv will do
    python benchmarks/compare_accasim.py TRACE [--hosts N] [--limit N]

The cluster is ``xce simulate``'s default for the trace (one one-slot host per
processor of the header's MaxProcs, else MaxNodes), or ``--hosts`` one-slot
hosts; AccaSim gets the same as one group of one-core nodes. AccaSim's
``FirstInFirstOut`` is strict (when the first queued job cannot start, none
behind it does), with its ``FirstFit`` allocator; xce runs ``--strict-fifo``.
Both take a job's size from its requested processors (field 8), else its
allocated ones (field 5), and run it for its run time.

Prints the number of jobs whose start times differ (the first few of them),
and every instant where AccaSim's own schedule holds more processors than the
cluster has (an overcommit: its starts from there on cannot be matched by a
scheduler that keeps to the cluster's capacity), then both wall times (each a
fresh process, start-up included; AccaSim writes its schedule file, which it
needs to be compared, and xce its ``--schedule``).

AccaSim 1.1.3 imports ``collections.Mapping`` (gone since Python 3.10): the
AccaSim run is started with that name put back.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xce_core.sim import default_cluster, read_swf

ACCASIM_RUN = """
import collections, collections.abc, sys
collections.Mapping = collections.abc.Mapping
collections.Iterable = collections.abc.Iterable
from accasim.base.simulator_class import Simulator
from accasim.base.scheduler_class import FirstInFirstOut
from accasim.base.allocator_class import FirstFit
workload, config, results = sys.argv[1:4]
simulator = Simulator(
    workload, config, FirstInFirstOut(FirstFit()), RESULTS_FOLDER_PATH=results,
    STATISTICS_OUTPUT=False, PPRINT_OUTPUT=False, BENCHMARK_OUTPUT=False,
)
simulator.start_simulation(system_status=False)
"""


def accasim_starts(schedule: Path) -> dict[str, tuple[float, float, int]]:
    """Job id -> (start, end, processors) from AccaSim's schedule file
    (``id;user;submit__nodes__start;end;cores;...`` with UTC date-times)."""

    def seconds(text: str) -> float:
        at = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
        return at.replace(tzinfo=datetime.UTC).timestamp()

    out = {}
    for line in schedule.read_text().splitlines():
        head, _, tail = line.split("__")
        first, rest = head.split(";"), tail.split(";")
        out[first[0]] = (seconds(rest[0]), seconds(rest[1]), int(rest[2]))
    return out


def overcommits(jobs: dict[str, tuple[float, float, int]], total: int) -> list[tuple[float, int]]:
    """Instants where the jobs running hold more than ``total`` processors."""
    changes = sorted(
        [(end, -procs) for start, end, procs in jobs.values() if end > start]
        + [(start, procs) for start, end, procs in jobs.values() if end > start]
    )
    used, found = 0, []
    for at, delta in changes:
        used += delta
        if used > total:
            found.append((at, used))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--hosts", type=int, default=None, help="one-slot hosts (default: xce's)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs")
    parser.add_argument("--python", default=sys.executable, help="the Python that has AccaSim")
    args = parser.parse_args()
    trace = read_swf(args.trace, limit=args.limit)
    hosts = args.hosts or default_cluster(trace.header, trace.jobs).total_slots
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        swf = work / "trace.swf"
        opener = gzip.open if args.trace.suffix == ".gz" else open
        with opener(args.trace, "rt") as src:
            lines = src.read().splitlines()
        if args.limit is not None:
            jobs = [line for line in lines if line.strip() and not line.startswith(";")]
            lines = jobs[: args.limit]
        swf.write_text("\n".join(lines) + "\n")
        config = work / "system.json"
        config.write_text(
            json.dumps(
                {
                    "system_name": "xce-compare",
                    "start_time": 0,
                    "equivalence": {},
                    "groups": {"g0": {"core": 1, "mem": 10**9}},
                    "resources": {"g0": hosts},
                }
            )
        )
        started = time.perf_counter()
        ran = subprocess.run(
            [args.python, "-c", ACCASIM_RUN, str(swf), str(config), str(work / "accasim")],
            capture_output=True,
            text=True,
        )
        accasim_s = time.perf_counter() - started
        if ran.returncode != 0:
            last = (ran.stderr.strip().splitlines() or ["(no output)"])[-1]
            sys.exit(f"AccaSim failed under {args.python} ({last}); pip install accasim there")
        acc = accasim_starts(work / "accasim" / "sched-trace.swf")
        schedule = work / "xce.jsonl"
        started = time.perf_counter()
        subprocess.run(
            [str(Path(sys.executable).with_name("xce")), "simulate", str(swf), "--strict-fifo",
             "--hosts", str(hosts), "--schedule", str(schedule), "-q"],
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        xce_s = time.perf_counter() - started
        xce = {row["job_id"]: row["start"] for row in map(json.loads, schedule.open())}
    differ = [j for j in xce if j in acc and acc[j][0] != xce[j]]
    print(f"{args.trace.name}: {len(xce):,} jobs on {hosts} one-slot hosts")
    print(f"AccaSim scheduled {len(acc):,}; start times differ for {len(differ):,}")
    for j in differ[:5]:
        print(f"  job {j}: AccaSim {acc[j][0]:.0f}, xce {xce[j]}")
    over = overcommits(acc, hosts)
    if over:
        at, used = over[0]
        print(f"AccaSim overcommits the cluster at {len(over)} instant(s), first at {at:.0f}:")
        print(f"  {used} processors in use of {hosts}")
    print(f"wall: AccaSim {accasim_s:.2f} s, xce {xce_s:.2f} s ({accasim_s / xce_s:.1f}x)")


if __name__ == "__main__":
    main()
