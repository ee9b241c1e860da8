"""``xce sweep``: the command-line face of :mod:`xce_core.sim.sweep`."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import click

from xce_core import XceError
from xce_core.cli._outputs import check_output
from xce_core.cli._study import read_study
from xce_core.sim.sweep import (
    ResultCache,
    RunFinished,
    SweepError,
    SweepInterrupted,
    check_plots,
    check_results_format,
    dask_distributed,
    default_jobs,
    plot_comparison,
    result_rows,
    run_sweep,
    write_results,
)

__all__ = ["sweep_command"]

INTERRUPTED = 130  # as a shell reports a command ended by SIGINT


class _OptionError(click.ClickException):
    """A bad option or a missing extra: one line, exit status 2."""

    exit_code = 2


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("study", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Results table: CSV, or Parquet if it ends in .parquet (needs pyarrow)."
    "  [default: STUDY with the suffix .csv]",
)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of cached runs.  [default: OUT with the suffix .cache]",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    help="Worker processes on this machine (1: run in this process).  [default: CPU count]",
)
@click.option(
    "--dask",
    metavar="ADDRESS",
    help="Run on the Dask scheduler at ADDRESS (tcp://HOST:8786); needs xce[dask].",
)
@click.option(
    "--plots",
    type=click.Path(file_okay=False, path_type=Path),
    help="Draw wait.png, slowdown.png and queue.png into this directory (needs xce[plot]).",
)
@click.option("-q", "--quiet", is_flag=True, help="No line per finished run on stderr.")
def sweep_command(
    study: Path,
    out: Path | None,
    cache_dir: Path | None,
    jobs: int | None,
    dask: str | None,
    plots: Path | None,
    quiet: bool,
) -> None:
    """Replay every run of a STUDY file (TOML) and write one results table.

    \b
    The study lists traces, cluster variants and policies; the runs are every
    combination, or its [[run]] tables (see README.md, "xce sweep"):
      trace = ["a.swf", "b.swf.gz"]      or [[trace]]: path, name, limit, skip_bad
      [[cluster]]  name, hosts, slots | file, max_hosts
      [[policy]]   name, picker, backfill (none|easy|conservative),
                   backfill_depth, strict_fifo, sequential_allocator,
                   parallel_allocator, resreq, limits (a --policy file)
      [[run]]      trace, cluster, policy (names): only these runs
    Paths are relative to the study file.

    \b
    Each run is a replay as `xce simulate` makes it, in a worker process
    (--jobs) or on a Dask cluster (--dask). Results are cached by run key
    (the SHA-256 of the trace's SHA-256, the cluster, the policy and the xce
    version), so a sweep run again, or after Ctrl-C, runs only what is
    missing. The table has a row per run in study order: its key and labels,
    jobs, makespan, utilisation, waits, slowdowns, backfilled...
    wall_time_s, jobs_per_s and cpu_time_s are timings; the rest is
    deterministic.

    \b
    Exit status: 0 all runs done; 1 some runs failed (the table holds the
    others); 2 a bad study file, option or missing extra; 130 interrupted
    (finished runs stay cached).
    """
    try:
        _sweep(study, out, cache_dir, jobs, dask, plots, quiet)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        raise SystemExit(INTERRUPTED) from None


def _sweep(
    study: Path,
    out: Path | None,
    cache_dir: Path | None,
    jobs: int | None,
    dask: str | None,
    plots: Path | None,
    quiet: bool,
) -> None:
    if dask is not None and jobs is not None:
        raise _OptionError("--jobs and --dask exclude each other (Dask has its own workers)")
    out = out if out is not None else study.with_suffix(".csv")
    cache = ResultCache(cache_dir if cache_dir is not None else out.with_suffix(".cache"))
    # Everything a sweep needs is checked before it starts, so none is lost at the end.
    check_output(out, "--out")
    try:
        check_results_format(out)
        if plots is not None:
            check_plots()
        if dask is not None:
            dask_distributed()
    except XceError as exc:
        raise _OptionError(str(exc)) from None
    if plots is not None and plots.exists() and not plots.is_dir():
        raise _OptionError(f"--plots: {plots} is not a directory")
    runs = read_study(study)
    inputs = [(study, "study file")]
    for run in runs:
        inputs.append((Path(run.trace.path), "trace"))
        for label, what in (
            (run.cluster.file, "cluster file"),
            (run.policy.limits_file, "limits file"),
        ):
            if label is not None:
                inputs.append((study.parent / label, what))
    check_output(out, "--out", inputs)
    # Last: it makes the directory, which no failed check should leave behind.
    problem = _cache_problem(cache.directory)
    if problem is not None:
        raise _OptionError(f"--cache: {cache.directory}: {problem}")
    started = time.perf_counter()

    def progress(event: RunFinished) -> None:
        if quiet:
            return
        if event.error is not None:
            what = f"FAILED: {event.error}"
        elif event.cached:
            what = "cached"
        else:
            assert event.record is not None
            what = f"{event.record.metrics.wall_time_s:.1f} s"
        click.echo(f"[{event.done}/{event.total}] {event.run.label}: {what}", err=True)

    try:
        outcome = run_sweep(
            runs,
            cache,
            jobs=jobs if jobs is not None else default_jobs(),
            dask=dask,
            on_finished=progress,
        )
    except SweepInterrupted as exc:
        click.echo(f"{exc}; run the same command again to resume", err=True)
        raise SystemExit(INTERRUPTED) from None
    except SweepError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        write_results(out, result_rows(outcome.rows))
        drawn = plot_comparison(outcome.rows, plots) if plots is not None and outcome.rows else []
    except OSError as exc:
        raise click.ClickException(f"{exc.filename or 'output'}: {exc.strerror or exc}") from None
    except XceError as exc:
        raise click.ClickException(str(exc)) from None
    wall = time.perf_counter() - started
    failed = len(outcome.failures)
    if not quiet:
        summary = (
            f"{len(runs)} runs: {outcome.ran} ran, {outcome.cached} cached,"
            f" {failed} failed in {wall:.1f} s; wrote {out}"
        )
        if drawn:
            summary += f" and {len(drawn)} plots in {plots}"
        click.echo(summary, err=True)
    for run, error in outcome.failures:
        click.echo(f"failed: {run.label}: {error}", err=True)
    if outcome.not_cached:
        count = len(outcome.not_cached)
        click.echo(
            f"Error: {count} result{'s' if count != 1 else ''} not cached (in the table all"
            f" the same; a rerun runs them again), first: {outcome.not_cached[0]}",
            err=True,
        )
    if failed or outcome.not_cached:
        raise SystemExit(1)


def _cache_problem(directory: Path) -> str | None:
    """Why results cannot be cached in ``directory`` (made if missing), or ``None``."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return f"cannot cache results there: {exc.strerror or exc}"
    return None
