"""Snapshots: a core's whole state as one msgpack message, and back.

:func:`write_snapshot` encodes everything a :class:`SchedulerCore` decides
from (workers in their table order, holes included; live jobs with their
order keys, claims and estimated ends; the pending groups, the policy order's
heap entry by entry, the sleeping groups; queues, shared resources, limits
and what running jobs hold under them; the counters: events received,
sessions, arrival sequence, group ids, fingerprints, releases; the ids of
ended jobs, so duplicates are still rejected; the last backfill reservation
and the ``job_reserved`` decisions already sent; each stateful picker's own
bytes) as one :class:`Snapshot`. :func:`read_snapshot` checks and decodes it;
:func:`load_snapshot` rebuilds a freshly constructed core from it.

Derived structures are rebuilt by construction, never by replaying events:
capacity totals from the workers, the backfill ends from the jobs, group
members from their indexes, shapes through the core's :class:`ShapeCache`
(one parse per distinct requirement). Floating-point amounts in use (per
worker, per shared resource, per limit) are stored as they are, not summed
again, so a restored core compares exactly what the original compared.
Caches that are rebuilt equal on demand (the static select memo) start empty;
the session-scoped scratch is empty between sessions anyway.

This module reads and sets the private fields of the parts it snapshots (the
pending queue's heap and sleepers, the limits' usage, the planner's last
reservation, the order keys' ranks): one place knows them all, rather than an
export and an import method in each. A field added to one of those parts
that a decision depends on must be added here too; the round-trip test
(a restored core's snapshot equals the original's) and the property test
comparing decision logs catch what is forgotten.

The contract, checked by ``tests/core/test_snapshot.py``: a core restored
from a snapshot taken between two events makes the same decisions, in the
same order, as the core it was taken from (``session_end.elapsed_s`` aside).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedList

from events import Decision, JobSubmitted, Limit
from xce_core._admission import ShapeCache
from xce_core._backfill import Reservation
from xce_core._config import SchedulerConfig
from xce_core._errors import SnapshotError
from xce_core._fairgroup import AccountRun, FairGroup, Lanes
from xce_core._fairshare import Fairshare, ShareNode
from xce_core._limits import Limits, _Usage
from xce_core._model import (
    DONE,
    PENDING,
    REJECTED,
    RUNNING,
    GroupHome,
    Job,
    JobGroup,
    Queue,
    Worker,
)
from xce_core._order import OrderKeys
from xce_core._pending import PendingQueue
from xce_core._registry import Registry
from xce_core._reservations import Reservations
from xce_core._results import PendReason
from xce_core._sleep import watch
from xce_core._snapshot_format import (
    ConfigRecord,
    GroupRecord,
    JobRecord,
    LimitUsageRecord,
    ReservationRecord,
    RunRecord,
    Snapshot,
    WorkerRecord,
    collector_paused,
    config_of,
    encode_snapshot,
    read_snapshot,
)
from xce_core._snapshot_shares import load_shares, write_shares
from xce_core._state import ClusterState

__all__ = [
    "CoreParts",
    "Counters",
    "config_of",
    "load_snapshot",
    "read_snapshot",
    "write_snapshot",
]

# --------------------------------------------------------------------------- the core's parts


@dataclass(slots=True)
class Counters:
    """The core's own counters (see :class:`SchedulerCore`)."""

    events_received: int
    sessions: int
    session_event: int
    changed: bool
    # The limits_config limits and the queues' shorthands (Limits holds both).
    cluster_limits: list[Limit]
    queue_limits: dict[str, list[Limit]]


@dataclass(slots=True)
class CoreParts:
    """What a snapshot reads from, or restores into, one core (between sessions)."""

    config: SchedulerConfig
    registry: Registry
    state: ClusterState
    pending: PendingQueue
    shapes: ShapeCache
    limits: Limits
    backfill: Reservations | None
    outbox: list[Decision]
    fairshare: Fairshare


# --------------------------------------------------------------------------- writing


def write_snapshot(parts: CoreParts, counters: Counters) -> bytes:
    """The snapshot of a core between sessions. Reads only; never raises for a
    consistent core (a picker's ``snapshot_state`` may)."""
    with collector_paused():
        return _write(parts, counters)


