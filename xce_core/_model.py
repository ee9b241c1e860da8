"""The records the cluster state is made of: workers, jobs, queues, job groups.

They are plain mutable objects with ``__slots__``, owned by :class:`ClusterState`;
nothing outside the core's synchronous methods changes them.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from types import MappingProxyType
from typing import Any, TypeAlias

from events import HostSlots
from xce_core._results import PendReason, Want
from xce_core.resreq import ResReq, Value

__all__ = [
    "AMOUNT_TOLERANCE",
    "DONE",
    "PENDING",
    "REJECTED",
    "RUNNING",
    "SLOTS",
    "Job",
    "JobGroup",
    "JobShape",
    "JobState",
    "Origin",
    "Queue",
    "Worker",
    "WorkerValues",
    "shortfall",
    "tasks_that_fit",
]


class Worker:
    """A host: static attributes, slot and consumable totals, and what is in use.

    ``index`` is the canonical order (first registration); the host iterator walks
    workers in that order unless ``order[]`` sorts them. ``one_slot`` is the host
    holding one slot as a decision lists it, built once (frozen, so every
    decision may share it).
    """

    __slots__ = (
        "attrs",
        "index",
        "name",
        "one_slot",
        "resources",
        "slots",
        "usable",
        "used",
        "used_slots",
        "values",
    )

    def __init__(
        self,
        name: str,
        index: int,
        slots: int,
        attrs: dict[str, Value],
        resources: dict[str, float],
    ) -> None:
        self.name = name
        self.index = index
        self.slots = slots
        self.attrs = attrs
        self.resources = resources
        self.used_slots = 0
        self.used: dict[str, float] = {}
        self.usable = True
        self.values = WorkerValues(self)
        self.one_slot = HostSlots(host=name, slots=1)

    @property
    def free_slots(self) -> int:
        """Slots not claimed by running jobs (never negative)."""
        free = self.slots - self.used_slots
        return free if free > 0 else 0

    def available(self, resource: str) -> float | None:
        """Unclaimed amount of a consumable, ``None`` when the host lacks it."""
        total = self.resources.get(resource)
        if total is None:
            return None
        free = total - self.used.get(resource, 0.0)
        return free if free > 0.0 else 0.0

    def __repr__(self) -> str:
        return f"Worker({self.name!r}, slots={self.used_slots}/{self.slots})"


# Consumable amounts are floats, added and subtracted claim by claim, so a host
# whose free amount is exactly what a bucket needs can come out a few ulps short
# (0.1 * 3 > 0.3). Every comparison of an amount with a free amount allows this
# much slack, and an amount released down to within it counts as zero. It is
# absolute: far below anything a requirement asks for, and above the rounding
# of amounts up to about 10**6 (one ulp of 10**7 is already 2e-9).
AMOUNT_TOLERANCE = 1e-9

# What shortfall() returns when free slots are too few (consumables are named).
SLOTS = "slots"

_NOTHING: Mapping[str, float] = {}


def shortfall(
    worker: Worker,
    tasks: int,
    want: Want,
    taken_slots: int = 0,
    taken: Mapping[str, float] = _NOTHING,
) -> str | None:
    """What ``worker`` lacks for one bucket of ``tasks`` tasks wanting ``want``:
    ``None`` when it fits; :data:`SLOTS` when its free slots are too few; else
    the name of the first consumable of ``want`` it lacks or does not have.

    ``taken_slots`` and ``taken`` (consumable name → amount) are what the caller
    has already claimed on ``worker`` and not yet committed. The one fit rule:
    host iterators, tentative claims, commits, pend reasons and
    :func:`tasks_that_fit` all decide through it (with :data:`AMOUNT_TOLERANCE`).
    Its first clause, free slots ``< tasks``, needs no call: the core's hottest
    loops test it inline before calling (each says which benchmark that serves).
    Amounts in ``want`` are non-negative. Pure; never raises.
    """
    if worker.slots - worker.used_slots - taken_slots < tasks:
        return SLOTS
    if want:
        resources = worker.resources
        used = worker.used
        for name, per_task, per_host in want:
            total = resources.get(name)
            if total is None:
                return name
            free = total - used.get(name, 0.0)
            if free < 0.0:
                free = 0.0
            if taken:
                free -= taken.get(name, 0.0)
            if per_task * tasks + per_host > free + AMOUNT_TOLERANCE:
                return name
    return None


def tasks_that_fit(
    worker: Worker,
    want: Want,
    taken_slots: int = 0,
    taken: Mapping[str, float] = _NOTHING,
) -> int:
    """The most tasks one bucket wanting ``want`` can have on ``worker`` (0 when
    not even one fits): :func:`shortfall` with the same arguments is ``None``
    exactly for ``1 <= tasks <= tasks_that_fit(...)``. Pure; never raises."""
    most = worker.slots - worker.used_slots - taken_slots
    resources = worker.resources
    used = worker.used
    for name, per_task, per_host in want:
        if most <= 0:
            break
        total = resources.get(name)
        if total is None:
            return 0
        free = total - used.get(name, 0.0)
        if free < 0.0:
            free = 0.0
        if taken:
            free -= taken.get(name, 0.0)
        # The very bound shortfall() compares with, computed the same way.
        limit = free + AMOUNT_TOLERANCE
        if per_task > 0.0:
            estimate = (limit - per_host) // per_task
            n = 0 if estimate < 0 else int(estimate) if estimate < most else most
            # Division rounds differently from shortfall()'s product: settle the
            # estimate with shortfall()'s own comparison, so the two always agree.
            while n > 0 and per_task * n + per_host > limit:
                n -= 1
            while n < most and not per_task * (n + 1) + per_host > limit:
                n += 1
            most = n
        elif per_host > limit:
            return 0
    return most if most > 0 else 0


# Names every host answers in select expressions, after its own attributes.
_BUILTIN_NAMES = frozenset({"slots", "maxslots", "hname", "host", "ncpus", "server"})


class WorkerValues:
    """What a select expression sees of a worker (``HostValues``).

    Lookup order: the worker's attributes (so a host can override anything), then
    consumables (``mem`` is the amount available now, ``maxmem`` the total, as in
    LSF), then built-ins: ``slots`` (free slots), ``maxslots``, ``hname``/``host``
    (the worker name), ``ncpus`` (defaults to ``maxslots``), ``server`` (true).
    A name none of these define is missing (``None``).
    """

    __slots__ = ("_worker",)

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    def get(self, name: str, /) -> Value | None:
        w = self._worker
        value = w.attrs.get(name)
        if value is not None:
            return value
        if name in w.resources:
            return w.available(name)
        if name.startswith("max") and name[3:] in w.resources:
            return w.resources[name[3:]]
        if name in _BUILTIN_NAMES:
            if name == "slots":
                return w.free_slots
            if name in ("maxslots", "ncpus"):
                return w.slots
            if name == "server":
                return True
            return w.name
        return None


# Shared, read-only empty mappings (defaults that allocate nothing). A mapping
# proxy answers get(), items() and len() in C: an ABC Mapping subclass took
# three Python calls to iterate, once per job end (benchmarks/bench_simulate.py).
_EMPTY: Mapping[str, float] = MappingProxyType({})
_EMPTY_FPS: Mapping[int, int] = MappingProxyType({})


class JobState(enum.Enum):
    """Where a job is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    REJECTED = "rejected"


