"""The snapshot message: its records, its format version, and decoding it.

One :class:`Snapshot` is a whole core (see :mod:`xce_core._snapshot`, which
fills and reads it): a msgpack map whose first two fields, ``magic`` and
``format``, say what it is. Records held by the hundred thousand (workers,
jobs, groups) are arrays (``array_like``), not maps, and untracked by the
garbage collector (``gc=False``: they hold no cycles). Bump :data:`FORMAT`
whenever a field changes meaning or is added without a default: a snapshot
of another format is refused by name, never misread.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeAlias

import msgspec

from events import Decision, Limit
from xce_core._config import FairshareParams, SchedulerConfig
from xce_core._errors import SnapshotError

__all__ = [
    "FORMAT",
    "MAGIC",
    "ClaimRecord",
    "ConfigRecord",
    "GroupRecord",
    "JobRecord",
    "LimitUsageRecord",
    "NodeRecord",
    "ReservationRecord",
    "RunRecord",
    "SharesRecord",
    "Snapshot",
    "TreeRecord",
    "WorkerRecord",
    "collector_paused",
    "config_of",
    "encode_snapshot",
    "read_snapshot",
]

MAGIC: Final = "xce-snapshot"
# Bumped whenever a field changes meaning or is added without a default.
FORMAT: Final = 1


# --------------------------------------------------------------------------- records

Amounts: TypeAlias = tuple[tuple[str, float], ...]
# (worker reference, slots, consumable amounts): a worker reference is its
# index in the table, or -1 - i for the i-th detached worker (see Snapshot).
ClaimRecord: TypeAlias = tuple[int, int, Amounts]
Key: TypeAlias = tuple[Any, ...]


class WorkerRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    name: str
    slots: int
    attrs: dict[str, str | bool | int | float]
    resources: dict[str, float]
    usable: bool
    used_slots: int
    used: dict[str, float]


class JobRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """A live job. ``shape`` and ``origin`` index the snapshot's tables."""

    id: str
    shape: int
    origin: int
    submit_time: float
    seq: int
    key: Key
    running: bool = False
    last_reason: str | None = None
    claims: list[ClaimRecord] = []
    shared: dict[str, float] = {}
    end: float | None = None  # estimated end (start + run limit), if running with one


class RunRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """One account's members of a fair group (pending ones, in order; ``members``
    index the snapshot's jobs). Between sessions every run is rewound."""

    account: int
    rid: int
    members: list[int]
    ticket: int


class GroupRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """A job group; ``members`` and ``unsettled`` index the snapshot's jobs.
    ``mapped``: the cluster state's group for its fingerprint (a group left
    only in a stale heap entry is not)."""

    gid: int
    fingerprint: int
    members: list[int]
    unsettled: list[int]
    settled_reason: str | None
    queued: bool
    ticket: int
    key: Key
    seen: int
    asleep: tuple[str, str] | None
    mapped: bool
    # A fairshare group (FairGroup): its queue (its home is (fingerprint,
    # queue)) and its account runs. ``run_heap``: written by snapshots from
    # before lanes (a heap of runs per group), read by none: a restored core
    # enters every run in its account's lane afresh.
    queue: str | None = None
    runs: list[RunRecord] = []
    run_heap: list[tuple[Key, int, int]] = []


class ConfigRecord(msgspec.Struct, forbid_unknown_fields=True):
    picker: str
    sequential_allocator: str
    parallel_allocator: str
    strict_fifo: bool
    unsatisfiable_cache: bool
    sleep_blocked_groups: bool
    backfill: str
    backfill_depth: int
    batch_size: int
    yield_every: int
    session_interval: float | None
    fairshare: FairshareParams = FairshareParams()
    # Snapshots written before the field restore with the default time budget
    # (pacing never changes a decision).
    yield_interval: float = 0.001


class ReservationRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """EASY's last finite reservation (kept whole while nothing is released)."""

    job: str
    start: float
    claims: list[ClaimRecord]
    shared: dict[str, float]
    slack: int
    releases: int
    # ClusterState.worker_version when its claims were last checked (-1: to
    # check again; what snapshots written before this field decode to).
    workers: int = -1


class LimitUsageRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    limit: int
    consumer: tuple[str, ...]
    slots: int
    jobs: int
    amounts: dict[str, float]


class NodeRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """One node of a tree; ``parent`` is the parent's uid (-1: the root).
    ``users`` and ``members`` name children by uid, in the level's order."""

    uid: int
    parent: int
    name: str
    shares: int
    level: bool
    default: int | None
    users: list[tuple[str, int]]
    members: list[tuple[list[str], int]]
    slots: int
    usage: float
    frozen: float
    stamp: float
    priority: float