def _write(parts: CoreParts, counters: Counters) -> bytes:
    state = parts.state
    config = parts.config
    workers, worker_ref, detached = _worker_table(state)
    order = parts.pending._order
    sleepers = parts.pending._sleepers

    # Live jobs in the state's order; their shapes and origins as tables.
    shape_index: dict[int, int] = {}
    shapes: list[tuple[str, int, int]] = []
    origin_index: dict[tuple[Any, ...], int] = {}
    origins: list[tuple[str, str, str, int, float | None]] = []
    job_index: dict[str, int] = {}
    records: list[JobRecord] = []
    for job in state.jobs.values():
        shape = job.shape
        si = shape_index.get(id(shape))
        if si is None:
            si = shape_index[id(shape)] = len(shapes)
            shapes.append((shape.resreq_text, shape.min_tasks, shape.max_tasks))
        origin = job._origin
        oi = origin_index.get(origin)
        if oi is None:
            oi = origin_index[origin] = len(origins)
            origins.append(origin)
        job_index[job.job_id] = len(records)
        record = JobRecord(job.job_id, si, oi, job.submit_time, job.seq, job.key)
        if job.last_reason is not None:
            record.last_reason = job.last_reason
        if job.state is RUNNING:
            record.running = True
            record.claims = [(worker_ref(w), n, need) for w, n, need in job.claims]
            if job.shared_claims:
                record.shared = dict(job.shared_claims)
            record.end = state.end_of.get(job)
        records.append(record)

    # Every group anything refers to: the state's (in its order), then those
    # only a pending job, a sleeper or a heap entry still names.
    groups: dict[int, JobGroup] = {}
    for group in state.groups.values():
        groups.setdefault(group.gid, group)
    for job in state.jobs.values():
        if job.state is PENDING and job.group is not None:
            groups.setdefault(job.group.gid, job.group)
    for group in (*sleepers.groups.values(), *sleepers._woken):
        groups.setdefault(group.gid, group)
    # A broken order is rebuilt from the groups before the next session: its
    # heap decides nothing (and may name groups of a replaced share tree).
    heap = [] if order.broken else order._heap
    for entry in heap:
        groups.setdefault(entry[-1].gid, entry[-1])
    group_records = []
    for group in groups.values():
        members = [job_index[j.job_id] for j in group.jobs if j.state is PENDING]
        unsettled = [job_index[j.job_id] for j in group.unsettled if j.state is PENDING]
        asleep = group.asleep
        fair: dict[str, Any] = {}
        if isinstance(group, FairGroup):
            fair = _fair_record(group, job_index)
        group_records.append(
            GroupRecord(
                gid=group.gid,
                fingerprint=group.fingerprint,
                members=members,
                unsettled=unsettled,
                settled_reason=group.settled_reason,
                queued=group.queued,
                ticket=group.ticket,
                key=group.key,
                seen=group.seen,
                asleep=(asleep.category, asleep.detail) if asleep is not None else None,
                mapped=state.groups.get(group.home) is group,
                **fair,
            )
        )

    keys = state.order_key
    assert isinstance(keys, OrderKeys)
    reservation = None
    announced: list[tuple[str, float, list[tuple[str, int]]]] = []
    if parts.backfill is not None:
        announced = [
            (job_id, start, list(hosts))
            for job_id, (start, hosts) in parts.backfill._announced.items()
        ]
        planner = parts.backfill._planner
        last = planner._last
        if last is not None and state.jobs.get(last.job.job_id) is last.job:
            reservation = ReservationRecord(
                job=last.job.job_id,
                start=last.start,
                claims=[(worker_ref(w), n, need) for w, n, need in last.claims],
                shared=dict(last.shared),
                slack=last.slack,
                releases=planner._last_releases,
                workers=planner._last_workers,
            )

    pickers: dict[str, bytes] = {}
    names = {config.picker, *keys._pickers, *(q.picker for q in state.queues.values())}
    for name in sorted(n for n in names if n is not None):
        data = parts.registry.picker(name).snapshot_state()
        if data is not None:
            pickers[name] = data

    snapshot = Snapshot(
        # Field by field: the record fixes the format whatever SchedulerConfig adds.
        config=ConfigRecord(
            **{name: getattr(config, name) for name in ConfigRecord.__struct_fields__}
        ),
        events_received=counters.events_received,
        sessions=counters.sessions,
        session_event=counters.session_event,
        changed=counters.changed,
        outbox=list(parts.outbox),
        workers=workers,
        detached=detached,
        shared_total=dict(state.shared_total),
        shared_used=dict(state.shared_used),
        consumables=sorted(state.consumables),
        queues=[(q.name, q.priority, q.picker) for q in state.queues.values()],
        worker_version=state.worker_version,
        releases=state.releases,
        fingerprints=list(state._fingerprints),
        seq=state._seq,
        groups_made=state._groups_made,
        shapes=shapes,
        origins=origins,
        jobs=records,
        done=[job_id for job_id, s in state.ended.items() if s is DONE],
        rejected=[job_id for job_id, s in state.ended.items() if s is REJECTED],
        groups=group_records,
        heap=[(entry[:-3], entry[-3], entry[-2]) for entry in heap],
        order_broken=order.broken,
        barren=parts.pending._barren,
        sleeping=list(sleepers.groups),
        sleeping_unsettled=list(sleepers.unsettled),
        woken=[group.gid for group in sleepers._woken],
        limits=list(parts.limits._limits),
        user_groups={name: list(m) for name, m in parts.limits._groups.items()},
        cluster_limits=list(counters.cluster_limits),
        queue_limits={name: list(limits) for name, limits in counters.queue_limits.items()},
        limit_usage=[
            LimitUsageRecord(index, consumer, u.slots, u.jobs, dict(u.amounts))
            for (index, consumer), u in parts.limits._usage.items()
        ],
        ranks=[(name, length, rank) for (name, length), rank in keys._ranks.items()],
        pickers=pickers,
        announced=announced,
        reservation=reservation,
        shares=(write_shares(parts.fairshare, job_index) if parts.fairshare.configured else None),
    )
    return encode_snapshot(snapshot)


