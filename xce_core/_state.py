"""Cluster state: one owner, changed only by the synchronous methods below.

Every method either applies an input event completely or raises
:class:`EventInconsistent` having changed nothing. Capacity is never negative:
a worker redefined below what it has in use, or a shared resource shrunk below
its use, simply has nothing free until jobs finish.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList

from events import JobSubmitted, QueueConfig, SharedResource, WorkerUp
from xce_core._errors import XceError
from xce_core._fairgroup import FairGroup, Lanes
from xce_core._model import (
    _EMPTY,
    AMOUNT_TOLERANCE,
    DONE,
    PENDING,
    REJECTED,
    RUNNING,
    SLOTS,
    GroupHome,
    Job,
    JobGroup,
    JobShape,
    JobState,
    Origin,
    Queue,
    Worker,
    shortfall,
)
from xce_core._results import Want
from xce_core.resreq import Alternative, Compound, ResReq

if TYPE_CHECKING:
    from xce_core._fairshare import ShareNode
    from xce_core._order import OrderKeys

__all__ = ["ClusterState", "EventInconsistent", "part_counts", "task_problem", "task_total"]

# What a refused job keeps as its requirement (it is never read again).


class EventInconsistent(XceError):
    """An input event contradicts the state (unknown worker, duplicate job...)."""


def task_total(resreq: ResReq, max_tasks: int) -> int:
    """Tasks a requirement asks for: ``max_tasks``, or a compound's part counts."""
    if isinstance(resreq, Compound):
        return sum(c for c in part_counts(resreq, max_tasks))
    if isinstance(resreq, Alternative):
        return max(task_total(o, max_tasks) for o in resreq.options)
    return max_tasks


def part_counts(compound: Compound, max_tasks: int) -> list[int]:
    """Task count of each compound part; a last part without count takes the rest."""
    fixed = sum(p.count for p in compound.parts if p.count is not None)
    return [p.count if p.count is not None else max_tasks - fixed for p in compound.parts]


def task_problem(resreq: ResReq, min_tasks: int, max_tasks: int) -> str:
    """Why task counts are impossible for this requirement, or ''."""
    if min_tasks > max_tasks:
        return f"min_tasks {min_tasks} exceeds max_tasks {max_tasks}"
    compounds: list[Compound] = []
    if isinstance(resreq, Compound):
        compounds.append(resreq)
    elif isinstance(resreq, Alternative):
        compounds.extend(o for o in resreq.options if isinstance(o, Compound))
    for compound in compounds:
        counts = part_counts(compound, max_tasks)
        if any(c < 1 for c in counts):
            return (
                f"compound parts ask for {sum(c for c in counts if c > 0)} tasks; "
                f"a part without a count gets none of max_tasks {max_tasks}"
            )
        total = sum(counts)
        if (min_tasks, max_tasks) != (1, 1) and not min_tasks <= total <= max_tasks:
            # As LSF: the compound's task count must be compatible with -n. One
            # task (the default, as no -n) lets the compound's counts decide.
            asked = f"{min_tasks}" if min_tasks == max_tasks else f"{min_tasks} to {max_tasks}"
            return (
                f"compound parts ask for {total} tasks"
                f" ({' + '.join(map(str, counts))}); the job asks for {asked}"
            )
    return ""


