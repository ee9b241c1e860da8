"""Testing scheduling behaviour the way a controller developer would.

Build the events your controller would send, run them through the core, and
assert on the decisions. No sockets, no threads, no sleeping: the core is a pure
function of its input events, so these tests are fast and deterministic.

Copy this file next to your own code and adapt the cluster and jobs.
"""

from __future__ import annotations

import xce_core
from events import (
    Decision,
    InputEvent,
    JobAllocated,
    JobFinished,
    JobPended,
    JobSubmitted,
    SessionBegin,
    WorkerUp,
)


def cluster() -> list[WorkerUp]:
    """Three 4-slot hosts; h3 has a GPU and much more memory."""
    return [
        WorkerUp(name="h1", slots=4, attrs={"type": "x86"}, resources={"mem": 16_000}),
        WorkerUp(name="h2", slots=4, attrs={"type": "x86"}, resources={"mem": 16_000}),
        WorkerUp(name="h3", slots=4, attrs={"type": "x86"}, resources={"mem": 64_000, "gpu": 2}),
    ]


def by_job(decisions: list[Decision]) -> dict[str, JobAllocated | JobPended]:
    """The last allocation or pend decision per job id (a pending job is reported
    again in every session)."""
    return {d.job_id: d for d in decisions if isinstance(d, JobAllocated | JobPended)}


def test_a_parallel_job_is_spread_over_hosts() -> None:
    # Annotated: a mixed list literal would otherwise be inferred as a list of
    # the events' private base class, which type checkers do not accept.
    events: list[InputEvent] = [
        *cluster(),
        # 10 tasks do not fit on one 4-slot host: the default parallel allocator
        # (parjob) takes the fewest hosts, balanced: 10 over 3 hosts is 4+3+3.
        JobSubmitted(job_id="mpi", min_tasks=10, max_tasks=10, resreq="rusage[mem=1000]"),
        SessionBegin(),  # a session runs here; without it nothing is decided
    ]

    decisions = xce_core.run_events(events)

    mpi = by_job(decisions)["mpi"]
    assert isinstance(mpi, JobAllocated)
    assert [(h.host, h.slots) for h in mpi.hosts] == [("h1", 4), ("h2", 3), ("h3", 3)]


def test_a_job_nobody_can_run_pends_with_a_reason() -> None:
    events: list[InputEvent] = [
        *cluster(),
        # No host has 4 GPUs: the job stays pending and the decision says why.
        JobSubmitted(job_id="train", resreq="select[type==x86] rusage[gpu=4]"),
        # Too much memory for h1 and h2, fine on h3.
        JobSubmitted(job_id="big", resreq="select[maxmem>32000] rusage[mem=40000]"),
        SessionBegin(),
    ]

    decisions = by_job(xce_core.run_events(events))

    train = decisions["train"]
    assert isinstance(train, JobPended)
    assert train.reason == "resource_unavailable"
    assert "gpu" in train.detail  # the readable breakdown names the missing resource
    big = decisions["big"]
    assert isinstance(big, JobAllocated)
    assert [h.host for h in big.hosts] == ["h3"]


async def test_a_finished_job_frees_its_slots() -> None:
    # Inside an async test (pytest-asyncio or anyio), await process_events
    # instead: run_events would try to start a second event loop.
    # Passing the same core again continues from its state, so a test can check
    # the decisions of each step separately.
    core = xce_core.SchedulerCore()
    first = await xce_core.process_events(
        [
            *cluster(),
            JobSubmitted(job_id="wide", min_tasks=12, max_tasks=12),
            JobSubmitted(job_id="next", min_tasks=4, max_tasks=4),
            SessionBegin(),
        ],
        core=core,
    )
    assert isinstance(by_job(first)["wide"], JobAllocated)
    waiting = by_job(first)["next"]
    assert isinstance(waiting, JobPended)
    assert waiting.reason == "not_enough_slots"

    second = await xce_core.process_events([JobFinished(job_id="wide"), SessionBegin()], core=core)

    assert [d.job_id for d in second if isinstance(d, JobAllocated)] == ["next"]