class TreeRecord(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """A tree: ``scope`` is ``"cluster"``, ``"implicit"`` or ``"queue"`` (of
    ``queue``); ``nodes`` root first, every node after its parent, children in
    their order."""

    scope: str
    queue: str
    where: str
    nodes: list[NodeRecord]


class SharesRecord(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    trees: list[TreeRecord]
    next_uid: int
    # (job index, account uid, slots) of every running job charged.
    running: list[tuple[int, int, int]]
    risen: list[int]
    recalculated: float | None
    used: bool


class _Header(msgspec.Struct, gc=False):
    magic: str = ""
    format: int = 0


class Snapshot(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """The whole message (see the module docstring)."""

    magic: str = MAGIC
    format: int = FORMAT
    config: ConfigRecord
    events_received: int
    sessions: int
    session_event: int
    changed: bool
    outbox: list[Decision]
    # The worker table in order, None for a removed worker's hole; detached:
    # workers no longer in it that a kept reservation still names.
    workers: list[WorkerRecord | None]
    detached: list[WorkerRecord]
    shared_total: dict[str, float]
    shared_used: dict[str, float]
    consumables: list[str]
    queues: list[tuple[str, int, str | None]]
    worker_version: int
    releases: int
    fingerprints: list[tuple[str | int, ...]]  # the key of fingerprint i + 1
    seq: int
    groups_made: int
    shapes: list[tuple[str, int, int]]
    origins: list[tuple[str, str, str, int, float | None]]
    jobs: list[JobRecord]
    done: list[str]
    rejected: list[str]
    groups: list[GroupRecord]
    heap: list[tuple[Key, int, int]]  # (order key, gid, ticket), in heap order
    order_broken: bool
    sleeping: list[int]  # gids, in the sleepers' order
    sleeping_unsettled: list[int]
    woken: list[int]
    limits: list[Limit]
    cluster_limits: list[Limit]
    queue_limits: dict[str, list[Limit]]
    limit_usage: list[LimitUsageRecord]
    ranks: list[tuple[str, int, int]]  # (picker, key length, rank)
    pickers: dict[str, bytes]
    announced: list[tuple[str, float, list[tuple[str, int]]]]
    reservation: ReservationRecord | None
    # Fairshare trees, accounts and charges (xce_core._snapshot_shares),
    # once a tree or a fairshare queue was ever set up.
    shares: SharesRecord | None = None
    # The user groups limits may name (limits_config.user_groups).
    user_groups: dict[str, list[str]] = {}
    # Whether the next session provably commits nothing (PendingQueue.barren):
    # it decides whether fragile sleepers wake. Older snapshots: False (they
    # wake; the same categories, told in another order within the session).
    barren: bool = False


_encoder = msgspec.msgpack.Encoder()
_MARKER: Final = msgspec.msgpack.encode("magic") + msgspec.msgpack.encode(MAGIC)


@functools.cache
def _decoders() -> tuple[msgspec.msgpack.Decoder[_Header], msgspec.msgpack.Decoder[Snapshot]]:
    """The header's decoder and the whole message's, built once, when the
    first snapshot is read: resolving every record's annotations took about
    3 ms of the start-up of each command, most of which read no snapshot."""
    return msgspec.msgpack.Decoder(_Header), msgspec.msgpack.Decoder(Snapshot)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while records are built in bulk: it
    would otherwise walk the whole heap again and again as they pile up (most
    of the time of B1's snapshot, benchmarks/bench_snapshot.py). Records hold
    no cycles; the core's own objects are kept alive by the core anyway."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --------------------------------------------------------------------------- reading


def read_snapshot(data: bytes) -> Snapshot:
    """Decode and check the message of a snapshot. Raises :class:`SnapshotError`
    saying what is wrong: not a snapshot, another format, or corrupt (with
    msgspec's path to the bad field)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SnapshotError(f"a snapshot is bytes, not {type(data).__name__}")
    with collector_paused():
        return _read(data)


def _read(data: bytes | bytearray | memoryview) -> Snapshot:
    header_decoder, decoder = _decoders()
    try:
        header = header_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        # The marker is the message's first value: its bytes say whether a
        # message that does not decode is a damaged snapshot or something else.
        what = "corrupt snapshot" if _MARKER in bytes(data[:32]) else "not an xce snapshot"
        raise SnapshotError(f"{what}: {exc}") from None
    if header.magic != MAGIC:
        raise SnapshotError(f"not an xce snapshot (no {MAGIC!r} marker)")
    if header.format != FORMAT:
        raise SnapshotError(
            f"snapshot format {header.format} is not supported (this xce reads format {FORMAT})"
        )
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SnapshotError(f"corrupt snapshot: {exc}") from None


def config_of(snapshot: Snapshot) -> SchedulerConfig:
    """The configuration a snapshot was taken under."""
    try:
        return SchedulerConfig(**msgspec.structs.asdict(snapshot.config))
    except ValueError as exc:
        raise SnapshotError(f"corrupt snapshot: config: {exc}") from None


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """The message's bytes."""
    return _encoder.encode(snapshot)
