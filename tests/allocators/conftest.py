"""Fixtures for allocator tests: a core with workers, and a context for one job."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from events import InputEvent
from tests.helpers import submit
from xce_core import SchedulerCore
from xce_core.plugin import SchedContext


def build(events: list[InputEvent], core: SchedulerCore | None = None) -> SchedulerCore:
    core = core or SchedulerCore()
    for event in events:
        core.apply(event)
    core.take_decisions()
    return core


def context_for(core: SchedulerCore, job_id: str = "probe", resreq: str = "") -> SchedContext:
    """A fresh attempt context inside a freshly begun session."""
    if job_id not in core.state.jobs:
        core.apply(submit(job_id, resreq))
    core.scratch.begin(core.session_count + 1)
    return SchedContext(core.state, core.scratch, core.state.jobs[job_id])


@pytest.fixture
def make_ctx() -> Callable[..., SchedContext]:
    return context_for
