"""Fairshare's pending jobs: by shape for feasibility, by account for order.

Under fairshare the order is by share account first (:mod:`xce_core._fairshare`),
but feasibility is by shape. So each pending job of a fairshare queue is in
two places:

- its :class:`FairGroup`, the jobs of one shape in one queue: a group of the
  unsatisfiable cache and of the sleepers like any
  :class:`~xce_core._model.JobGroup` (a shape that fails fails for every
  account at once, at the cost of one group);
- its account's :class:`Lane` in that queue, the order entry: one per
  account and queue, keyed by the account's path key spliced into the key of
  its first pending job (first come first served within an account, across
  shapes).

They meet in :class:`AccountRun`, one account's members of one group: a lane
holds its runs in a heap by each run's first member, and a group holds its
runs by account. Charging an account moves one entry, its lane, not one in
every group it has jobs in (benchmark B12 of benchmarks/bench_fairshare.py:
each start re-keyed about 17 runs when groups were ordered by account).

Keys only grow within a session (a start lowers its account's priority), so a
lane's entry may hold a key too small, never too large: the merge
(:meth:`xce_core._order.PolicyOrder.merge`) keys a lane again when it
surfaces. Whatever can make a lane's key smaller pushes it again
(:meth:`Lanes.touch`): a job joining it, a run rewound after a session, a
group waking, an account whose priority rose.

A lane may hold runs of groups that sleep or that failed this session: the
merge drops them from the lane when they surface, into their group's ``out``,
and the group puts them back as it is rewound (:meth:`FairGroup.begin`: after
the session, or as it wakes).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from xce_core._model import PENDING, GroupHome, Job, JobGroup

if TYPE_CHECKING:
    from xce_core._fairshare import ShareNode

__all__ = ["AccountRun", "FairGroup", "Lane", "Lanes", "account_key"]


def account_key(account: ShareNode, key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A job's ``key`` with ``account``'s path key after the queue priority and
    picker rank."""
    return (key[0], key[1], *account.path_key(), *key[2:])


class AccountRun:
    """One account's members of a :class:`FairGroup`, first come first served:
    ``jobs[head:]`` holds every pending one (dead entries are dropped now and
    then), ``jobs[pos:]`` those not taken this session. In its lane's heap by
    its first member not taken (``keyed``) while ``inlane``; ``ticket`` names
    that entry. ``touched``: taken from this session."""

    __slots__ = (
        "account",
        "group",
        "head",
        "inlane",
        "jobs",
        "keyed",
        "lane",
        "pos",
        "ticket",
        "touched",
    )

    def __init__(self, account: ShareNode, group: FairGroup, lane: Lane) -> None:
        self.account = account
        self.group = group
        self.lane = lane
        self.jobs: list[Job] = []
        self.head = 0
        self.pos = 0
        self.ticket = 0
        self.touched = False
        self.inlane = False
        self.keyed: Job | None = None

    def first(self) -> Job | None:
        """The first member not taken this session (dead entries skipped)."""
        jobs = self.jobs
        pos = self.pos
        end = len(jobs)
        while pos < end and jobs[pos].state is not PENDING:
            pos += 1
        self.pos = pos
        return jobs[pos] if pos < end else None

    def rewind(self) -> None:
        """Back to the first pending member (dead ones before it skipped once)."""
        self.pos = self.head
        self.first()
        self.head = self.pos

    def compact(self) -> None:
        """Drop every dead member (when the group drops its own)."""
        self.jobs = [job for job in self.jobs if job.state is PENDING]
        self.head = self.pos = 0

    def __repr__(self) -> str:
        return f"AccountRun({self.account.name!r}, jobs={len(self.jobs)})"


