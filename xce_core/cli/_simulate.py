"""``xce simulate`` and ``xce generate-trace``: the command-line faces of :mod:`xce_core.sim`."""

from __future__ import annotations

import functools
import gzip
import io
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import click
import msgspec

from events import Limit, LimitsConfig
from xce_core import (
    ResReqSyntaxError,
    SchedulerConfig,
    XceError,
    default_registry,
    parse_resreq,
)
from xce_core.cli._policy import policy_options, read_policy
from xce_core.cli._run import unknown_plugin
from xce_core.runtime import run_async
from xce_core.sim import (
    DEFAULT_MAX_HOSTS,
    MAX_INTEGER,
    MAX_LOAD,
    MAX_SLOTS,
    MIN_LOAD,
    ClusterSpec,
    SimResult,
    SwfJob,
    WorkloadModel,
    check_plot,
    default_cluster,
    format_table,
    generate_jobs,
    load_cluster,
    plot_timeline,
    read_swf,
    simulate,
    swf_header,
    write_schedule,
    write_swf,
)

__all__ = ["generate_trace_command", "simulate_command"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--hosts", type=click.IntRange(min=1), help="Number of hosts (default: see above).")
@click.option(
    "--slots",
    type=click.IntRange(min=1, max=MAX_SLOTS),
    default=1,
    show_default=True,
    help="Slots per host.",
)
@click.option(
    "--cluster",
    "cluster_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML cluster file ([[group]] tables); excludes --hosts/--slots.",
)
@click.option(
    "--max-hosts",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_HOSTS,
    show_default=True,
    help="Refuse a cluster of more hosts (each takes about 1 KB and 10 us to set up).",
)
@click.option(
    "--resreq",
    help="Resource requirement for every job, used verbatim (replaces mem/partition).",
)
@click.option(
    "--strict-fifo", is_flag=True, help="Stop each session at the first job that cannot start."
)
@policy_options
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
@click.option(
    "--skip-bad", is_flag=True, help="Skip and count malformed trace lines instead of failing."
)
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
    max_hosts: int,
    resreq: str | None,
    strict_fifo: bool,
    backfill: str,
    backfill_depth: int,
    policy: Path | None,
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
    MaxProcs (else MaxNodes, else the largest job) in hosts of --slots slots,
    refused above --max-hosts hosts (then give --hosts/--slots or --cluster).
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
      req time   field 9, when > 0: the job's run limit (for --backfill),
                 raised to its run time when it ran longer (limits raised)
    Jobs still pending when nothing can change any more: never_started.
    \b
    Malformed lines stop the replay with FILE:LINE: what (exit 1), or with
    --skip-bad are skipped and counted. A line is malformed when it is not
    UTF-8 or over 64 KiB, or a data line is not 18 numbers each from -1 to
    its limit (times 1e10 s, memory 2^40 KB/proc, integers 2^53-1; never
    inf or nan), or an integer header key (MaxProcs, MaxNodes, MaxJobs...)
    does not start with such an integer (or -1). A corrupt or truncated gzip
    file is always an error. Cluster file errors name the group and field.
    --schedule and --plot are checked before the replay (a path that can be
    written; for --plot, matplotlib and the format of the suffix).
    """
    try:
        if resreq is not None:
            parse_resreq(resreq)
    except ResReqSyntaxError as exc:
        raise click.BadParameter(str(exc), param_hint="--resreq") from None
    limits = read_policy(policy) if policy is not None else LimitsConfig()
    if cluster_file is not None and (hosts is not None or slots != 1):
        raise click.UsageError("--cluster excludes --hosts and --slots")
    if hosts is not None and hosts > max_hosts:
        raise click.BadParameter(
            f"{hosts} is more than --max-hosts ({max_hosts})", param_hint="--hosts"
        )
    config = SchedulerConfig(
        picker=picker,
        sequential_allocator=sequential_allocator,
        parallel_allocator=parallel_allocator,
        strict_fifo=strict_fifo,
        backfill=backfill,
        backfill_depth=backfill_depth,
        unsatisfiable_cache=not no_cache,
    )
    try:
        unknown = unknown_plugin(default_registry(), config)
    except XceError as exc:  # a broken or clashing installed plugin
        raise click.ClickException(str(exc)) from None
    if unknown is not None:  # before reading the trace, so a typo fails fast
        option, message = unknown
        raise click.BadParameter(message, param_hint=option)  # exit 2, as in `xce run`
    # Outputs are checked before the replay, so a long replay is never lost at the end.
    if schedule is not None:
        _check_output(schedule, "--schedule")
    if plot is not None:
        _check_output(plot, "--plot")
        try:
            check_plot(plot)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--plot") from None
        except XceError as exc:  # matplotlib is missing
            raise click.ClickException(str(exc)) from None
    try:
        cluster = None if cluster_file is None else load_cluster(cluster_file, max_hosts=max_hosts)
        swf = read_swf(trace, skip_bad=skip_bad, limit=limit)
    except OSError as exc:  # the trace vanished or is unreadable since click checked it
        raise click.ClickException(f"{trace}: {exc.strerror or exc}") from None
    except XceError as exc:
        raise click.ClickException(str(exc)) from None
    if swf.skipped:
        lines = "line" if swf.skipped == 1 else "lines"
        first = swf.first_skipped
        click.echo(f"skipped {swf.skipped} malformed {lines} (first {first})", err=True)
    if cluster is None:
        try:
            cluster = default_cluster(
                swf.header, swf.jobs, hosts=hosts, slots=slots, max_hosts=max_hosts
            )
        except XceError as exc:
            raise click.ClickException(f"{trace}: {exc}") from None
    try:
        # Where jobs ran is kept only for the one output that shows it.
        keep_hosts = schedule is not None
        result = _replay(
            swf.jobs, cluster, config, resreq, every_instant, keep_hosts, limits.limits
        )
    except XceError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        if schedule is not None:
            write_schedule(schedule, result.jobs)
        if plot is not None:
            plot_timeline(result, plot, title=f"{trace.name}: {result.summary.policy}")
    except OSError as exc:
        raise click.ClickException(f"{exc.filename or 'output'}: {exc.strerror or exc}") from None
    except XceError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(msgspec.json.encode(result.summary).decode())
    else:
        click.echo(format_table(result.summary))


def _check_output(path: Path, option: str) -> None:
    """Raise a usage error (exit 2) now unless ``path`` can be written: an existing
    writable file, or a new file the directory lets us create (tried, then removed)."""
    try:
        if path.exists():
            if path.is_dir():
                problem = "is a directory"
            elif not os.access(path, os.W_OK):
                problem = "is not writable"
            else:
                return
        elif not path.parent.exists():
            problem = f"directory {path.parent} does not exist"
        elif not path.parent.is_dir():
            problem = f"{path.parent} is not a directory"
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            path.unlink()
            return
    except OSError as exc:
        problem = f"cannot be created: {exc.strerror or exc}"
    raise click.BadParameter(f"{path}: {problem}", param_hint=option)


def _replay(
    jobs: Sequence[SwfJob],
    cluster: ClusterSpec,
    config: SchedulerConfig,
    resreq: str | None,
    every_instant: bool,
    keep_hosts: bool,
    limits: Sequence[Limit],
) -> SimResult:
    """Run :func:`simulate`, with a progress bar on stderr when it is a terminal."""
    run = functools.partial(
        simulate,
        jobs,
        cluster,
        config=config,
        resreq=resreq,
        every_instant=every_instant,
        keep_hosts=keep_hosts,
        limits=limits,
    )
    if not sys.stderr.isatty():
        return run_async(run)
    with click.progressbar(length=len(jobs), label="replaying", file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        return run_async(functools.partial(run, progress=progress))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("out", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option("--jobs", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option(
    "--procs",
    type=click.IntRange(min=1, max=MAX_INTEGER),
    default=64,
    show_default=True,
    help="Machine size: MaxProcs and the cap on job sizes.",
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--load",
    type=click.FloatRange(min=MIN_LOAD, max=MAX_LOAD),
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
    always give the same file. See xce_core/sim/_workload.py.
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
    _check_output(out, "OUT")  # before a long generation, as in simulate
    try:
        generated = generate_jobs(model)
    except ValueError as exc:  # arrivals past the SWF time limit
        raise click.BadParameter(str(exc), param_hint="--load") from None
    try:
        if out.suffix == ".gz":
            with gzip.GzipFile(out, "wb", mtime=0) as raw, io.TextIOWrapper(raw, "utf-8") as text:
                write_swf(text, generated, header)
        else:
            with out.open("w", encoding="utf-8") as text:
                write_swf(text, generated, header)
    except OSError as exc:
        raise click.ClickException(f"{out}: {exc.strerror or exc}") from None
    click.echo(f"wrote {len(generated)} jobs to {out}", err=True)
