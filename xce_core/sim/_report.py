"""Results of a trace replay: per-job outcomes, the summary metrics, their output.

Metric definitions (``started`` = jobs that got an allocation):

- ``makespan``: last end of a started job minus the first submit of any job
  that was not rejected (0 when nothing started).
- ``wait``: start minus submit, over started jobs; mean, median, p95 (nearest
  rank) and max.
- ``turnaround``: end minus submit (wait + run), over started jobs; mean and max.
- ``bounded_slowdown``: over started jobs,
  ``max(1, (wait + run) / max(run, 10 s))`` (the bound, tau, is
  BOUNDED_SLOWDOWN_TAU = 10 s); mean and max.
- ``slowdown_max``: the largest ``(wait + run) / run`` over started jobs with a
  run time above 0 (undefined for the others).
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
- ``by_size``: per size class with a submitted job, the jobs submitted and
  started, and the started jobs' mean wait, mean turnaround, mean bounded
  slowdown and largest slowdown.
- ``skipped_lines`` / ``skipped_by_reason``: malformed trace lines skipped
  (``--skip-bad``), by kind (see :func:`~xce_core.sim.skip_reason`).
- ``partial``: the replay was stopped before its end (Ctrl-C); ``stopped_at``
  is the virtual instant it reached, ``pending`` the jobs submitted and not
  started then, ``unreplayed`` the jobs not submitted yet. Figures are of what
  was decided.
- ``provenance``: what produced the figures (xce version, trace, options,
  cluster), set by the command line.
- ``limits_raised``: jobs whose run time exceeded their requested time (SWF
  field 9), whose run limit was raised to their run time.
- ``by_user`` / ``by_queue``: per user and per queue (as the replay names them:
  ``u<N>``, ``q<N>``, empty when the trace has -1), the jobs submitted and
  started, their mean wait and the slot-hours they used (JSON only).
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from xce_core.sim._outcomes import JobOutcome, OutcomeColumns, OutcomeTable
from xce_core.sim._provenance import Provenance

__all__ = [
    "BOUNDED_SLOWDOWN_TAU",
    "SIZE_CLASSES",
    "ConsumerFigures",
    "JobOutcome",
    "SimResult",
    "SimSummary",
    "SizeFigures",
    "consumer_figures",
    "format_table",
    "size_class",
    "summarize",
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
    turnaround_mean: float = 0.0
    turnaround_max: float = 0.0
    slowdown_max: float = 0.0
    bounded_slowdown_max: float = 0.0
    by_size: dict[str, SizeFigures] = msgspec.field(default_factory=dict)
    skipped_lines: int = 0
    skipped_by_reason: dict[str, int] = msgspec.field(default_factory=dict)
    pending: int = 0
    unreplayed: int = 0
    partial: bool = False
    stopped_at: float | None = None
    provenance: Provenance | None = None


class SizeFigures(msgspec.Struct, kw_only=True):
    """One size class's share of a replay (started jobs' means; 0 when none)."""

    jobs: int = 0
    started: int = 0
    wait_mean: float = 0.0
    turnaround_mean: float = 0.0
    bounded_slowdown_mean: float = 0.0
    slowdown_max: float = 0.0


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
    "bounded_slowdown_max",
    "turnaround_mean",
    "turnaround_max",
    "slowdown_max",
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
    turnarounds = [(w or 0.0) + r for w, r in zip(c.wait, c.run_time, strict=True)]
    slowdowns = [max(1.0, t / max(r, tau)) for t, r in zip(turnarounds, c.run_time, strict=True)]
    plain = [t / r for t, r in zip(turnarounds, c.run_time, strict=True) if r > 0]
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
        bounded_slowdown_max=max(slowdowns, default=0.0),
        turnaround_mean=statistics.fmean(turnarounds) if turnarounds else 0.0,
        turnaround_max=max(turnarounds, default=0.0),
        slowdown_max=max(plain, default=0.0),
        utilisation=work / (makespan * total_slots) if makespan > 0 and total_slots else 0.0,
        sessions=sessions,
        sessions_skipped=sessions_skipped,
        wall_time_s=wall_time_s,
        jobs_per_s=c.jobs / wall_time_s if wall_time_s > 0 else 0.0,
        backfilled=backfilled,
        wait_mean_by_size=_wait_by_size(c.wait, c.slots),
        limits_raised=limits_raised,
        by_size=_by_size(c, turnarounds, slowdowns),
        pending=c.pending,
        unreplayed=c.unreplayed,
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


def size_class(size: int) -> str:
    """The name of the size class (:data:`SIZE_CLASSES`) of a job of ``size`` tasks."""
    for lo, hi, name in SIZE_CLASSES:
        if lo <= size <= hi:
            return name
    return SIZE_CLASSES[0][2]  # size < 1: never submitted


def _by_size(
    c: OutcomeColumns, turnarounds: Sequence[float], slowdowns: Sequence[float]
) -> dict[str, SizeFigures]:
    out: dict[str, SizeFigures] = {}
    for size in c.queued_procs:
        name = size_class(size)
        figures = out.get(name)
        if figures is None:
            figures = out[name] = SizeFigures()
        figures.jobs += 1
    for size, wait, run, turnaround, bsld in zip(
        c.slots, c.wait, c.run_time, turnarounds, slowdowns, strict=True
    ):
        figures = out.setdefault(size_class(size), SizeFigures())
        figures.started += 1
        # Sums until the end.
        figures.wait_mean += wait or 0.0
        figures.turnaround_mean += turnaround
        figures.bounded_slowdown_mean += bsld
        if run > 0:
            figures.slowdown_max = max(figures.slowdown_max, turnaround / run)
    for figures in out.values():
        if figures.started:
            figures.wait_mean /= figures.started
            figures.turnaround_mean /= figures.started
            figures.bounded_slowdown_mean /= figures.started
    return {name: out[name] for _, _, name in SIZE_CLASSES if name in out}


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


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def format_table(summary: SimSummary) -> str:
    """The summary as an aligned two-column text table (no trailing newline). A
    partial summary starts with a ``PARTIAL`` row."""
    s = summary
    rows: list[tuple[str, str]] = []
    if s.partial:
        rows.append(
            (
                "PARTIAL",
                f"stopped at t={s.stopped_at or 0.0:.0f} s: {s.pending} jobs pending,"
                f" {s.unreplayed} not replayed; the figures are of what was decided",
            )
        )
    rows += [("policy", s.policy), ("cluster", f"{s.hosts} hosts, {s.total_slots} slots")]
    p = s.provenance
    if p is not None:
        if p.trace is not None:
            rows.append(("trace", f"{p.trace.name} (sha256 {p.trace.sha256[:16]})"))
        rows.append(("xce", p.xce_version))
    rejected = _counts(s.rejected_by_reason)
    rows += [
        ("jobs", f"{s.jobs}"),
        ("started", f"{s.started}"),
        ("rejected", f"{s.rejected}" + (f" ({rejected})" if rejected else "")),
        ("never started", f"{s.never_started}"),
    ]
    if s.skipped_lines:
        rows.append(("skipped lines", f"{s.skipped_lines} ({_counts(s.skipped_by_reason)})"))
    rows += [
        ("makespan", _duration(s.makespan)),
        ("wait mean", _duration(s.wait_mean)),
        ("wait median", _duration(s.wait_median)),
        ("wait p95", _duration(s.wait_p95)),
        ("wait max", _duration(s.wait_max)),
        ("turnaround mean", _duration(s.turnaround_mean)),
        ("turnaround max", _duration(s.turnaround_max)),
        (
            "bounded slowdown",
            f"{s.bounded_slowdown_mean:.2f} mean, {s.bounded_slowdown_max:.2f} max"
            f" (tau {BOUNDED_SLOWDOWN_TAU:g} s)",
        ),
        ("slowdown max", f"{s.slowdown_max:.2f} (jobs that ran > 0 s)"),
        ("utilisation", f"{s.utilisation:.1%}"),
        ("sessions", f"{s.sessions} run, {s.sessions_skipped} skipped (could start nothing)"),
        ("backfilled", f"{s.backfilled} (started ahead of a job still pending)"),
        (
            "wait by size",
            ", ".join(f"{k}: {_duration(v)}" for k, v in s.wait_mean_by_size.items()) or "-",
        ),
    ]
    for name, f in s.by_size.items():
        rows.append(
            (
                f"size {name}",
                f"{f.jobs} jobs, {f.started} started: wait {_duration(f.wait_mean)},"
                f" turnaround {_duration(f.turnaround_mean)},"
                f" bounded slowdown {f.bounded_slowdown_mean:.2f},"
                f" slowdown max {f.slowdown_max:.2f}",
            )
        )
    rows += [
        ("limits raised", f"{s.limits_raised} (ran longer than requested)"),
        ("wall time", f"{s.wall_time_s:.3f} s"),
        ("jobs/s", f"{s.jobs_per_s:,.0f}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
