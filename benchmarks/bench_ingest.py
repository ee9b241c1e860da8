"""B5 (issue #11 item 4, "cheap ingest"): NDJSON through ``xce run``, no session.

    python benchmarks/bench_ingest.py [--jobs 500000] [--workers 10000] [--subprocess]

Writes a stream to a temporary file: ``--workers`` ``worker_up`` lines (the
workers of B1), then ``--jobs`` ``job_submitted`` lines from 2,000 users (drawn
at random per job) in the 20 shapes of B1, one task each, and no
``session_begin``, so every job stays pending. The stream goes through the very
function ``xce run`` uses (:func:`~xce_core.cli._run.consume`, on the event loop
and collector settings of the command line), read from the file in ``xce run``'s
chunks. Prints events per second (all lines over the time ``consume`` took, in
wall and in CPU seconds: other processes on the machine slow the first) and
resident bytes per pending job: the growth of the resident set
(``/proc/self/statm``) while the job lines were consumed, over the number of
jobs; the workers are consumed first, in a call of their own, so their memory
is not counted. With ``--subprocess`` it also times ``xce run --input FILE``
as a child process, start-up included, and reports its peak resident set
(``ru_maxrss``). Targets: >= 300,000 events/s, <= 400 bytes per pending job.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import msgspec
from bench_alloc import SHAPES

from xce_core import SchedulerConfig, SchedulerCore
from xce_core.cli._run import FdReceiveStream, consume
from xce_core.runtime import run_async

_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    """The resident set of this process now (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


def write_workers(path: str, n: int) -> None:
    """``n`` ``worker_up`` lines (B1's workers: 32 slots, mem and tmp) at ``path``."""
    rng = random.Random(1)
    with open(path, "wb") as f:
        for i in range(n):
            attrs: dict[str, Any] = {
                "type": rng.choice("abc"),
                "model": rng.choice(["m1", "m2"]),
                "ncpus": 32,
            }
            if i % 7 == 0:
                attrs["fast"] = True
            line = {
                "type": "worker_up",
                "name": f"h{i:06d}",
                "slots": 32,
                "attrs": attrs,
                "resources": {"mem": 64000.0, "tmp": 10000.0},
            }
            f.write(msgspec.json.encode(line) + b"\n")


def write_jobs(path: str, n: int) -> None:
    """``n`` one-task ``job_submitted`` lines at ``path``: 2,000 users, B1's shapes."""
    rng = random.Random(5)
    encode = msgspec.json.encode
    with open(path, "wb") as f:
        for start in range(0, n, 10_000):
            lines = [
                encode(
                    {
                        "type": "job_submitted",
                        "job_id": f"j{i}",
                        "user": f"u{rng.randrange(2000)}",
                        "queue": "normal",
                        "resreq": SHAPES[i % len(SHAPES)],
                        "max_tasks": 1,
                        "submit_time": float(i),
                    }
                )
                for i in range(start, min(n, start + 10_000))
            ]
            f.write(b"\n".join(lines) + b"\n")


async def _discard(data: bytes) -> None:
    return None


async def _consume_file(core: SchedulerCore, path: str) -> tuple[float, float]:
    """Wall and CPU seconds ``consume`` took over the file at ``path``."""
    started = time.perf_counter()
    cpu = time.process_time()
    await consume(
        FdReceiveStream(os.open(path, os.O_RDONLY), close_fd=True), core, _discard, format="ndjson"
    )
    return time.perf_counter() - started, time.process_time() - cpu


def in_process(workers_path: str, jobs_path: str, nworkers: int, njobs: int) -> None:
    """Consume the workers, then the jobs, on one core; print the B5 figures."""
    core = SchedulerCore(SchedulerConfig())

    async def main() -> tuple[float, float, float, int, int]:
        workers_s, workers_cpu = await _consume_file(core, workers_path)
        gc.collect()
        before = resident_bytes()
        jobs_s, jobs_cpu = await _consume_file(core, jobs_path)
        after = resident_bytes()
        return workers_s, jobs_s, workers_cpu + jobs_cpu, before, after

    workers_s, jobs_s, cpu, before, after = run_async(main)
    pending = core.state.pending_count
    assert pending == njobs, f"{pending:,} jobs pending, expected {njobs:,}"
    assert len(core.state.by_name) == nworkers
    events = nworkers + njobs
    rate = events / (workers_s + jobs_s)
    print(
        f"B5   {rate:>10,.0f} events/s  ({events:,} events in {workers_s + jobs_s:.2f} s;"
        f" {events / cpu:,.0f} per CPU second; jobs alone {njobs / jobs_s:,.0f}/s)"
        "   target >= 300,000"
    )
    print(
        f"B5'  {(after - before) / njobs:>10,.0f} bytes resident per pending job"
        f"  ({(after - before) / 2**20:,.1f} MiB for {njobs:,})   target <= 400"
    )


def as_subprocess(path: str, events: int) -> None:
    """``xce run --input path`` as a child: wall time and peak resident set."""
    xce = os.path.join(os.path.dirname(sys.executable), "xce")
    started = time.perf_counter()
    subprocess.run([xce, "run", "--input", path], check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(
        f'B5"  {events / elapsed:>10,.0f} events/s through `xce run --input`, start-up'
        f" included ({elapsed:.2f} s), peak resident {peak / 2**20:,.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500_000)
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--subprocess", action="store_true", help="also time `xce run`")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workers_path = os.path.join(tmp, "workers.ndjson")
        jobs_path = os.path.join(tmp, "jobs.ndjson")
        write_workers(workers_path, args.workers)
        write_jobs(jobs_path, args.jobs)
        in_process(workers_path, jobs_path, args.workers, args.jobs)
        if args.subprocess:
            both = os.path.join(tmp, "b5.ndjson")
            with open(both, "wb") as out:
                for path in (workers_path, jobs_path):
                    with open(path, "rb") as f:
                        out.write(f.read())
            as_subprocess(both, args.workers + args.jobs)


if __name__ == "__main__":
    main()
