"""Per-attempt scratch: tentative claims of one allocation attempt (docs/design.md, R3 and R4).

Claims made here are invisible to the cluster state until the core commits them
in one synchronous step; a failed or cancelled attempt simply drops the context,
so nothing it tried can leak into the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from xce_core._model import Job, Worker, shortfall, tasks_that_fit
from xce_core._results import AllocMode, Need, PendReason, Want, need

if TYPE_CHECKING:
    from xce_core._session import SessionScratch
    from xce_core._state import ClusterState

__all__ = ["SchedContext"]

_NO_SHARED: dict[str, float] = {}
_NOTHING_TAKEN: Mapping[str, float] = {}
_NORMAL = AllocMode.NORMAL  # an Enum class attribute lookup is slow on 3.11


class SchedContext:
    """Tentative claims of one job's allocation attempt.

    ``journal`` records every tentative claim in order, as (worker, slots, need)
    triples, so that :meth:`rollback_to` can undo a failed plan or compound part
    exactly. ``slots`` sums the journal's slots per worker index; amounts of
    consumables are worked out from the journal when a host is claimed twice
    (rare: compound parts), so a plain claim stays cheap. ``cap``: the most
    tasks a job of a task range may take in this attempt (its limits' room,
    set by the core); not ``None`` whenever limits bound the attempt (host
    limits too), so that no failure of it is cached for a shape.
    """

    __slots__ = (
        "_kept",
        "_own",
        "cap",
        "job",
        "journal",
        "mode",
        "reason",
        "session",
        "shared",
        "slots",
        "state",
    )

    def __init__(
        self,
        state: ClusterState,
        session: SessionScratch,
        job: Job,
        mode: AllocMode = AllocMode.NORMAL,
    ) -> None:
        self.state = state
        self.session = session
        self.job = job
        self.mode = mode
        self.journal: list[tuple[Worker, int, Need]] = []
        self.slots: dict[int, int] = {}
        self.shared: dict[str, float] = {}
        self.reason: PendReason | None = None
        self.cap: int | None = None
        # For distinct(): the journal this context keeps, and whether per-host
        # rooms put entries in ``slots`` that are not claims.
        self._own = self.journal
        self._kept = False

    def __repr__(self) -> str:
        return f"SchedContext(job={self.job.job_id!r}, journal={self.journal!r})"

    def reset(self, job: Job) -> None:
        """Start a fresh attempt for ``job`` (the core reuses one context for a
        batch of jobs). The old journal is not touched: a committed job keeps it."""
        self.job = job
        self.mode = _NORMAL
        self.journal = self._own = []
        if self.slots:
            self.slots = {}
        if self.shared:
            self.shared = {}
        self.reason = None
        self.cap = None
        self._kept = False

    def keep_within(self, rooms: Mapping[str, int]) -> None:
        """Make each host named in ``rooms`` look to this attempt no freer than
        that many slots (per-host limits: tentative claims that are never
        committed, not in the journal). Before the attempt's first claim."""
        self._kept = True
        by_name = self.state.by_name
        for host, room in rooms.items():
            worker = by_name.get(host)
            if worker is not None:
                free = worker.slots - worker.used_slots
                if free > room:
                    self.slots[worker.index] = free - room

    def distinct(self) -> bool:
        """Whether no worker has two claims in ``journal`` (``False``: not
        known). ``slots`` has one entry per worker claimed (rollbacks remove
        what they undo), so equal counts say so, in O(1): unless per-host rooms
        put entries there that are not claims (:meth:`keep_within`), or the
        journal was replaced by one this context did not build."""
        return (
            self._own is self.journal and not self._kept and len(self.slots) == len(self.journal)
        )

    @property
    def now(self) -> float:
        """The session's "now" on the scheduler's injected clock (virtual time
        under the simulator), read once when the session began. The core itself
        makes no time-based decision; this is for plugins that do."""
        return self.session.now

    @property
    def amounts(self) -> dict[tuple[int, str], float]:
        """Tentatively claimed consumables, by (worker index, name)."""
        out: dict[tuple[int, str], float] = {}
        for worker, _, scaled in self.journal:
            for name, amount in scaled:
                key = (worker.index, name)
                out[key] = out.get(key, 0.0) + amount
        return out

    def taken(self, worker: Worker) -> Mapping[str, float]:
        """Consumables this attempt has tentatively claimed on ``worker``, by name."""
        if worker.index not in self.slots:
            return _NOTHING_TAKEN
        out: dict[str, float] = {}
        for w, _, scaled in self.journal:
            if w is worker:
                for name, amount in scaled:
                    out[name] = out.get(name, 0.0) + amount
        return out

    def tentative(self, worker: Worker, name: str) -> float:
        """How much of ``name`` this attempt has tentatively claimed on ``worker``."""
        return self.taken(worker).get(name, 0.0)

    def free_slots(self, worker: Worker) -> int:
        """Slots free on ``worker`` after this attempt's tentative claims."""
        free = worker.slots - worker.used_slots
        if self.slots:
            free -= self.slots.get(worker.index, 0)
        return free

    def shortfall(self, worker: Worker, slots: int, want: Want) -> str | None:
        """:func:`~xce_core.plugin.shortfall` on top of this attempt's tentative
        claims: what ``worker`` lacks for a bucket of ``slots`` tasks (``None``
        when it fits)."""
        taken_slots = self.slots.get(worker.index)
        if taken_slots is None:
            return shortfall(worker, slots, want)
        return shortfall(worker, slots, want, taken_slots, self.taken(worker))

    def tasks_that_fit(self, worker: Worker, want: Want) -> int:
        """:func:`~xce_core.plugin.tasks_that_fit` on top of this attempt's
        tentative claims: the most tasks one bucket can have on ``worker``."""
        taken_slots = self.slots.get(worker.index)
        if taken_slots is None:
            return tasks_that_fit(worker, want)
        return tasks_that_fit(worker, want, taken_slots, self.taken(worker))

    def fits(self, worker: Worker, slots: int, want: Want) -> bool:
        """Whether a bucket of ``slots`` tasks with ``want`` fits on ``worker`` now."""
        return self.shortfall(worker, slots, want) is None

    def claim(self, worker: Worker, slots: int, want: Want) -> None:
        """Tentatively take a bucket of ``slots`` tasks (and what ``want`` says it
        takes) on ``worker``. Raises :class:`ValueError` for a bucket of no task
        (a plugin's bug: the core's plans have positive buckets)."""
        if slots < 1:
            raise ValueError(f"a claim of {slots} slots on {worker.name}: a bucket has 1 or more")
        index = worker.index
        tentative = self.slots
        tentative[index] = tentative.get(index, 0) + slots
        self.journal.append((worker, slots, need(want, slots) if want else ()))

    def claim_many(self, workers: list[Worker], slots: int, want: Want) -> None:
        """:meth:`claim` a bucket of ``slots`` tasks on each of ``workers``
        (distinct), in order."""
        if slots < 1:
            raise ValueError(f"a claim of {slots} slots: a bucket has 1 or more")
        tentative = self.slots
        append = self.journal.append
        taken = need(want, slots) if want else ()
        for worker in workers:
            index = worker.index
            tentative[index] = tentative.get(index, 0) + slots
            append((worker, slots, taken))

    def mark(self) -> tuple[int, dict[str, float]]:
        """A point to roll back to (host claims and shared claims)."""
        return len(self.journal), dict(self.shared) if self.shared else _NO_SHARED

    def rollback_to(self, mark: tuple[int, dict[str, float]]) -> None:
        """Undo every tentative claim made after ``mark``, exactly."""
        depth, shared = mark
        if shared or self.shared:
            self.shared = dict(shared)
        journal = self.journal
        tentative = self.slots
        while len(journal) > depth:
            worker, slots, _ = journal.pop()
            left = tentative[worker.index] - slots
            if left:
                tentative[worker.index] = left
            else:
                del tentative[worker.index]

    def claim_shared(self, want: dict[str, float]) -> None:
        """Tentatively take per-job shared resources."""
        for name, amount in want.items():
            self.shared[name] = self.shared.get(name, 0.0) + amount

    def shared_free(self, name: str) -> float | None:
        """Free amount of a shared resource after this attempt's tentative claims."""
        free = self.state.shared_free(name)
        if free is None:
            return None
        return free - self.shared.get(name, 0.0)
