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


def test_user_usage_steps_the_heaviest_users_and_sums_the_rest() -> None:
    from xce_core.sim import user_usage
    from xce_core.sim._outcomes import JobOutcome

    def ran(user: str, procs: int, start: float, end: float) -> JobOutcome:
        return JobOutcome(
            job_id=f"{user}{start}",
            submit=0.0,
            run_time=end - start,
            procs=procs,
            status="started",
            start=start,
            end=end,
            wait=start,
            user=user,
        )

    jobs = [ran("ann", 4, 0, 10), ran("bob", 1, 5, 15), ran("cy", 2, 5, 6), ran("ann", 1, 10, 12)]
    jobs.append(JobOutcome(job_id="never", submit=0.0, run_time=1.0, procs=8, user="dee"))
    times, series = user_usage(jobs, 2)
    # ann 42 slot-seconds, bob 10, cy 2 (summed as "other"); dee never ran.
    assert times == [0, 5, 6, 10, 12, 15]
    assert series == {
        "ann": [4, 4, 4, 1, 0, 0],
        "bob": [0, 1, 1, 1, 1, 0],
        "other": [0, 2, 0, 0, 0, 0],
    }
    assert list(user_usage(jobs, 5)[1]) == ["ann", "bob", "cy"]
