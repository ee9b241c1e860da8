"""Admission caches (``_admission.ShapeCache``): a cached submission decides exactly
as a fresh one, jobs share what they have in common, and every table stays
bounded."""

from __future__ import annotations

import random
import sys

import pytest

from events import (
    Decision,
    EventRejected,
    InputEvent,
    JobCancelled,
    JobFinished,
    JobRejected,
    JobSubmitted,
)
from tests.helpers import GO, submit, up
from xce_core import SchedulerCore, process_events
from xce_core import _admission as admission

RESREQS = [
    "",
    "select[type==a]",
    "select[type==b] rusage[mem=100]",
    "select[type==a]  rusage[mem=100]",  # a second text of one canonical shape
    "rusage[mem=5000]",  # fits nowhere: pends, cached
    "2*{select[type==a]} + {select[type==b]}",
    "{select[type==c]} || {rusage[mem=10]}",
    "{select[type==a]} || {2*{select[type==a]} + {rusage[mem=50]}}",
    "select[type==]",  # does not parse
    "select[",
]


def stream(seed: int, jobs: int = 300) -> list[InputEvent]:
    """Workers, then submissions over the texts above with varied task ranges
    (some impossible), finishes, cancels and sessions."""
    rng = random.Random(seed)
    events: list[InputEvent] = [
        up(f"h{i}", 4, {"mem": 1000.0}, type="abc"[i % 3]) for i in range(8)
    ]
    for i in range(jobs):
        tasks = rng.choice([1, 1, 1, 2, 3, 4])
        low = rng.choice([None, None, 1, tasks, tasks + 1])
        events.append(
            JobSubmitted(
                job_id=f"j{i}",
                user=f"u{rng.randrange(5)}",
                queue=rng.choice(["normal", "short"]),
                priority=rng.choice([0, 0, 5]),
                resreq=rng.choice(RESREQS),
                min_tasks=low,
                max_tasks=tasks,
            )
        )
        if i % 25 == 24:
            events.append(GO)
            events.append(JobFinished(job_id=f"j{rng.randrange(i)}"))
            events.append(JobCancelled(job_id=f"j{rng.randrange(i)}"))
    events.append(submit("j0"))  # a duplicate id
    events.append(GO)
    return events


def plain(decisions: list[Decision]) -> list[tuple[object, ...]]:
    """The decisions as comparable tuples, without session wall times."""
    out: list[tuple[object, ...]] = []
    for d in decisions:
        fields = {name: getattr(d, name) for name in d.__struct_fields__}
        fields.pop("elapsed_s", None)
        out.append((type(d).__name__, *sorted(fields.items(), key=lambda kv: kv[0])))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_cached_submissions_decide_as_fresh_ones(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = stream(seed)
    cached = await process_events(events)
    # Tables holding one entry: every submission parses, checks and
    # fingerprints its requirement afresh.
    monkeypatch.setattr(admission, "TEXTS_HELD", 1)
    monkeypatch.setattr(admission, "RANGES_HELD", 1)
    monkeypatch.setattr(admission, "ORIGINS_HELD", 1)
    fresh = await process_events(events)
    assert plain(cached) == plain(fresh)
    rejected = {d.job_id: d.error for d in cached if isinstance(d, JobRejected)}
    assert any(error.startswith("bad resreq: ") for error in rejected.values())
    assert any("exceeds max_tasks" in error for error in rejected.values())
    assert any("duplicate job id 'j0'" in d.error for d in cached if isinstance(d, EventRejected))


async def test_jobs_of_one_shape_share_it_and_their_strings() -> None:
    core = SchedulerCore()
    events = [
        JobSubmitted(
            job_id=f"j{i}",
            user="u" + str(i % 2),  # built per event, like a decoder's strings
            queue="".join(["nor", "mal"]),
            resreq="".join(["select[type==a] ", "rusage[mem=1]"]),
        )
        for i in range(4)
    ]
    await process_events(events, core=core)
    jobs = [core.state.jobs[f"j{i}"] for i in range(4)]
    assert len({id(job.shape) for job in jobs}) == 1
    assert len({id(job.resreq_text) for job in jobs}) == 1
    # One origin per (user, queue, project, priority): its strings are shared.
    assert jobs[0].user is jobs[2].user
    assert jobs[0].queue is jobs[2].queue
    assert jobs[1].user is jobs[3].user
    assert [job.user for job in jobs] == ["u0", "u1", "u0", "u1"]
    assert jobs[0].primary_fps == {id(jobs[0].resreq): jobs[0].fingerprint}


async def test_a_shape_is_a_requirement_and_a_task_range() -> None:
    core = SchedulerCore()
    await process_events(
        [
            submit("a", "select[type==a]", tasks=2),
            submit("b", "select[type==a]", tasks=2, min=None),
            submit("c", "select[type==a]", tasks=2, min=1),
            submit("d", "select[type == a]", tasks=2, min=1),
        ],
        core=core,
    )
    jobs = core.state.jobs
    assert (jobs["a"].min_tasks, jobs["a"].max_tasks) == (2, 2)
    assert (jobs["c"].min_tasks, jobs["c"].max_tasks) == (1, 2)
    assert jobs["a"].fingerprint == jobs["b"].fingerprint != jobs["c"].fingerprint
    assert jobs["c"].fingerprint == jobs["d"].fingerprint  # one canonical text
    assert jobs["c"].resreq_text == "select[type==a]"
    assert jobs["d"].resreq_text == "select[type == a]"


async def test_tables_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "TEXTS_HELD", 8)
    monkeypatch.setattr(admission, "RANGES_HELD", 4)
    monkeypatch.setattr(admission, "ORIGINS_HELD", 8)
    core = SchedulerCore()
    shapes = core._shapes
    for i in range(100):
        core.apply(submit(f"t{i}", f"select[ncpus>={i}]", user=f"u{i}", priority=i))
        core.apply(submit(f"r{i}", "select[type==a]", tasks=1 + i))
        assert len(shapes) <= 8
        assert len(shapes._origins) <= 8
        assert len(shapes._by_user) <= 8
        assert len(shapes._texts["select[type==a]"].ranges) <= 4
    assert not core.take_decisions()
    assert core.state.pending_count == 200
    # Emptied entries are rebuilt equal: fingerprints belong to the state.
    core.apply(submit("again", "select[ncpus>=0]"))
    assert core.state.jobs["again"].fingerprint == core.state.jobs["t0"].fingerprint


def test_a_pending_job_is_small() -> None:
    core = SchedulerCore()
    core.apply(submit("j1", "select[type==a]", user="u1", queue="normal"))
    job = core.state.jobs["j1"]
    # 12 slots (128 bytes, a size class of its own): what jobs share lives in
    # their shape and origin.
    assert sys.getsizeof(job) <= 16 + 16 + 12 * 8