class ClusterState:
    """Workers, shared resources, queues and jobs, plus the pending-job groups.

    ``order_key(job, queue)`` (an ``OrderKeys``, injected by the core) returns the
    job's position in policy order; it is asked at submission (through
    ``order_key.of_queue``, once per queue for a run of them) and when its
    queue changes.
    """

    def __init__(
        self,
        order_key: OrderKeys,
        account_of: Callable[[Job, Queue], ShareNode | None] = lambda job, queue: None,
    ) -> None:
        self.order_key = order_key
        # Queues known to have no fairshare picker (their jobs need no account).
        self._plain: set[str] = set()
        # The fairshare account a pending job's group belongs to (None: its
        # queue's picker is not fairshare); injected by the core.
        self.account_of = account_of
        self.workers: list[Worker | None] = []
        self._holes = 0  # removed workers' entries in ``workers`` (None)
        self.by_name: dict[str, Worker] = {}
        self.shared_total: dict[str, float] = {}
        self.shared_used: dict[str, float] = {}
        # Moves whenever the set of shared resource names may have changed (what
        # the dispatcher's rusage splits depend on).
        self.shared_names_version = 0
        self.queues: dict[str, Queue] = {}
        # Live jobs (pending or running). A job that has ended leaves only its
        # id and final state in ``ended``, for duplicate-id rejection and precise
        # errors: memory follows the live jobs, not the history.
        self.jobs: dict[str, Job] = {}
        self.ended: dict[str, JobState] = {}
        # Pending-job groups by home: the fingerprint, or (fingerprint, queue)
        # for a fairshare queue's jobs (FairGroup).
        self.groups: dict[GroupHome, JobGroup] = {}
        # Fairshare accounts' lanes in the policy order (see _fairgroup.py).
        self.lanes = Lanes()
        self.consumables: set[str] = set()
        # Capacity totals over usable workers, kept exact by every change of a
        # worker's slots, use or usability (so a session reads them in O(1)):
        # ``free_hosts`` holds the usable workers with a free slot.
        self.usable_count = 0
        self.usable_slots = 0
        self.free_total = 0
        self.free_hosts: set[Worker] = set()
        # Usable workers by slot count (for the largest: a bound on free slots).
        self.slot_sizes: Counter[int] = Counter()
        # Bumped whenever the set of usable workers or their static attributes change:
        # memoised select results older than this are stale.
        self.worker_version = 0
        self.pending_count = 0
        self.running_count = 0
        # Running jobs with a run limit by estimated end (start + run_limit):
        # (end, seq, job), for backfill planning; ``end_of`` finds an entry.
        self.ends: SortedList[tuple[float, int, Job]] = SortedList()
        self.end_of: dict[Job, float] = {}
        # The slots each of those jobs holds: what EASY's first-time bound adds
        # per end without walking claims (benchmarks/bench_simulate.py, EASY).
        self.held: dict[Job, int] = {}
        # Bumped whenever capacity may come back: a running job ends, a worker
        # or licence event. Backfill keeps a reservation while it stands still.
        self.releases = 0
        self._fingerprints: dict[tuple[Any, ...], int] = {}
        self._seq = 0
        # Group ids only break ties in the picker's heap: never reuse one.
        self._groups_made = 0

    # ------------------------------------------------------------------ queries

    def live_workers(self) -> Iterator[Worker]:
        """Registered workers in canonical order."""
        return (w for w in self.workers if w is not None)

    def shared_free(self, name: str) -> float | None:
        """Unclaimed amount of a shared resource, ``None`` if it is not defined."""
        total = self.shared_total.get(name)
        if total is None:
            return None
        free = total - self.shared_used.get(name, 0.0)
        return free if free > 0.0 else 0.0

    def queue(self, name: str) -> Queue:
        """The queue called ``name``; an unconfigured queue has priority 0."""
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = Queue(name)
        return q

    # ------------------------------------------------------------------ workers

    def worker_up(self, ev: WorkerUp) -> None:
        """Register or redefine a worker; it becomes usable. Keeps running claims."""
        w = self.by_name.get(ev.name)
        if w is None:
            w = Worker(ev.name, len(self.workers), ev.slots, dict(ev.attrs), dict(ev.resources))
            self.workers.append(w)
            self.by_name[ev.name] = w
        else:
            self._uncount(w)
            w.slots = ev.slots
            w.attrs = dict(ev.attrs)
            w.resources = dict(ev.resources)
            w.usable = True
        self._count(w)
        self.releases += 1
        self.consumables.update(ev.resources)
        self.worker_version += 1

    def worker_down(self, name: str) -> None:
        """Make a worker unusable for new work. Idempotent."""
        w = self._worker(name)
        if w.usable:
            self._uncount(w)
            w.usable = False
            self.worker_version += 1
            self.releases += 1

    def worker_removed(self, name: str) -> None:
        """Forget a worker; refused while jobs run on it."""
        w = self._worker(name)
        if w.used_slots or w.used:  # a running job holds something on it
            if self.running_count <= _NAME_JOBS_UP_TO:
                running = self.running_on(w)
                what = f"{len(running)} job(s) ({', '.join(sorted(running)[:5])})"
            else:  # naming them would walk every running job
                what = f"jobs ({w.used_slots} slot(s) held)"
            raise EventInconsistent(
                f"worker {name!r} still runs {what}; "
                "finish or cancel them first (worker_down stops new work)"
            )
        self._uncount(w)
        # A forgotten worker is never usable again (a worker_up of its name
        # makes a new one): a claim or reservation naming it fails the usable
        # test of commit and of backfill's planning.
        w.usable = False
        self.releases += 1
        self.workers[w.index] = None
        del self.by_name[name]
        self.worker_version += 1
        self._holes += 1
        if self._holes > 64 and self._holes * 2 > len(self.workers):
            self._compact_workers()

    def running_on(self, worker: Worker) -> list[str]:
        """Ids of the running jobs holding a claim on ``worker``. A walk over the
        running jobs: workers keep no list of their jobs, which would cost two
        set operations per host of every job started and ended (the replays of
        benchmarks/bench_simulate.py hold about 17 hosts a job), for the one
        question a refused ``worker_removed`` asks (which it asks only with at
        most ``_NAME_JOBS_UP_TO`` jobs running)."""
        return [
            job.job_id
            for job in self.jobs.values()
            if job.state is RUNNING and any(w is worker for w, _ in job.allocation)
        ]

    def _compact_workers(self) -> None:
        """Drop the holes removed workers left, renumbering the rest in the same
        order. Indices are only held within a session (attempt claims, cursors),
        and events never apply during one, so renumbering here is safe; doing it
        when holes outnumber workers keeps removal O(1) amortised and every scan
        over the table proportional to the live workers."""
        live = [w for w in self.workers if w is not None]
        for index, w in enumerate(live):
            w.index = index
        self.workers = list(live)
        self._holes = 0

    def _count(self, w: Worker) -> None:
        """Add a worker's capacity to the totals (after a change)."""
        if w.usable:
            self.usable_count += 1
            self.usable_slots += w.slots
            self.slot_sizes[w.slots] += 1
            free = w.slots - w.used_slots
            if free > 0:
                self.free_total += free
                self.free_hosts.add(w)

    def _uncount(self, w: Worker) -> None:
        """Take a worker's capacity out of the totals (before a change)."""
        if w.usable:
            self.usable_count -= 1
            self.usable_slots -= w.slots
            sizes = self.slot_sizes
            sizes[w.slots] -= 1
            if not sizes[w.slots]:
                del sizes[w.slots]
            free = w.slots - w.used_slots
            if free > 0:
                self.free_total -= free
                self.free_hosts.discard(w)

    def _freed(self, w: Worker, slots: int) -> None:
        """``slots`` of ``w`` were freed (taken, if negative), totals kept exact.
        The same as _uncount, change, _count, in one call (EASY's projections
        take and give back claims host by host through it). ``commit`` and
        ``_release`` apply the same rule inline, summing ``free_total`` once per
        job: per-host work is most of benchmarks/bench_simulate_big.py."""
        before = w.slots - w.used_slots
        w.used_slots -= slots
        if w.usable:
            after = before + slots
            if before > 0:
                if after > 0:
                    self.free_total += slots
                else:
                    self.free_total -= before
                    self.free_hosts.discard(w)
            elif after > 0:
                self.free_total += after
                self.free_hosts.add(w)

    def _worker(self, name: str) -> Worker:
        w = self.by_name.get(name)
        if w is None:
            raise EventInconsistent(f"unknown worker {name!r}")
        return w

    def shared_resource(self, ev: SharedResource) -> None:
        """Define or resize a shared resource."""
        if ev.name not in self.shared_total:
            self.shared_names_version += 1
        self.shared_total[ev.name] = ev.total
        self.releases += 1

    def queue_config(self, ev: QueueConfig) -> None:
        """Set a queue's priority and picker; reorders its pending jobs."""
        q = self.queue(ev.name)
        q.priority = ev.priority
        q.picker = ev.picker
        self._plain.discard(ev.name)  # its picker may be fairshare now
        for group in self.groups_of_queue(ev.name):
            for job in group.jobs:
                if job.queue == ev.name:
                    job.key = self.order_key(job, q)
            group.jobs.sort(key=_job_key)
            group.head = 0

    def groups_of_queue(self, name: str) -> list[JobGroup]:
        """The groups holding a job of queue ``name`` (a group holds one shape,
        whatever the queue)."""
        return [g for g in self.groups.values() if any(job.queue == name for job in g.jobs)]

    # ------------------------------------------------------------------ jobs

    def job_submitted(
        self,
        ev: JobSubmitted,
        shape: JobShape,
        origin: Origin,
        keys: Callable[[Job], tuple[Any, ...]],
        *,
        place: bool = True,
    ) -> Job:
        """Add a pending job of ``shape`` (its requirement parsed and validated, its
        fingerprint set, see :meth:`fingerprint`) submitted from ``origin``
        (``(ev.user, ev.queue, ev.project, ev.priority, ev.run_limit)``, or an
        equal tuple to share), keyed by ``keys``: its queue's order keys as
        they are now (:meth:`OrderKeys.of_queue`, looked up once for many jobs).
        Its id must be new: the caller checks that (:meth:`known`), once.
        Without ``place`` it joins no group (a job its limits park:
        :meth:`withdraw`). Raises what ``keys`` raises, with the job in
        ``jobs`` (``forget_partial_job`` undoes that). ``SchedulerCore._submit``
        admits the usual job (a queue placed by shape) inline by this rule:
        change both together (tests/core/test_ingest.py compares them)."""
        job_id = ev.job_id
        self._seq += 1
        job = self.jobs[job_id] = Job.admit(job_id, shape, origin, ev.submit_time, self._seq)
        # What decides feasibility, nothing else: the requirement and the task
        # counts (the shape's fingerprint). User, queue and project change
        # nothing a session can place, so jobs of one shape share a group and a
        # cache entry whoever submits them (per-user or per-queue limits would
        # be a check of their own).
        queue = self.queues.get(origin[1])
        if queue is None:
            queue = self.queue(origin[1])
        job.key = keys(job)
        if place and queue.name in self._plain:
            # The usual: a queue without fairshare, whose jobs need no account
            # looked up (benchmarks/bench_ingest.py's B5; place() is the rule).
            group = job.group = self._shape_group(shape.fingerprint)
            group.insert(job)
        elif place:
            self.place(job, queue)
        self.pending_count += 1
        return job

    def place(self, job: Job, queue: Queue) -> JobGroup:
        """Put pending ``job`` in its group (made if new): that of its shape, or
        under fairshare that of its shape in its queue, under its account."""
        fp = job.fingerprint
        account = self.account_of(job, queue)
        if account is None:
            self._plain.add(queue.name)
            group = job.group = self._shape_group(fp)
            group.insert(job)
            return group
        home: GroupHome = (fp, queue.name)
        fair = self.groups.get(home)
        if fair is None:
            self._groups_made += 1
            fair = self.groups[home] = FairGroup(fp, self._groups_made, home, self.lanes)
        assert isinstance(fair, FairGroup)
        job.group = fair
        fair.insert(job)
        fair.add(job, account)
        return fair

    def withdraw(self, jobs: Collection[Job]) -> None:
        """Take pending ``jobs`` out of their groups: they stay pending, in no
        group (parked by the core: :meth:`PendingQueue.park`). A fair group
        they leave is made again from its other members (its runs are by
        account). The caller rebuilds the policy order."""
        out = set(jobs)
        groups = {job.group.gid: job.group for job in out if job.group is not None}
        for job in out:
            job.group = None
        for group in groups.values():
            if isinstance(group, FairGroup):
                rest = [j for j in group.jobs if j.state is PENDING and j not in out]
                self.drop_group(group)
                for job in rest:
                    self.place(job, self.queues[job.queue])
                continue
            left = len(group.jobs)
            group.jobs = [j for j in group.jobs if j not in out]
            group.unsettled = [j for j in group.unsettled if j not in out]
            group.live -= left - len(group.jobs)
            group.head = group.pos = 0
            if not group.live:
                self.drop_group(group)

    def readmit(self, job: Job) -> None:
        """A parked pending job (:meth:`withdraw`) joins its group again, keyed
        by its queue as it is now."""
        queue = self.queue(job.queue)
        job.key = self.order_key(job, queue)
        self.place(job, queue)

    def _shape_group(self, fp: int) -> JobGroup:
        """The group of the jobs of fingerprint ``fp`` outside fairshare (made
        if new)."""
        group = self.groups.get(fp)
        if group is None:
            self._groups_made += 1
            group = self.groups[fp] = JobGroup(fp, self._groups_made)
        return group

    def regroup(self, name: str) -> None:
        """Queue ``name``'s pending jobs move to the groups their queue's picker
        and share tree (new) call for, keeping their order keys. The caller
        rebuilds the policy order."""
        queue = self.queues[name]
        for group in self.groups_of_queue(name):
            fair = isinstance(group, FairGroup)
            moved = [j for j in group.jobs if j.queue == name and j.state is PENDING]
            if not moved:
                if fair:
                    self.drop_group(group)  # nothing pending: its accounts may be gone
                continue
            if not fair and self.account_of(moved[0], queue) is None:
                continue  # not fairshare, before or after
            group.jobs = [j for j in group.jobs if j.queue != name]
            group.unsettled = [j for j in group.unsettled if j.queue != name]
            group.live -= len(moved)
            group.head = group.pos = 0
            if fair or not group.live:
                self.drop_group(group)  # a fairshare group holds one queue's jobs
            for job in moved:
                self.place(job, queue)

    def drop_group(self, group: JobGroup) -> None:
        """Forget ``group`` (nothing pending in it any more)."""
        if self.groups.get(group.home) is group:
            del self.groups[group.home]
            group.forget()

    def job_rejected(self, ev: JobSubmitted) -> None:
        """Remember a job that was refused, so its id cannot be reused silently.

        Only its id is kept (the error went out in the ``job_rejected``
        decision): a refused requirement can be large (hostile input), and
        nothing will ever read it again.
        """
        if self.known(ev.job_id):
            raise EventInconsistent(f"duplicate job id {ev.job_id!r}")
        self.ended[ev.job_id] = REJECTED

    def known(self, job_id: str) -> bool:
        """Whether ``job_id`` was ever accepted or refused (ids are never reused)."""
        return job_id in self.jobs or job_id in self.ended

    def job_state(self, job_id: str) -> JobState | None:
        """The state of a live or ended job; ``None`` for an id never seen."""
        job = self.jobs.get(job_id)
        return job.state if job is not None else self.ended.get(job_id)

    def retire(self, job: Job, state: JobState) -> None:
        """End a job that holds nothing (pending, or released): it leaves the live
        jobs; its group (if it was pending) drops it in a later session."""
        if job.state is PENDING and job.group is not None:
            job.group.live -= 1
        job.state = state
        del self.jobs[job.job_id]
        self.ended[job.job_id] = state

    def fingerprint(self, *fields: Any) -> int:
        """Intern a satisfiability key as a small int (O(1) cache lookups later).

        A job's is that of ``(canonical requirement text, min_tasks, max_tasks)``;
        the core computes it once per :class:`JobShape`, not per job."""
        fp = self._fingerprints.get(fields)
        if fp is None:
            fp = self._fingerprints[fields] = len(self._fingerprints) + 1
        return fp

    def job_finished(self, job_id: str) -> Job:
        """A running job ended: free its claims."""
        job = self._job(job_id, "not running")
        if job.state is not RUNNING:
            hint = "; use job_cancelled for a pending job" if job.state is PENDING else ""
            raise EventInconsistent(f"job {job_id!r} is {job.state.value}, not running{hint}")
        self._release(job)
        return job

    def job_cancelled(self, job_id: str) -> Job:
        """Withdraw a pending or running job, freeing what it held."""
        job = self._job(job_id, "")
        if job.state is RUNNING:
            self._release(job)
        else:
            self.pending_count -= 1
            self.retire(job, DONE)
        return job

    def _job(self, job_id: str, not_what: str) -> Job:
        """The live job ``job_id``; an ended or unknown one is an error."""
        job = self.jobs.get(job_id)
        if job is None:
            ended = self.ended.get(job_id)
            if ended is None:
                raise EventInconsistent(f"unknown job {job_id!r}")
            if not_what:
                raise EventInconsistent(f"job {job_id!r} is {ended.value}, {not_what}")
            raise EventInconsistent(f"job {job_id!r} is already {ended.value}")
        return job

    def _release(self, job: Job) -> None:
        self.releases += 1
        free_hosts = self.free_hosts
        freed = 0
        for worker, slots, rusage in job.claims:
            # _freed(worker, slots) for slots >= 0, the total summed once (see
            # commit()). A host redefined smaller while the job ran may have
            # had less than nothing free.
            before = worker.slots - worker.used_slots
            worker.used_slots -= slots
            if worker.usable:
                if before > 0:
                    freed += slots
                elif before + slots > 0:
                    freed += before + slots
                    free_hosts.add(worker)
            for name, amount in rusage:
                left = worker.used.get(name, 0.0) - amount
                if left > AMOUNT_TOLERANCE:
                    worker.used[name] = left
                else:
                    worker.used.pop(name, None)
        self.free_total += freed
        for name, amount in job.shared_claims.items():
            left = self.shared_used.get(name, 0.0) - amount
            if left > AMOUNT_TOLERANCE:
                self.shared_used[name] = left
            else:
                self.shared_used.pop(name, None)
        job.claims = ()
        job.shared_claims = _EMPTY
        end = self.end_of.pop(job, None)
        if end is not None:
            self.ends.remove((end, job.seq, job))
            del self.held[job]
        self.running_count -= 1
        self.retire(job, DONE)

    def _host_lacks(self, worker: Worker, slots: int, need: tuple[tuple[str, float], ...]) -> str:
        """What ``worker`` lacks for one claim of ``slots`` slots and ``need``
        amounts, or ``''``."""
        if not worker.usable:  # down, or removed (worker_removed)
            return f"worker {worker.name} is gone"
        if need:
            lacks = shortfall(worker, slots, _as_want(need))
        else:
            lacks = SLOTS if slots > worker.slots - worker.used_slots else None
        return "" if lacks is None else f"{worker.name} lacks {lacks}"

    def _shared_lacks(self, shared: dict[str, float]) -> str:
        """Which of the ``shared`` amounts a job would take is not free, or ``''``."""
        for name, amount in shared.items():
            free = self.shared_free(name)
            if free is None or amount > free + AMOUNT_TOLERANCE:
                return f"shared {name} exhausted"
        return ""

    def per_host(
        self, claims: Sequence[tuple[Worker, int, tuple[tuple[str, float], ...]]]
    ) -> Sequence[tuple[Worker, int, tuple[tuple[str, float], ...]]]:
        """``claims`` with one entry per host (summed where a host is claimed twice)."""
        return claims if len(claims) == 1 or _distinct(claims) else _per_host(claims)

    def commit(
        self,
        job: Job,
        claims: list[tuple[Worker, int, tuple[tuple[str, float], ...]]],
        shared: dict[str, float],
        now: float = 0.0,
        distinct: bool = False,
    ) -> None:
        """Start ``job`` with ``claims`` in one synchronous step (no await inside),
        at time ``now`` on the core's clock (its estimated end is ``now`` plus
        its run limit, if it has one). ``distinct``: the caller knows that no
        worker has two claims (:meth:`SchedContext.distinct`), so they need no
        merging and no pass to find out.

        Checks every host by the one fit rule (:meth:`_host_lacks`) as it takes it;
        a host that fails gives back the ones taken before it, exactly, and
        raises :class:`XceError`: a bad allocation changes nothing.
        """
        if job.state is not PENDING:
            raise XceError(f"cannot start job {job.job_id!r}: it is {job.state.value}")
        if shared and (problem := self._shared_lacks(shared)):
            raise XceError(f"cannot start {job.job_id!r}: {problem}")
        # One (worker, slots, amounts) per host: a host claimed twice (compound
        # parts) is checked and charged for the sum.
        per_host = claims if distinct else self.per_host(claims)
        job_id = job.job_id
        allocation: list[tuple[Worker, int]] = []
        amounts = False
        held = 0
        free_hosts = self.free_hosts
        for worker, slots, need in per_host:
            # Check and take slots in one pass over the hosts, not two (per-host
            # work is most of benchmarks/bench_simulate_big.py): _host_lacks()
            # inline for a claim of slots alone, which is the usual one. Amounts
            # are taken once every host is known to fit (below), so a failure
            # gives back slots only.
            free = worker.slots - worker.used_slots
            if need or not worker.usable or slots > free:
                problem = self._host_lacks(worker, slots, need)
                if problem:
                    self._give_back(allocation)
                    raise XceError(f"cannot start {job_id!r}: {problem}")
                amounts = amounts or bool(need)
            held += slots
            # _freed(worker, -slots) for a worker just proved usable with
            # ``slots`` free: only a host filled up leaves ``free_hosts``, and
            # free_total falls by ``held``.
            worker.used_slots += slots
            if slots >= free:
                free_hosts.discard(worker)
            allocation.append((worker, slots))
        if amounts:
            # Each host is in per_host once, so each was checked on the amounts
            # it held before this commit.
            for worker, _, need in per_host:
                if need:
                    used = worker.used
                    for name, amount in need:
                        used[name] = used.get(name, 0.0) + amount
        self.free_total -= held
        if shared:
            shared_used = self.shared_used
            for name, amount in shared.items():
                shared_used[name] = shared_used.get(name, 0.0) + amount
            job.shared_claims = dict(shared)
        job.allocation = allocation
        job.claims = claims
        job.state = RUNNING
        limit = job.run_limit
        if limit is not None:
            end = now + limit
            self.end_of[job] = end
            self.held[job] = held
            self.ends.add((end, job.seq, job))
        job.last_reason = None
        self.pending_count -= 1
        self.running_count += 1
        if job.group is not None:
            job.group.live -= 1

    def _give_back(self, taken: list[tuple[Worker, int]]) -> None:
        """Undo the slots a commit took before one of its hosts failed
        (``taken``); ``free_total`` and the amounts were not changed yet."""
        for worker, slots in taken:
            worker.used_slots -= slots
            self.free_hosts.add(worker)  # it had ``slots`` free: usable, not full