# The members as module constants, for the core's hot loops: reading one is
# about 0.01 µs, ``JobState.PENDING`` about 0.07 µs (Python 3.11), and the picker
# and the commit test a job's state once per job. Import them from here.
PENDING = JobState.PENDING
RUNNING = JobState.RUNNING
DONE = JobState.DONE
REJECTED = JobState.REJECTED


@dataclass(slots=True)
class Queue:
    """A queue: its priority and the picker ordering its jobs (``None``: default)."""

    name: str
    priority: int = 0
    picker: str | None = None


class JobShape:
    """What every job of one requirement text and task range shares: the parsed
    requirement, its fingerprint, and the fingerprint of each primary in it.

    Built once per distinct shape at ingest (see ``SchedulerCore._submit``) and
    shared, never copied, by its jobs: a repeat submission costs a few dictionary
    lookups and no per-job tree, dict or string. Not changed once its jobs hold it.
    """

    __slots__ = ("fingerprint", "max_tasks", "min_tasks", "primary_fps", "resreq", "resreq_text")

    def __init__(
        self,
        resreq_text: str,
        resreq: ResReq,
        min_tasks: int,
        max_tasks: int,
        fingerprint: int = 0,
        primary_fps: Mapping[int, int] = _EMPTY_FPS,
    ) -> None:
        self.resreq_text = resreq_text
        self.resreq = resreq
        self.min_tasks = min_tasks
        self.max_tasks = max_tasks
        self.fingerprint = fingerprint
        # Fingerprint of each primary of the requirement, by id() of the Primary.
        self.primary_fps = primary_fps

    def __repr__(self) -> str:
        return (
            f"JobShape({self.resreq_text!r}, tasks={self.min_tasks}..{self.max_tasks},"
            f" fp={self.fingerprint})"
        )


