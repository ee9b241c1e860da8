"""``xce simulate``: the command-line face of :mod:`xce_core.sim`'s replay.

The command checks every option and output before it reads the trace, replays
it with progress on stderr, stops early (keeping what was decided) on SIGINT or
SIGTERM, writes the outputs (:mod:`xce_core.cli._outputs`) and prints the
summary with its provenance. Exit statuses: :mod:`xce_core.cli._logging`."""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Self

import click
import msgspec

from xce_core import (
    FairshareParams,
    ResReqSyntaxError,
    SchedulerConfig,
    XceError,
    default_registry,
    parse_resreq,
)
from xce_core.cli._endpoints import stderr_line, stdout_text
from xce_core.cli._logging import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    configure_logging,
    verbosity_options,
)
from xce_core.cli._outputs import SimOutputs
from xce_core.cli._policy import policy_options, read_policy, unknown_plugin
from xce_core.cli._progress import replay_progress
from xce_core.cli._types import FloatRange
from xce_core.runtime import run_async
from xce_core.sim import (
    DEFAULT_MAX_HOSTS,
    MAX_SLOTS,
    default_cluster,
    format_table,
    load_cluster,
    provenance,
    read_swf,
    simulate,
)

__all__ = ["simulate_command"]

_log = logging.getLogger("xce.simulate")


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
    "--strict-fifo",
    is_flag=True,
    help="Stop each session at the first job that cannot start (with --backfill it adds "
    "nothing: in-order starts stop there anyway, and later jobs may only backfill).",
)
@policy_options
@click.option(
    "--picker",
    default="fcfs",
    show_default=True,
    help="Job order: fcfs, fairshare (users by LSF dynamic priority; share tree from "
    "--policy, else equal shares), or an xce.pickers plugin.",
)
@click.option("--sequential-allocator", default="seqjob", show_default=True, help="For 1 task.")
@click.option("--parallel-allocator", default="parjob", show_default=True, help="For 2+ tasks.")
@click.option("--no-cache", is_flag=True, help="Disable the unsatisfiable-requirement cache.")
@click.option(
    "--schedule",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Write one row per job (.jsonl, .csv or .parquet; Parquet needs xce[parquet]).",
)
@click.option(
    "--timeseries",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Write used slots, running jobs, queue length and queued slot demand at every"
    " change (.csv or .parquet).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option(
    "--plot",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Draw utilisation and queue length over time (needs xce[plot]; format by suffix).",
)
@click.option(
    "--plot-users",
    type=click.IntRange(min=0, max=50),
    default=0,
    metavar="N",
    help="With --plot: add a panel of the running slots of the N users with the most "
    "slot-hours (the others summed), to compare users under fairshare.",
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
@click.option(
    "--progress-interval",
    type=FloatRange(min=0),
    default=5.0,
    show_default=True,
    metavar="S",
    help="Seconds between progress lines when stderr is not a terminal.",
)
@verbosity_options
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
    plot_users: int,
    limit: int | None,
    skip_bad: bool,
    every_instant: bool,
    timeseries: Path | None,
    progress_interval: float,
    verbose: int,
    quiet: bool,
) -> None:
    """Replay an SWF workload TRACE (.swf or .swf.gz) through the scheduler core.

    Virtual time: at each instant (an arrival or an end) the finishes due are
    applied, then the submissions, then one session; started jobs finish
    after their run time. A job that runs 0 s ends after its instant's
    session; with nothing else due while jobs wait, the next session is a
    second later (as in AccaSim). Prints a summary table (or JSON with --json).

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
    file is always an error. Cluster file errors name the file and the path
    of the value (`$.group[1].slots`).
    \b
    Outputs (checked before the replay: a path that can be written, a known
    suffix, pyarrow for .parquet, matplotlib for --plot; else exit 2):
      --schedule     job_id user queue size status submit start end wait run
                     turnaround slowdown bounded_slowdown (tau 10 s) hosts
                     reason detail (a never-started job's last pend reason)
      --timeseries   time used_slots running_jobs queue_length
                     queued_slot_demand, at every change
    \b
    Ctrl-C (or SIGTERM) stops the replay: what was decided is written, the
    summary is printed marked partial, and the exit status is 130 (143).
    Progress goes to stderr (a bar on a terminal, else a line every
    --progress-interval seconds); -q turns it off, -v logs what is done.
    \b
    Exit status: 0 done; 1 bad input (trace, cluster file) or an output that
    could not be written (the summary too: stdout closed or full); 2 usage
    error; 130 SIGINT; 143 SIGTERM.
    """
    configure_logging(verbose, quiet)
    params = click.get_current_context().params
    try:
        status = _simulate(params, quiet=quiet, progress_interval=progress_interval)
    except KeyboardInterrupt:  # before or after the replay, or a second Ctrl-C
        stderr_line("xce simulate: interrupted")
        status = EXIT_INTERRUPTED
    sys.exit(status)


