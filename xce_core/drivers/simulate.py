"""Replay a workload trace through the scheduler core on virtual time.

:func:`simulate` drives a :class:`SchedulerCore` with a :class:`VirtualClock`. At
each distinct instant, in time order, it applies the ``job_finished`` events due
then, then the ``job_submitted`` events of that instant (in trace order), then
runs ONE scheduling session. Every ``job_allocated`` starts its job at that
instant and schedules its finish at start + run time. Nothing ever sleeps. A job
with run time 0 starts and finishes at the same instant: its finish is applied
in a following step at the same virtual time (followed by another session), and
so on until no finish is due at that instant.

A session is skipped when it provably cannot start a job, which never changes
the schedule (``every_instant=True`` / ``--every-instant`` turns this off): when
no job is pending; when no slot is free; or when nothing finished since the last
session and every job submitted since needs more slots than are free (jobs that
failed before fail again, as capacity has only shrunk since).

How SWF fields become jobs (the trace quirks):

- **run time** (field 4): ``-1`` (not recorded) -> rejected, reason
  ``no_runtime``; ``0`` -> the job runs for zero seconds (it still needs its
  processors free to start).
- **size**: requested processors (field 8) when > 0, else allocated processors
  (field 5); neither > 0 -> rejected, ``no_size``. More processors than the
  cluster's total slots -> rejected, ``too_big``. The job asks for exactly that
  many tasks (``min_tasks = max_tasks``).
- **submit time** (field 2) < 0 -> rejected, ``no_submit``. A job id seen before
  in the trace -> rejected, ``duplicate_id``. Jobs the core itself rejects
  (``job_rejected``/``event_rejected``, e.g. a bad ``--resreq``) -> ``core``.
- Identity: job id -> ``str(id)``, user -> ``u<user>``, group -> project
  ``g<group>``, queue -> ``q<queue>``; a ``-1`` there maps to the empty string
  (the core's default). All of them share one FCFS order: queues carry no
  priority in a replay.
- **memory** (field 10, KB per processor): when some host of the cluster has a
  ``mem`` resource (MB), a job with ``req_mem > 0`` gets
  ``rusage[mem=ceil(req_mem / 1024)]`` (per task); otherwise it is ignored.
- **partition** (field 16): when some host has a ``partition`` attribute, a job
  with partition >= 0 gets ``select[partition==<n>]``; otherwise ignored.
- ``--resreq``: used verbatim for every job, *instead of* the memory and
  partition parts.
- Wait time, status, CPU time, used memory, executable, preceding job and think
  time are ignored (the replay makes its own schedule; no job dependencies).
- When a session leaves jobs pending while no finish is due and no submission
  remains, those jobs can never start (too much memory for any host, a
  ``select`` nothing matches...): the replay stops and counts them as
  ``never_started``.
"""

from __future__ import annotations

import functools
import gzip
import heapq
import io
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import click
import msgspec

from events import (
    EventRejected,
    JobAllocated,
    JobFinished,
    JobRejected,
    JobSubmitted,
)
from xce_core._clock import VirtualClock
from xce_core._config import SchedulerConfig
from xce_core._core import SchedulerCore
from xce_core._errors import ResReqSyntaxError, XceError
from xce_core._registry import default_registry
from xce_core._resreq_parse import parse_resreq
from xce_core.drivers._runtime import tune_gc
from xce_core.drivers.run import unknown_plugin
from xce_core.drivers.sim_cluster import (
    ClusterSpec,
    SimulationError,
    default_cluster,
    load_cluster,
)
from xce_core.drivers.sim_report import (
    JobOutcome,
    SimResult,
    format_table,
    plot_timeline,
    summarize,
    write_schedule,
)
from xce_core.drivers.swf import SwfJob, read_swf, write_swf
from xce_core.drivers.workload import WorkloadModel, generate_jobs, swf_header

__all__ = [
    "generate_trace_command",
    "job_request",
    "simulate",
    "simulate_command",
]

Progress = Callable[[int, int], None]
_PROGRESS_EVERY = 512