# A refused worker_removed names the jobs on the worker by a walk over the
# running jobs (workers keep no list of theirs) when there are at most this many:
# a few milliseconds; beyond, it says how many slots they hold.
_NAME_JOBS_UP_TO = 10_000


def _as_want(need: tuple[tuple[str, float], ...]) -> Want:
    """Amounts taken on one host as a want of one bucket (all per host)."""
    if len(need) == 1:  # the usual rusage[mem=...]
        name, amount = need[0]
        return ((name, 0.0, amount),)
    return tuple([(name, 0.0, amount) for name, amount in need])


def _distinct(claims: Sequence[tuple[Worker, int, tuple[tuple[str, float], ...]]]) -> bool:
    """Whether no worker is claimed twice (the usual: one claim per host)."""
    return len({worker.index for worker, _, _ in claims}) == len(claims)


def _per_host(
    claims: Sequence[tuple[Worker, int, tuple[tuple[str, float], ...]]],
) -> list[tuple[Worker, int, tuple[tuple[str, float], ...]]]:
    """The claims merged per worker (first-claim order): slots and each
    consumable's amount summed."""
    slots_on: dict[Worker, int] = {}
    amounts_on: dict[Worker, dict[str, float]] = {}
    for worker, slots, need in claims:
        slots_on[worker] = slots_on.get(worker, 0) + slots
        if need:
            amounts = amounts_on.setdefault(worker, {})
            for name, amount in need:
                amounts[name] = amounts.get(name, 0.0) + amount
    return [
        (w, slots, tuple(amounts_on[w].items()) if w in amounts_on else ())
        for w, slots in slots_on.items()
    ]


def _job_key(job: Job) -> tuple[Any, ...]:
    return job.key
