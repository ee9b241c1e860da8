"""Results of a trace replay: per-job outcomes, the summary metrics, their output.

Metric definitions (``started`` = jobs that got an allocation):

- ``makespan``: last end of a started job minus the first submit of any job
  that was not rejected (0 when nothing started).
- ``wait``: start minus submit, over started jobs; mean, median, p95 (nearest
  rank) and max.
- ``bounded_slowdown``: mean over started jobs of
  ``max(1, (wait + run) / max(run, 10 s))``.
- ``utilisation``: the sum of allocated slots x run time over started jobs,
  divided by ``makespan x total slots``.
- ``sessions`` run and ``sessions_skipped`` (instants with pending jobs where no
  job could start, see :func:`~xce_core.sim._replay.simulate`).
- ``jobs_per_s``: replayed jobs divided by the wall time of the replay.
- ``backfilled``: started jobs that started while a job ahead of them in
  submit order was still pending (with ``--backfill easy``, the jobs that
  backfilled; without backfill, those that overtook a job that could not start).
- ``wait_mean_by_size``: mean wait of started jobs per size class (tasks: 1,
  2-4, 5-16, 17-64, 65-256, 257+; classes without a started job are left out).
- ``limits_raised``: jobs whose run time exceeded their requested time (SWF
  field 9), whose run limit was raised to their run time.
- ``by_user`` / ``by_queue``: per user and per queue (as the replay names them:
  ``u<N>``, ``q<N>``, empty when the trace has -1), the jobs submitted and
  started, their mean wait and the slot-hours they used (JSON only).
"""

from __future__ import annotations

import importlib
import math
import operator
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from xce_core import XceError
from xce_core.sim._outcomes import JobOutcome, OutcomeColumns, OutcomeTable

__all__ = [
    "BOUNDED_SLOWDOWN_TAU",
    "ConsumerFigures",
    "consumer_figures",
    "JobOutcome",
    "SimResult",
    "SimSummary",
    "check_plot",
    "format_table",
    "plot_timeline",
    "summarize",
    "timeline",
    "write_schedule",
]

BOUNDED_SLOWDOWN_TAU: Final = 10.0


class SimSummary(msgspec.Struct, kw_only=True):
    """Aggregate figures of one replay (see the module docstring for definitions)."""

    policy: str
    hosts: int
    total_slots: int
    jobs: int
    started: int
    rejected: int
    rejected_by_reason: dict[str, int]
    never_started: int
    makespan: float
    wait_mean: float
    wait_median: float
    wait_p95: float
    wait_max: float
    bounded_slowdown_mean: float
    utilisation: float
    sessions: int
    sessions_skipped: int
    wall_time_s: float
    jobs_per_s: float
    backfilled: int = 0
    wait_mean_by_size: dict[str, float] = msgspec.field(default_factory=dict)
    limits_raised: int = 0
    by_user: dict[str, ConsumerFigures] = msgspec.field(default_factory=dict)
    by_queue: dict[str, ConsumerFigures] = msgspec.field(default_factory=dict)


class ConsumerFigures(msgspec.Struct, kw_only=True):
    """One user's or queue's share of a replay."""

    jobs: int = 0
    started: int = 0
    wait_mean: float = 0.0
    slot_hours: float = 0.0


class SimResult(msgspec.Struct, kw_only=True):
    """A replay's summary and every job's outcome in trace order (from
    :func:`~xce_core.sim.simulate`, an :class:`~xce_core.sim.OutcomeTable`)."""

    summary: SimSummary
    jobs: Sequence[JobOutcome]

    def __repr__(self) -> str:
        # Short whatever the replay's size: asyncio formats a finished task's
        # result (Python 3.11's Runner), and the per-user figures of a big
        # trace run to megabytes.
        s = self.summary
        return (
            f"SimResult(policy={s.policy!r}, jobs={s.jobs}, started={s.started},"
            f" wait_mean={s.wait_mean:g}, users={len(s.by_user)}, outcomes={len(self.jobs)})"
        )


_FIGURES: Final = (
    "makespan",
    "wait_mean",
    "wait_median",
    "wait_p95",
    "wait_max",
    "bounded_slowdown_mean",
    "utilisation",
    "wall_time_s",
    "jobs_per_s",
)