Origin: TypeAlias = tuple[str, str, str, int, float | None]
"""Who submitted a job and where: ``(user, queue, project, priority)``, one tuple
shared by the jobs that have the same."""


class Job:
    """A job as the core tracks it.

    ``key`` is its position in policy order (smaller first), computed at ingest by
    its queue's picker; ``fingerprint`` identifies its satisfiability class (equal
    fingerprints succeed or fail together within a session).

    Lean, because the core holds every pending job: what a job shares with others
    of its shape (:class:`JobShape`: ``fingerprint``, ``resreq``, ``resreq_text``,
    ``min_tasks``, ``max_tasks``, ``primary_fps``) and of its submitter (:data:`Origin`:
    ``user``, ``queue``, ``project``, ``priority``) is read through shared
    objects; these fields are read-only. The keyword constructor takes every
    field, as the dataclass it replaces did; the core builds jobs with
    :meth:`admit` (the usual submission, inline as it does:
    ``SchedulerCore._submit``, for benchmark B5).
    """

    __slots__ = (
        "_origin",
        "_shape",
        "allocation",
        "claims",
        "group",
        "job_id",
        "key",
        "last_reason",
        "seq",
        "shared_claims",
        "state",
        "submit_time",
    )

    job_id: str
    submit_time: float
    seq: int
    key: tuple[Any, ...]
    state: JobState
    allocation: Sequence[tuple[Worker, int]]
    claims: Sequence[tuple[Worker, int, tuple[tuple[str, float], ...]]]
    shared_claims: Mapping[str, float]
    last_reason: str | None
    group: JobGroup | None

    def __init__(
        self,
        job_id: str,
        user: str,
        queue: str,
        project: str,
        priority: int,
        submit_time: float,
        min_tasks: int,
        max_tasks: int,
        resreq_text: str,
        resreq: ResReq,
        seq: int,
        fingerprint: int = 0,
        key: tuple[Any, ...] = (),
        state: JobState = PENDING,
        allocation: Sequence[tuple[Worker, int]] = (),
        claims: Sequence[tuple[Worker, int, tuple[tuple[str, float], ...]]] = (),
        shared_claims: Mapping[str, float] = _EMPTY,
        last_reason: str | None = None,
        group: JobGroup | None = None,
        primary_fps: Mapping[int, int] = _EMPTY_FPS,
        run_limit: float | None = None,
    ) -> None:
        self.job_id = job_id
        self._shape = JobShape(resreq_text, resreq, min_tasks, max_tasks, fingerprint, primary_fps)
        self._origin = (user, queue, project, priority, run_limit)
        self.submit_time = submit_time
        self.seq = seq
        self.key = key
        self.state = state
        self.allocation = allocation
        self.claims = claims
        self.shared_claims = shared_claims
        self.last_reason = last_reason
        self.group = group

    @classmethod
    def admit(
        cls, job_id: str, shape: JobShape, origin: Origin, submit_time: float, seq: int
    ) -> Job:
        """A new pending job of ``shape`` from ``origin`` (both shared, not copied);
        its ``key`` and ``group`` are the caller's to set. ``SchedulerCore._submit``
        builds the usual job inline the same way: change both together."""
        job = cls.__new__(cls)
        job.job_id = job_id
        job._shape = shape
        job._origin = origin
        job.submit_time = submit_time
        job.seq = seq
        # Immutable empty defaults: no per-job allocations at ingest (hot path).
        job.key = ()
        job.state = PENDING
        job.allocation = ()
        job.claims = ()
        job.shared_claims = _EMPTY
        job.last_reason = None
        job.group = None
        return job

    @property
    def shape(self) -> JobShape:
        """What the job shares with every job of its requirement and task range."""
        return self._shape

    @property
    def user(self) -> str:
        return self._origin[0]

    @property
    def queue(self) -> str:
        return self._origin[1]

    @property
    def project(self) -> str:
        return self._origin[2]

    @property
    def priority(self) -> int:
        return self._origin[3]

    @property
    def run_limit(self) -> float | None:
        """Estimated run time in seconds (``bsub -W``), ``None`` if not given."""
        return self._origin[4]

    @property
    def fingerprint(self) -> int:
        return self._shape.fingerprint

    @property
    def min_tasks(self) -> int:
        return self._shape.min_tasks

    @property
    def max_tasks(self) -> int:
        return self._shape.max_tasks

    @property
    def resreq_text(self) -> str:
        return self._shape.resreq_text

    @property
    def resreq(self) -> ResReq:
        return self._shape.resreq

    @property
    def primary_fps(self) -> Mapping[int, int]:
        """Fingerprint of each primary of the requirement, by id() of the Primary."""
        return self._shape.primary_fps

    def __repr__(self) -> str:
        return (
            f"Job({self.job_id!r}, {self.state.value}, resreq={self.resreq_text!r},"
            f" tasks={self.min_tasks}..{self.max_tasks}, fp={self.fingerprint})"
        )


