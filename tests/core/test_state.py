"""Applying input events: transitions and every bad-event outcome."""

from __future__ import annotations

import gc

import msgspec
import pytest

from events import (
    EventRejected,
    JobCancelled,
    JobFinished,
    JobRejected,
    QueueConfig,
    SharedResource,
    WorkerDown,
    WorkerRemoved,
)
from tests.helpers import GO, allocations, pends, submit, up
from xce_core import JobState, SchedulerConfig, SchedulerCore, XceError, process_events
from xce_core._model import Job, JobGroup


async def test_worker_lifecycle_and_canonical_order() -> None:
    core = SchedulerCore()
    await process_events([up("b", 2), up("a", 2), up("b", 4)], core=core)
    assert [w.name for w in core.state.live_workers()] == ["b", "a"]
    assert core.state.by_name["b"].slots == 4  # redefined in place, keeps its position
    out = await process_events([WorkerDown(name="b"), submit("j1"), GO], core=core)
    assert allocations(out) == {"j1": [("a", 1)]}
    await process_events([WorkerRemoved(name="b")], core=core)
    assert [w.name for w in core.state.live_workers()] == ["a"]


async def test_unknown_worker_events_are_rejected_with_index() -> None:
    out = await process_events([up("a"), WorkerDown(name="zz"), WorkerRemoved(name="yy")])
    rejected = [d for d in out if isinstance(d, EventRejected)]
    assert [(r.index, "zz" in r.error or "yy" in r.error) for r in rejected] == [
        (1, True),
        (2, True),
    ]


async def test_duplicate_job_id_is_rejected_and_original_kept() -> None:
    core = SchedulerCore()
    out = await process_events([up("a", 1), submit("j", "select[foo]"), submit("j")], core=core)
    assert [d.index for d in out if isinstance(d, EventRejected)] == [2]
    assert core.state.jobs["j"].resreq_text == "select[foo]"


async def test_a_rejected_job_event_names_its_job_and_a_worker_event_none() -> None:
    out = await process_events(
        [up("a", 1), submit("j"), submit("j"), JobFinished(job_id="zz"), WorkerDown(name="yy")]
    )
    rejected = [(d.index, d.job_id) for d in out if isinstance(d, EventRejected)]
    assert rejected == [(2, "j"), (3, "zz"), (4, msgspec.UNSET)]


async def test_bad_resreq_and_impossible_counts_reject_the_job_only() -> None:
    core = SchedulerCore()
    out = await process_events(
        [
            up("a", 4),
            submit("bad", "select[type==]"),
            submit("counts", tasks=2, min=3),
            submit("ok"),
            GO,
        ],
        core=core,
    )
    rejected = {d.job_id: d.error for d in out if isinstance(d, JobRejected)}
    assert set(rejected) == {"bad", "counts"}
    assert "column" in rejected["bad"]
    assert "min_tasks 3 exceeds max_tasks 2" in rejected["counts"]
    assert allocations(out) == {"ok": [("a", 1)]}
    assert core.state.job_state("bad") is JobState.REJECTED
    # A rejected id stays taken.
    out = await process_events([submit("bad")], core=core)
    assert isinstance(out[0], EventRejected)


async def test_finish_and_cancel_outcomes() -> None:
    core = SchedulerCore()
    out = await process_events([up("a", 1), submit("run"), submit("wait"), GO], core=core)
    assert allocations(out) == {"run": [("a", 1)]}
    out = await process_events(
        [
            JobFinished(job_id="wait"),  # pending, not running
            JobFinished(job_id="nope"),  # unknown
            JobCancelled(job_id="nope"),
            WorkerRemoved(name="a"),  # still runs "run"
        ],
        core=core,
    )
    errors = [d.error for d in out if isinstance(d, EventRejected)]
    assert len(errors) == 4
    assert "pending, not running" in errors[0]
    assert "unknown job" in errors[1]
    assert "still runs 1 job" in errors[3]
    assert core.state.by_name["a"].used_slots == 1
    out = await process_events([JobFinished(job_id="run"), GO], core=core)
    assert allocations(out) == {"wait": [("a", 1)]}
    out = await process_events([JobFinished(job_id="run")], core=core)  # already done
    assert "already" in out[0].error or "done" in out[0].error  # type: ignore[union-attr]
    out = await process_events([JobCancelled(job_id="wait"), GO], core=core)
    assert core.state.by_name["a"].used_slots == 0
    assert core.state.job_state("wait") is JobState.DONE
    assert "wait" not in core.state.jobs  # an ended job leaves only its id


