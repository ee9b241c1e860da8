"""The ``xce`` command line: ``xce run`` (event consumer) and ``xce simulate`` (trace replay)."""

from __future__ import annotations

import click

from xce_core.cli._run_command import run_command
from xce_core.cli._simulate import generate_trace_command, simulate_command
from xce_core.cli._sweep import sweep_command

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xce")
def main() -> None:
    """xce: an event-driven scheduler core for batch clusters.

    \b
    xce run        consume input events, write scheduling decisions
    xce simulate   replay a workload trace (SWF) through the same core
    xce sweep      replay traces x clusters x policies in parallel, one table
    xce generate-trace   write a synthetic SWF workload

    See README.md for the event schema and examples.
    """


main.add_command(run_command, "run")
main.add_command(simulate_command, "simulate")
main.add_command(sweep_command, "sweep")
main.add_command(generate_trace_command, "generate-trace")
