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

Fairshare (:mod:`xce_core._fairshare`): users are ordered, not jobs. A
fairshare queue's jobs are in the order through their accounts' lanes
(:class:`~xce_core._fairgroup.Lane`: one entry per account and queue, keyed
by the account's path key spliced into its first job's key), in a heap of
their own (:class:`~xce_core._fairgroup.Lanes`) that the merge reads beside
the plain groups' heap. A job that starts lowers its account's priority, so
keys only grow within a session: a lane is keyed again whenever it surfaces,
and one taken from is held out of the order until its batch is decided (so
its charge is seen before the next pick under its account). A priority that
rises (a job ended) enters the account's lanes again before the next session
(:meth:`PolicyOrder.lift`). Feasibility stays by shape: a fair group whose
shape failed is handed over whole, where its first job not taken surfaces.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, final

from xce_core._fairgroup import FairGroup, Lane, Lanes
from xce_core._model import PENDING, Job, JobGroup, Queue
from xce_core._pickers import Picker
from xce_core._registry import Registry
from xce_core._results import PendReason, SessionStats

if TYPE_CHECKING:
    from xce_core._fairshare import ShareNode

__all__ = ["BatchSink", "DirectSink", "Item", "OrderKeys", "PolicyOrder", "QueueKeys"]

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
        key = self._picker(name).order_key(job, queue)
        return (-queue.priority, self._rank(name, len(key)), *key)

    def of_queue(self, queue: Queue) -> QueueKeys:
        """``queue``'s keys as they are now (see :class:`QueueKeys`). Raises what
        looking its picker up raises (:class:`PluginError`)."""
        name = queue.picker or self._default
        return QueueKeys(self, name, self._picker(name), queue)

    def _picker(self, name: str) -> Picker:
        picker = self._pickers.get(name)
        if picker is None:
            picker = self._pickers[name] = self._registry.picker(name)
        return picker

    def _rank(self, name: str, length: int) -> int:
        return self._ranks.setdefault((name, length), len(self._ranks))