async def test_cancel_pending_job_removes_it_from_scheduling() -> None:
    core = SchedulerCore()
    out = await process_events(
        [up("a", 1), submit("x", "select[nothing]"), JobCancelled(job_id="x"), GO], core=core
    )
    assert pends(out) == {}
    assert core.state.pending_count == 0


async def test_shared_resource_shrink_never_goes_negative() -> None:
    core = SchedulerCore()
    await process_events(
        [
            up("a", 4),
            SharedResource(name="lic", total=2),
            submit("j", "rusage[lic=2]"),
            GO,
            SharedResource(name="lic", total=1),
        ],
        core=core,
    )
    assert core.state.shared_free("lic") == 0.0
    out = await process_events([submit("k", "rusage[lic=1]"), GO], core=core)
    assert pends(out)["k"].reason == "shared_resource_unavailable"


async def test_unknown_picker_in_queue_config_is_rejected() -> None:
    out = await process_events([QueueConfig(name="q", picker="nosuch")])
    assert isinstance(out[0], EventRejected)
    assert "unknown picker 'nosuch'" in out[0].error
    assert "fcfs" in out[0].error


async def test_worker_redefined_below_use_has_nothing_free() -> None:
    core = SchedulerCore()
    await process_events([up("a", 4), submit("j", tasks=3), GO, up("a", 2)], core=core)
    w = core.state.by_name["a"]
    assert w.free_slots == 0
    out = await process_events([submit("k"), GO], core=core)
    assert pends(out)["k"].reason == "not_enough_slots"


async def test_a_rejected_job_keeps_only_its_id() -> None:
    core = SchedulerCore()
    huge = "select[" + "x" * 100_000 + " == ]"  # a large, bad requirement
    out = await process_events([submit("j", huge), submit("j")], core=core)
    assert [type(d).__name__ for d in out] == ["JobRejected", "EventRejected"]
    assert "j" not in core.state.jobs
    assert core.state.ended == {"j": JobState.REJECTED}


async def test_ended_jobs_leave_only_their_ids() -> None:
    # Memory follows the live jobs: 300 jobs through, none left as a Job.
    core = SchedulerCore()
    events: list[object] = [up("a", 1)]
    for i in range(300):
        events += [submit(f"j{i}"), GO, JobFinished(job_id=f"j{i}")]
    out = await process_events(events, core=core)  # type: ignore[arg-type]
    assert len(allocations(out)) == 300
    assert core.state.jobs == {}
    assert len(core.state.ended) == 300
    await process_events([GO], core=core)  # groups are compacted as a session begins
    held = [j for g in core.state.groups.values() for j in (*g.jobs, *g.unsettled)]
    assert held == []
    again = await process_events([submit("j7"), JobFinished(job_id="j7")], core=core)
    assert [d.error for d in again] == [  # type: ignore[union-attr]
        "duplicate job id 'j7'",
        "job 'j7' is done, not running",
    ]


@pytest.mark.parametrize("picker", ["fcfs", "fairshare"])
async def test_an_ended_job_is_freed_without_the_garbage_collector(picker: str) -> None:
    # A job that started keeps naming its group; a dropped group must not keep
    # naming the job, or every ended job stays in a reference cycle until a
    # collection (a replay's sessions spent about 15% of their time in them).
    core = SchedulerCore(SchedulerConfig(picker=picker))
    events: list[object] = [up("a", 4, mem=100)]
    for i in range(40):  # a shape of its own each: each group is dropped
        events += [submit(f"j{i}", f"select[mem>={i}]"), GO, JobFinished(job_id=f"j{i}")]
    gc.collect()
    flags = gc.get_debug()
    gc.disable()
    try:
        await process_events(events, core=core)  # type: ignore[arg-type]
        await process_events([GO], core=core)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        cyclic = [o for o in gc.garbage if isinstance(o, (Job, JobGroup))]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        gc.enable()
    assert len(core.state.ended) == 40
    assert cyclic == []


