"""Plots and step functions of a replay: :func:`timeline` (busy slots and queued
jobs over time) and :func:`plot_timeline`, which draws it with matplotlib (the
optional ``plot`` extra; :func:`check_plot` checks it before a replay)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xce_core import XceError
from xce_core.sim._outcomes import JobOutcome, OutcomeColumns
from xce_core.sim._report import SimResult

__all__ = ["check_plot", "plot_timeline", "timeline"]


def timeline(outcomes: Iterable[JobOutcome]) -> tuple[list[float], list[int], list[int]]:
    """Step functions over time: instants, busy slots and queued jobs after each.

    A job is queued from its submit to its start (to the end of the replay when
    it never started); rejected jobs are never queued. ``outcomes``: objects, or
    an :class:`~xce_core.sim.OutcomeTable`, read by column.
    """
    c = OutcomeColumns.of(outcomes)
    changes: dict[float, list[int]] = {}
    for submit in c.queued_submits:
        changes.setdefault(submit, [0, 0])[1] += 1
    for start, end, slots in zip(c.start, c.end, c.slots, strict=True):
        if start is not None and end is not None:
            changes.setdefault(start, [0, 0])[1] -= 1
            changes.setdefault(start, [0, 0])[0] += slots
            changes.setdefault(end, [0, 0])[0] -= slots
    times: list[float] = []
    busy: list[int] = []
    queued: list[int] = []
    b = q = 0
    for t in sorted(changes):
        db, dq = changes[t]
        b += db
        q += dq
        times.append(t)
        busy.append(b)
        queued.append(q)
    return times, busy, queued


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; :class:`XceError` saying how to
    install it when missing."""
    try:
        # Imported by name: matplotlib is an optional extra without type stubs here.
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        return importlib.import_module("matplotlib.pyplot")
    except ImportError:
        raise XceError(
            "plots need matplotlib: pip install 'xce[plot]' (or pip install matplotlib)"
        ) from None


def check_plot(path: Path) -> None:
    """Check, before a replay, what :func:`plot_timeline` will need: raises
    :class:`XceError` when matplotlib does not import, ``ValueError`` when it does
    not write the format of ``path``'s suffix (none: PNG). Does not touch ``path``."""
    plt = _pyplot()
    suffix = path.suffix[1:].lower()
    fig = plt.figure()
    formats = fig.canvas.get_supported_filetypes()
    plt.close(fig)
    if suffix and suffix not in formats:
        raise ValueError(
            f"{path}: matplotlib does not write {suffix!r} files"
            f" (it writes {', '.join(sorted(formats))})"
        )


def plot_timeline(result: SimResult, path: Path, title: str = "") -> None:
    """Draw utilisation and queue length over time into ``path`` (PNG, SVG... by
    suffix). Raises :class:`XceError` telling how to install matplotlib if missing,
    ``OSError`` if ``path`` cannot be written."""
    plt = _pyplot()
    times, busy, queued = timeline(result.jobs)
    total = result.summary.total_slots or 1
    hours = [t / 3600.0 for t in times]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    top.step(hours, [100.0 * b / total for b in busy], where="post", linewidth=0.7)
    top.set_ylabel("utilisation (%)")
    top.set_ylim(0, 105)
    bottom.step(hours, queued, where="post", linewidth=0.7, color="tab:orange")
    bottom.set_ylabel("queued jobs")
    bottom.set_xlabel("time (h)")
    fig.suptitle(title or f"{result.summary.policy}: {result.summary.jobs} jobs")
    fig.tight_layout()
    try:
        # The format given, so a name without a suffix is written as named (PNG).
        fig.savefig(path, format=path.suffix[1:].lower() or "png")
    finally:
        plt.close(fig)