class Lane:
    """One account's pending jobs in one fairshare queue, across shapes: its
    runs in ``heap`` by their first member (``(*job.key, gid, ticket, run)``).
    In the policy order by ``key`` (the account's path key spliced into its
    first run's first member's key) while ``queued``; ``ticket`` names that
    entry, ``lid`` (negative: never a group id) tells lanes apart.
    ``computed`` the key last worked out, from the member's key ``keyed`` and
    the flat account priority ``priority`` (unchanged both: it stands; a
    member keyed again, as its queue changed, has a new key).
    ``checked``: the merge's mark when it last found ``key`` valid."""

    __slots__ = (
        "account",
        "bound",
        "checked",
        "computed",
        "heap",
        "key",
        "keyed",
        "lid",
        "priority",
        "queued",
        "ticket",
    )

    def __init__(self, account: ShareNode, lid: int) -> None:
        self.account = account
        self.lid = lid
        self.heap: list[tuple[Any, ...]] = []
        self.bound = _BOUND  # compacted past this size (as Lanes.heap is)
        self.key: tuple[Any, ...] = ()
        self.computed: tuple[Any, ...] = ()
        self.keyed: tuple[Any, ...] | None = None
        self.priority = 0.0
        self.queued = False
        self.ticket = 0
        self.checked: object = None

    def push(self, run: AccountRun) -> None:
        """(Re)enter ``run`` by its first member not taken (none: it leaves)."""
        run.ticket += 1
        job = run.first()
        if job is None:
            run.inlane = False
            return
        run.keyed = job
        run.inlane = True
        heap = self.heap
        heapq.heappush(heap, (*job.key, run.group.gid, run.ticket, run))
        if len(heap) > self.bound:
            self.bound = _compact(heap)

    def first_run(self) -> AccountRun | None:
        """The run with the first member not taken, its entry keyed afresh if
        that member changed (runs with none left leave the heap)."""
        heap = self.heap
        while heap:
            entry = heap[0]
            run: AccountRun = entry[-1]
            if entry[-2] != run.ticket:
                heapq.heappop(heap)  # stale: pushed again since
                continue
            keyed = run.keyed
            jobs = run.jobs
            pos = run.pos
            if pos < len(jobs) and jobs[pos] is keyed and keyed.state is PENDING:
                return run
            job = run.first()
            if job is None:
                heapq.heappop(heap)
                run.inlane = False
                continue
            run.keyed = job
            heapq.heapreplace(heap, (*job.key, run.group.gid, run.ticket, run))
        return None

    def drop_first(self) -> AccountRun:
        """Take the run :meth:`first_run` gave out of the heap (its group sleeps
        or failed this session): its group puts it back (``out``)."""
        run: AccountRun = heapq.heappop(self.heap)[-1]
        run.inlane = False
        run.group.out.append(run)
        return run

    def key_of(self, run: AccountRun) -> tuple[Any, ...]:
        """The lane's key with ``run`` (from :meth:`first_run`) first; a flat
        account's path key built inline, and not at all when neither the
        member nor the priority changed (a lane is keyed at every take,
        charge and rise: benchmarks B11 and B12 of
        benchmarks/bench_fairshare.py)."""
        account = self.account
        job = run.keyed
        assert job is not None
        if account.depth != 1:
            return account_key(account, job.key)
        priority = account.priority
        key = job.key
        if key is not self.keyed or priority != self.priority:
            self.priority = priority
            self.keyed = key
            self.computed = (key[0], key[1], -priority, 0, *key[2:])
        return self.computed

    def held_key(self) -> tuple[Any, ...] | None:
        """The lane's key after its batch was decided, for a lane held since
        :meth:`key_of` keyed it by its next member (nothing takes from a held
        lane or drops a run from it). For a flat account only the priority
        may have changed: :meth:`key_of`'s rule, without looking at the runs
        again (3% of benchmark B11's instructions in
        benchmarks/bench_fairshare.py, one release a take)."""
        account = self.account
        key = self.keyed
        if account.depth != 1 or key is None:
            run = self.first_run()
            return None if run is None else self.key_of(run)
        priority = account.priority
        if priority != self.priority:
            self.priority = priority
            self.computed = (key[0], key[1], -priority, 0, *key[2:])
        return self.computed

    def __repr__(self) -> str:
        return f"Lane({self.account.name!r}, runs={len(self.heap)})"


