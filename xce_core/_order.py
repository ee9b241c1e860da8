"""The policy order of pending jobs, kept across sessions, and the picker's merge.

:class:`PolicyOrder` is a heap with one entry per *queued* group (a group with
pending members that the next session must cover), keyed by the group's first
pending member. It is kept up to date as jobs arrive (:meth:`PolicyOrder.submitted`)
and as sessions cover groups, not rebuilt per session: a session pops only the
groups it covers, so its cost follows the groups it touches, and a session with
nothing queued costs O(1). Entries go stale rather than being removed (a group
re-queued gets a new ``ticket``; an entry whose ticket is not its group's is
dropped when it surfaces), and a group whose first member changed since it was
queued (that member started or was cancelled) is re-keyed when it surfaces.

Sleeping groups (:mod:`xce_core._sleep`) are not queued; they rejoin the order
when an event wakes them.

Fairshare (:mod:`xce_core._fairshare`): users are ordered, not jobs. A share
account's groups of one queue form a :class:`Lane`, a heap of its own keyed
like any group; the lane sits in the policy order by its account's path key
spliced into its first group's key. A job that starts lowers its account's
priority, which makes one entry stale (the lane's), never the account's
groups: the merge re-keys a lane whenever it surfaces with a key that grew,
and hands its batch over before it takes a second job under an account that a
job of the batch may charge (so that charge is seen first). A priority that
rises (a job ended) re-queues the account's lanes before the next session
(:meth:`PolicyOrder.lift`).
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from xce_core._model import PENDING, Job, JobGroup, Queue
from xce_core._pickers import Picker
from xce_core._registry import Registry
from xce_core._results import PendReason, SessionStats

if TYPE_CHECKING:
    from xce_core._fairshare import ShareNode

__all__ = ["BatchSink", "DirectSink", "Item", "Lane", "OrderKeys", "PolicyOrder"]

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


class DirectSink:
    """Inline sessions: the merge hands each batch straight to ``allocate``."""

    __slots__ = ("_allocate",)

    def __init__(self, allocate: Callable[[list[Item]], Awaitable[object]]) -> None:
        self._allocate = allocate

    async def send(self, item: list[Item]) -> None:
        await self._allocate(item)

    async def __aenter__(self) -> DirectSink:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class Lane:
    """One share account's groups of one queue (see the module docstring):
    ``heap`` holds their entries as the policy order holds plain groups';
    ``gid``, ``ticket``, ``key`` and ``queued`` mean for the lane's own entry in
    the policy order what they mean for a group's."""

    __slots__ = ("account", "epoch", "first", "gid", "heap", "key", "queued", "ticket")

    def __init__(self, account: ShareNode, gid: int) -> None:
        self.account = account
        self.gid = gid
        self.heap: list[tuple[Any, ...]] = []
        self.key: tuple[Any, ...] = ()
        # The merge's epoch (no charge since) and the first entry ``key`` was
        # computed at: while both hold, the key is current.
        self.epoch = -1
        self.first: tuple[Any, ...] | None = None
        self.queued = False
        self.ticket = 0

    def top(self) -> tuple[Any, ...] | None:
        """The first valid entry of the lane's heap (stale ones dropped)."""
        heap = self.heap
        while heap:
            entry = heap[0]
            if entry[-2] == entry[-1].ticket:
                return entry
            heapq.heappop(heap)
        return None

    def order_key(self, entry: tuple[Any, ...]) -> tuple[Any, ...]:
        """The lane's key when ``entry`` is its first: the group's key with the
        account's path key after the queue priority and picker rank."""
        return (entry[0], entry[1], *self.account.path_key(), *entry[2:-3])

    def __repr__(self) -> str:
        return f"Lane({self.account.name!r}, groups={len(self.heap)})"