async def test_removed_workers_do_not_leave_the_worker_table_growing() -> None:
    core = SchedulerCore()
    events = [up("keep", 1)]
    for i in range(3000):
        events += [up(f"w{i}", 1), WorkerRemoved(name=f"w{i}")]
    events += [submit("j", "", 1), GO]
    out = await process_events(events, core=core)
    assert allocations(out) == {"j": [("keep", 1)]}
    assert len(core.state.workers) <= 2 * 64 + 2
    assert [w.index for w in core.state.live_workers()] == [0]


async def test_queue_priority_reorders_jobs_of_one_shape_across_queues() -> None:
    # Jobs of one shape share a group whatever their queue; a queue's new
    # priority still moves its jobs ahead of the other queue's.
    core = SchedulerCore()
    events: list[object] = [up("a", 1)]
    events += [submit("x1", queue="x"), submit("y1", queue="y"), submit("x2", queue="x")]
    events += [QueueConfig(name="y", priority=10), GO]
    out = await process_events(events, core=core)  # type: ignore[arg-type]
    assert allocations(out) == {"y1": [("a", 1)]}
    assert core.state.jobs["x1"].group is core.state.jobs["y1"].group


def _usage(core: SchedulerCore) -> tuple[object, ...]:
    state = core.state
    return (
        [(w.name, w.used_slots, dict(w.used)) for w in state.live_workers()],
        {w.name for w in state.free_hosts},
        state.free_total,
        dict(state.shared_used),
    )


async def test_a_commit_refused_at_a_later_host_gives_back_the_earlier_ones() -> None:
    # The commit checks each host as it takes it: when the third one cannot
    # take its claim, the two before it are given back exactly (slots, amounts
    # that were already held, free-host set and total), and the job stays pending.
    core = SchedulerCore()
    await process_events(
        [
            up("a", 2, resources={"mem": 10.0}),
            up("b", 2, resources={"mem": 10.0}),
            up("c", 1),
            submit("held", "rusage[mem=0.1]"),
            GO,
            submit("j"),
        ],
        core=core,
    )
    state = core.state
    a, b, c = (state.by_name[n] for n in "abc")
    assert a.used == {"mem": 0.1}  # an amount that float arithmetic would not restore
    before = _usage(core)
    claims = [(a, 1, (("mem", 0.2),)), (b, 2, (("mem", 0.3),)), (c, 2, ())]
    with pytest.raises(XceError, match="c lacks slots"):
        state.commit(state.jobs["j"], claims, {})
    assert _usage(core) == before
    assert state.jobs["j"].state is JobState.PENDING
    with pytest.raises(XceError, match="shared lic exhausted"):
        state.commit(state.jobs["j"], [(a, 1, ())], {"lic": 1.0})
    assert _usage(core) == before


async def test_a_claim_on_a_removed_worker_is_refused_even_when_its_name_is_back() -> None:
    # A claim made before worker b was removed and added again names the old
    # worker object: the commit refuses it (b is gone; the new b is another
    # host) and changes nothing, on the new b least of all.
    core = SchedulerCore()
    await process_events([up("a", 2), up("b", 2), submit("j", tasks=2)], core=core)
    state = core.state
    a, old_b = state.by_name["a"], state.by_name["b"]
    await process_events([WorkerRemoved(name="b"), up("b", 2)], core=core)
    before = _usage(core)
    with pytest.raises(XceError, match="worker b is gone"):
        state.commit(state.jobs["j"], [(a, 1, ()), (old_b, 1, ())], {})
    assert _usage(core) == before
    assert state.by_name["b"].used_slots == 0
    assert state.jobs["j"].state is JobState.PENDING


