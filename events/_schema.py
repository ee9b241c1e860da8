"""The event contract: input events the core consumes and the decisions it emits.

Every event is a frozen :class:`msgspec.Struct` tagged by a ``type`` field with a
snake_case name. The wire names are a contract with outside tools: fields may be
added (optional, with defaults), never renamed.

Input fields carry bounds (:class:`msgspec.Meta` constraints), so a decoder
rejects out-of-range input with the field's path (``Expected `int` <= 1048576 -
at `$.slots```) before the core sees it. The bounds are far beyond anything a
real cluster sends; they exist so that hostile or corrupt input (``inf``
amounts, 2**64 slots, megabyte names) is a rejected event, not a failure deep
in the core. Like all msgspec constraints they are checked when decoding, not
when a struct is built in Python.
"""

from __future__ import annotations

import sys
from typing import Annotated, Final, TypeAlias

from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = [
    "Decision",
    "EventRejected",
    "HostSlots",
    "InputEvent",
    "JobAllocated",
    "JobCancelled",
    "JobFinished",
    "JobPended",
    "JobRejected",
    "JobSubmitted",
    "MAX_AMOUNT",
    "MAX_ENTRIES",
    "MAX_NAME_LENGTH",
    "MAX_PRIORITY",
    "MAX_RESREQ_LENGTH",
    "MAX_SLOTS",
    "MAX_TASKS",
    "MIN_PRIORITY",
    "QueueConfig",
    "SessionBegin",
    "SessionEnd",
    "SharedResource",
    "WireEvent",
    "WorkerDown",
    "WorkerRemoved",
    "WorkerUp",
]

MAX_NAME_LENGTH: Final = 4096
"""Longest name, id or other short text field, in characters (worker and job ids,
user, queue, project, picker, attribute and resource names, string attributes)."""
MAX_RESREQ_LENGTH: Final = 65536
"""Longest ``resreq`` string, in characters (64 Ki)."""
MAX_SLOTS: Final = 1 << 20
"""Most slots one worker may have (1,048,576)."""
MAX_TASKS: Final = 1 << 24
"""Largest ``min_tasks``/``max_tasks`` of a job (16,777,216)."""
MIN_PRIORITY: Final = -(1 << 31)
"""Lowest job or queue ``priority`` (a signed 32-bit integer)."""
MAX_PRIORITY: Final = (1 << 31) - 1
"""Highest job or queue ``priority``."""
MAX_AMOUNT: Final = float(1 << 53)
"""Largest consumable amount or total (2**53: integers up to it are exact floats,
so claims add and subtract without rounding)."""
MAX_ENTRIES: Final = 1024
"""Most entries in a worker's ``attrs`` or ``resources``."""