@final
class QueueKeys:
    """One queue's order keys while its priority and picker stay as they are:
    ``keys(job)`` is :class:`OrderKeys`'s key of ``job`` in ``queue``, with
    the picker and its rank looked up once (benchmark B5 of
    benchmarks/bench_ingest.py keys 500,000 jobs of one queue).

    A caller keying many jobs may join each key itself: ``picker_key(job,
    queue)`` is the picker's key; one that is a tuple of ``size`` fields is
    joined as ``head + key`` (``size`` is -1 until :meth:`join` has seen a
    key); :meth:`join` joins any."""

    __slots__ = ("_keys", "_name", "head", "picker_key", "queue", "size")

    def __init__(self, keys: OrderKeys, name: str, picker: Picker, queue: Queue) -> None:
        self._keys = keys
        self._name = name
        self.picker_key = picker.order_key
        self.queue = queue
        self.size = -1
        self.head: tuple[int, int] = (-queue.priority, 0)

    def __call__(self, job: Job) -> tuple[Any, ...]:
        return self.join(self.picker_key(job, self.queue))

    def join(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """The order key of a job whose picker gave ``key``."""
        if type(key) is tuple:
            if len(key) == self.size:
                return self.head + key
            if self.size < 0:
                # The first key: its length is the picker's (one of another
                # length, or not a tuple, is joined as OrderKeys joins it).
                self.size = len(key)
                self.head = (self.head[0], self._keys._rank(self._name, self.size))
                return self.head + key
        return (self.head[0], self._keys._rank(self._name, len(key)), *key)


class PolicyOrder:
    """Queued groups in policy order (see the module docstring).

    Entries are flat tuples: the order key's fields, then the group id (unique:
    ties never reach the group), the ticket, the group.
    One flat tuple compares in about half the time of ``(key, gid, group)``.
    """

    __slots__ = ("_heap", "broken", "fair", "lanes", "touched")

    def __init__(self, lanes: Lanes) -> None:
        self._heap: list[tuple[Any, ...]] = []
        # The fairshare side: every lane's entry (shared with the fair groups),
        # and the fair groups queued.
        self.lanes = lanes
        self.fair: set[FairGroup] = set()
        # Set when a heap operation raised (order keys that do not compare: a
        # picker breaking its contract): the heap may have lost an entry, so
        # the owner rebuilds it before the next session.
        self.broken = False
        # Groups the running (or last) session covered, each once.
        self.touched: list[JobGroup] = []

    def __len__(self) -> int:
        """Entries held (stale ones included until they surface), and fair
        groups queued (0: nothing to cover)."""
        return len(self._heap) + len(self.fair)

    def queue(self, group: JobGroup) -> None:
        """(Re)queue ``group`` by its first pending member; a group with none
        leaves the order. A fair group is rewound, its runs back in their
        lanes (:meth:`FairGroup.begin`)."""
        group.begin()
        if isinstance(group, FairGroup):
            group.queued = bool(group.live)
            if group.queued:
                self.fair.add(group)
            else:
                self.fair.discard(group)
            return
        if group.pos >= len(group.jobs):
            group.queued = False
            return
        group.key = group.jobs[group.pos].key
        self._push(group)

    def _push(self, group: JobGroup) -> None:
        group.ticket += 1
        group.queued = True
        heapq.heappush(self._heap, (*group.key, group.gid, group.ticket, group))

    def requeue(self, group: JobGroup) -> None:
        """Queue ``group`` again after a session covered it, by the key it was
        queued by (never after its first pending member's: the head only moves
        on, and an earlier newcomer re-queues it); the next merge re-keys it
        when it surfaces. O(log n): no walk over what the session started. A
        fair group is rewound (O(runs it gave jobs or dropped))."""
        if isinstance(group, FairGroup):
            self.queue(group)
        else:
            self._push(group)

    def lift(self, accounts: Iterable[ShareNode]) -> None:
        """These accounts' priority rose (between sessions): their lanes move up
        now, in the order given (the same pushes wherever it runs: R6)."""
        self.lanes.lift(accounts)

    def submitted(self, job: Job) -> None:
        """A pending job joined its (awake) group: queue the group, or re-key it
        when the job comes before the member it is queued by. (A fair group's
        lane was keyed as the job joined it: :meth:`FairGroup.add`.)"""
        group = job.group
        assert group is not None
        if not group.queued or (not isinstance(group, FairGroup) and job.key < group.key):
            self.queue(group)

    def rebuild(self, groups: Iterable[JobGroup], asleep: Iterable[FairGroup] = ()) -> None:
        """Queue exactly ``groups`` (after order keys changed: a queue's priority
        or picker; a fairshare recalculation needs only :meth:`relane`). Every
        lane is entered afresh from the runs of the fair groups among
        ``groups`` and ``asleep``."""
        groups = list(groups)
        self.lanes.clear()
        self.fair = set()
        for group in groups:
            group.queued = False
            if isinstance(group, FairGroup):
                group.rekey()
        for fair in asleep:
            fair.rekey()
        self._heap = []
        for group in groups:
            self.queue(group)
        self.broken = False

    def relane(self) -> None:
        """Every lane keyed again (a fairshare recalculation: :meth:`Lanes.relane`)."""
        self.lanes.relane()

    def finish(self) -> list[JobGroup]:
        """End a session: the groups it covered (each to be re-queued or put to
        sleep by the caller), forgotten here."""
        touched, self.touched = self.touched, []
        fair = self.fair
        for group in touched:
            group.queued = False  # any entry left is stale: the caller re-queues
            group.ticket += 1
            if isinstance(group, FairGroup):
                fair.discard(group)
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
        *,
        fair: bool = False,
    ) -> None:
        """Send the queued groups' pending jobs in policy order, in batches, to
        ``send``; ``failed`` holds the fingerprints proven unsatisfiable this
        session (read as it grows): such a group is handed over whole, so its
        jobs are pended together. Batches start at ``first`` jobs and double up
        to ``limit`` (a strict-FIFO session often stops at its first job:
        ``stats.stopped_by_fifo`` ends the merge, so it starts at one).
        ``fair``: whether fair groups may be queued (else none is looked for:
        the plain path of benchmarks/bench_alloc.py's B1 pays nothing for
        fairshare). Closes ``send``."""
        batch_size = min(first, limit)
        pending = PENDING
        heap = self._heap
        number = stats.number
        ready = self._ready
        touched = self.touched
        # The fairshare side: lanes, looked at while a queued fair group is
        # neither settled whole nor emptied this session (``live``: past that,
        # a lane holds nothing to take, and is not walked).
        lanes = self.lanes.heap
        # (A queued group whose members were all cancelled since is not
        # counted: nothing of it will surface to settle it.)
        live = sum(1 for group in self.fair if group.live) if fair else 0
        # Top-level share accounts a job of the batch may charge; lanes taken
        # from since the batch began, out of ``lanes`` until it is decided, by
        # the key of their next member before that charge (the smallest it can
        # be); the mark of lane keys found valid since then (Lane.checked).
        charging: set[ShareNode | None] = set()
        held: list[tuple[Any, ...]] = []
        mark = object()
        try:
            async with send:
                batch: list[Item] = []
                decide = False  # hand the batch over before looking further
                while True:
                    if decide:
                        decide = False
                        await send.send(batch)
                        if stats.stopped_by_fifo:
                            return
                        batch = []
                        if charging:
                            charging.clear()
                            mark = _release(held, lanes)
                    if live and (lanes or held):
                        entry = lanes[0] if lanes else None
                        if held and (entry is None or held[0] < entry):
                            if not heap or held[0] < heap[0]:
                                # A lane taken from comes first: its account's
                                # charge must be known. Decide the batch.
                                decide = True
                                continue
                            entry = None
                        elif entry is not None and heap and heap[0] < entry:
                            entry = None
                    else:
                        entry = None
                    if entry is not None:
                        lane: Lane = entry[-1]
                        if entry[-2] != lane.ticket:
                            heapq.heappop(lanes)  # stale: entered again since
                            continue
                        if lane.checked is not mark:
                            run = lane.first_run()
                            while run is not None:
                                fgroup = run.group
                                if not fgroup.queued:
                                    lane.drop_first()  # asleep
                                elif fgroup.seen != number:
                                    # Its first cover this session (it was
                                    # rewound as the last one ended, or as it
                                    # woke).
                                    fgroup.seen = number
                                    touched.append(fgroup)
                                    fgroup.left = fgroup.live
                                    continue
                                elif fgroup.done == number:
                                    lane.drop_first()  # settled whole, or emptied
                                elif fgroup.fingerprint in failed:
                                    # Its shape failed: settled whole, here.
                                    fgroup.done = number
                                    live -= 1
                                    batch.append(fgroup)
                                    lane.drop_first()
                                else:
                                    break
                                run = lane.first_run()
                            if run is None:
                                heapq.heappop(lanes)
                                lane.queued = False
                                continue
                            key = lane.key_of(run)
                            if key is not lane.key and key != lane.key:
                                # A charge, or its first member changed: within
                                # a session a lane's key only grows.
                                lane.key = key
                                heapq.heapreplace(lanes, (*key, lane.lid, lane.ticket, lane))
                                continue
                            lane.checked = mark
                        else:
                            run = lane.first_run()  # checked this batch, nothing taken since
                        top = lane.account.top
                        if top in charging:
                            # A job of the batch may lower this account's
                            # priority (a group above it): decide the batch
                            # first, then look again.
                            decide = True
                            continue
                        assert run is not None
                        fgroup = run.group
                        batch.append(fgroup.take(run))
                        if not fgroup.left:
                            fgroup.done = number
                            live -= 1
                        charging.add(top)
                        # Held out of the order until the batch is decided,
                        # by its next member's key as it is now (one heap
                        # operation a take on the order's side: benchmark B11
                        # of benchmarks/bench_fairshare.py).
                        heapq.heappop(lanes)
                        lane.queued = False
                        run = lane.first_run()
                        if run is not None:
                            heapq.heappush(held, (*lane.key_of(run), lane.lid, lane.ticket, lane))
                    elif heap:
                        entry = heap[0]
                        group = entry[-1]
                        if entry[-2] != group.ticket:
                            heapq.heappop(heap)  # stale: re-queued since
                            continue
                        if group.seen != number and not ready(heap, group, number):
                            continue  # (seen tested inline: no call per job, bench_alloc.py's B1)
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
                                heapq.heapreplace(
                                    heap, (*jobs[pos].key, group.gid, group.ticket, group)
                                )
                            else:
                                heapq.heappop(heap)
                    else:
                        break
                    if len(batch) >= batch_size:
                        decide = True
                        batch_size = min(batch_size * 2, limit)
                if batch:
                    await send.send(batch)
        finally:
            # However the merge ends, the lanes held go back (keyed as the
            # next merge will find them).
            _release(held, lanes)


def _release(held: list[tuple[Any, ...]], lanes: list[tuple[Any, ...]]) -> object:
    """After a batch was decided: the lanes it took from enter the order again,
    keyed after its charges; a new mark (keys found valid before may have
    grown)."""
    for entry in held:
        lane: Lane = entry[-1]
        key = lane.held_key()
        if key is not None:
            lane.key = key
            lane.queued = True
            lane.ticket += 1
            heapq.heappush(lanes, (*key, lane.lid, lane.ticket, lane))
    held.clear()
    return object()


def _gid(group: JobGroup) -> int:
    return group.gid
