"""Faults the core survives: how they read in a decision, and undoing an event
that a fault interrupted half-way.

A fault is an exception that is not an :class:`XceError` while an event is
applied, or any exception while a job is allocated or a session runs: a bug or a
misbehaving plugin, not bad input. :class:`~xce_core.SchedulerCore` reports it
as a decision whose error text starts with ``"internal error: "`` (a job whose
attempt raised pends with reason :data:`INTERNAL_ERROR`), hands the exception to
the driver's :data:`InternalErrorHook`, and keeps running. The helpers below
leave the state as a rejected event would: unchanged, or with the job rejected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final, TypeAlias

from events import Decision, JobSubmitted, QueueConfig
from xce_core._model import PENDING, REJECTED
from xce_core._state import ClusterState

__all__ = [
    "INTERNAL_ERROR",
    "InternalErrorHook",
    "forget_partial_job",
    "internal_error_text",
    "queue_config_or_nothing",
]

INTERNAL_ERROR: Final = "internal_error"
"""The pend category of a job whose attempt raised (or whose commit failed)."""

InternalErrorHook: TypeAlias = Callable[[Exception, Decision], None]
"""Called with a fault and the decision that reports it (see :class:`SchedulerCore`)."""


def internal_error_text(exc: BaseException, where: str = "") -> str:
    """How a fault reads in a decision: ``"internal error: " + where +
    "ValueError: bad"``. An exception group of one (a task group's) reads as its
    only member."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"internal error: {where}{type(exc).__name__}{': ' + text if text else ''}"


def forget_partial_job(state: ClusterState, ev: JobSubmitted, pending_before: int) -> None:
    """After a fault while ``ev`` was being admitted: leave its job rejected (its
    id stays taken, as for any rejected job) and out of the pending set,
    whatever point admission had reached."""
    job = state.jobs.get(ev.job_id)
    if job is None:
        # Best effort: the fault itself is what gets reported.
        with contextlib.suppress(Exception):
            state.job_rejected(ev)
    elif job.state is PENDING:
        state.pending_count = pending_before
        state.retire(job, REJECTED)  # its group drops it in a later session


def queue_config_or_nothing(state: ClusterState, ev: QueueConfig) -> None:
    """Apply ``ev`` all or nothing: should a picker raise while the queue's
    pending jobs are re-keyed, the queue and its jobs are left as they were and
    the exception propagates."""
    queue = state.queue(ev.name)
    before = (queue.priority, queue.picker)
    groups = state.groups_of_queue(ev.name)
    saved = [(g, list(g.jobs), [job.key for job in g.jobs]) for g in groups]
    try:
        state.queue_config(ev)
    except Exception:
        queue.priority, queue.picker = before
        for group, jobs, keys in saved:
            for job, key in zip(jobs, keys, strict=True):
                job.key = key
            group.jobs = jobs
            group.head = 0
        raise
