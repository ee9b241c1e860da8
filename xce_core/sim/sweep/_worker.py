"""One run of a sweep, in whichever process executes it: a worker of the local
pool, a Dask worker, or the sweep's own process when it runs serially."""

from __future__ import annotations

import functools
import hashlib
import math
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

from xce_core import SchedulerConfig
from xce_core.runtime import run_async
from xce_core.sim import (
    ClusterSpec,
    SimResult,
    SimulationError,
    SwfTrace,
    default_cluster,
    read_swf,
    simulate,
)
from xce_core.sim.sweep._runs import RunMetrics, RunRecord, SweepRun, TraceInput, file_sha256

__all__ = ["execute_run", "ignore_sigint"]


def ignore_sigint() -> None:
    """Initializer of local pool workers: Ctrl-C reaches the whole process
    group, and only the sweep's own process decides what it means."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def execute_run(run: SweepRun, data: bytes | None = None) -> RunRecord:
    """Replay ``run`` and return its record. The trace is ``data`` when given
    (a Dask worker that does not see the sweep's files), else read from
    ``run.trace.path``; either way its SHA-256 must be the one planned.

    Raises :class:`SimulationError` (an :class:`~xce_core.XceError`) for a
    trace that changed or a cluster that cannot be built, and whatever
    :func:`~xce_core.sim.simulate` raises."""
    cpu = time.thread_time()
    swf = _read_trace(run.trace, data)
    variant = run.cluster
    if variant.groups is not None:
        cluster = ClusterSpec(
            variant.groups, licences=dict(variant.licences), queues=variant.queues
        )
    else:
        cluster = default_cluster(
            swf.header,
            swf.jobs,
            hosts=variant.hosts,
            slots=variant.slots,
            max_hosts=variant.max_hosts,
        )
    policy = run.policy
    config = SchedulerConfig(
        picker=policy.picker,
        sequential_allocator=policy.sequential_allocator,
        parallel_allocator=policy.parallel_allocator,
        strict_fifo=policy.strict_fifo,
        backfill=policy.backfill,
        backfill_depth=policy.backfill_depth,
    )
    replay = functools.partial(
        simulate,
        swf.jobs,
        cluster,
        config=config,
        resreq=policy.resreq,
        keep_hosts=False,
        limits=policy.limits,
    )
    # The collector's threshold is process-wide: tuned only where the run owns
    # the process (not in a Dask worker thread, say).
    result = run_async(replay, gc_tuning=threading.current_thread() is threading.main_thread())
    return _record(run, result, time.thread_time() - cpu)


# The last trace read, by (SHA-256, limit, skip_bad): a worker often replays
# one trace under several policies in a row. Replaced whole, never mutated,
# so threads of a Dask worker may share it.
_last_trace: tuple[tuple[str, int | None, bool], SwfTrace] | None = None


def _read_trace(trace: TraceInput, data: bytes | None) -> SwfTrace:
    global _last_trace
    if data is None:
        if file_sha256(Path(trace.path)) != trace.sha256:
            raise SimulationError(f"{trace.path}: changed since the sweep was planned")
    elif hashlib.sha256(data).hexdigest() != trace.sha256:
        raise SimulationError(f"{trace.path}: not the bytes the sweep planned")
    key = (trace.sha256, trace.limit, trace.skip_bad)
    last = _last_trace
    if last is not None and last[0] == key:
        return last[1]
    if data is None:
        swf = read_swf(trace.path, skip_bad=trace.skip_bad, limit=trace.limit)
    else:
        with tempfile.TemporaryDirectory(prefix="xce-sweep-") as scratch:
            # read_swf reads a file (plain or gzip, by content).
            copy = Path(scratch, os.path.basename(trace.path) or "trace.swf")
            copy.write_bytes(data)
            swf = read_swf(copy, skip_bad=trace.skip_bad, limit=trace.limit)
    _last_trace = (key, swf)
    return swf


def _record(run: SweepRun, result: SimResult, cpu_time: float) -> RunRecord:
    submit: list[float] = []
    start: list[float] = []
    run_time: list[float] = []
    slowdowns: list[float] = []
    for job in result.jobs:
        if job.status == "rejected":
            continue
        submit.append(job.submit)
        run_time.append(job.run_time)
        if job.start is None:
            start.append(math.nan)
        else:
            start.append(job.start)
            if job.run_time > 0:
                slowdowns.append((job.start - job.submit + job.run_time) / job.run_time)
    s = result.summary
    metrics = RunMetrics(
        hosts=s.hosts,
        total_slots=s.total_slots,
        jobs=s.jobs,
        started=s.started,
        rejected=s.rejected,
        never_started=s.never_started,
        makespan=s.makespan,
        utilisation=s.utilisation,
        wait_mean=s.wait_mean,
        wait_median=s.wait_median,
        wait_p95=s.wait_p95,
        wait_max=s.wait_max,
        slowdown_mean=math.fsum(slowdowns) / len(slowdowns) if slowdowns else 0.0,
        slowdown_max=max(slowdowns, default=0.0),
        bounded_slowdown_mean=s.bounded_slowdown_mean,
        backfilled=s.backfilled,
        limits_raised=s.limits_raised,
        sessions=s.sessions,
        sessions_skipped=s.sessions_skipped,
        wall_time_s=s.wall_time_s,
        jobs_per_s=s.jobs_per_s,
        cpu_time_s=cpu_time,
    )
    return RunRecord(
        key=run.key,
        description=run.description(),
        metrics=metrics,
        submit=submit,
        start=start,
        run_time=run_time,
    )
