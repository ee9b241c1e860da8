"""The ``xce`` command line: ``xce run`` (event consumer) and ``xce simulate`` (trace replay)."""

from __future__ import annotations

import gettext
import importlib
import os
from typing import Final

import click

__all__ = ["main"]

# Each command's module is imported when the command is asked for: `xce
# simulate` does not import the service, the sweep or the generator (start-up
# counts on a short trace). Each command's first paragraph of help is here
# too, for `xce --help` (tests/cli/test_main.py checks it against the command).
_COMMANDS: Final = {
    "run": (
        "xce_core.cli._run_command",
        "run_command",
        "Consume input events, write scheduling decisions.",
    ),
    "simulate": (
        "xce_core.cli._simulate",
        "simulate_command",
        "Replay an SWF workload TRACE (.swf or .swf.gz) through the scheduler core.",
    ),
    "sweep": (
        "xce_core.cli._sweep",
        "sweep_command",
        "Replay every run of a STUDY file (TOML) and write one results table.",
    ),
    "generate-trace": (
        "xce_core.cli._generate",
        "generate_trace_command",
        "Write a synthetic SWF workload to OUT (gzip-compressed if OUT ends in .gz).",
    ),
}


class _LazyGroup(click.Group):
    """A group whose commands are imported on first use (``_COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = _COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, name, _ = where
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The "Commands" section of ``xce --help`` as click writes it, but from
        ``_COMMANDS``: click's own asks each command for its short help, which
        imported all four commands' modules (about 45 ms, a third of ``xce
        --help``)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [
            (name, click.Command(name, help=_COMMANDS[name][2]).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section(gettext.gettext("Commands")):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
    _hold_standard_fds()


def _hold_standard_fds() -> None:
    """Give a closed stdin, stdout or stderr a placeholder: /dev/null, open the
    other way round (stdin for writing, stdout and stderr for reading), so
    using one fails as a closed one would (EBADF: an I/O error, exit status 1)
    while no file the command opens takes its number. A closed descriptor 0-2
    reused by a file made uvloop abort when it closed that file."""
    for fd, flags in ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_RDONLY)):
        try:
            os.fstat(fd)
        except OSError:
            held = os.open(os.devnull, flags)
            if held != fd:  # a lower one was closed too and took this number
                os.dup2(held, fd)
                os.close(held)
