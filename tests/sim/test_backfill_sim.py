"""``xce simulate --backfill easy``: the replay's schedule equals a plain textbook
EASY (tests/core/test_backfill.py) on one-slot hosts, and the summary's
backfill figures."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_backfill import TJob, textbook_easy
from xce_core import SchedulerConfig
from xce_core.cli import main as cli_main
from xce_core.sim import SwfJob, default_cluster, run_limit, simulate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "synthetic.swf"


def swf(job_id: int, submit: float, size: int, run: float, req: float) -> SwfJob:
    return SwfJob(
        job_id=job_id, submit=submit, wait=-1, run_time=run, alloc_procs=size, avg_cpu=-1,
        used_mem=-1, req_procs=size, req_time=req, req_mem=-1, status=1, user=1, group=1,
        executable=-1, queue=1, partition=-1, preceding_job=-1, think_time=-1,
    )  # fmt: skip


def replay(jobs: list[SwfJob], hosts: int, backfill: str = "easy") -> dict[str, float]:
    cluster = default_cluster({}, jobs, hosts=hosts, slots=1)

    async def run() -> dict[str, float]:
        result = await simulate(jobs, cluster, config=SchedulerConfig(backfill=backfill))
        return {o.job_id: o.start for o in result.jobs if o.start is not None}

    return anyio.run(run)


rows = st.lists(
    st.tuples(
        st.integers(0, 40),  # submit
        st.integers(1, 8),  # size
        st.integers(0, 30),  # run time
        st.integers(-12, 12),  # requested - run (<= 0: raised to the run time; -12: none)
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows)
def test_the_replay_equals_the_textbook_rule(data: list[tuple[int, int, int, int]]) -> None:
    jobs = [
        swf(i + 1, float(s), size, float(run), -1.0 if over == -12 else float(max(run + over, 1)))
        for i, (s, size, run, over) in enumerate(data)
    ]
    reference = textbook_easy(
        [TJob(str(j.job_id), j.submit, j.size, j.run_time, run_limit(j)) for j in jobs],
        8,
        one_pass_per_instant=True,
    )
    assert replay(jobs, 8) == reference


def test_requested_times_become_run_limits_raised_to_the_run_time() -> None:
    assert run_limit(swf(1, 0, 1, 50, 100)) == 100
    assert run_limit(swf(1, 0, 1, 50, 20)) == 50  # ran longer than requested: raised
    assert run_limit(swf(1, 0, 1, 50, -1)) is None  # not recorded


def test_the_summary_counts_backfilled_jobs_and_raised_limits(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    jobs = [
        swf(1, 0, 3, 10, 10),
        swf(2, 1, 4, 5, 5),  # the head: waits for 10
        swf(3, 2, 1, 5, 3),  # requested 3, ran 5 (raised): ends by 10, backfills
    ]
    trace.write_text("; MaxProcs: 4\n" + "\n".join(j.to_line() for j in jobs) + "\n")
    out = CliRunner().invoke(cli_main, ["simulate", str(trace), "--backfill", "easy", "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    assert summary["policy"] == "fcfs easy-backfill"
    assert (summary["backfilled"], summary["limits_raised"]) == (1, 1)
    assert set(summary["wait_mean_by_size"]) == {"1", "2-4"}


def test_the_bundled_example_replays_with_backfill() -> None:
    out = CliRunner().invoke(cli_main, ["simulate", str(EXAMPLE), "--backfill", "easy"])
    assert out.exit_code == 0, out.output
    assert "easy-backfill" in out.output


def test_json_gives_per_user_and_per_queue_figures_that_add_up() -> None:
    out = CliRunner().invoke(cli_main, ["simulate", str(EXAMPLE), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    for by in (summary["by_user"], summary["by_queue"]):
        assert sum(f["jobs"] for f in by.values()) == summary["jobs"] - summary["rejected"]
        assert sum(f["started"] for f in by.values()) == summary["started"]
        waited = sum(f["wait_mean"] * f["started"] for f in by.values())
        assert abs(waited / summary["started"] - summary["wait_mean"]) < 1e-6 * max(
            1.0, summary["wait_mean"]
        )
    work = summary["utilisation"] * summary["makespan"] * summary["total_slots"] / 3600
    assert abs(sum(f["slot_hours"] for f in summary["by_user"].values()) - work) < 1e-6 * work
    assert len(summary["by_user"]) > 1
