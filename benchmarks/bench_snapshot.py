"""Snapshot of B1's state after its session (issue #14). Run by hand:

    python benchmarks/bench_snapshot.py [--scale 0.1] [--loop uvloop|asyncio]

B1 (benchmarks/bench_alloc.py): 10,000 workers x 32 slots, 500,000 one-task
jobs of 20 shapes, one session (320,000 start, the rest pend). Prints the
snapshot's size, the time to write it (encode, and write to a file with
fsync), the time to restore it (read and rebuild a core), and for comparison
the time to replay the events that built the state (apply them and run the
session). Then checks that the restored core decides as the original would.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_alloc import SHAPES, submit, workers

from events import JobFinished, SessionBegin
from xce_core import SchedulerCore


def timed(what: str, seconds: float, note: str = "") -> None:
    print(f"{what:<34} {seconds:8.3f} s  {note}")


async def bench(scale: float) -> None:
    nworkers, njobs = int(10_000 * scale), int(500_000 * scale)
    gc.collect()
    started = time.perf_counter()
    core = SchedulerCore()
    workers(core, nworkers, 32)
    submit(core, njobs, SHAPES, lambda i: 1)
    ingest = time.perf_counter() - started
    await core.run_session()
    replay = time.perf_counter() - started
    decisions = core.take_decisions()
    running = core.state.running_count
    print(
        f"B1 state: {nworkers:,} workers, {njobs:,} jobs ({running:,} running), "
        f"{core.events_received:,} events, {len(decisions):,} decisions"
    )
    timed("replay (apply events + session)", replay, f"(apply {ingest:.3f} s)")

    started = time.perf_counter()
    data = core.snapshot()
    encode = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot"
        started = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        write = time.perf_counter() - started
        print(
            f"snapshot size                      {len(data) / 1e6:8.1f} MB "
            f"({len(data) / max(njobs, 1):.0f} B/job)"
        )
        timed("snapshot (encode)", encode)
        timed("snapshot (write + fsync)", write)
        gc.collect()
        started = time.perf_counter()
        restored = SchedulerCore.restore(path.read_bytes())
        restore = time.perf_counter() - started
    timed(
        "restore (read + decode + rebuild)",
        restore,
        f"({replay / restore:.1f}x faster than the replay)",
    )

    # The restored core decides as the original: finish 1,000 jobs, one session.
    finished = [JobFinished(job_id=f"j{i}") for i in range(0, 20_000, 20)]
    outs = []
    for c in (core, restored):
        for event in [*finished, SessionBegin()]:
            if c.apply(event):
                await c.run_session()
        outs.append([d for d in c.take_decisions() if not hasattr(d, "elapsed_s")])
    assert outs[0] == outs[1], "the restored core decided otherwise"
    print(f"restored core: same {len(outs[0]):,} decisions after 1,000 finishes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = parser.parse_args()
    options = {"use_uvloop": args.loop == "uvloop"}
    anyio.run(bench, args.scale, backend="asyncio", backend_options=options)


if __name__ == "__main__":
    main()