class Lanes:
    """Every lane's entry in the policy order (``heap``: ``(*key, lid, ticket,
    lane)``), shared by the fair groups (which push what they rewind) and the
    order (which merges it with the plain groups' heap)."""

    __slots__ = ("_made", "bound", "heap")

    def __init__(self) -> None:
        self.heap: list[tuple[Any, ...]] = []
        self._made = 0
        self.bound = _BOUND  # compacted past this size (see touch)

    def lane(self, account: ShareNode, queue: str) -> Lane:
        """``account``'s lane in fairshare queue ``queue`` (made if new)."""
        lane = account.lanes.get(queue)
        if lane is None:
            self._made += 1
            lane = account.lanes[queue] = Lane(account, -self._made)
        return lane

    def touch(self, lane: Lane) -> None:
        """``lane``'s key may be smaller now: enter it again if so (or if it is
        out of the order and has a run)."""
        run = lane.first_run()
        if run is None:
            return
        key = lane.key_of(run)
        if lane.queued and not key < lane.key:
            return
        lane.key = key
        lane.queued = True
        lane.ticket += 1
        heap = self.heap
        heapq.heappush(heap, (*key, lane.lid, lane.ticket, lane))
        if len(heap) > self.bound:
            # Entries left behind by lanes entered again pile up where no
            # merge reaches them (benchmark B12 of benchmarks/bench_fairshare.py
            # enters about 2,000 lanes again a session).
            self.bound = _compact(heap)

    def enter(self, run: AccountRun) -> None:
        """(Re)enter ``run`` in its lane, and the lane in the order if its key
        may be smaller now."""
        run.lane.push(run)
        self.touch(run.lane)

    def lift(self, accounts: Iterable[ShareNode]) -> None:
        """These accounts' priority rose (between sessions): their lanes move up,
        in the order given."""
        touch = self.touch
        for account in accounts:
            for lane in account.lanes.values():
                touch(lane)

    def relane(self) -> None:
        """Every lane in the order keyed again, at once (every account's
        priority changed: a fairshare recalculation; runs are keyed by their
        jobs' keys, which did not)."""
        entered = [entry[-1] for entry in self.heap if entry[-2] == entry[-1].ticket]
        self.clear()
        for lane in entered:
            self.touch(lane)

    def clear(self) -> None:
        """Empty the order's side (a rebuild enters every lane again)."""
        for entry in self.heap:
            entry[-1].queued = False
        self.heap = []