def _simulate(params: dict[str, Any], *, quiet: bool, progress_interval: float) -> int:
    """The command's work; returns the exit status. Raises click exceptions for
    usage errors (exit 2) and bad input (exit 1)."""
    o = _Options(**{name: params[name] for name in _Options.__struct_fields__})
    try:
        if o.resreq is not None:
            parse_resreq(o.resreq)
    except ResReqSyntaxError as exc:
        raise click.BadParameter(str(exc), param_hint="--resreq") from None
    rules = read_policy(o.policy) if o.policy is not None else None
    if o.cluster_file is not None and (o.hosts is not None or o.slots != 1):
        raise click.UsageError("--cluster excludes --hosts and --slots")
    if o.hosts is not None and o.hosts > o.max_hosts:
        raise click.BadParameter(
            f"{o.hosts} is more than --max-hosts ({o.max_hosts})", param_hint="--hosts"
        )
    config = SchedulerConfig(
        picker=o.picker,
        sequential_allocator=o.sequential_allocator,
        parallel_allocator=o.parallel_allocator,
        strict_fifo=o.strict_fifo,
        backfill=o.backfill,
        backfill_depth=o.backfill_depth,
        unsatisfiable_cache=not o.no_cache,
        fairshare=(rules and rules.fairshare_params) or FairshareParams(),
    )
    try:
        unknown = unknown_plugin(default_registry(), config)
    except XceError as exc:  # a broken or clashing installed plugin
        raise click.ClickException(str(exc)) from None
    if unknown is not None:  # before reading the trace, so a typo fails fast
        option, message = unknown
        raise click.BadParameter(message, param_hint=option)  # exit 2, as in `xce run`
    # Outputs are checked before the replay, so a long replay is never lost at the end.
    if o.plot_users and o.plot is None:
        raise click.UsageError("--plot-users needs --plot")
    outputs = SimOutputs(
        schedule=o.schedule, timeseries=o.timeseries, plot=o.plot, plot_users=o.plot_users
    )
    inputs = [(o.trace, "trace")]
    inputs += [
        (path, what)
        for path, what in ((o.cluster_file, "cluster file"), (o.policy, "policy file"))
        if path is not None
    ]
    outputs.check(inputs)
    started = time.perf_counter()
    try:
        cluster = (
            None if o.cluster_file is None else load_cluster(o.cluster_file, max_hosts=o.max_hosts)
        )
        swf = read_swf(o.trace, skip_bad=o.skip_bad, limit=o.limit)
        # Hashed now: the file the figures come from, however long the replay.
        trace_sha = provenance(trace=o.trace, options=params, cluster=None).trace
    except OSError as exc:  # the trace vanished or is unreadable since click checked it
        raise click.ClickException(f"{o.trace}: {exc.strerror or exc}") from None
    except XceError as exc:
        raise click.ClickException(str(exc)) from None
    elapsed = time.perf_counter() - started
    _log.info("read %d jobs from %s in %.2f s", len(swf.jobs), o.trace, elapsed)
    if swf.skipped and not quiet:
        lines = "line" if swf.skipped == 1 else "lines"
        first = swf.first_skipped
        click.echo(f"skipped {swf.skipped} malformed {lines} (first {first})", err=True)
    if cluster is None:
        try:
            cluster = default_cluster(
                swf.header, swf.jobs, hosts=o.hosts, slots=o.slots, max_hosts=o.max_hosts
            )
        except XceError as exc:
            raise click.ClickException(f"{o.trace}: {exc}") from None
    _log.info("cluster: %d hosts, %d slots", cluster.hosts, cluster.total_slots)
    stop = _StopOnSignals()
    try:
        with (
            stop,
            replay_progress(
                sys.stderr,
                len(swf.jobs),
                quiet=quiet,
                interval=progress_interval,
                label="replaying",
            ) as progress,
        ):
            result = run_async(
                functools.partial(
                    simulate,
                    swf.jobs,
                    cluster,
                    config=config,
                    resreq=o.resreq,
                    every_instant=o.every_instant,
                    # Where jobs ran is kept only for the one output that shows it.
                    keep_hosts=o.schedule is not None,
                    keep_series=o.timeseries is not None,
                    limits=rules.limits if rules is not None else (),
                    setup=rules.setup if rules is not None else (),
                    progress=progress,
                    stop=stop,
                )
            )
    except XceError as exc:
        raise click.ClickException(str(exc)) from None
    summary = result.summary
    summary.skipped_lines = swf.skipped
    summary.skipped_by_reason = swf.skipped_by_reason
    summary.provenance = provenance(trace=None, options=params, cluster=cluster)
    summary.provenance.trace = trace_sha
    if stop.signum is not None:
        _log.warning(
            "stopped by %s at t=%.0f s: writing what was decided",
            signal.Signals(stop.signum).name,
            summary.stopped_at or 0.0,
        )
    errors = outputs.write(result, title=f"{o.trace.name}: {summary.policy}")
    text = msgspec.json.encode(summary).decode() if o.as_json else format_table(summary)
    problem = stdout_text(text)
    if problem is not None:
        errors.append(f"cannot write the summary: {problem}")
    for error in errors:
        stderr_line(f"Error: {error}")
    if stop.signum is not None:
        return 128 + stop.signum
    return EXIT_FAILURE if errors else EXIT_OK


# A frozen msgspec Struct rather than a dataclass: the same record, defined in
# 0.02 ms instead of about 1 ms of every `xce simulate`.
class _Options(msgspec.Struct, frozen=True):
    """The options :func:`_simulate` reads (the rest only go into provenance)."""

    trace: Path
    hosts: int | None
    slots: int
    cluster_file: Path | None
    max_hosts: int
    resreq: str | None
    strict_fifo: bool
    backfill: str
    backfill_depth: int
    policy: Path | None
    picker: str
    sequential_allocator: str
    parallel_allocator: str
    no_cache: bool
    schedule: Path | None
    timeseries: Path | None
    as_json: bool
    plot: Path | None
    plot_users: int
    limit: int | None
    skip_bad: bool
    every_instant: bool


class _StopOnSignals:
    """While entered: the first SIGINT or SIGTERM asks the replay to stop (this
    object, called, says whether one came: :func:`simulate`'s ``stop``); a
    second SIGINT interrupts at once (``KeyboardInterrupt``). Outside the main
    thread (a test runner's), signals are left alone."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __call__(self) -> bool:
        return self.signum is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = self.signum or signum

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
