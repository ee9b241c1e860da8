"""``xce generate-trace``: write a synthetic SWF workload (:mod:`xce_core.sim`)."""

from __future__ import annotations

import gzip
import io
import shlex
from pathlib import Path

import click

from xce_core.cli._outputs import check_output
from xce_core.cli._types import FloatRange
from xce_core.sim import (
    MAX_INTEGER,
    MAX_JOBS,
    MAX_LOAD,
    MIN_LOAD,
    WorkloadModel,
    generate_jobs,
    swf_header,
    write_swf,
)

__all__ = ["generate_trace_command"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("out", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option("--jobs", type=click.IntRange(min=1, max=MAX_JOBS), default=2000, show_default=True)
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
    type=FloatRange(min=MIN_LOAD, max=MAX_LOAD),
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
    check_output(out, "OUT")  # before a long generation, as in simulate
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
