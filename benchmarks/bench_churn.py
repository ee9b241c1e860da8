"""Issue #11: ``xce run`` with 200,000 jobs passing through, at most 1,000 live.

    python benchmarks/bench_churn.py [--jobs 200000] [--live 1000]

Writes an NDJSON stream: 100 workers of 32 slots, then jobs submitted in waves
of ``--live``, each wave followed by a ``session_begin`` and then a
``job_finished`` (or ``job_cancelled``, one in ten) for every job of the wave.
Runs ``xce run`` on it as a child process and prints its peak resident memory
(target: 80 MB) and the time it took. Memory that followed the history (every
ended job kept) would grow with ``--jobs``; it must follow the live jobs.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

XCE = [sys.executable, "-c", "import sys; from xce_core.cli import main; sys.exit(main())"]


def write(path: Path, jobs: int, live: int) -> None:
    with path.open("w") as out:
        for i in range(100):
            out.write(
                json.dumps(
                    {
                        "type": "worker_up",
                        "name": f"h{i}",
                        "slots": 32,
                        "resources": {"mem": 64000},
                    }
                )
                + "\n"
            )
        for start in range(0, jobs, live):
            wave = range(start, min(start + live, jobs))
            for i in wave:
                out.write(
                    json.dumps(
                        {
                            "type": "job_submitted",
                            "job_id": f"job-{i}",
                            "user": f"u{i % 50}",
                            "resreq": "rusage[mem=10]" if i % 3 else "",
                            "max_tasks": 1 + i % 4,
                            "run_limit": 3600,
                        }
                    )
                    + "\n"
                )
            out.write('{"type":"session_begin"}\n')
            for i in wave:
                kind = "job_cancelled" if i % 10 == 0 else "job_finished"
                out.write(json.dumps({"type": kind, "job_id": f"job-{i}"}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--live", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stream = Path(tmp) / "churn.ndjson"
        write(stream, args.jobs, args.live)
        started = time.perf_counter()
        with stream.open("rb") as source:
            subprocess.run([*XCE, "run"], stdin=source, stdout=subprocess.DEVNULL, check=False)
        elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"xce run, {args.jobs:,} jobs, <= {args.live:,} live: peak {peak_mb:.0f} MB,"
        f" {elapsed:.1f} s   target <= 80 MB"
    )


if __name__ == "__main__":
    main()