def job_request(
    job: SwfJob, cluster: ClusterSpec, resreq: str | None = None
) -> tuple[int, str] | str:
    """``(tasks, resreq)`` for a job the replay submits, or the rejection reason
    (``no_runtime``, ``no_size``, ``no_submit``, ``too_big: ...``). Pure."""
    if job.run_time < 0:
        return "no_runtime"
    if job.submit < 0:
        return "no_submit"
    size = job.size
    if size <= 0:
        return "no_size"
    if size > cluster.total_slots:
        return f"too_big: {size} processors, the cluster has {cluster.total_slots} slots"
    if resreq is not None:
        return size, resreq
    parts: list[str] = []
    if job.partition >= 0 and cluster.has_attr("partition"):
        parts.append(f"select[partition=={job.partition}]")
    if job.req_mem > 0 and cluster.has_resource("mem"):
        parts.append(f"rusage[mem={math.ceil(job.req_mem / 1024)}]")
    return size, " ".join(parts)


def _ident(prefix: str, value: int) -> str:
    return "" if value == -1 else f"{prefix}{value}"


async def simulate(
    jobs: Sequence[SwfJob],
    cluster: ClusterSpec,
    *,
    config: SchedulerConfig | None = None,
    resreq: str | None = None,
    progress: Progress | None = None,
    every_instant: bool = False,
) -> SimResult:
    """Replay ``jobs`` on ``cluster`` (see the module docstring for the rules).

    ``progress(done, total)`` is called now and then with the number of jobs
    submitted so far, and once at the end. ``every_instant`` runs a session at
    every instant with pending jobs, even one that cannot start any. Never
    sleeps; each session is a checkpoint. Raises :class:`SimulationError` if the
    core contradicts the replay's bookkeeping (a bug), :class:`PluginError` for an
    unknown picker or allocator in ``config``.
    """
    config = config or SchedulerConfig()
    clock = VirtualClock()
    core = SchedulerCore(config, clock=clock)
    workers = cluster.workers()
    for worker in workers:
        core.apply(worker)
    for decision in core.take_decisions():
        raise SimulationError(f"the core refused a host: {decision}")

    outcomes: list[JobOutcome] = []
    queue: list[tuple[float, int, SwfJob, int, str]] = []  # submit, trace order...
    seen: set[int] = set()
    for job in jobs:
        request = job_request(job, cluster, resreq)
        outcome = JobOutcome(
            job_id=str(job.job_id),
            submit=job.submit,
            run_time=max(job.run_time, 0.0),
            procs=job.size,
        )
        if job.job_id in seen:
            request = "duplicate_id"
        seen.add(job.job_id)
        if isinstance(request, str):
            outcome.status = "rejected"
            outcome.reason = request
        else:
            queue.append((job.submit, len(outcomes), job, *request))
        outcomes.append(outcome)
    queue.sort(key=lambda item: (item[0], item[1]))

    by_id = {o.job_id: o for o in outcomes if o.status != "rejected"}
    by_index: dict[int, JobOutcome] = {}
    finishes: list[tuple[float, int, str, int]] = []  # end, start order, job id, slots
    pending = 0
    sessions = 0
    skipped = 0
    free = cluster.total_slots
    freed = True  # a finish since the last session
    smallest_new = math.inf  # fewest tasks among jobs submitted since the last session
    started_n = 0
    index = len(workers)
    total = len(queue)
    next_job = 0
    instants = 0
    wall_start = time.perf_counter()
    while next_job < total or finishes:
        t = queue[next_job][0] if next_job < total else math.inf
        if finishes and finishes[0][0] < t:
            t = finishes[0][0]
        clock.advance_to(t)
        while finishes and finishes[0][0] <= t:
            _, _, done_id, done_slots = heapq.heappop(finishes)
            core.apply(JobFinished(job_id=done_id), index)
            index += 1
            free += done_slots
            freed = True
        while next_job < total and queue[next_job][0] <= t:
            submit, order, job, tasks, job_resreq = queue[next_job]
            by_index[index] = outcomes[order]
            core.apply(
                JobSubmitted(
                    job_id=str(job.job_id),
                    user=_ident("u", job.user),
                    queue=_ident("q", job.queue),
                    project=_ident("g", job.group),
                    submit_time=submit,
                    min_tasks=tasks,
                    max_tasks=tasks,
                    resreq=job_resreq,
                ),
                index,
            )
            index += 1
            pending += 1
            next_job += 1
            smallest_new = min(smallest_new, tasks)
        if pending:
            if every_instant or (free > 0 and (freed or smallest_new <= free)):
                await core.run_session()
                sessions += 1
                freed = False
                smallest_new = math.inf
            else:
                skipped += 1
        for decision in core.take_decisions():
            match decision:
                case JobAllocated(job_id=job_id, hosts=hosts):
                    outcome = by_id[job_id]
                    outcome.status = "started"
                    outcome.start = t
                    outcome.end = t + outcome.run_time
                    outcome.wait = t - outcome.submit
                    outcome.hosts = [(h.host, h.slots) for h in hosts]
                    heapq.heappush(finishes, (outcome.end, started_n, job_id, outcome.slots))
                    free -= outcome.slots
                    started_n += 1
                    pending -= 1
                case JobRejected(job_id=job_id, error=error):
                    _reject(by_id[job_id], f"core: {error}")
                    pending -= 1
                case EventRejected(index=bad, error=error):
                    rejected = by_index.get(bad)
                    if rejected is None:
                        raise SimulationError(f"the core rejected a replay event: {error}")
                    _reject(rejected, f"core: {error}")
                    pending -= 1
                case _:
                    pass
        instants += 1
        if progress is not None and instants % _PROGRESS_EVERY == 0:
            progress(next_job, total)
        if pending and not finishes and next_job >= total:
            break  # nothing left that could ever free resources: never_started
    wall = time.perf_counter() - wall_start
    if progress is not None:
        progress(next_job, total)
    for outcome in outcomes:
        if outcome.status == "never_started":
            outcome.reason = "still pending when nothing could change any more"
    policy = f"{config.picker}{' strict-fifo' if config.strict_fifo else ''}"
    summary = summarize(
        outcomes,
        policy=policy,
        hosts=cluster.hosts,
        total_slots=cluster.total_slots,
        sessions=sessions,
        sessions_skipped=skipped,
        wall_time_s=wall,
    )
    return SimResult(summary=summary, jobs=outcomes)