async def test_a_refused_worker_removed_on_a_big_cluster_says_what_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Past _NAME_JOBS_UP_TO running jobs the refusal does not walk them all to
    # name the worker's: it says how many slots they hold.
    import xce_core._state

    monkeypatch.setattr(xce_core._state, "_NAME_JOBS_UP_TO", 1)
    core = SchedulerCore()
    await process_events(
        [up("a", 2), up("b", 2), submit("j1", tasks=2), submit("j2"), GO], core=core
    )
    out = await process_events([WorkerRemoved(name="a"), WorkerRemoved(name="b")], core=core)
    errors = [d.error for d in out if isinstance(d, EventRejected)]
    assert ["still runs jobs (2 slot(s) held)" in e for e in errors] == [True, False]
    assert "still runs jobs (1 slot(s) held)" in errors[1]
    assert {w.name for w in core.state.live_workers()} == {"a", "b"}


@pytest.mark.parametrize(
    ("tasks", "low", "started"),
    [
        (1, None, 6),  # the default, as no -n: the compound's counts decide
        (6, None, 6),
        (8, 4, 6),  # -n 4,8
        (2, None, 0),  # -n 2: incompatible, rejected
        (8, None, 0),
        (5, 2, 0),  # -n 2,5
    ],
)
async def test_a_counted_compound_must_fit_the_jobs_task_range(
    tasks: int, low: int | None, started: int
) -> None:
    # As LSF: a compound's task count must be compatible with the job's -n.
    resreq = "2*{select[type==a]} + 4*{select[type==b]}"
    workers = [up("a1", 4, type="a"), up("b1", 8, type="b")]
    out = await process_events([*workers, submit("j", resreq, tasks, min=low), GO])
    if started:
        assert allocations(out) == {"j": [("a1", 2), ("b1", 4)]}
    else:
        (rejected,) = [d for d in out if isinstance(d, JobRejected)]
        assert "compound parts ask for 6 tasks (2 + 4)" in rejected.error
        assert "the job asks for" in rejected.error


async def test_rusage_on_a_load_index_reserves_nothing() -> None:
    # LSF's load reservation (rusage[r1m=..], its default rusage[r15s=1.0:...]):
    # xce sees no load, so the job starts; a consumable beside it is still taken.
    workers = [up("h1", 4, {"mem": 100.0}, r1m=0.2, ut=0.1)]
    out = await process_events(
        [
            *workers,
            submit("a", "rusage[r15s=1.0:r1m=1.0:r15m=1.0:ut=0.3:mem=60]"),
            submit("b", "rusage[it=5:mem=60]"),
            GO,
        ]
    )
    assert allocations(out) == {"a": [("h1", 1)]}
    assert pends(out)["b"].reason == "resource_unavailable"  # mem: 40 left of 100


async def test_a_select_on_a_name_no_host_defines_says_which() -> None:
    # A misspelt or unknown resource: the pend reason names it, not the bare
    # word right of a comparison (read as text when no host defines it).
    workers = [up("h1", 4, {"mem": 100.0}, type="X86_64"), up("h2", 4, type="HP")]
    out = await process_events(
        [
            *workers,
            submit("typo", "select[tyep==X86_64]"),
            submit("case", "select[TYPE==X86_64 && mem>10]"),
            submit("none", "select[type==SUNSOL]"),
            GO,
        ]
    )
    reasons = pends(out)
    assert reasons["typo"].detail.endswith("(no host defines 'tyep')")
    assert reasons["case"].detail.endswith("(no host defines 'TYPE')")
    assert reasons["none"].detail == "2 hosts: select not satisfied"
    assert {r.reason for r in reasons.values()} == {"no_matching_host"}