def _worker_table(
    state: ClusterState,
) -> tuple[list[WorkerRecord | None], Callable[[Worker], int], list[WorkerRecord]]:
    """The worker table as records, and a function naming any worker (one
    detached from the table gets a record of its own)."""
    table: list[WorkerRecord | None] = [
        None if w is None else _worker_record(w) for w in state.workers
    ]
    detached: list[WorkerRecord] = []
    detached_ref: dict[Worker, int] = {}
    workers = state.workers

    def ref(worker: Worker) -> int:
        index = worker.index
        if index < len(workers) and workers[index] is worker:
            return index
        known = detached_ref.get(worker)
        if known is None:
            detached.append(_worker_record(worker))
            known = detached_ref[worker] = -len(detached)
        return known

    return table, ref, detached


def _worker_record(w: Worker) -> WorkerRecord:
    return WorkerRecord(
        w.name, w.slots, dict(w.attrs), dict(w.resources), w.usable, w.used_slots, dict(w.used)
    )


def load_snapshot(snapshot: Snapshot, parts: CoreParts) -> Counters:
    """Rebuild the state of a freshly constructed core (``parts``, with the
    snapshot's configuration) from ``snapshot``; returns the core's counters.
    Raises :class:`SnapshotError` when the snapshot contradicts itself."""
    try:
        with collector_paused():
            _load(snapshot, parts)
    except SnapshotError:
        raise
    except (IndexError, KeyError, ValueError, TypeError, AssertionError) as exc:
        raise SnapshotError(f"inconsistent snapshot: {type(exc).__name__}: {exc}") from None
    return Counters(
        snapshot.events_received,
        snapshot.sessions,
        snapshot.session_event,
        snapshot.changed,
        list(snapshot.cluster_limits),
        {name: list(limits) for name, limits in snapshot.queue_limits.items()},
    )


