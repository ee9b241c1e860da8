"""The picker's merge: pending jobs of every group in policy order, in batches.

Groups (jobs of one fingerprint, each list sorted by its order key) are merged
through a heap keyed by each group's next pending job. A group whose
fingerprint was proven unsatisfiable this session is handed over whole, so its
jobs are pended together instead of one by one.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Protocol

from xce_core._model import PENDING, Job, JobGroup
from xce_core._results import PendReason, SessionStats

__all__ = ["BatchSink", "Item", "send_in_policy_order"]

Item = Job | JobGroup


class BatchSink(Protocol):
    """Where batches go: the allocator task's memory stream, or (inline
    sessions) the allocator itself. Closed when the merge ends."""

    async def send(self, item: list[Item], /) -> None: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
        /,
    ) -> Any: ...


async def send_in_policy_order(
    groups: Iterable[JobGroup],
    failed: Mapping[int, PendReason],
    send: BatchSink,
    stats: SessionStats,
    limit: int,
) -> None:
    """Merge ``groups`` in policy order into batches for ``send``; ``failed`` holds
    the fingerprints proven unsatisfiable this session (read as it grows).
    Batches start at 16 jobs and double up to ``limit`` (a strict-FIFO session
    often stops early: ``stats.stopped_by_fifo`` ends the merge). Closes ``send``."""
    batch_size = min(16, limit)
    pending = PENDING
    # Entries are the key's fields followed by (gid, group): one flat tuple
    # compares in about half the time of (key, gid, group).
    heap: list[tuple[Any, ...]] = [(*g.jobs[0].key, g.gid, g) for g in groups if g.jobs]
    heapq.heapify(heap)
    async with send:
        batch: list[Item] = []
        while heap:
            group = heap[0][-1]
            if group.fingerprint in failed:
                heapq.heappop(heap)
                batch.append(group)
            else:
                jobs = group.jobs
                pos = group.pos
                batch.append(jobs[pos])
                pos += 1
                while pos < len(jobs) and jobs[pos].state is not pending:
                    pos += 1
                group.pos = pos
                if pos < len(jobs):
                    heapq.heapreplace(heap, (*jobs[pos].key, group.gid, group))
                else:
                    heapq.heappop(heap)
            if len(batch) >= batch_size:
                await send.send(batch)
                if stats.stopped_by_fifo:
                    return
                batch = []
                batch_size = min(batch_size * 2, limit)
        if batch:
            await send.send(batch)
