"""Trace replay: a tiny trace whose schedule is worked out by hand, both policies."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from events import FairshareConfig, ShareTree
from xce_core import FairshareParams, SchedulerConfig
from xce_core.sim._cluster import (
    ClusterSpec,
    HostGroup,
    SimulationError,
    default_cluster,
    load_cluster,
)
from xce_core.sim._plot import timeline
from xce_core.sim._replay import job_request, simulate
from xce_core.sim._report import JobOutcome, summarize
from xce_core.sim._swf import SwfJob, parse_swf_line, read_swf


def swf(job_id: int, submit: float, run: float, procs: int, **fields: float) -> SwfJob:
    """A job with allocated processors ``procs`` and everything else -1 unless given."""
    values = dict.fromkeys(SwfJob.__struct_fields__, -1)
    values.update(job_id=job_id, submit=submit, run_time=run, alloc_procs=procs, **fields)
    return parse_swf_line(" ".join(str(values[name]) for name in SwfJob.__struct_fields__))


# Four one-slot hosts. By hand (F = FCFS, S = strict FIFO):
#   t=0  1 (2 procs, 10 s) and 2 (1, 5 s) start: 1 slot free.
#   t=1  3 (3 procs) cannot start.                       F and S: pending
#   t=2  4 (1 proc, 3 s): F starts it (3 does not stop it); S waits behind 3.
#   t=3  5 (1 proc, 0 s): no slot free.
#   t=5  2 (and in F 4) finish. F: 3 still cannot start, 5 starts and ends at 5.
#                                S: 2 free slots, 3 blocks everything.
#   t=10 1 finishes: 3 starts (F and S); S also starts 4, then 5 finds no slot.
#   t=13 S: 4 finishes, 5 starts and ends at 13.    t=14 3 finishes.
# Jobs 6 (run time -1), 7 (8 procs) and 8 (no size) are rejected.
TINY = [
    swf(1, 0, 10, 2),
    swf(2, 0, 5, 1),
    swf(3, 1, 4, 3),
    swf(4, 2, 3, 1),
    swf(5, 3, 0, 1),
    swf(6, 4, -1, 1),
    swf(7, 4, 5, 8),
    swf(8, 5, 2, -1),
]
FOUR_HOSTS = ClusterSpec((HostGroup(count=4, slots=1),))
FCFS_STARTS = {"1": 0.0, "2": 0.0, "3": 10.0, "4": 2.0, "5": 5.0}
FIFO_STARTS = {"1": 0.0, "2": 0.0, "3": 10.0, "4": 10.0, "5": 13.0}


def starts(jobs: list[JobOutcome]) -> dict[str, float | None]:
    return {o.job_id: o.start for o in jobs if o.status == "started"}


@pytest.mark.parametrize("every_instant", [False, True])
async def test_fcfs_lets_a_small_later_job_pass_a_blocked_big_one(every_instant: bool) -> None:
    result = await simulate(TINY, FOUR_HOSTS, every_instant=every_instant)
    assert starts(result.jobs) == FCFS_STARTS
    by_id = {o.job_id: o for o in result.jobs}
    assert by_id["5"].end == 5.0
    assert by_id["3"].end == 14.0
    assert by_id["1"].slots == 2
    assert len({host for host, _ in by_id["3"].hosts}) == 3
    s = result.summary
    assert (s.jobs, s.started, s.rejected, s.never_started) == (8, 5, 3, 0)
    assert s.rejected_by_reason == {"no_runtime": 1, "no_size": 1, "too_big": 1}
    assert s.makespan == 14.0
    assert s.wait_mean == pytest.approx(11 / 5)  # waits 0, 0, 9, 0, 2
    assert (s.wait_median, s.wait_p95, s.wait_max) == (0.0, 9.0, 9.0)
    assert s.bounded_slowdown_mean == pytest.approx(1.06)  # only job 3 above 1: 13/10
    assert s.utilisation == pytest.approx(40 / 56)  # 2*10 + 5 + 3*4 + 3 + 0 over 14 s x 4
    # Sessions at t = 0, 2, 5, 10 (one an instant: job 5 ends after t=5's);
    # at t = 1 and 3 nothing fits.
    assert (s.sessions, s.sessions_skipped) == ((6, 0) if every_instant else (4, 2))


@pytest.mark.parametrize("every_instant", [False, True])
async def test_strict_fifo_waits_behind_the_blocked_job(every_instant: bool) -> None:
    config = SchedulerConfig(strict_fifo=True)
    result = await simulate(TINY, FOUR_HOSTS, config=config, every_instant=every_instant)
    assert starts(result.jobs) == FIFO_STARTS
    s = result.summary
    assert s.policy == "fcfs strict-fifo"
    assert s.wait_mean == pytest.approx(27 / 5)  # waits 0, 0, 9, 8, 10
    assert (s.wait_median, s.wait_p95, s.wait_max) == (8.0, 10.0, 10.0)
    assert s.bounded_slowdown_mean == pytest.approx(5.4 / 5)  # 1.3 (job 3) and 1.1 (job 4)
    assert s.utilisation == pytest.approx(40 / 56)
    assert s.makespan == 14.0


async def test_rejections_carry_reasons() -> None:
    result = await simulate(TINY, FOUR_HOSTS)
    reasons = {o.job_id: o.reason for o in result.jobs if o.status == "rejected"}
    assert reasons["6"] == "no_runtime"
    assert reasons["8"] == "no_size"
    assert reasons["7"] == "too_big: 8 processors, the cluster has 4 slots"


async def test_a_zero_second_job_frees_its_slots_for_the_next_session() -> None:
    # One host, one session an instant (AccaSim's rule): a zero-second job ends
    # after the session that started it, and the next session is at the next
    # arrival (job 5 at t=5: job 2 starts), else, with nothing else due, a
    # second later (jobs 3 and 4).
    jobs = [swf(i, 0, 0, 1) for i in (1, 2, 3)] + [swf(4, 0, 7, 1), swf(5, 5, 1, 1)]
    result = await simulate(jobs, ClusterSpec((HostGroup(count=1, slots=1),)))
    assert starts(result.jobs) == {"1": 0.0, "2": 5.0, "3": 6.0, "4": 7.0, "5": 14.0}
    assert result.summary.makespan == 15.0


async def test_a_rejected_arrival_is_an_instant_for_slots_a_zero_second_job_freed() -> None:
    # Two hosts: at t=0 job 1 (0 s, 2 procs) starts and job 2 waits; job 3
    # (t=4) is too big and rejected, yet its arrival is the next session's
    # instant (a job the scheduler turns away is still an arrival).
    jobs = [swf(1, 0, 0, 2), swf(2, 0, 5, 1), swf(3, 4, 5, 9), swf(4, 9, 1, 2)]
    result = await simulate(jobs, ClusterSpec((HostGroup(count=2, slots=1),)))
    assert starts(result.jobs) == {"1": 0.0, "2": 4.0, "4": 9.0}


async def test_a_job_with_no_size_is_no_instant() -> None:
    # As above, but job 3 gives no size at all (fields 5 and 8 both -1): it is
    # rejected, and its arrival is no instant, as AccaSim never reads such a
    # line. Job 2 waits for the next one, job 4's arrival at t=9.
    jobs = [swf(1, 0, 0, 2), swf(2, 0, 5, 1), swf(3, 4, 5, -1), swf(4, 9, 1, 2)]
    result = await simulate(jobs, ClusterSpec((HostGroup(count=2, slots=1),)))
    assert starts(result.jobs) == {"1": 0.0, "2": 9.0, "4": 14.0}
    assert result.summary.rejected_by_reason == {"no_size": 1}


async def test_finishes_while_nothing_waits_reach_the_core_before_the_next_session() -> None:
    # Jobs 1 and 2 end at t=3 and t=2 with nothing pending: those instants need
    # no session, and their finishes go with job 3's batch, which needs both hosts.
    jobs = [swf(1, 0, 3, 1), swf(2, 1, 1, 1), swf(3, 10, 4, 2), swf(4, 10, 1, 1)]
    result = await simulate(jobs, ClusterSpec((HostGroup(count=2, slots=1),)))
    assert starts(result.jobs) == {"1": 0.0, "2": 1.0, "3": 10.0, "4": 14.0}
    assert (result.summary.sessions, result.summary.sessions_skipped) == (4, 0)


async def test_jobs_that_can_never_start_are_reported() -> None:
    cluster = ClusterSpec((HostGroup(count=2, slots=1, resources={"mem": 1024}),))
    jobs = [swf(1, 0, 5, 1, req_mem=2048 * 1024), swf(2, 1, 5, 1, req_mem=512 * 1024)]
    result = await simulate(jobs, cluster)
    by_id = {o.job_id: o for o in result.jobs}
    assert by_id["1"].status == "never_started"
    assert by_id["2"].start == 1.0
    assert result.summary.never_started == 1


async def test_core_rejections_are_counted() -> None:
    # A compound whose fixed part asks for more tasks than the job has.
    result = await simulate(TINY[:2], FOUR_HOSTS, resreq="2*{span[hosts=1]} + {span[hosts=1]}")
    reasons = {o.job_id: o.reason for o in result.jobs}
    assert reasons["2"].startswith("core: compound parts")
    assert result.summary.rejected_by_reason == {"core": 2}  # job 1 (2 procs) too


def test_duplicate_ids_are_rejected() -> None:
    import anyio

    jobs = [swf(1, 0, 5, 1), swf(1, 3, 5, 1)]
    result = anyio.run(lambda: simulate(jobs, FOUR_HOSTS))
    assert [o.status for o in result.jobs] == ["started", "rejected"]
    assert result.jobs[1].reason == "duplicate_id"


def test_job_request_adds_memory_and_partition_only_when_hosts_have_them() -> None:
    job = swf(1, 0, 5, 2, req_mem=1500, partition=3)
    assert job_request(job, FOUR_HOSTS) == (2, "")
    rich = ClusterSpec(
        (HostGroup(count=4, slots=2, attrs={"partition": 3}, resources={"mem": 8}),)
    )
    assert job_request(job, rich) == (2, "select[partition==3] rusage[mem=2]")
    assert job_request(job, rich, "span[hosts=1]") == (2, "span[hosts=1]")
    assert job_request(swf(2, 0, 5, 2, req_procs=6), rich) == (6, "")  # requested wins
    assert job_request(swf(3, -1, 5, 2), rich) == "no_submit"


def test_default_cluster_falls_back_from_header_to_job_sizes() -> None:
    jobs = [swf(1, 0, 5, 6)]
    assert default_cluster({"MaxProcs": "16"}, jobs).total_slots == 16
    assert default_cluster({"MaxNodes": "8"}, jobs).total_slots == 8
    only = default_cluster({}, jobs, slots=4)
    assert (only.hosts, only.total_slots) == (2, 8)
    assert default_cluster({}, jobs, hosts=3, slots=2).total_slots == 6


def test_cluster_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "[[group]]\ncount = 2\nslots = 4\nresources = { mem = 4096 }\n"
        '[[group]]\ncount = 1\nslots = 8\nname = "big"\nattrs = { partition = 2 }\n'
        "[[group]]\ncount = 1\nslots = 1\n"
    )
    cluster = load_cluster(path)
    assert (cluster.hosts, cluster.total_slots) == (4, 17)
    workers = cluster.workers()
    assert [w.name for w in workers] == ["h0001", "h0002", "big0001", "h0003"]
    assert workers[0].resources == {"mem": 4096.0}
    assert workers[2].attrs == {"partition": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "missing required field `group`"),
        ("group = []\n", "Expected `array` of length >= 1 - at `\\$.group`"),
        ("[[group]]\ncount = 0\nslots = 1\n", "Expected `int` >= 1 - at `\\$.group\\[0\\].count`"),
        ("[[group]]\ncount = 1\nslots = 1\ncolour = 3\n", "unknown field `colour`"),
        ("[[group]]\ncount = 1\nslots = 1\nresources = { mem = -1 }\n", "non-negative"),
        ("[[group]\n", "cannot read"),
        (
            '[[group]]\ncount = 1\nslots = 1\n[[queue]]\nname = "q"\npicker = "nosuch"\n',
            "unknown picker 'nosuch' .* - at `\\$.queue\\[0\\].picker`",
        ),
    ],
)
def test_bad_cluster_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(SimulationError, match=message):
        load_cluster(path)


def test_timeline_steps() -> None:
    done = JobOutcome(
        job_id="1", submit=0, run_time=4, procs=2, status="started", start=1, end=5,
        wait=1, hosts=[("h1", 2)],
    )  # fmt: skip
    never = JobOutcome(job_id="2", submit=2, run_time=1, procs=1)
    assert timeline([done, never]) == ([0, 1, 2, 5], [0, 2, 2, 0], [1, 0, 1, 1])


def test_summary_of_nothing() -> None:
    s = summarize([], policy="fcfs", hosts=1, total_slots=1, sessions=0, wall_time_s=0)
    assert (s.jobs, s.makespan, s.utilisation, s.wait_mean) == (0, 0.0, 0.0, 0.0)


NASA = Path(__file__).resolve().parents[3] / "shared/traces/NASA-iPSC-1993-3.1-cln.swf.gz"


@pytest.mark.slow
@pytest.mark.skipif(not NASA.exists(), reason="the shared NASA trace is not beside the checkout")
async def test_nasa_trace_replays_completely(request: pytest.FixtureRequest) -> None:
    # addopts does not deselect slow tests, so opt in explicitly (-m slow).
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("slow: opt in with -m slow")
    trace = read_swf(NASA)
    result = await simulate(trace.jobs, default_cluster(trace.header, trace.jobs))
    s = result.summary
    assert s.total_slots == 128
    assert s.jobs == s.started == 18239
    assert 0.3 < s.utilisation < 0.7


async def test_a_fault_in_the_core_stops_the_replay_with_its_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from xce_core._state import ClusterState

    def broken(self: ClusterState, *args: object) -> None:
        raise RuntimeError("commit is broken")

    # The core survives the fault (the job pends with internal_error), but a
    # replay built on it would be wrong: the simulator says so and stops.
    monkeypatch.setattr(ClusterState, "commit", broken)
    with pytest.raises(SimulationError, match=r"^the replay stopped at t=0: internal error: Runt"):
        await simulate(TINY, FOUR_HOSTS)


@pytest.mark.parametrize("picker", ["fairshare", "fcfs"])
async def test_under_fairshare_an_end_is_charged_at_its_own_instant(picker: str) -> None:
    # Two hosts. u1 runs 300 s and u2 200 s from t=0; nothing waits when they
    # end. At t=1000 each submits a job needing both hosts, u1's first in the
    # trace. Fairshare charges u1 300 s and u2 200 s (not both up to t=1000,
    # as if their ends were applied with the next session's batch), so u2, the
    # lighter user, goes first; fcfs keeps trace order.
    jobs = [
        swf(1, 0, 300, 1, user=1),
        swf(2, 0, 200, 1, user=2),
        swf(3, 1000, 10, 2, user=1),
        swf(4, 1000, 10, 2, user=2),
    ]
    config = SchedulerConfig(picker=picker)
    result = await simulate(jobs, ClusterSpec((HostGroup(count=2, slots=1),)), config=config)
    first, second = ("4", "3") if picker == "fairshare" else ("3", "4")
    assert starts(result.jobs)[first] == 1000.0
    assert starts(result.jobs)[second] == 1010.0


@pytest.mark.parametrize(
    ("hosts", "t1", "end", "params"),
    [
        (2, 500, 1000, FairshareParams(recalc_interval=3600, run_job_factor=0.0)),
        (32, 23, 20000, FairshareParams()),
    ],
)
async def test_under_fairshare_equal_histories_tie_first_come_first_served(
    hosts: int, t1: int, end: int, params: FairshareParams
) -> None:
    # u1 and u2 hold half the cluster each from t=0 to ``end``, but u1's usage
    # is stepped once more (its first job ends at t1, its second starts then).
    # Their usage is equal, so once it enters priorities they tie, and job 4
    # (u2's, first in the trace) goes first. Unrounded, u1's usage came out 2
    # units in the last place smaller and job 5 went first.
    half = hosts // 2
    later = (end + 3000) if hosts == 2 else end + 10
    jobs = [
        swf(1, 0, t1, half, user=1),
        swf(2, 0, end, half, user=2),
        swf(3, t1, end - t1, half, user=1),
        swf(4, later, 100, hosts, user=2),
        swf(5, later, 100, hosts, user=1),
    ]
    config = SchedulerConfig(picker="fairshare", fairshare=params)
    cluster = ClusterSpec((HostGroup(count=hosts, slots=1),))
    tree = FairshareConfig(tree=ShareTree(shares=[("u1", 1), ("u2", 1)]))
    result = await simulate(jobs, cluster, config=config, setup=[tree])
    assert starts(result.jobs)["4"] == later
    assert starts(result.jobs)["5"] == later + 100


@pytest.mark.parametrize("every_instant", [False, True])
async def test_under_fairshare_a_session_due_to_recalculate_is_not_skipped(
    every_instant: bool,
) -> None:
    # Two hosts, priorities recalculated every 5 s. t=2: 4 (u1, both hosts,
    # 2 s) starts and usage enters priorities. t=4: 2 (u2, 1 host, 7 s) starts.
    # t=7: 1 (u2, 2 hosts) arrives with one host free: it cannot start, but the
    # recalculation is due (5 s since t=2) and freezes u1 at 4 slot-seconds, u2
    # at 3. t=8: 3 (u1, 2 hosts) arrives. t=11: 2 ends; u2 used less by the
    # last recalculation, so 1 goes first (11) and 3 after it (15). Skipping
    # the session at 7 would recalculate at 11 instead (u2 at 7 slot-seconds
    # by then) and start 3 first.
    jobs = [
        swf(1, 7, 4, 2, user=2),
        swf(2, 4, 7, 1, user=2),
        swf(3, 8, 8, 2, user=1),
        swf(4, 2, 2, 2, user=1),
    ]
    config = SchedulerConfig(
        picker="fairshare", fairshare=FairshareParams(recalc_interval=5.0, hist_hours=0.01)
    )
    cluster = ClusterSpec((HostGroup(count=2, slots=1),))
    result = await simulate(jobs, cluster, config=config, every_instant=every_instant)
    assert starts(result.jobs) == {"1": 11.0, "2": 4.0, "3": 15.0, "4": 2.0}


def reference_fifo(jobs: list[tuple[int, int, int]], hosts: int, strict: bool) -> dict[str, float]:
    """FIFO on one-slot hosts, written plainly with the replay's time rule: one
    pass an instant (any arrival, a too-big one included, or end), jobs in
    submit order (trace order on ties) started while they fit (``strict``:
    none past the first that does not); a job that runs 0 s ends after its
    instant's pass, and with nothing else due while jobs wait the next pass is
    a second later. Jobs are ``(submit, size, run)``, named by position from 1."""
    arrivals = sorted(range(len(jobs)), key=lambda i: jobs[i][0])
    queue: list[int] = []
    running: list[tuple[float, int]] = []  # end, size
    starts: dict[str, float] = {}
    now, nxt, retry = -1.0, 0, False
    while nxt < len(arrivals) or running or (queue and retry):
        due = [float(jobs[arrivals[nxt]][0])] if nxt < len(arrivals) else []
        due += [end for end, _ in running]
        now = min(due) if due else now + 1
        retry = False
        running = [(end, size) for end, size in running if end > now]
        while nxt < len(arrivals) and jobs[arrivals[nxt]][0] <= now:
            if jobs[arrivals[nxt]][1] <= hosts:
                queue.append(arrivals[nxt])
            nxt += 1
        free = hosts - sum(size for _, size in running)
        for i in list(queue):
            _, size, run = jobs[i]
            if size > free:
                if strict:
                    break
                continue
            queue.remove(i)
            starts[str(i + 1)] = now
            free -= size
            if run > 0:
                running.append((now + run, size))
            else:
                retry = True  # its slots serve the next pass
        retry = retry and bool(queue)
    return starts


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30),  # submit
            st.integers(1, 6),  # size: 5 and 6 are too big for 4 hosts
            st.sampled_from([0, 0, 0, 1, 2, 5, 10]),  # run time: often 0
        ),
        min_size=1,
        max_size=30,
    ),
    st.booleans(),
)
def test_fifo_replays_equal_a_plain_model_with_zero_second_jobs(
    rows: list[tuple[int, int, int]], strict: bool
) -> None:
    jobs = [swf(i + 1, submit, run, size) for i, (submit, size, run) in enumerate(rows)]
    config = SchedulerConfig(strict_fifo=strict)

    async def replay() -> dict[str, float | None]:
        return starts((await simulate(jobs, FOUR_HOSTS, config=config)).jobs)

    assert anyio.run(replay) == reference_fifo(rows, 4, strict)


# Skipped sessions never change a start, nor the last pend reason of a job that
# never starts: every policy, on hosts of 1 to 3 slots, with jobs that can never
# start (too much memory). Fairshare recalculates every 5 s and forgets within
# a minute, so a recalculation moved to another session, or one that a
# sleeping group missed, changes the order.
POLICIES = {
    "fcfs": SchedulerConfig(),
    "strict": SchedulerConfig(strict_fifo=True),
    "easy": SchedulerConfig(backfill="easy"),
    "conservative": SchedulerConfig(backfill="conservative"),
    "fairshare": SchedulerConfig(
        picker="fairshare", fairshare=FairshareParams(recalc_interval=5.0, hist_hours=0.01)
    ),
}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40),  # submit
            st.integers(1, 7),  # size (the cluster has 6 slots)
            st.sampled_from([0, 1, 2, 3, 5, 8, 13]),  # run time
            st.sampled_from([-1, -1, -1, 2048, 40960]),  # memory per task (KB); 40 MB fits none
            st.integers(1, 3),  # user
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(sorted(POLICIES)),
)
# Found by this test: job 10 was told not_enough_slots alone (its fair group
# holding it only), and when its shape next failed with resource_unavailable,
# its group settled as if every member reported that already; the sessions at
# every instant happened to try it alone again. Its job_pended was dropped.
@example(
    rows=[
        *[(0, 1, 0, -1, 1)] * 9,
        (0, 4, 0, 40960, 2),
        (0, 4, 0, 40960, 3),
        (0, 6, 0, -1, 1),
        (0, 6, 0, -1, 1),
        (1, 1, 1, -1, 1),
        (3, 3, 5, -1, 2),
        (5, 1, 1, -1, 1),
    ],
    policy="fairshare",
)
def test_skipped_sessions_change_no_start_and_no_pend_reason(
    rows: list[tuple[int, int, int, int, int]], policy: str
) -> None:
    jobs = [
        swf(i + 1, submit, run, size, req_mem=mem, req_time=run + 2, user=user)
        for i, (submit, size, run, mem, user) in enumerate(rows)
    ]
    cluster = ClusterSpec(
        (
            HostGroup(count=2, slots=1, resources={"mem": 16.0}),
            HostGroup(count=1, slots=3, resources={"mem": 16.0}),
            HostGroup(count=1, slots=1, resources={"mem": 16.0}),
        )
    )

    skipping, every = both_ways(jobs, cluster, POLICIES[policy])
    assert [(o.job_id, o.start, o.status, o.reason) for o in skipping] == [
        (o.job_id, o.start, o.status, o.reason) for o in every
    ]


def both_ways(
    jobs: list[SwfJob], cluster: ClusterSpec, config: SchedulerConfig
) -> tuple[list[JobOutcome], list[JobOutcome]]:
    """The jobs' outcomes replayed with sessions skipped, and with one at every instant."""

    async def replay(every_instant: bool) -> list[JobOutcome]:
        result = await simulate(jobs, cluster, config=config, every_instant=every_instant)
        return list(result.jobs)

    return anyio.run(replay, False), anyio.run(replay, True)