def _load(snap: Snapshot, parts: CoreParts) -> None:
    state = parts.state
    keys = state.order_key
    assert isinstance(keys, OrderKeys)
    # Pickers first: a stateful picker keys the jobs submitted after this.
    for name, data in snap.pickers.items():
        parts.registry.picker(name).restore_state(data)
    keys._ranks = {(name, length): rank for name, length, rank in snap.ranks}

    # Workers: the table with its holes, then what is derived from it.
    workers: list[Worker | None] = []
    for index, entry in enumerate(snap.workers):
        workers.append(None if entry is None else _worker(entry, index))
    state.workers = workers
    state._holes = sum(1 for w in workers if w is None)
    for w in workers:
        if w is not None:
            if w.name in state.by_name:
                raise SnapshotError(f"inconsistent snapshot: worker {w.name!r} twice")
            state.by_name[w.name] = w
            state._count(w)
    detached = [_worker(entry, -1) for entry in snap.detached]

    def worker(ref: int) -> Worker:
        if ref >= 0:
            w = workers[ref]
            if w is None:
                raise SnapshotError(f"inconsistent snapshot: a claim on removed worker {ref}")
            return w
        return detached[-1 - ref]

    state.shared_total = dict(snap.shared_total)
    state.shared_names_version += 1
    state.shared_used = dict(snap.shared_used)
    state.consumables = set(snap.consumables)
    for name, priority, picker in snap.queues:
        state.queues[name] = Queue(name, priority, picker)
    state.worker_version = snap.worker_version
    state.releases = snap.releases
    state._fingerprints = {key: fp for fp, key in enumerate(snap.fingerprints, 1)}
    state._seq = snap.seq
    state._groups_made = snap.groups_made
    for job_id in snap.done:
        state.ended[job_id] = DONE
    for job_id in snap.rejected:
        state.ended[job_id] = REJECTED

    # Jobs: shapes through the shape cache (one parse per distinct text).
    shapes = []
    for text, low, high in snap.shapes:
        shape = parts.shapes.shape(
            JobSubmitted(job_id="", resreq=text, min_tasks=low, max_tasks=high)
        )
        if isinstance(shape, str):
            raise SnapshotError(f"inconsistent snapshot: job shape {text!r}: {shape}")
        shapes.append(shape)
    origins = snap.origins
    jobs: list[Job] = []
    live = state.jobs
    admit = Job.admit
    ends = []
    for record in snap.jobs:
        job = admit(
            record.id, shapes[record.shape], origins[record.origin], record.submit_time, record.seq
        )
        job.key = record.key
        job.last_reason = record.last_reason
        if record.running:
            job.state = RUNNING
            claims = [(worker(ref), n, need) for ref, n, need in record.claims]
            job.claims = claims
            job.allocation = [(w, n) for w, n, _ in state.per_host(claims)]
            if record.shared:
                job.shared_claims = dict(record.shared)
            if record.end is not None:
                state.end_of[job] = record.end
                state.held[job] = sum(n for _, n in job.allocation)
                ends.append((record.end, job.seq, job))
            state.running_count += 1
        else:
            state.pending_count += 1
        if record.id in live or record.id in state.ended:
            raise SnapshotError(f"inconsistent snapshot: job {record.id!r} twice")
        live[record.id] = job
        jobs.append(job)
    state.ends = SortedList(ends)

    # Fairshare trees first: groups name their accounts.
    shares = snap.shares
    nodes = load_shares(shares, parts.fairshare, jobs) if shares is not None else {}

    # Groups, the policy order and the sleepers.
    groups: dict[int, JobGroup] = {}
    members_seen = 0
    for g in snap.groups:
        home: GroupHome = g.fingerprint
        if g.queue is None:
            group = JobGroup(g.fingerprint, g.gid)
        else:
            home = (g.fingerprint, g.queue)
            group = _fair_group(g, home, nodes, jobs, state.lanes)
        members = [jobs[i] for i in g.members]
        for job in members:
            if job.state is not PENDING or job.group is not None:
                raise SnapshotError(
                    f"inconsistent snapshot: job {job.job_id!r} in group {g.gid} is not pending"
                    " or in two groups"
                )
            job.group = group
        members_seen += len(members)
        group.jobs = members
        group.live = len(members)
        group.unsettled = [jobs[i] for i in g.unsettled]
        group.settled_reason = g.settled_reason
        group.queued = g.queued
        group.ticket = g.ticket
        group.key = g.key
        group.seen = g.seen
        if g.gid in groups:
            raise SnapshotError(f"inconsistent snapshot: group {g.gid} twice")
        groups[g.gid] = group
        if g.mapped:
            state.groups[home] = group
    # Pending jobs in no group are the parked ones (parked again below, once
    # the limits that hold them back are restored).
    parked = [job for job in state.jobs.values() if job.state is PENDING and job.group is None]
    if members_seen + len(parked) != state.pending_count or (parked and not snap.limits):
        raise SnapshotError(
            f"inconsistent snapshot: {state.pending_count} pending jobs, {members_seen} in groups"
        )
    order = parts.pending._order
    # Fair groups are in their accounts' lanes, not in the heap (whose entries
    # for them, in a snapshot from before lanes, are left out); every run is
    # entered afresh, in the snapshot's order (runs are rewound between
    # sessions), and the order's fair side is the fair groups queued.
    order._heap = [
        (*key, gid, ticket, groups[gid])
        for key, gid, ticket in snap.heap
        if not isinstance(groups[gid], FairGroup)
    ]
    for group in groups.values():
        if isinstance(group, FairGroup):
            for run in group.runs.values():
                state.lanes.enter(run)
            if group.queued:
                order.fair.add(group)
    order.broken = snap.order_broken
    parts.pending._barren = snap.barren
    sleepers = parts.pending._sleepers
    by_gid = {g.gid: g for g in snap.groups}
    for gid in snap.sleeping:
        group = groups[gid]
        asleep = by_gid[gid].asleep
        if asleep is None or not group.jobs:
            raise SnapshotError(
                f"inconsistent snapshot: sleeping group {gid} has no reason or no job"
            )
        unsettled = group.unsettled
        head = group.jobs[0]
        sleepers.sleep(
            group,
            PendReason(*asleep),
            watch(head.resreq, state.consumables),
            head.min_tasks,
        )
        group.unsettled = unsettled
    sleepers.unsettled = {gid: groups[gid] for gid in snap.sleeping_unsettled}
    sleepers._woken = [groups[gid] for gid in snap.woken]

    # Limits and backfill.
    limits = parts.limits
    limits._limits = list(snap.limits)
    limits._groups = {name: list(members) for name, members in snap.user_groups.items()}
    limits.reindex()
    limits._usage = {
        (u.limit, tuple(u.consumer)): _Usage(u.slots, u.jobs, dict(u.amounts))
        for u in snap.limit_usage
    }
    limits._hosts = {}
    for (index, key), used in limits._usage.items():
        if key[-1] != "*":
            limits._hosts.setdefault((index, key[:-1]), {})[key[-1]] = used
    for job in parked:
        reason = limits.never_for(job)
        if reason is None:
            raise SnapshotError(
                f"inconsistent snapshot: pending job {job.job_id!r} is in no group,"
                " and no limit holds it back"
            )
        parts.pending.park(job, reason)
    backfill = parts.backfill
    if backfill is not None:
        backfill._announced = {
            job_id: (start, tuple((name, n) for name, n in hosts))
            for job_id, start, hosts in snap.announced
        }
        res = snap.reservation
        if res is not None:
            last = Reservation(
                live[res.job],
                res.start,
                [(worker(ref), n, need) for ref, n, need in res.claims],
                dict(res.shared),
            )
            last.slack = res.slack
            backfill._planner._last = last
            backfill._planner._last_releases = res.releases
            backfill._planner._last_workers = res.workers
    parts.outbox[:] = snap.outbox


