"""Opt-in soak: a long randomized churn of workers and jobs through one core,
checked against independent bookkeeping (``check_invariants``) as it goes.

Run with ``python -m pytest -m slow tests/core/test_soak.py``; the number of
events is ``XCE_SOAK_EVENTS`` (default 1,000,000; under a minute here).
"""

from __future__ import annotations

import os
import random

import pytest

from events import (
    InputEvent,
    JobAllocated,
    JobCancelled,
    JobFinished,
    JobPended,
    SessionBegin,
    SharedResource,
    WorkerDown,
    WorkerRemoved,
)
from tests.core.test_invariants import RESREQS, check_invariants
from tests.helpers import submit, up
from xce_core import SchedulerCore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(7200)]

EVENTS = int(os.environ.get("XCE_SOAK_EVENTS", "1000000"))
HOSTS = [f"w{i}" for i in range(40)]


def churn(rng: random.Random, running: list[str], pending: dict[str, None], n: int) -> InputEvent:
    """One random event; ``running``/``pending`` are the ids the driver knows of."""
    roll = rng.random()
    if roll < 0.04:
        return up(
            rng.choice(HOSTS),
            rng.randint(0, 8),
            {"mem": float(rng.choice([0, 100, 400]))},
            type=rng.choice("ab"),
        )
    if roll < 0.05:
        return WorkerDown(name=rng.choice(HOSTS))
    if roll < 0.06:
        return WorkerRemoved(name=rng.choice(HOSTS))
    if roll < 0.065:
        return SharedResource(name="lic", total=float(rng.randint(0, 4)))
    if roll < 0.45:
        tasks = rng.randint(1, 6)
        return submit(f"j{n}", rng.choice(RESREQS), tasks, min=rng.randint(1, tasks))
    if roll < 0.80 and running:
        return JobFinished(job_id=running.pop(rng.randrange(len(running))))
    if roll < 0.85 and pending:
        job_id = next(iter(pending)) if rng.random() < 0.5 else next(reversed(pending))
        del pending[job_id]
        return JobCancelled(job_id=job_id)
    return SessionBegin()


async def test_soak_keeps_invariants() -> None:
    rng = random.Random(20261201)
    core = SchedulerCore()
    running: list[str] = []
    pending: dict[str, None] = {}  # insertion-ordered
    sessions = 0
    for n in range(EVENTS):
        event = churn(rng, running, pending, n)
        if core.apply(event):
            await core.run_session()
            sessions += 1
            if sessions % 200 == 0:
                check_invariants(core)
        for decision in core.take_decisions():
            if isinstance(decision, JobAllocated):
                running.append(decision.job_id)
                pending.pop(decision.job_id, None)
            elif isinstance(decision, JobPended):
                pending[decision.job_id] = None
            assert not (isinstance(decision, JobPended) and decision.reason == "internal_error")
        if len(pending) > 2000:  # keep the queue realistic: withdraw the oldest
            oldest = next(iter(pending))
            del pending[oldest]
            core.apply(JobCancelled(job_id=oldest))
            core.take_decisions()
    check_invariants(core)
    assert sessions > EVENTS // 10