async def test_strict_fifo_skips_the_sessions_its_first_job_does_not_fit() -> None:
    # Four one-slot hosts. t=0: 1 (3 procs, 10 s) starts; 2 (2 procs) waits with
    # one slot free. t=1..4: 3, 4, 5, 6 (1 proc, 1 s) arrive. Each fits the free
    # slot, but strict FIFO takes 2 first, which needs 2: the sessions at 1 to 4
    # would stop at once, and are skipped. t=10: 1 ends; 2, 3 and 4 start.
    # t=11: 3 and 4 end; 5 and 6 start. Sessions with jobs pending: 0, 1, 2, 3,
    # 4, 10, 11; of them only 0, 10 and 11 run.
    trace = [
        swf(1, 0, 10, 3),
        swf(2, 0, 5, 2),
        swf(3, 1, 1, 1),
        swf(4, 2, 1, 1),
        swf(5, 3, 1, 1),
        swf(6, 4, 1, 1),
    ]
    fifo = SchedulerConfig(strict_fifo=True)
    skipping = await simulate(trace, FOUR_HOSTS, config=fifo)
    every = await simulate(trace, FOUR_HOSTS, config=fifo, every_instant=True)
    assert starts(skipping.jobs) == starts(every.jobs) == {
        "1": 0.0, "2": 10.0, "3": 10.0, "4": 10.0, "5": 11.0, "6": 11.0
    }  # fmt: skip
    assert (skipping.summary.sessions, skipping.summary.sessions_skipped) == (3, 4)
    assert every.summary.sessions == 7
    # fcfs would start 3 at t=1: the head rule is strict FIFO's alone.
    assert starts((await simulate(trace, FOUR_HOSTS)).jobs)["3"] == 1.0