GroupHome: TypeAlias = int | tuple[int, str]
"""A group's key in ``ClusterState.groups``: its fingerprint, or (fingerprint,
queue) for a fairshare queue's jobs (a ``FairGroup``)."""


class JobGroup:
    """Pending jobs sharing a fingerprint, in policy order, kept across sessions.

    ``jobs[head:]`` holds every pending member, sorted by order key; members
    that started or ended stay in the list as dead entries until :meth:`begin`
    drops them (when they are many, so the cost is amortised O(1) per job),
    and ``jobs[:head]`` are all dead. ``live`` counts the pending members.
    Within a session ``jobs[pos:]`` are the members not yet covered.
    ``settled_reason``: every pending member's last reported pend category,
    when they all agree; ``unsettled`` lists members added since.

    Across sessions (:mod:`xce_core._order`, :mod:`xce_core._sleep`): ``queued``
    when the group has an entry in the policy order (``ticket`` names the
    valid one, ``key`` its order key); ``asleep`` holds the reason while the
    group sleeps; ``seen`` is the last session that covered it.

    ``home`` is its key in ``ClusterState.groups``: the fingerprint, or for a
    fairshare queue's :class:`~xce_core._fairgroup.FairGroup` the fingerprint
    and the queue.
    """

    __slots__ = (
        "asleep",
        "fingerprint",
        "gid",
        "head",
        "home",
        "jobs",
        "key",
        "live",
        "pos",
        "queued",
        "seen",
        "settled_reason",
        "ticket",
        "unsettled",
    )

    def __init__(self, fingerprint: int, gid: int, home: GroupHome | None = None) -> None:
        self.fingerprint = fingerprint
        self.gid = gid
        self.home: GroupHome = fingerprint if home is None else home
        self.jobs: list[Job] = []
        self.head = 0
        self.pos = 0
        self.live = 0
        self.settled_reason: str | None = None
        self.unsettled: list[Job] = []
        self.queued = False
        self.ticket = 0
        self.key: tuple[Any, ...] = ()
        self.asleep: PendReason | None = None
        self.seen = 0

    def begin(self) -> None:
        """Rewind to the first pending member (``pos`` = ``head``), dropping dead
        members once they outnumber the live ones."""
        jobs = self.jobs
        dead = len(jobs) - self.live
        if dead > self.live + 32:
            self.jobs = jobs = [j for j in jobs if j.state is PENDING]
            if self.unsettled:
                # Members that started or ended need no pend decision.
                self.unsettled = [j for j in self.unsettled if j.state is PENDING]
            self.head = 0
        head = self.head
        end = len(jobs)
        while head < end and jobs[head].state is not PENDING:
            head += 1
        self.head = self.pos = head

    def forget(self) -> None:
        """Let go of every member (the group was dropped, nothing pending in it).
        Members that started still name the group; without this, each would
        stay in a reference cycle with it until the garbage collector finds it
        (a replay of small sessions spent about 15% of its time in such
        collections: benchmarks/bench_simulate.py)."""
        self.jobs = []
        self.unsettled = []
        self.head = self.pos = 0

    def insert(self, job: Job) -> None:
        """Add a pending member at its place in policy order. (``SchedulerCore._submit``
        adds a member that goes last inline, the same way: change both together.)"""
        jobs = self.jobs
        if not jobs or jobs[-1].key <= job.key:
            jobs.append(job)
        else:
            at = bisect.bisect_right(jobs, job.key, key=_job_key)
            jobs.insert(at, job)
            if at < self.head:
                self.head = at
        self.unsettled.append(job)
        self.live += 1

    def covered_pending(self) -> int:
        """Pending members this session took one by one (``jobs[head:pos]``)."""
        return sum(1 for job in islice(self.jobs, self.head, self.pos) if job.state is PENDING)

    def rest_pending(self) -> list[Job]:
        """Pending members this session has not taken (``jobs[pos:]``)."""
        return [job for job in islice(self.jobs, self.pos, None) if job.state is PENDING]

    def close(self) -> None:
        """Nothing more to take this session (it was settled whole)."""
        self.pos = len(self.jobs)

    def __repr__(self) -> str:
        return f"JobGroup(fp={self.fingerprint}, live={self.live})"


def _job_key(job: Job) -> tuple[Any, ...]:
    return job.key