class OrderKeys:
    """A job's key in the policy order: its queue's priority (higher first),
    the rank of the picker that ordered it, then that picker's key, as one flat
    tuple (the heap compares these once per job: flat is about twice as fast
    as nested). The rank tells pickers (and, should a picker break its
    contract, key lengths) apart, so fields of different pickers are never
    compared. Computed once per job, at submission."""

    __slots__ = ("_default", "_pickers", "_ranks", "_registry")

    def __init__(self, registry: Registry, default: str) -> None:
        self._registry = registry
        self._default = default
        # Looked up once per name (a registry never replaces a plugin).
        self._pickers: dict[str, Picker] = {}
        self._ranks: dict[tuple[str, int], int] = {}

    def __call__(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        name = queue.picker or self._default
        picker = self._pickers.get(name)
        if picker is None:
            picker = self._pickers[name] = self._registry.picker(name)
        key = picker.order_key(job, queue)
        rank = self._ranks.setdefault((name, len(key)), len(self._ranks))
        return (-queue.priority, rank, *key)


class PolicyOrder:
    """Queued groups and lanes in policy order (see the module docstring).

    Entries are flat tuples: the order key's fields, then the group (or lane)
    id (unique: ties never reach the object), the ticket, the group or lane.
    One flat tuple compares in about half the time of ``(key, gid, group)``.
    """

    __slots__ = ("_epoch", "_heap", "_lanes", "broken", "touched")

    def __init__(self) -> None:
        self._heap: list[tuple[Any, ...]] = []
        # Fairshare lanes by (account id, queue name).
        self._lanes: dict[tuple[int, str], Lane] = {}
        # Bumped whenever accounts may have been charged (a batch decided, a
        # session begun): lanes keyed in an older epoch are keyed again.
        self._epoch = 0
        # Set when a heap operation raised (order keys that do not compare: a
        # picker breaking its contract): the heap may have lost an entry, so
        # the owner rebuilds it before the next session.
        self.broken = False
        # Groups the running (or last) session covered, each once.
        self.touched: list[JobGroup] = []

    def __len__(self) -> int:
        """Entries held (stale ones included until they surface)."""
        return len(self._heap)

    def queue(self, group: JobGroup) -> None:
        """(Re)queue ``group`` by its first pending member; a group with none
        leaves the order."""
        group.begin()
        if group.pos >= len(group.jobs):
            group.queued = False
            return
        group.key = group.jobs[group.pos].key
        self.requeue(group)

    def requeue(self, group: JobGroup) -> None:
        """Queue ``group`` again after a session covered it, by the key it was
        queued by (never after its first pending member's: the head only moves
        on, and an earlier newcomer re-queues it); the next merge re-keys it
        when it surfaces. O(log n): no walk over what the session started."""
        group.ticket += 1
        group.queued = True
        entry = (*group.key, group.gid, group.ticket, group)
        account = group.account
        if account is None:
            heapq.heappush(self._heap, entry)
            return
        home = group.home
        assert isinstance(home, tuple)  # (fingerprint, account id, queue)
        queue = home[2]
        lane = self._lanes.get((account.uid, queue))
        if lane is None:
            lane = self._lanes[account.uid, queue] = Lane(account, -group.gid)
            account.lanes.append(lane)
        heapq.heappush(lane.heap, entry)
        self._raise(lane)

    def _raise(self, lane: Lane) -> None:
        """Queue ``lane`` by its first group, unless its entry is there with a
        key no greater (a smaller stale key is re-keyed when it surfaces)."""
        entry = lane.top()
        if entry is None:
            return
        key = lane.order_key(entry)
        if lane.queued and lane.key <= key:
            return
        lane.ticket += 1
        lane.queued = True
        lane.key = key
        heapq.heappush(self._heap, (*key, lane.gid, lane.ticket, lane))

    def lift(self, accounts: Iterable[ShareNode]) -> None:
        """These accounts' priority rose: their lanes move up now."""
        for account in accounts:
            for lane in account.lanes:
                lane.queued = False
                self._raise(lane)

    def submitted(self, job: Job) -> None:
        """A pending job joined its (awake) group: queue the group, or re-key it
        when the job comes before the member it is queued by."""
        group = job.group
        assert group is not None
        if not group.queued or job.key < group.key:
            self.queue(group)

    def rebuild(self, groups: Iterable[JobGroup]) -> None:
        """Queue exactly ``groups`` (after order keys changed: a queue's priority
        or picker, a fairshare recalculation)."""
        for group in groups:
            group.queued = False
        self._heap = []
        # Lanes are made again as their groups are queued (an account of a
        # tree that was replaced leaves no lane behind).
        for lane in self._lanes.values():
            lane.account.lanes.clear()
        self._lanes = {}
        for group in groups:
            self.queue(group)
        self.broken = False

    def finish(self) -> list[JobGroup]:
        """End a session: the groups it covered (each to be re-queued or put to
        sleep by the caller), forgotten here."""
        touched, self.touched = self.touched, []
        for group in touched:
            group.queued = False  # any entry left is stale: the caller re-queues
            group.ticket += 1
        return touched

    def _ready(self, heap: list[tuple[Any, ...]], group: JobGroup, number: int) -> bool:
        """Whether ``group``, valid at the top of ``heap``, is ready to give a
        job. The first time this session it is rewound, and dropped (nothing
        pending) or re-keyed (its first member changed) instead: ``False``."""
        if group.seen == number:
            return True
        group.seen = number
        self.touched.append(group)
        group.begin()
        if group.pos >= len(group.jobs):
            heapq.heappop(heap)
            return False
        key = group.jobs[group.pos].key
        if key != group.key:
            group.key = key
            heapq.heapreplace(heap, (*key, group.gid, group.ticket, group))
            return False
        return True

    async def merge(
        self,
        failed: Mapping[int, PendReason],
        send: BatchSink,
        stats: SessionStats,
        limit: int,
        first: int = 16,
    ) -> None:
        """Send the queued groups' pending jobs in policy order, in batches, to
        ``send``; ``failed`` holds the fingerprints proven unsatisfiable this
        session (read as it grows): such a group is handed over whole, so its
        jobs are pended together. Batches start at ``first`` jobs and double up
        to ``limit`` (a strict-FIFO session often stops at its first job:
        ``stats.stopped_by_fifo`` ends the merge, so it starts at one).
        Closes ``send``."""
        batch_size = min(first, limit)
        pending = PENDING
        heap = self._heap
        number = stats.number
        ready = self._ready
        # Top-level share accounts a job of the batch may charge.
        charging: set[ShareNode | None] = set()
        self._epoch += 1
        epoch = self._epoch
        async with send:
            batch: list[Item] = []
            while heap:
                entry = heap[0]
                item = entry[-1]
                if entry[-2] != item.ticket:
                    heapq.heappop(heap)  # stale: re-queued since
                    continue
                if isinstance(item, Lane):
                    lane = item
                    top = lane.account.top
                    if top in charging:
                        # A job of the batch may lower this account's priority:
                        # decide the batch first, then look again.
                        await send.send(batch)
                        if stats.stopped_by_fifo:
                            return
                        batch = []
                        charging.clear()
                        self._epoch = epoch = epoch + 1
                        continue
                    inner = lane.heap
                    while inner:
                        sub = inner[0]
                        group = sub[-1]
                        if sub[-2] != group.ticket:
                            heapq.heappop(inner)
                        elif ready(inner, group, number):
                            break
                    else:
                        lane.queued = False
                        heapq.heappop(heap)
                        continue
                    head = inner[0]
                    if lane.epoch != epoch or lane.first is not head:
                        key = lane.order_key(head)
                        lane.epoch, lane.first = epoch, head
                        if key != lane.key:
                            # Its account was charged, or its first group moved
                            # on: within a session a lane's key only grows.
                            lane.key = key
                            heapq.heapreplace(heap, (*key, lane.gid, lane.ticket, lane))
                            continue
                else:
                    inner = heap
                    top = None
                    group = item
                    if not ready(heap, group, number):
                        continue
                if group.fingerprint in failed:
                    heapq.heappop(inner)
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
                        heapq.heapreplace(inner, (*jobs[pos].key, group.gid, group.ticket, group))
                    else:
                        heapq.heappop(inner)
                    if top is not None:
                        charging.add(top)
                        # The lane moves on to its next job now (its account's
                        # charge is seen when it surfaces after the batch).
                        first_group = inner[0] if inner else None
                        if first_group is not None and first_group[-2] != first_group[-1].ticket:
                            first_group = lane.top()  # stale entries first
                        if first_group is None:
                            lane.queued = False
                            heapq.heappop(heap)
                        else:
                            lane.key = key = lane.order_key(first_group)
                            lane.epoch, lane.first = epoch, first_group
                            heapq.heapreplace(heap, (*key, lane.gid, lane.ticket, lane))
                if len(batch) >= batch_size:
                    await send.send(batch)
                    if stats.stopped_by_fifo:
                        return
                    batch = []
                    charging.clear()
                    self._epoch = epoch = epoch + 1
                    batch_size = min(batch_size * 2, limit)
            if batch:
                await send.send(batch)
