"""Progress of a long replay on stderr: a rich progress bar on a terminal, a
line every few seconds otherwise (a log file, a CI job), nothing with ``-q``.

Both show the jobs submitted so far, the rate (jobs per second of wall time)
and an estimated time left. The rate is smoothed (rich: over the last 30 s; the
lines: an exponential average), so the estimate does not jump with the bursts
of a trace.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import IO, Final

__all__ = ["ProgressCallback", "replay_progress"]

ProgressCallback = Callable[[int, int], None]
_SMOOTHING: Final = 0.3  # weight of the newest rate in the lines' average


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class _Lines:
    """A progress line on ``stream`` at most every ``interval`` seconds."""

    def __init__(self, stream: IO[str], interval: float, label: str) -> None:
        self._stream = stream
        self._interval = interval
        self._label = label
        self._started = self._last = time.monotonic()
        self._last_done = 0
        self._rate: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        elapsed = now - self._last
        if elapsed < self._interval:
            return
        rate = (done - self._last_done) / elapsed
        self._rate = rate if self._rate is None else (
            _SMOOTHING * rate + (1 - _SMOOTHING) * self._rate
        )  # fmt: skip
        self._last, self._last_done = now, done
        share = f" ({done / total:.1%})" if total else ""
        eta = f", about {_duration((total - done) / self._rate)} left" if self._rate > 0 else ""
        self._stream.write(
            f"{self._label}: {done:,}/{total:,} jobs{share}, {self._rate:,.0f} jobs/s{eta}"
            f" ({_duration(now - self._started)} so far)\n"
        )
        self._stream.flush()


@contextlib.contextmanager
def replay_progress(
    stream: IO[str], total: int, *, quiet: bool, interval: float, label: str
) -> Iterator[ProgressCallback | None]:
    """A ``progress(done, total)`` callback for :func:`~xce_core.sim.simulate`
    showing progress on ``stream`` (see the module docstring), or ``None`` when
    ``quiet``. The bar is removed when the block ends."""
    if quiet:
        yield None
        return
    if not stream.isatty():
        yield _Lines(stream, interval, label)
        return
    with _bar(stream, total, label) as progress:
        yield progress


@contextlib.contextmanager
def _bar(stream: IO[str], total: int, label: str) -> Iterator[ProgressCallback]:
    """The rich bar. Rich is imported here, on a terminal only: a replay in a
    script or a CI job does not pay for importing it (start-up, which counts on
    a short trace)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        """Jobs per second, as rich estimates it."""

        def render(self, task: Task) -> Text:
            speed = task.speed
            text = "" if speed is None else f"{speed:,.0f} jobs/s"
            return Text(text, style="progress.data.speed")

    columns = (
        TextColumn(label),
        BarColumn(),
        TaskProgressColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(file=stream), transient=True) as bar:
        task = bar.add_task(label, total=total)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield progress
