"""Small builders for tests: events with sensible defaults, decision filters."""

from __future__ import annotations

from typing import Any

from events import (
    Decision,
    JobAllocated,
    JobPended,
    JobSubmitted,
    SessionBegin,
    SessionEnd,
    WorkerUp,
)


def up(
    name: str, slots: int = 1, resources: dict[str, float] | None = None, **attrs: Any
) -> WorkerUp:
    return WorkerUp(name=name, slots=slots, attrs=attrs, resources=resources or {})


def submit(job_id: str, resreq: str = "", tasks: int = 1, **fields: Any) -> JobSubmitted:
    fields.setdefault("min_tasks", fields.pop("min", tasks))
    fields.setdefault("max_tasks", tasks)
    return JobSubmitted(job_id=job_id, resreq=resreq, **fields)


GO = SessionBegin()


def allocations(decisions: list[Decision]) -> dict[str, list[tuple[str, int]]]:
    return {
        d.job_id: [(h.host, h.slots) for h in d.hosts]
        for d in decisions
        if isinstance(d, JobAllocated)
    }


def pends(decisions: list[Decision]) -> dict[str, JobPended]:
    return {d.job_id: d for d in decisions if isinstance(d, JobPended)}


def ends(decisions: list[Decision]) -> list[SessionEnd]:
    return [d for d in decisions if isinstance(d, SessionEnd)]
