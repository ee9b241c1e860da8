"""Job pickers: the policy deciding in which order a session considers pending jobs.

A picker is a plugin that maps a job to a sort key within its queue (like the
Kubernetes QueueSort extension point). The core merges queues by priority and
keeps jobs grouped by fingerprint, so the key is computed once per job at
submission (and again when its queue is reconfigured), never per session.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from xce_core._model import Job, Queue

__all__ = ["FairsharePicker", "FcfsPicker", "Picker"]


class Picker(ABC):
    """Policy order within a queue. Smaller keys go first.

    ``order_key`` must depend only on the job and its queue; it must be total
    (use ``job.seq``, the arrival number, as the last tie-breaker), and the same
    length for every job (a tuple of a fixed shape).
    """

    name: ClassVar[str]

    @abstractmethod
    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        """The job's position in this picker's order."""

    def snapshot_state(self) -> bytes | None:
        """What a stateful picker (per-user usage, say) must keep across a
        restart, as bytes of its own format; ``None`` (the default): nothing.
        Called by :meth:`SchedulerCore.snapshot` between sessions; its result is
        stored in the snapshot and handed to :meth:`restore_state` of the
        restored core's picker of the same name. Must not change the picker."""
        return None

    def restore_state(self, data: bytes) -> None:
        """Take back what :meth:`snapshot_state` returned (called once, before
        any job is keyed, by :meth:`SchedulerCore.restore`). Raise an
        :class:`XceError` if ``data`` is not usable; the default ignores it."""
        del data


class FcfsPicker(Picker):
    """First come, first served: job priority (higher first), then submit time,
    then arrival order. Queue priority is applied by the core above any picker."""

    name = "fcfs"

    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        # job.priority without the property's call, a fifth of the keying of
        # a job (benchmark B5 of benchmarks/bench_ingest.py keys 500,000).
        return (-job._origin[3], job.submit_time, job.seq)


class FairsharePicker(Picker):
    """LSF fairshare: users (share accounts of the queue's share tree, or the
    cluster's) in order of dynamic priority, highest first, taken top-down in a
    hierarchical tree; within one account, first come first served (job
    priority, submit time, arrival). The core keeps the accounts and their
    priorities (:mod:`xce_core._fairshare`): ``fairshare = True`` asks for
    them, and the key below orders jobs within an account."""

    name = "fairshare"
    fairshare = True

    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        return (-job._origin[3], job.submit_time, job.seq)  # as FcfsPicker's
