"""Replay summaries: never an infinite or undefined figure."""

from __future__ import annotations

import math

import pytest

from xce_core.sim import JobOutcome, summarize


def started(run_time: float, end: float) -> JobOutcome:
    return JobOutcome(
        job_id="1", submit=0, run_time=run_time, procs=1, status="started", start=0, end=end,
        wait=0, hosts=[("h1", 1)],
    )  # fmt: skip


def test_summary_figures_are_finite_or_refused() -> None:
    s = summarize([started(1e10, 1e10)], policy="fcfs", hosts=1, total_slots=1, sessions=1,
                  wall_time_s=1e-9)  # fmt: skip
    assert (s.makespan, s.utilisation) == (1e10, 1.0)
    with pytest.raises(ValueError, match="makespan is not finite"):
        summarize([started(math.inf, math.inf)], policy="fcfs", hosts=1, total_slots=1,
                  sessions=1, wall_time_s=1)  # fmt: skip
