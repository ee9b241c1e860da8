"""Resource allocation limits (xce_core._limits): worked examples, bad
configurations, and a property: after every session no limit is exceeded."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import (
    EventRejected,
    InputEvent,
    JobAllocated,
    JobFinished,
    JobPended,
    Limit,
    LimitsConfig,
    SessionBegin,
)
from tests.core.test_invariants import check_invariants, op, to_events
from tests.helpers import submit, up
from xce_core import JobState, SchedulerConfig, SchedulerCore, process_events

GO = SessionBegin()


def started(out: list[Any]) -> list[str]:
    return [d.job_id for d in out if isinstance(d, JobAllocated)]


def pended(out: list[Any]) -> dict[str, JobPended]:
    return {d.job_id: d for d in out if isinstance(d, JobPended)}


async def test_a_per_user_slot_limit_holds_one_user_back_and_not_another() -> None:
    limits = LimitsConfig(limits=[Limit(name="u2", per_user=["all"], slots=2)])
    events: list[InputEvent] = [up("h", 8), limits]
    events += [submit(f"a{i}", user="ann") for i in range(3)]
    events += [submit("b0", user="bob"), GO]
    out = await process_events(events)
    assert started(out) == ["a0", "a1", "b0"]
    why = pended(out)["a2"]
    assert why.reason == "limit_reached"
    assert why.detail == "limit u2: SLOTS (PER_USER ann): 2/2 in use"
    assert not why.cached  # never the unsatisfiable cache: bob's identical job started


async def test_a_limit_frees_as_jobs_end_and_counts_users_together() -> None:
    limits = LimitsConfig(limits=[Limit(name="team", users=["ann", "bob"], jobs=2)])
    core = SchedulerCore()
    events: list[InputEvent] = [up("h", 8), limits, submit("a0", user="ann")]
    events += [submit("b0", user="bob"), submit("b1", user="bob"), submit("c0", user="cy"), GO]
    out = await process_events(events, core=core)
    assert started(out) == ["a0", "b0", "c0"]
    assert pended(out)["b1"].detail == "limit team: JOBS: 2/2 in use"
    out = await process_events([JobFinished(job_id="a0"), GO], core=core)
    assert started(out) == ["b1"]


async def test_a_resource_limit_caps_the_amounts_held() -> None:
    limits = LimitsConfig(limits=[Limit(name="mem", per_queue=["short"], resources={"mem": 300})])
    events: list[InputEvent] = [up("h", 8, {"mem": 1000.0}), limits]
    events += [submit(f"j{i}", "rusage[mem=100]", 2, queue="short") for i in range(3)]
    events += [submit("x", "rusage[mem=100]", queue="long"), submit("y", queue="short"), GO]
    out = await process_events(events)
    # j0 takes 200; j1 would make 400 > 300; y takes no mem, so the limit is not its.
    assert started(out) == ["j0", "x", "y"]
    assert pended(out)["j1"].detail == "limit mem: mem (PER_QUEUE short): 200/300 in use"


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ([Limit(name="a", slots=1), Limit(name="a", jobs=1)], "limit 'a': defined twice"),
        ([Limit(name="a", users=["x"])], "limit 'a': no slots, jobs or resources to cap"),
        ([Limit(name="a", users=["x"], per_user=["y"], slots=1)], "both users and per_user"),
        ([Limit(name="a", queues=[], slots=1)], "queues is empty"),
    ],
)
async def test_a_bad_set_of_limits_is_rejected_whole_and_the_old_one_stays(
    limits: list[Limit], error: str
) -> None:
    old = LimitsConfig(limits=[Limit(name="one", slots=1)])
    out = await process_events(
        [up("h", 4), old, LimitsConfig(limits=limits), submit("a"), submit("b"), GO]
    )
    (rejected,) = [d for d in out if isinstance(d, EventRejected)]
    assert error in rejected.error
    assert rejected.index == 2
    assert started(out) == ["a"]  # "one" still caps the cluster at one slot


def test_an_unknown_field_in_a_limit_is_an_error_not_a_limit_that_limits_nothing() -> None:
    line = b'{"type":"limits_config","limits":[{"name":"h","per_host":["all"],"slots":1}]}'
    with pytest.raises(msgspec.ValidationError, match="per_host"):
        msgspec.json.decode(line, type=LimitsConfig)


# ---------------------------------------------------------------- property

limit_sets = st.lists(
    st.builds(
        lambda name, dim, who, slots, jobs: Limit(
            name=name, **{dim: who}, slots=slots, jobs=jobs if slots is None else None
        ),
        st.sampled_from(["l1", "l2", "l3"]),
        st.sampled_from(["users", "per_user", "queues", "per_queue", "projects"]),
        st.sampled_from([["all"], ["all"], ["u0"], ["q1"], [""]]),
        st.one_of(st.none(), st.integers(0, 3)),
        st.integers(0, 3),
    ),
    max_size=3,
    unique_by=lambda limit: limit.name,
)


def holdings(core: SchedulerCore, limit: Limit) -> dict[tuple[str, ...], list[int]]:
    """Slots and jobs of running jobs per consumer key, counted independently."""
    out: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0, 0])
    dims = (("users", "per_user"), ("queues", "per_queue"), ("projects", "per_project"))
    for job in core.state.jobs.values():
        if job.state is not JobState.RUNNING:
            continue
        key = []
        for (together, each), value in zip(dims, (job.user, job.queue, job.project), strict=True):
            listed, per = getattr(limit, together), getattr(limit, each)
            if listed is not None:
                if "all" not in listed and value not in listed:
                    break
                key.append("*")
            elif per is not None:
                if "all" not in per and value not in per:
                    break
                key.append(value)
            else:
                key.append("*")
        else:
            out[tuple(key)][0] += sum(n for _, n in job.allocation)
            out[tuple(key)][1] += 1
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=50), limit_sets, st.booleans())
async def test_no_limit_is_ever_exceeded(ops: list[Any], limits: list[Limit], cache: bool) -> None:
    events = to_events(ops)
    # Spread the jobs over users and queues, and set the limits first.
    spread: list[InputEvent] = [LimitsConfig(limits=limits)]
    for i, event in enumerate(events):
        if hasattr(event, "resreq"):
            event = msgspec.structs.replace(event, user=f"u{i % 3}", queue=f"q{i % 2}")
        spread.append(event)
    core = SchedulerCore(SchedulerConfig(unsatisfiable_cache=cache))
    for event in spread:
        if core.apply(event):
            await core.run_session()
            check_invariants(core)
            for limit in limits:
                for key, (slots, jobs) in holdings(core, limit).items():
                    # Jobs that were running before cannot exceed a limit set
                    # later; here limits come first, so every count holds.
                    assert limit.slots is None or slots <= limit.slots, (limit, key)
                    assert limit.jobs is None or jobs <= limit.jobs, (limit, key)
        core.take_decisions()


async def test_queue_shorthands_cap_slots_per_user_and_per_queue() -> None:
    from events import QueueConfig

    core = SchedulerCore()
    for i in range(10):
        core.apply(up(f"h{i}"))
    core.apply(QueueConfig(name="q", ujob_limit=2, qjob_limit=3))
    # A limits_config afterwards replaces the cluster's limits, not the queue's.
    core.apply(LimitsConfig(limits=[Limit(name="other", queues=["x"], slots=1)]))
    assert core.take_decisions() == []
    for user in ("a", "b"):
        for i in range(3):
            core.apply(submit(f"{user}{i}", user=user, queue="q"))
    core.apply(submit("free", user="a"))  # another queue: not covered
    core.apply(GO)
    await core.run_session()
    out = core.take_decisions()
    assert sorted(started(out)) == ["a0", "a1", "b0", "free"]
    reasons = {job: p.detail for job, p in pended(out).items()}
    assert "limit q:UJOB_LIMIT: SLOTS (PER_USER a): 2/2 in use" in reasons["a2"]
    assert "limit q:QJOB_LIMIT: SLOTS: 3/3 in use" in reasons["b1"]
    # A queue_config without them lifts them.
    core.apply(QueueConfig(name="q"))
    core.apply(GO)
    await core.run_session()
    assert sorted(started(core.take_decisions())) == ["a2", "b1", "b2"]