def _fair_record(group: FairGroup, job_index: dict[str, int]) -> dict[str, Any]:
    """A fair group's own fields of its record (runs are rewound between
    sessions: their pending members in order)."""
    assert not group.touched, "a fair group is rewound between sessions"
    home = group.home
    assert isinstance(home, tuple)
    return {
        "queue": home[1],
        "runs": [
            RunRecord(
                run.account.uid,
                rid,
                [job_index[j.job_id] for j in run.jobs if j.state is PENDING],
                0,  # lane entries are not kept: a restored core enters every run afresh
            )
            for rid, run in enumerate(group.runs.values(), 1)
        ],
    }


def _fair_group(
    g: GroupRecord,
    home: tuple[int, str],
    nodes: dict[int, ShareNode],
    jobs: list[Job],
    lanes: Lanes,
) -> FairGroup:
    group = FairGroup(g.fingerprint, g.gid, home, lanes)
    for r in g.runs:
        account = nodes[r.account]
        run = AccountRun(account, group, lanes.lane(account, home[1]))
        run.jobs = [jobs[i] for i in r.members]
        group.runs[account.uid] = run
    return group


def _worker(record: WorkerRecord, index: int) -> Worker:
    w = Worker(record.name, index, record.slots, dict(record.attrs), dict(record.resources))
    w.usable = record.usable
    w.used_slots = record.used_slots
    w.used = dict(record.used)
    return w