# Job 11's group sleeps at 57, through the recalculation at 59 (which puts u1
# ahead of u2), and wakes at 61: it must wake in the new order.
ASLEEP_THROUGH_A_RECALCULATION = [
    (41, 3, 12, 3), (59, 4, 18, 2), (25, 1, 8, 3), (19, 4, 7, 3), (21, 1, 15, 2),
    (41, 3, 12, 3), (42, 4, 18, 3), (17, 4, 14, 1), (37, 2, 14, 3), (59, 2, 20, 2),
    (57, 2, 20, 1), (35, 3, 9, 3),
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@example(ASLEEP_THROUGH_A_RECALCULATION)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 60),  # submit
            st.integers(1, 4),  # size: one shape (group) per size
            st.integers(1, 20),  # run time
            st.integers(1, 3),  # user
        ),
        min_size=1,
        max_size=40,
    )
)
def test_under_fairshare_skipped_sessions_change_no_start(
    rows: list[tuple[int, int, int, int]],
) -> None:
    # Groups that sleep through a recalculation must wake in the new order: a
    # session that starts nothing (skipped, or run under --every-instant)
    # leaves a group asleep, or not, across the next recalculation.
    jobs = [swf(i + 1, s, run, size, user=u) for i, (s, size, run, u) in enumerate(rows)]
    config = SchedulerConfig(
        picker="fairshare", fairshare=FairshareParams(recalc_interval=7.0, hist_hours=0.01)
    )

    skipping, every = both_ways(jobs, FOUR_HOSTS, config)
    assert starts(skipping) == starts(every)