class FairGroup(JobGroup):
    """Pending jobs of one shape and one fairshare queue, of every account (see
    the module docstring). ``jobs`` holds every member first come first served,
    as a :class:`JobGroup`'s (what settling, sleeping and snapshots read);
    ``runs`` by account id; ``lanes`` the order's lanes. Within a session:
    ``taken`` the members taken, ``touched`` the runs they came from, ``out``
    runs dropped from their lanes (see :meth:`Lane.drop_first`), ``left`` the
    pending members not taken, ``done`` the session that settled it whole or
    took its last member."""

    __slots__ = ("done", "lanes", "left", "out", "runs", "taken", "touched")

    def __init__(self, fingerprint: int, gid: int, home: GroupHome, lanes: Lanes) -> None:
        super().__init__(fingerprint, gid, home)
        self.lanes = lanes
        self.runs: dict[int, AccountRun] = {}
        self.taken: list[Job] = []
        self.touched: list[AccountRun] = []
        self.out: list[AccountRun] = []
        self.left = 0
        self.done = 0

    @property
    def queue_name(self) -> str:
        home = self.home
        assert isinstance(home, tuple)
        return home[1]

    # ------------------------------------------------------------ members

    def add(self, job: Job, account: ShareNode) -> None:
        """Add pending ``job`` of ``account`` (after :meth:`insert`)."""
        run = self.runs.get(account.uid)
        if run is None:
            lane = self.lanes.lane(account, self.queue_name)
            run = self.runs[account.uid] = AccountRun(account, self, lane)
        jobs = run.jobs
        if not jobs or jobs[-1].key <= job.key:
            jobs.append(job)
            at = len(jobs) - 1
        else:
            at = bisect.bisect_right(jobs, job.key, key=_job_key)
            jobs.insert(at, job)
            if at < run.pos:
                # Before what the session has not taken yet: a rewind sees it.
                run.head = min(run.head, at)
                run.pos = at
        if at <= run.pos or not run.inlane or run.first() is job:
            self.lanes.enter(run)

    def rekey(self) -> None:
        """Every run rewound and entered again (after every account's priority
        changed, or the order was rebuilt)."""
        self.touched = []
        self.out = []
        for run in self.runs.values():
            run.touched = False
            run.rewind()
            self.lanes.enter(run)

    def forget(self) -> None:
        """Let go of every member and run (see :meth:`JobGroup.forget`): the
        runs' lane entries go stale."""
        super().forget()
        for run in self.runs.values():
            run.jobs = []
            run.ticket += 1
            run.inlane = False
        self.runs = {}
        self.taken = []
        self.touched = []
        self.out = []

    # ------------------------------------------------------------ sessions

    def begin(self) -> None:
        """Rewind (see :meth:`JobGroup.begin`): every run taken from since the
        last rewind starts again at its first pending member, and it and every
        run dropped from its lane enter their lanes again."""
        size = len(self.jobs)
        super().begin()
        if len(self.jobs) < size:
            # The group dropped its dead members: its runs do too.
            for uid, run in list(self.runs.items()):
                run.compact()
                if not run.jobs:
                    del self.runs[uid]
                    run.ticket += 1
                    run.inlane = False
        touched, self.touched = self.touched, []
        out, self.out = self.out, []
        lanes = self.lanes
        for run in touched:
            run.touched = False
            pos = run.pos
            run.rewind()
            # Entered again only when it moved back (a member it gave did not
            # start) or left its lane: else its entry, and its lane's, hold a
            # key no larger than its first member's now (benchmark B12 of
            # benchmarks/bench_fairshare.py rewinds about 1,000 runs a session,
            # nearly all of whose members started).
            if (run.pos < pos or not run.inlane) and self.runs.get(run.account.uid) is run:
                lanes.enter(run)
        for run in out:
            if not run.inlane and self.runs.get(run.account.uid) is run:
                lanes.enter(run)
        self.taken = []

    def take(self, run: AccountRun) -> Job:
        """Take ``run``'s first member not taken (``run`` is
        :meth:`Lane.first_run`'s): its lane keys it again when it surfaces."""
        job = run.jobs[run.pos]
        run.pos += 1
        if not run.touched:
            run.touched = True
            self.touched.append(run)
        self.taken.append(job)
        self.left -= 1
        return job

    def covered_pending(self) -> int:
        return sum(1 for job in self.taken if job.state is PENDING)

    def rest_pending(self) -> list[Job]:
        taken = set(self.taken)
        return [job for job in self.jobs[self.head :] if job.state is PENDING and job not in taken]

    def close(self) -> None:
        """Nothing to do: a group settled whole is out of the merge for the rest
        of the session (``done``), and its runs are rewound by the next
        :meth:`begin`."""

    def __repr__(self) -> str:
        return f"FairGroup(fp={self.fingerprint}, live={self.live}, runs={len(self.runs)})"


def _job_key(job: Job) -> tuple[Any, ...]:
    return job.key


_BOUND = 64


def _compact(heap: list[tuple[Any, ...]]) -> int:
    """Keep only ``heap``'s valid entries (those whose ticket is their
    owner's), in place, and return the size past which to compact it again:
    once stale entries are as many as the valid ones (amortised O(1) a
    push)."""
    heap[:] = [entry for entry in heap if entry[-2] == entry[-1].ticket]
    heapq.heapify(heap)
    return max(_BOUND, 2 * len(heap))
