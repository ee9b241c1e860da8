"""Result types shared by the session, the cache, the dispatcher and plugins.

A leaf module: it imports nothing of the core, so every other module can use
these without an import cycle.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, final

__all__ = ["AllocMode", "Need", "PendReason", "Reason", "SessionStats", "Status", "Want", "need"]

# Consumables wanted on each host of an allocation, as sorted
# (name, per_task, per_host) triples: a bucket of n slots takes
# ``per_task * n + per_host`` of ``name`` on its host.
Want = tuple[tuple[str, float, float], ...]


# Amounts actually taken on one host, as (name, amount) pairs.
Need = tuple[tuple[str, float], ...]


def need(want: Want, slots: int) -> Need:
    """What a bucket of ``slots`` tasks takes on its host, per consumable."""
    if len(want) == 1:  # the usual rusage[mem=...]
        name, per_task, per_host = want[0]
        return ((name, per_task * slots + per_host),)
    return tuple([(name, per_task * slots + per_host) for name, per_task, per_host in want])


class AllocMode(enum.Enum):
    """How an attempt may use resources. Only NORMAL is implemented; PREEMPT is the
    extension point a preemption feature will use (Req 9.5)."""

    NORMAL = "normal"
    PREEMPT = "preempt"


class Reason:
    """Pend reason categories (the ``reason`` field of ``job_pended``)."""

    NO_MATCHING_HOST = "no_matching_host"
    NOT_ENOUGH_SLOTS = "not_enough_slots"
    RESOURCE_UNAVAILABLE = "resource_unavailable"
    SHARED_RESOURCE_UNAVAILABLE = "shared_resource_unavailable"
    NO_WORKERS = "no_workers"
    # Backfill: the job fits now but would delay the reserved head job.
    RESERVED_FOR_OTHER = "reserved_for_other"
    # A resource allocation limit that covers the job is full.
    LIMIT_REACHED = "limit_reached"
    # Strict FIFO: the job was not tried, as a job before it cannot start.
    FIFO_ORDER = "fifo_order"


@dataclass(slots=True)
class PendReason:
    """Why a job could not start: a category and a readable per-host breakdown.

    ``detail`` may be filled lazily (it costs a pass over the hosts), so use
    :meth:`SchedContext.explain` or the session to render it.
    """

    category: str
    detail: str = ""


@final
@dataclass(frozen=True, slots=True)
class Status:
    """What an allocator's attempt came to, as the Kubernetes scheduling
    framework's ``Status``: not fitting is a value, not an exception.

    Either :attr:`OK` (placed: the claims are in the attempt's context) or
    unschedulable, optionally with the :class:`PendReason` the job should pend
    with (:meth:`unschedulable`). Without a reason the core works one out from
    the hosts. Truthy exactly when ok, so code that treated the old ``bool``
    results as conditions (``if await allocate_plans(...)``) keeps working.
    """

    ok: bool
    reason: PendReason | None = None

    OK: ClassVar[Status]
    UNSCHEDULABLE: ClassVar[Status]

    def __post_init__(self) -> None:
        if self.ok and self.reason is not None:
            raise ValueError("a successful Status carries no pend reason")

    @staticmethod
    def unschedulable(reason: PendReason | None = None) -> Status:
        """Not placed; ``reason`` (optional) says why, in the job's pend reason."""
        return Status.UNSCHEDULABLE if reason is None else Status(False, reason)

    def __bool__(self) -> bool:
        return self.ok


Status.OK = Status(True)
Status.UNSCHEDULABLE = Status(False)


@dataclass(slots=True)
class SessionStats:
    """Counters of one session (also reported in ``session_end``)."""

    number: int
    allocated: int = 0
    pended: int = 0
    cache_hits: int = 0
    attempts: int = 0
    stopped_by_fifo: bool = False