Name = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_LENGTH)]
Text = Annotated[str, Meta(max_length=MAX_NAME_LENGTH)]
ResReqText = Annotated[str, Meta(max_length=MAX_RESREQ_LENGTH)]
Slots = Annotated[int, Meta(ge=0, le=MAX_SLOTS)]
Tasks = Annotated[int, Meta(ge=1, le=MAX_TASKS)]
Priority = Annotated[int, Meta(ge=MIN_PRIORITY, le=MAX_PRIORITY)]
Amount = Annotated[float, Meta(ge=0, le=MAX_AMOUNT)]
# Finite: NaN fails both comparisons, infinities one of them.
FiniteFloat = Annotated[float, Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
# A run limit in seconds (``bsub -W``): positive and finite.
RunLimit = Annotated[float, Meta(gt=0, le=sys.float_info.max)]
Int64 = Annotated[int, Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
AttrValue: TypeAlias = Text | bool | Int64 | FiniteFloat
Attrs = Annotated[dict[Text, AttrValue], Meta(max_length=MAX_ENTRIES)]
Resources = Annotated[dict[Text, Amount], Meta(max_length=MAX_ENTRIES)]


class _Event(Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=False):
    """Base of every wire event (tag field ``type``)."""


# --------------------------------------------------------------------------- inputs


class WorkerUp(_Event, tag="worker_up", frozen=True):
    """Register a worker, or replace its definition; the worker becomes usable.

    ``attrs`` are static host attributes (``type``, ``model``, ``ncpus``, boolean
    resources such as ``bigmem: true``); ``resources`` are consumable totals
    (``mem``, ``tmp``, ``gpu``...). Redefining a worker that runs jobs keeps their
    claims; its capacity may then be below what is in use until they finish.
    """

    name: Name
    slots: Slots
    attrs: Attrs = {}
    resources: Resources = {}


class WorkerDown(_Event, tag="worker_down", frozen=True):
    """Mark a worker unusable for new work; jobs running there keep their claims."""

    name: Name


class WorkerRemoved(_Event, tag="worker_removed", frozen=True):
    """Forget a worker. Refused (``event_rejected``) while jobs still run on it."""

    name: Name


class SharedResource(_Event, tag="shared_resource", frozen=True):
    """Define or resize a cluster-wide consumable (e.g. a licence pool)."""

    name: Name
    total: Amount


class JobSubmitted(_Event, tag="job_submitted", frozen=True):
    """A new pending job. ``resreq`` is an LSF-style resource requirement string.

    Task counts follow ``bsub -n``: ``max_tasks`` alone asks for exactly that
    many tasks (``min_tasks`` omitted or null means "equal to max_tasks");
    ``min_tasks < max_tasks`` asks for anything from min to max (``-n min,max``).
    Use :attr:`task_range` for the effective pair.

    ``run_limit`` (seconds, like ``bsub -W``) is the job's estimated run time
    for backfill planning (``SchedulerConfig.backfill``); null means none: the
    job never ends as far as planning knows.
    """

    job_id: Name
    user: Text = ""
    queue: Text = ""
    project: Text = ""
    priority: Priority = 0
    submit_time: FiniteFloat = 0.0
    min_tasks: Tasks | None = None
    max_tasks: Tasks = 1
    resreq: ResReqText = ""
    run_limit: RunLimit | None = None

    @property
    def task_range(self) -> tuple[int, int]:
        """``(min_tasks, max_tasks)`` with an omitted minimum equal to the maximum."""
        return (self.max_tasks if self.min_tasks is None else self.min_tasks, self.max_tasks)


class JobFinished(_Event, tag="job_finished", frozen=True):
    """A running job ended; everything it held is freed."""

    job_id: Name


class JobCancelled(_Event, tag="job_cancelled", frozen=True):
    """A pending or running job is withdrawn; everything it held is freed."""

    job_id: Name


Shares = Annotated[int, Meta(ge=0, le=MAX_TASKS)]
ShareEntry = tuple[Name, Shares]
ShareList = Annotated[list[ShareEntry], Meta(max_length=MAX_ENTRIES)]


class UserGroup(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A user group of a share tree (LSF's ``lsb.users`` UserGroup section):
    its ``members`` (user names) and, for hierarchical fairshare, the shares of
    its own level (``None``: the members share one account)."""

    members: Annotated[list[Name], Meta(max_length=MAX_ENTRIES)]
    shares: ShareList | None = None


class ShareTree(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A fairshare tree (LSF's ``USER_SHARES``): ``shares`` lists ``[name,
    shares]`` entries, where a name is a user, a group of ``groups`` (one
    account for the group, or a level of its own when the group lists
    ``shares``), ``group@`` (each member of the group an account with that
    many shares) or ``default`` (each user not listed)."""

    shares: ShareList
    groups: Annotated[dict[Name, UserGroup], Meta(max_length=MAX_ENTRIES)] = {}


class QueueConfig(_Event, tag="queue_config", frozen=True):
    """Define a queue's priority and, optionally, the picker that orders its jobs
    and, for the ``fairshare`` picker, the queue's own share tree (``None``:
    the cluster's, from ``fairshare_config``, else every user an equal share).
    ``ujob_limit`` / ``qjob_limit`` / ``hjob_limit``: LSF's queue shorthands,
    slots of the queue's running jobs per user / in all / per host (limits
    named ``QUEUE:UJOB_LIMIT``... beside those of ``limits_config``)."""

    name: Text
    priority: Priority = 0
    picker: Text | None = None
    fairshare: ShareTree | None = None
    ujob_limit: Annotated[int, Meta(ge=0, le=MAX_TASKS)] | None = None
    qjob_limit: Annotated[int, Meta(ge=0, le=MAX_TASKS)] | None = None
    hjob_limit: Annotated[int, Meta(ge=0, le=MAX_TASKS)] | None = None


class FairshareConfig(_Event, tag="fairshare_config", frozen=True):
    """Replace the cluster-wide share tree (used by every ``fairshare`` queue
    without a tree of its own; ``None`` removes it). A bad tree is rejected
    whole; the previous one stays."""

    tree: ShareTree | None = None


Names = Annotated[list[Text], Meta(max_length=MAX_ENTRIES)]
Count = Annotated[int, Meta(ge=0, le=MAX_TASKS)]


class Limit(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One resource allocation limit (LSF's ``lsb.resources`` Limit section).

    Consumers: ``users`` / ``queues`` / ``projects`` list the jobs it covers,
    counted together; ``per_user`` / ``per_queue`` / ``per_project`` cover the
    listed ones each on its own. ``["all"]`` means every one; an omitted
    dimension is not restricted. ``hosts`` counts only what covered jobs hold
    on the listed hosts, together; ``per_host`` caps what they hold on each
    listed host on its own (hosts at their limit are no candidates for a
    covered job). Caps: ``slots`` and ``jobs`` of running jobs,
    and ``resources`` (host consumables and shared resources, by name: the
    amounts running jobs hold). At least one cap.
    """

    name: Name
    users: Names | None = None
    per_user: Names | None = None
    queues: Names | None = None
    per_queue: Names | None = None
    projects: Names | None = None
    per_project: Names | None = None
    hosts: Names | None = None
    per_host: Names | None = None
    slots: Count | None = None
    jobs: Count | None = None
    resources: Resources | None = None


class LimitsConfig(_Event, tag="limits_config", frozen=True):
    """Replace the cluster's resource allocation limits with ``limits`` (an empty
    list removes them). A bad set is rejected whole; the previous one stays.
    ``user_groups`` (LSF's ``lsb.users`` groups) name sets of users that a
    limit's ``users`` (the members counted together) or ``per_user`` (each
    member on its own) may list by the group's name."""

    limits: Annotated[list[Limit], Meta(max_length=MAX_ENTRIES)] = []
    user_groups: Annotated[dict[Name, Names], Meta(max_length=MAX_ENTRIES)] = {}


class SessionBegin(_Event, tag="session_begin", frozen=True):
    """Run a scheduling session now."""


InputEvent: TypeAlias = (
    WorkerUp
    | WorkerDown
    | WorkerRemoved
    | SharedResource
    | JobSubmitted
    | JobFinished
    | JobCancelled
    | QueueConfig
    | LimitsConfig
    | FairshareConfig
    | SessionBegin
)

# --------------------------------------------------------------------------- decisions


class HostSlots(Struct, frozen=True, kw_only=True):
    """One host of an allocation and the number of slots (tasks) placed on it."""

    host: str
    slots: int


class JobAllocated(_Event, tag="job_allocated", frozen=True):
    """The job starts on ``hosts`` (in allocation order)."""

    session: int
    job_id: str
    hosts: list[HostSlots]


class JobPended(_Event, tag="job_pended", frozen=True):
    """The job stays pending. ``reason`` is a category, ``detail`` a readable breakdown.

    ``cached`` is true when the unsatisfiable-requirement cache settled the job
    without running an allocator (the category is the original miss's).
    """

    session: int
    job_id: str
    reason: str
    detail: str = ""
    cached: bool = False


class JobReserved(_Event, tag="job_reserved", frozen=True):
    """Backfill: the job's planned start time (on the core's clock) and the
    capacity held for it then, sent when a reservation is made or moves (like
    ``squeue --start``). The job also stays pending (``job_pended``)."""

    session: int
    job_id: str
    start: float
    hosts: list[HostSlots]


class JobRejected(_Event, tag="job_rejected", frozen=True):
    """The job can never run as submitted (bad resreq, impossible task counts)."""

    job_id: str
    error: str


class EventRejected(_Event, tag="event_rejected", frozen=True):
    """An input event was malformed or inconsistent with the state; it was skipped.

    ``index`` is the event's 0-based position in the input stream (or -1 when
    unknown); ``line`` the 1-based input line for line-oriented codecs;
    ``job_id`` the job the event names (``job_submitted``, ``job_finished``,
    ``job_cancelled``), also when the event was malformed elsewhere but its
    type and ``job_id`` could be read; else ``msgspec.UNSET``, and the field is
    left out of the encoding (a rejection naming no job reads as it always did).
    """

    index: int
    error: str
    line: int | None = None
    job_id: str | UnsetType = UNSET


class SessionEnd(_Event, tag="session_end", frozen=True):
    """End of a session: jobs allocated, pending jobs it left pending, wall time."""

    session: int
    allocated: int
    pended: int
    elapsed_s: float


Decision: TypeAlias = (
    JobAllocated | JobPended | JobRejected | EventRejected | SessionEnd | JobReserved
)
WireEvent: TypeAlias = InputEvent | Decision

INPUT_TYPES: tuple[type[Struct], ...] = (
    WorkerUp,
    WorkerDown,
    WorkerRemoved,
    SharedResource,
    JobSubmitted,
    JobFinished,
    JobCancelled,
    QueueConfig,
    SessionBegin,
    LimitsConfig,
    FairshareConfig,
)
DECISION_TYPES: tuple[type[Struct], ...] = (
    JobAllocated,
    JobPended,
    JobRejected,
    EventRejected,
    SessionEnd,
    JobReserved,
)


def tag_of(event: Struct) -> str:
    """The wire ``type`` tag of an event instance."""
    tag = type(event).__struct_config__.tag
    assert isinstance(tag, str)
    return tag
