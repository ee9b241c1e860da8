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

__all__ = ["check_plot", "plot_timeline", "pyplot", "timeline", "user_usage"]


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


def user_usage(
    outcomes: Iterable[JobOutcome], top: int
) -> tuple[list[float], dict[str, list[int]]]:
    """Running slots per user over time, for the ``top`` users with the most
    slot-hours (every other user summed as ``"other"``): the instants, and each
    user's slots after each. For comparing users under fairshare."""
    started = [
        (o.user, o.procs, o.start, o.end)
        for o in outcomes
        if o.start is not None and o.end is not None
    ]
    used: dict[str, float] = {}
    for user, procs, start, end in started:
        used[user] = used.get(user, 0.0) + procs * (end - start)
    shown = sorted(used, key=lambda user: (-used[user], user))[:top]
    names = {user: user for user in shown}
    changes: dict[float, dict[str, int]] = {}
    for user, procs, start, end in started:
        name = names.get(user, "other")
        for t, delta in ((start, procs), (end, -procs)):
            at = changes.setdefault(t, {})
            at[name] = at.get(name, 0) + delta
    series: dict[str, list[int]] = {name: [] for name in [*shown, "other"]}
    now = dict.fromkeys(series, 0)
    times: list[float] = []
    for t in sorted(changes):
        for name, delta in changes[t].items():
            now[name] += delta
        times.append(t)
        for name, values in series.items():
            values.append(now[name])
    if not any(series["other"]):
        del series["other"]
    return times, series


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; :class:`XceError` saying how to
    install it when missing (the simulator's and the sweep's plots)."""
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
    plt = pyplot()
    suffix = path.suffix[1:].lower()
    fig = plt.figure()
    formats = fig.canvas.get_supported_filetypes()
    plt.close(fig)
    if suffix and suffix not in formats:
        raise ValueError(
            f"{path}: matplotlib does not write {suffix!r} files"
            f" (it writes {', '.join(sorted(formats))})"
        )


def plot_timeline(result: SimResult, path: Path, title: str = "", users: int = 0) -> None:
    """Draw utilisation and queue length over time into ``path`` (PNG, SVG... by
    suffix), and with ``users`` > 0 a third panel: the running slots of the
    ``users`` heaviest users, stacked. Raises :class:`XceError` telling how to
    install matplotlib if missing, ``OSError`` if ``path`` cannot be written."""
    plt = pyplot()
    times, busy, queued = timeline(result.jobs)
    total = result.summary.total_slots or 1
    hours = [t / 3600.0 for t in times]
    panels = 3 if users > 0 else 2
    fig, axes = plt.subplots(panels, 1, sharex=True, figsize=(10, 3 * panels))
    top, bottom = axes[0], axes[1]
    if users > 0:
        at, series = user_usage(result.jobs, users)
        axes[2].stackplot(
            [t / 3600.0 for t in at], *series.values(), labels=list(series), step="post"
        )
        axes[2].set_ylabel("running slots by user")
        axes[2].legend(loc="upper left", fontsize="small", ncol=min(len(series), 6))
        axes[2].set_xlabel("time (h)")
    top.step(hours, [100.0 * b / total for b in busy], where="post", linewidth=0.7)
    top.set_ylabel("utilisation (%)")
    top.set_ylim(0, 105)
    bottom.step(hours, queued, where="post", linewidth=0.7, color="tab:orange")
    bottom.set_ylabel("queued jobs")
    if panels == 2:
        bottom.set_xlabel("time (h)")
    fig.suptitle(title or f"{result.summary.policy}: {result.summary.jobs} jobs")
    fig.tight_layout()
    try:
        # The format given, so a name without a suffix is written as named (PNG).
        fig.savefig(path, format=path.suffix[1:].lower() or "png")
    finally:
        plt.close(fig)