def _reject(outcome: JobOutcome, reason: str) -> None:
    outcome.status = "rejected"
    outcome.reason = reason


# ---------------------------------------------------------------------- command line


def _run_async(coro_fn: Callable[[], Any]) -> Any:
    """Run ``coro_fn()`` with anyio, on uvloop when it is importable."""
    tune_gc()
    options: dict[str, Any] = {}
    try:
        import uvloop  # noqa: F401
    except ImportError:  # pragma: no cover - platforms without uvloop
        pass
    else:
        options["use_uvloop"] = True
    return anyio.run(coro_fn, backend="asyncio", backend_options=options)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--hosts", type=click.IntRange(min=1), help="Number of hosts (default: see above).")
@click.option(
    "--slots", type=click.IntRange(min=1), default=1, show_default=True, help="Slots per host."
)
@click.option(
    "--cluster",
    "cluster_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML cluster file ([[group]] tables); excludes --hosts/--slots.",
)
@click.option(
    "--resreq",
    help="Resource requirement for every job, used verbatim (replaces mem/partition).",
)
@click.option(
    "--strict-fifo", is_flag=True, help="Stop each session at the first job that cannot start."
)
@click.option("--picker", default="fcfs", show_default=True, help="Job order plugin.")
@click.option("--sequential-allocator", default="seqjob", show_default=True, help="For 1 task.")
@click.option("--parallel-allocator", default="parjob", show_default=True, help="For 2+ tasks.")
@click.option("--no-cache", is_flag=True, help="Disable the unsatisfiable-requirement cache.")
@click.option(
    "--schedule",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write every job's outcome to this JSON Lines file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Draw utilisation and queue length over time (needs xce[plot]).",
)
@click.option("--limit", type=click.IntRange(min=1), help="Replay only the first N jobs.")
@click.option("--skip-bad", is_flag=True, help="Skip malformed trace lines instead of failing.")
@click.option(
    "--every-instant",
    is_flag=True,
    help="Run a session at every instant, even when no job could start (same schedule, slower).",
)
def simulate_command(
    trace: Path,
    hosts: int | None,
    slots: int,
    cluster_file: Path | None,
    resreq: str | None,
    strict_fifo: bool,
    picker: str,
    sequential_allocator: str,
    parallel_allocator: str,
    no_cache: bool,
    schedule: Path | None,
    as_json: bool,
    plot: Path | None,
    limit: int | None,
    skip_bad: bool,
    every_instant: bool,
) -> None:
    """Replay an SWF workload TRACE (.swf or .swf.gz) through the scheduler core.

    Virtual time: at each instant the finishes due are applied, then the
    submissions, then one session; started jobs finish after their run time.
    Prints a summary table (or JSON with --json).

    \b
    Cluster: --hosts N x --slots S, or --cluster FILE; by default the header's
    MaxProcs (else MaxNodes, else the largest job) in hosts of --slots slots.
    \b
    Trace fields:
      size       requested procs (field 8) if > 0, else allocated (field 5);
                 neither > 0: rejected (no_size); above the cluster's slots:
                 rejected (too_big)
      run time   -1: rejected (no_runtime); 0: runs for zero seconds
      submit     < 0: rejected (no_submit); repeated job id: duplicate_id
      ids        user u<N>, group -> project g<N>, queue q<N> (-1: empty)
      memory     field 10 (KB/proc) -> rusage[mem=MB] per task, only if the
                 hosts have a mem resource
      partition  field 16 -> select[partition==N], only if the hosts have a
                 partition attribute
      --resreq   replaces the memory and partition parts for every job
    Jobs still pending when nothing can change any more: never_started.
    """
    try:
        if resreq is not None:
            parse_resreq(resreq)
    except ResReqSyntaxError as exc:
        raise click.BadParameter(str(exc), param_hint="--resreq") from None
    if cluster_file is not None and (hosts is not None or slots != 1):
        raise click.UsageError("--cluster excludes --hosts and --slots")
    config = SchedulerConfig(
        picker=picker,
        sequential_allocator=sequential_allocator,
        parallel_allocator=parallel_allocator,
        strict_fifo=strict_fifo,
        unsatisfiable_cache=not no_cache,
    )
    try:
        unknown = unknown_plugin(default_registry(), config)
    except XceError as exc:  # a broken or clashing installed plugin
        raise click.ClickException(str(exc)) from None
    if unknown is not None:  # before reading the trace, so a typo fails fast
        option, message = unknown
        raise click.BadParameter(message, param_hint=option)  # exit 2, as in `xce run`
    try:
        swf = read_swf(trace, skip_bad=skip_bad, limit=limit)
        if cluster_file is not None:
            cluster = load_cluster(cluster_file)
        else:
            cluster = default_cluster(swf.header, swf.jobs, hosts=hosts, slots=slots)
        result = _replay(swf.jobs, cluster, config, resreq, every_instant)
        if schedule is not None:
            write_schedule(schedule, result.jobs)
        if plot is not None:
            plot_timeline(result, plot, title=f"{trace.name}: {result.summary.policy}")
    except XceError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(msgspec.json.encode(result.summary).decode())
    else:
        if swf.skipped:
            click.echo(f"skipped {swf.skipped} malformed lines", err=True)
        click.echo(format_table(result.summary))


