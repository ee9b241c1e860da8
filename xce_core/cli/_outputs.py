"""``xce simulate``'s output files: checked before the replay, written after it.

Every path, format and optional extra is checked before the trace is read
(:meth:`SimOutputs.check`), so a long replay is never lost at the end: a path
that cannot be written, a suffix with no format, pyarrow missing for Parquet or
matplotlib for ``--plot`` is a one-line error and exit status 2. After the
replay (finished or stopped), :meth:`SimOutputs.write` writes each output; one
that fails does not keep the others from being written.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import click
import msgspec

from xce_core import XceError
from xce_core.cli._logging import EXIT_USAGE
from xce_core.sim import (
    SCHEDULE_FORMATS,
    TIMESERIES_FORMATS,
    OutputFormat,
    SimResult,
    check_parquet,
    check_plot,
    output_format,
    plot_timeline,
    write_schedule,
    write_timeseries,
)

__all__ = ["OutputError", "SimOutputs", "check_output"]

_log = logging.getLogger("xce.simulate")


class OutputError(click.ClickException):
    """An output that cannot work, found before the replay: one line on stderr,
    exit status 2 (a usage error, without click's usage text)."""

    exit_code = EXIT_USAGE


def _path_problem(path: Path) -> str | None:
    """Why ``path`` cannot be written, or ``None``: an existing writable file, or
    a new file the directory lets us create (tried, then removed)."""
    try:
        if path.exists():
            if path.is_dir():
                return "is a directory"
            if not os.access(path, os.W_OK):
                return "is not writable"
            return None
        if not path.parent.exists():
            return f"directory {path.parent} does not exist"
        if not path.parent.is_dir():
            return f"{path.parent} is not a directory"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        path.unlink()
    except OSError as exc:
        return f"cannot be created: {exc.strerror or exc}"
    return None


def check_output(path: Path, option: str, inputs: Sequence[tuple[Path, str]] = ()) -> None:
    """Raise :class:`OutputError` now unless ``path`` can be written, and is
    none of the ``inputs`` (``(file, what it is)``: writing would destroy it)."""
    for source, what in inputs:
        if _same_file(path, source):
            raise OutputError(f"{option}: {path} is the {what}: it would be overwritten")
    problem = _path_problem(path)
    if problem is not None:
        raise OutputError(f"{option}: {path}: {problem}")


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (links included), or would."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet)
        return a.resolve() == b.resolve()


# A frozen Struct, not a dataclass: the same record, defined in a fraction
# of the start-up time (see _simulate._Options).
class SimOutputs(msgspec.Struct, frozen=True):
    """The output files ``xce simulate`` was asked for."""

    schedule: Path | None = None
    timeseries: Path | None = None
    plot: Path | None = None
    plot_users: int = 0

    def check(
        self, inputs: Sequence[tuple[Path, str]] = ()
    ) -> tuple[OutputFormat | None, OutputFormat | None]:
        """Check every output (see the module docstring), none of them one of
        the ``inputs`` (``(file, what it is)``); returns the schedule's and the
        time series' formats. Raises :class:`OutputError`."""
        named = [
            (path, option)
            for path, option in (
                (self.schedule, "--schedule"),
                (self.timeseries, "--timeseries"),
                (self.plot, "--plot"),
            )
            if path is not None
        ]
        for i, (path, option) in enumerate(named):
            for other, other_option in named[:i]:
                if path.resolve() == other.resolve():
                    raise OutputError(f"{option}: {path} is also the {other_option} file")
        formats: list[OutputFormat | None] = []
        for target, option, known in (
            (self.schedule, "--schedule", SCHEDULE_FORMATS),
            (self.timeseries, "--timeseries", TIMESERIES_FORMATS),
        ):
            if target is None:
                formats.append(None)
                continue
            try:
                fmt = output_format(target, known)
            except ValueError as exc:
                raise OutputError(f"{option}: {exc}") from None
            if fmt == "parquet":
                try:
                    check_parquet()
                except XceError as exc:
                    raise OutputError(f"{option}: {exc}") from None
            check_output(target, option, inputs)
            formats.append(fmt)
        if self.plot is not None:
            check_output(self.plot, "--plot", inputs)
            try:
                check_plot(self.plot)
            except (ValueError, XceError) as exc:  # a format it does not write; missing
                raise OutputError(f"--plot: {exc}") from None
        return formats[0], formats[1]

    def write(self, result: SimResult, title: str) -> list[str]:
        """Write every output of ``result`` (a stopped replay's too: what was
        decided); returns the errors, one line each, of those that failed."""
        until = result.summary.stopped_at
        jobs = result.jobs
        steps: list[tuple[str, Path | None, Callable[[Path], object]]] = [
            ("schedule", self.schedule, lambda p: write_schedule(p, jobs)),
            ("time series", self.timeseries, lambda p: write_timeseries(p, jobs, until)),
            (
                "plot",
                self.plot,
                lambda p: plot_timeline(result, p, title=title, users=self.plot_users),
            ),
        ]
        errors: list[str] = []
        for what, path, write in steps:
            if path is None:
                continue
            started = time.perf_counter()
            try:
                rows = write(path)
            except OSError as exc:
                errors.append(f"{what}: {exc.filename or path}: {exc.strerror or exc}")
                continue
            except XceError as exc:
                errors.append(f"{what}: {exc}")
                continue
            elapsed = time.perf_counter() - started
            count = f"{rows:,} rows " if isinstance(rows, int) else ""
            _log.info("wrote the %s to %s (%sin %.3f s)", what, path, count, elapsed)
        return errors