async def test_rusage_of_a_resource_no_host_defines_says_which() -> None:
    # The rusage[] side of the test above: a resource no usable host has (one
    # no worker ever defined, one only a host now down has) is named as such;
    # one that hosts have but not enough of is not.
    workers = [up("h1", 4, {"mem": 100.0}), up("h2", 4, {"mem": 50.0}), up("h3", 2, {"gpu": 1.0})]
    out = await process_events(
        [
            *workers,
            WorkerDown(name="h3"),
            submit("typo", "rusage[mme=10]"),
            submit("down", "rusage[gpu=1]"),
            submit("short", "rusage[mem=500]"),
            GO,
        ]
    )
    reasons = pends(out)
    assert reasons["typo"].detail == "2 hosts: mme (no host defines 'mme')"
    assert reasons["down"].detail == "2 hosts: gpu (no host defines 'gpu')"
    assert reasons["short"].detail == "2 hosts: mem"
    assert {r.reason for r in reasons.values()} == {"resource_unavailable"}


@pytest.mark.parametrize(
    ("resreq", "tasks", "category"),
    [
        # No host of type c, and the licence gone: where it could run first.
        ("select[type==c] rusage[lic=1]", 1, "no_matching_host"),
        # The type a host holds one task of two, and the licence gone: the
        # licence before capacity.
        ("select[type==a] rusage[lic=1]", 2, "shared_resource_unavailable"),
    ],
)
async def test_a_pend_category_does_not_depend_on_whether_the_cluster_is_full(
    resreq: str, tasks: int, category: str
) -> None:
    # A full cluster is explained without building host lists, a cluster with
    # free slots over the candidates; both give the same order of reasons (a
    # cached reason found in one state is then the one a fresh attempt gives
    # in the other: the cache property of test_limits.py found them differ).
    hosts = [SharedResource(name="lic", total=0.0), up("a", 1, type="a"), up("b", 1, type="b")]
    for fillers in ([], [submit("fa", "select[type==a]"), submit("fb", "select[type==b]")]):
        out = await process_events([*hosts, *fillers, GO, submit("j", resreq, tasks), GO])
        assert pends(out)["j"].reason == category, fillers


async def test_a_same_job_that_fits_only_across_unlike_hosts_says_same() -> None:
    # Four tasks, two a host: the two hosts together hold them, but they differ
    # in model, so same[model] is what keeps the job pending.
    workers = [up("h1", 16, model="m1"), up("h2", 16, model="m2")]
    jobs = [submit("same", "span[ptile=2] same[model]", 4), submit("free", "span[ptile=2]", 4)]
    out = await process_events([*workers, *jobs, GO])
    assert set(allocations(out)) == {"free"}
    reason = pends(out)["same"]
    assert reason.reason == "not_enough_slots"
    assert reason.detail.endswith("; same[model]: no set of hosts alike in model holds 4 tasks")


@pytest.mark.parametrize(
    ("resreq", "slots", "said"),
    [
        ("span[hosts=1]", [2, 2], "span[hosts=1]: no host holds 4 tasks"),
        ("span[ptile=3]", [2, 2], "span[ptile=3]: 4 tasks go 3 to a host, on 2 hosts"),
        ("span[ptile=4]", [2, 2], "span[ptile=4]: no host holds 4 tasks"),
        (
            "span[ptile='!']",
            [2, 2, 1],
            "span[ptile='!']: each host taken whole (all its slots free)",
        ),
    ],
)
async def test_a_span_job_that_fits_only_in_another_shape_says_its_span(
    resreq: str, slots: list[int], said: str
) -> None:
    # The free slots hold 4 tasks (without a span the job starts), but not in
    # the shape the span asks for. With three hosts, one slot of h0 is taken
    # first, so that no set of whole free hosts holds 4.
    workers = [up(f"h{i}", n) for i, n in enumerate(slots)]
    first = [submit("x")] if len(slots) == 3 else []
    out = await process_events([*workers, *first, submit("span", resreq, 4), GO])
    out += await process_events([*workers, *first, submit("plain", "", 4), GO])
    assert "plain" in allocations(out)
    reason = pends(out)["span"]
    assert reason.reason == "not_enough_slots"
    assert reason.detail.endswith("; " + said)