def _percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of non-empty, sorted values."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(
    outcomes: Iterable[JobOutcome],
    *,
    policy: str,
    hosts: int,
    total_slots: int,
    sessions: int,
    sessions_skipped: int = 0,
    wall_time_s: float,
    backfilled: int = 0,
    limits_raised: int = 0,
) -> SimSummary:
    """Compute the summary of finished replay ``outcomes`` (objects, or an
    :class:`~xce_core.sim.OutcomeTable`, read by column). Pure.

    Raises ``ValueError`` if a figure would not be finite, which outcomes of jobs
    within the SWF limits (:mod:`xce_core.sim._swf_record`) never cause."""
    c = OutcomeColumns.of(outcomes)
    rejected: dict[str, int] = {}
    for reason in c.rejected_reasons:
        key = reason.split(":", 1)[0]
        rejected[key] = rejected.get(key, 0) + 1
    waits = sorted(w for w in c.wait if w is not None)
    first_submit = min(c.queued_submits, default=0.0)
    last_end = max((e for e in c.end if e is not None), default=first_submit)
    makespan = max(0.0, last_end - first_submit) if c.slots else 0.0
    work = sum(map(operator.mul, c.slots, c.run_time))
    tau = BOUNDED_SLOWDOWN_TAU
    slowdowns = [
        max(1.0, ((w or 0.0) + r) / max(r, tau)) for w, r in zip(c.wait, c.run_time, strict=True)
    ]
    summary = SimSummary(
        policy=policy,
        hosts=hosts,
        total_slots=total_slots,
        jobs=c.jobs,
        started=len(c.slots),
        rejected=sum(rejected.values()),
        rejected_by_reason=dict(sorted(rejected.items())),
        never_started=c.never_started,
        makespan=makespan,
        wait_mean=statistics.fmean(waits) if waits else 0.0,
        wait_median=statistics.median(waits) if waits else 0.0,
        wait_p95=_percentile(waits, 0.95) if waits else 0.0,
        wait_max=waits[-1] if waits else 0.0,
        bounded_slowdown_mean=statistics.fmean(slowdowns) if slowdowns else 0.0,
        utilisation=work / (makespan * total_slots) if makespan > 0 and total_slots else 0.0,
        sessions=sessions,
        sessions_skipped=sessions_skipped,
        wall_time_s=wall_time_s,
        jobs_per_s=c.jobs / wall_time_s if wall_time_s > 0 else 0.0,
        backfilled=backfilled,
        wait_mean_by_size=_wait_by_size(c.wait, c.slots),
        limits_raised=limits_raised,
    )
    for name in _FIGURES:
        if not math.isfinite(getattr(summary, name)):
            raise ValueError(f"{name} is not finite: a job outcome is outside the SWF limits")
    return summary


def consumer_figures(
    names: Sequence[str], submitted: Iterable[int], table: OutcomeTable
) -> dict[str, ConsumerFigures]:
    """Per consumer, ``names[i]`` being job ``i``'s: the ``submitted`` jobs'
    count, and the started jobs' count, mean wait and slot-hours."""
    out: dict[str, ConsumerFigures] = {}
    for index in submitted:
        name = names[index]
        figures = out.get(name)
        if figures is None:
            figures = out[name] = ConsumerFigures()
        figures.jobs += 1
    for index, submit, start, run_time, slots in table.started_jobs():
        figures = out[names[index]]
        figures.started += 1
        figures.wait_mean += start - submit  # a sum until the end
        figures.slot_hours += slots * run_time / 3600.0
    for figures in out.values():
        if figures.started:
            figures.wait_mean /= figures.started
    return dict(sorted(out.items()))


# Size classes (tasks) of wait_mean_by_size: powers of four.
SIZE_CLASSES: Final = ((1, 1, "1"), (2, 4, "2-4"), (5, 16, "5-16"), (17, 64, "17-64"),
                       (65, 256, "65-256"), (257, math.inf, "257+"))  # fmt: skip


def _wait_by_size(waits: Sequence[float | None], slots: Sequence[int]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for wait, size in zip(waits, slots, strict=True):
        for lo, hi, name in SIZE_CLASSES:
            if lo <= size <= hi:
                entry = sums.setdefault(name, [0.0, 0.0])
                entry[0] += wait or 0.0
                entry[1] += 1
                break
    return {name: sums[name][0] / sums[name][1] for _, _, name in SIZE_CLASSES if name in sums}


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds:.0f} s ({seconds / 60:.1f} min)"
    if seconds < 86400:
        return f"{seconds:.0f} s ({seconds / 3600:.1f} h)"
    return f"{seconds:.0f} s ({seconds / 86400:.1f} d)"


def format_table(summary: SimSummary) -> str:
    """The summary as an aligned two-column text table (no trailing newline)."""
    s = summary
    rejected = ", ".join(f"{k} {v}" for k, v in s.rejected_by_reason.items())
    rows = [
        ("policy", s.policy),
        ("cluster", f"{s.hosts} hosts, {s.total_slots} slots"),
        ("jobs", f"{s.jobs}"),
        ("started", f"{s.started}"),
        ("rejected", f"{s.rejected}" + (f" ({rejected})" if rejected else "")),
        ("never started", f"{s.never_started}"),
        ("makespan", _duration(s.makespan)),
        ("wait mean", _duration(s.wait_mean)),
        ("wait median", _duration(s.wait_median)),
        ("wait p95", _duration(s.wait_p95)),
        ("wait max", _duration(s.wait_max)),
        ("bounded slowdown", f"{s.bounded_slowdown_mean:.2f} (mean, tau 10 s)"),
        ("utilisation", f"{s.utilisation:.1%}"),
        ("sessions", f"{s.sessions} run, {s.sessions_skipped} skipped (could start nothing)"),
        ("backfilled", f"{s.backfilled} (started ahead of a job still pending)"),
        (
            "wait by size",
            ", ".join(f"{k}: {_duration(v)}" for k, v in s.wait_mean_by_size.items()) or "-",
        ),
        ("limits raised", f"{s.limits_raised} (ran longer than requested)"),
        ("wall time", f"{s.wall_time_s:.3f} s"),
        ("jobs/s", f"{s.jobs_per_s:,.0f}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def write_schedule(path: Path, outcomes: Iterable[JobOutcome]) -> None:
    """Write one JSON object per job (trace order) to ``path`` (JSON Lines)."""
    encoder = msgspec.json.Encoder()
    with path.open("wb") as out:
        for outcome in outcomes:
            out.write(encoder.encode(outcome))
            out.write(b"\n")


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
            "--plot needs matplotlib: pip install 'xce[plot]' (or pip install matplotlib)"
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
