"""Comparison plots of a sweep (matplotlib, the ``plot`` extra): per policy,
box plots of the jobs' waits and bounded slowdowns, and the queue length over
time; one panel per scenario (trace and cluster)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any, Final

from xce_core.sim import BOUNDED_SLOWDOWN_TAU, pyplot
from xce_core.sim.sweep._runs import RunRecord, SweepRun

__all__ = ["PLOT_FILES", "check_plots", "plot_comparison", "queue_length"]

PLOT_FILES: Final = ("wait.png", "slowdown.png", "queue.png")

Scenario = tuple[str, str]


def check_plots() -> None:
    """Before a sweep: raises :class:`XceError` when matplotlib does not import."""
    pyplot()


def queue_length(record: RunRecord) -> tuple[list[float], list[int]]:
    """The jobs queued (submitted, not started) after each change, as a step
    function: instants (ascending) and lengths."""
    changes: dict[float, int] = {}
    for submit, start in zip(record.submit, record.start, strict=True):
        changes[submit] = changes.get(submit, 0) + 1
        if not math.isnan(start):
            changes[start] = changes.get(start, 0) - 1
    times = sorted(changes)
    return times, list(accumulate(changes[t] for t in times))


def _scenarios(
    rows: Sequence[tuple[SweepRun, RunRecord]],
) -> dict[Scenario, list[tuple[str, RunRecord]]]:
    out: dict[Scenario, list[tuple[str, RunRecord]]] = {}
    for run, record in rows:
        out.setdefault((run.trace.name, run.cluster.name), []).append((run.policy.name, record))
    return out


def _grid(plt: Any, panels: int, height: float) -> tuple[Any, list[Any]]:
    columns = min(panels, 2)
    lines = math.ceil(panels / columns)
    fig, axes = plt.subplots(
        lines, columns, figsize=(6.5 * columns, height * lines), squeeze=False
    )
    flat = [ax for line in axes for ax in line]
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def plot_comparison(rows: Sequence[tuple[SweepRun, RunRecord]], directory: Path) -> list[Path]:
    """Draw ``wait.png``, ``slowdown.png`` and ``queue.png`` into ``directory``
    (created if missing) and return their paths. Raises :class:`XceError`
    when matplotlib is missing, ``OSError`` when a file cannot be written."""
    plt = pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    scenarios = _scenarios(rows)
    written: list[Path] = []

    def boxes(name: str, ylabel: str, values: Any, log: bool) -> None:
        fig, axes = _grid(plt, len(scenarios), 4.0)
        try:
            for ax, ((trace, cluster), runs) in zip(axes, scenarios.items(), strict=True):
                ax.boxplot(
                    [values(record) or [0.0] for _, record in runs],
                    showfliers=True,
                    flierprops={"markersize": 2, "alpha": 0.3},
                )
                ax.set_xticks(range(1, len(runs) + 1), [policy for policy, _ in runs])
                ax.tick_params(axis="x", labelrotation=20)
                if log:
                    ax.set_yscale("log")
                else:
                    # Many waits are 0: linear near 0, logarithmic above.
                    ax.set_yscale("symlog", linthresh=0.1)
                    ax.set_ylim(bottom=0)
                ax.set_ylabel(ylabel)
                ax.set_title(f"{trace} on {cluster}", fontsize="medium")
            fig.tight_layout()
            path = directory / name
            fig.savefig(path)
            written.append(path)
        finally:
            plt.close(fig)

    boxes("wait.png", "wait (h)", lambda r: [w / 3600.0 for w in r.waits()], False)
    boxes(
        "slowdown.png",
        f"bounded slowdown (tau {BOUNDED_SLOWDOWN_TAU:g} s)",
        lambda r: r.bounded_slowdowns(BOUNDED_SLOWDOWN_TAU),
        True,
    )
    fig, axes = _grid(plt, len(scenarios), 3.5)
    try:
        for ax, ((trace, cluster), runs) in zip(axes, scenarios.items(), strict=True):
            for policy, record in runs:
                times, queued = queue_length(record)
                origin = times[0] if times else 0.0
                ax.step(
                    [(t - origin) / 3600.0 for t in times],
                    queued,
                    where="post",
                    linewidth=0.7,
                    label=policy,
                )
            ax.set_xlabel("time (h)")
            ax.set_ylabel("queued jobs")
            ax.set_title(f"{trace} on {cluster}", fontsize="medium")
            ax.legend(fontsize="small")
        fig.tight_layout()
        path = directory / "queue.png"
        fig.savefig(path)
        written.append(path)
    finally:
        plt.close(fig)
    return written