def _replay(
    jobs: Sequence[SwfJob],
    cluster: ClusterSpec,
    config: SchedulerConfig,
    resreq: str | None,
    every_instant: bool,
) -> SimResult:
    """Run :func:`simulate`, with a progress bar on stderr when it is a terminal."""
    run = functools.partial(
        simulate, jobs, cluster, config=config, resreq=resreq, every_instant=every_instant
    )
    if not sys.stderr.isatty():
        return cast(SimResult, _run_async(run))
    with click.progressbar(length=len(jobs), label="replaying", file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        return cast(SimResult, _run_async(functools.partial(run, progress=progress)))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("out", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option("--jobs", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option(
    "--procs",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Machine size: MaxProcs and the cap on job sizes.",
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--load",
    type=click.FloatRange(min=0, min_open=True),
    default=0.7,
    show_default=True,
    help="Offered load (work / (span x procs)).",
)
def generate_trace_command(out: Path, jobs: int, procs: int, seed: int, load: float) -> None:
    """Write a synthetic SWF workload to OUT (gzip-compressed if OUT ends in .gz).

    \b
    A simplified Lublin-Feitelson (2003) model: 25% serial jobs, log-uniform
    parallel sizes (75% rounded to powers of two), hyper-gamma run times that
    grow with size, Poisson arrivals following a daily cycle. The same options
    always give the same file. See xce_core/drivers/workload.py.
    """
    model = WorkloadModel(jobs=jobs, procs=procs, seed=seed, load=load)
    command = shlex.join(
        [
            "xce",
            "generate-trace",
            str(out),
            "--jobs",
            str(jobs),
            "--procs",
            str(procs),
            "--seed",
            str(seed),
            "--load",
            f"{load:g}",
        ]
    )
    header = swf_header(model, command)
    generated = generate_jobs(model)
    if out.suffix == ".gz":
        with gzip.GzipFile(out, "wb", mtime=0) as raw, io.TextIOWrapper(raw, "utf-8") as text:
            write_swf(text, generated, header)
    else:
        with out.open("w", encoding="utf-8") as text:
            write_swf(text, generated, header)
    click.echo(f"wrote {len(generated)} jobs to {out}", err=True)
