"""The pending jobs of one shape in one fairshare queue (:class:`FairGroup`).

Under fairshare the order is by share account first (:mod:`xce_core._fairshare`),
but feasibility is by shape: a :class:`FairGroup` is one group of the policy
order, of the unsatisfiable cache and of the sleepers (like any
:class:`~xce_core._model.JobGroup`: a shape that fails fails for every account
at once, at the cost of one group), whose members are taken account by
account. Each account's members form an :class:`AccountRun` (first come first
served within it); the runs sit in the group's own heap by their account's
path key spliced into their first member's key, and the group sits in the
policy order by its first run's key.

Keys only grow within a session (a start lowers its account's priority), so a
run's entry and the group's entry may be too small, never too large: they are
keyed again when they surface (:meth:`FairGroup.first_key`). Between sessions
an account whose priority rose has its runs pushed again (:meth:`FairGroup.lift`).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from xce_core._model import PENDING, GroupHome, Job, JobGroup

if TYPE_CHECKING:
    from xce_core._fairshare import ShareNode

__all__ = ["AccountRun", "FairGroup", "account_key"]


def account_key(account: ShareNode, key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A job's ``key`` with ``account``'s path key after the queue priority and
    picker rank."""
    return (key[0], key[1], *account.path_key(), *key[2:])


class AccountRun:
    """One account's members of a :class:`FairGroup`, first come first served:
    ``jobs[head:]`` holds every pending one (dead entries are dropped now and
    then), ``jobs[pos:]`` those not taken this session. ``ticket`` names its
    valid entry in the group's heap; ``touched``: taken from this session."""

    __slots__ = (
        "account",
        "head",
        "jobs",
        "key",
        "keyed",
        "pos",
        "priority",
        "rid",
        "ticket",
        "touched",
    )

    def __init__(self, account: ShareNode, rid: int) -> None:
        self.account = account
        self.rid = rid
        self.jobs: list[Job] = []
        self.head = 0
        self.pos = 0
        self.ticket = 0
        self.touched = False
        # The key of its valid entry, the member and the account priority it
        # was computed from (unchanged both: the key stands; benchmark B12 of
        # benchmarks/bench_fairshare.py).
        self.key: tuple[Any, ...] = ()
        self.keyed: Job | None = None
        self.priority = 0.0

    def entry(self) -> tuple[Any, ...] | None:
        """Its heap entry, ``(*key, rid, ticket, self)``, by its :meth:`first`
        member, or ``None`` when every member is taken. The key is computed
        again only when that member or its flat account's priority changed; a
        flat account's path key is built inline (:func:`account_key`,
        ``ShareNode.path_key``): a run is entered again at every take, charge
        and rise (benchmarks B11 and B12 of benchmarks/bench_fairshare.py)."""
        jobs = self.jobs
        pos = self.pos
        if pos < len(jobs) and jobs[pos].state is PENDING:
            job = jobs[pos]  # first() without its call, the usual case
        else:
            first = self.first()
            if first is None:
                return None
            job = first
        account = self.account
        if account.depth != 1:
            self.key = account_key(account, job.key)
            self.keyed = job
        elif job is not self.keyed or account.priority != self.priority:
            key = job.key
            self.priority = priority = account.priority
            self.key = (key[0], key[1], -priority, 0, *key[2:])
            self.keyed = job
        return (*self.key, self.rid, self.ticket, self)

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


class FairGroup(JobGroup):
    """Pending jobs of one shape and one fairshare queue, of every account (see
    the module docstring). ``jobs`` holds every member first come first served,
    as a :class:`JobGroup`'s (what settling, sleeping and snapshots read);
    ``runs`` by account id, ``heap`` their entries; ``taken`` the members taken
    this session, ``touched`` the runs they came from; ``held`` the entries of
    runs taken from since the merge last handed its batch over (out of
    ``heap`` until :meth:`release`), by the key they had when taken;
    ``checked``: the merge's mark when it last found ``key`` valid."""

    __slots__ = ("checked", "heap", "held", "runs", "taken", "touched")

    def __init__(self, fingerprint: int, gid: int, home: GroupHome) -> None:
        super().__init__(fingerprint, gid, home)
        self.runs: dict[int, AccountRun] = {}
        self.heap: list[tuple[Any, ...]] = []
        self.held: list[tuple[Any, ...]] = []
        self.taken: list[Job] = []
        self.touched: list[AccountRun] = []
        self.checked: object = None

    # ------------------------------------------------------------ members

    def add(self, job: Job, account: ShareNode) -> None:
        """Add pending ``job`` of ``account`` (after :meth:`insert`)."""
        run = self.runs.get(account.uid)
        if run is None:
            run = self.runs[account.uid] = AccountRun(account, len(self.runs) + 1)
            account.groups.add(self)
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
        if at <= run.pos or run.first() is job:
            self._push(run)

    def _push(self, run: AccountRun) -> None:
        """(Re)enter ``run`` by its first member not taken (none: it leaves)."""
        run.ticket += 1
        entry = run.entry()
        if entry is not None:
            heapq.heappush(self.heap, entry)

    def lift(self, accounts: Iterable[ShareNode]) -> None:
        """These accounts' priority rose (between sessions): their runs move up,
        in the order given."""
        runs = self.runs
        heap = self.heap
        for account in accounts:
            run = runs.get(account.uid)
            if run is not None:
                # _push without its call (benchmark B12 of
                # benchmarks/bench_fairshare.py lifts about 6,000 runs).
                run.ticket += 1
                entry = run.entry()
                if entry is not None:
                    heapq.heappush(heap, entry)

    def rekey(self) -> None:
        """Every run entered again (after every account's priority changed)."""
        for run in self.runs.values():
            run.rewind()
        self._build()

    def _build(self) -> None:
        """The heap made again, at once: one entry per run with a member left."""
        heap = []
        for run in self.runs.values():
            run.ticket += 1
            entry = run.entry()
            if entry is not None:
                heap.append(entry)
        heapq.heapify(heap)
        self.heap = heap
        self.held = []

    def forget(self) -> None:
        """Let go of every member and run (see :meth:`JobGroup.forget`)."""
        super().forget()
        self.runs = {}
        self.heap = []
        self.held = []
        self.taken = []
        self.touched = []

    # ------------------------------------------------------------ sessions

    def begin(self) -> None:
        """Rewind (see :meth:`JobGroup.begin`): every run taken from since the
        last rewind starts again at its first pending member."""
        size = len(self.jobs)
        super().begin()
        if len(self.jobs) < size:
            # The group dropped its dead members: its runs do too.
            for uid, run in list(self.runs.items()):
                run.compact()
                if not run.jobs:
                    del self.runs[uid]
                    run.account.groups.discard(self)
        touched, self.touched = self.touched, []
        self.held = []  # runs taken from: touched, entered again below
        for run in touched:
            run.touched = False
            run.rewind()
            self._push(run)
        self.taken = []
        self.checked = None

    def first_key(self) -> tuple[Any, ...] | None:
        """The key of the next member to take: entries are looked at smallest
        first, held ones with the others (a held run is valid until the batch
        is decided: its account's charge is not known yet), the one at the top
        of the heap keyed again if its account was charged, until one is
        valid; ``None`` when every run is taken or empty."""
        heap = self.heap
        held = self.held
        while heap:
            entry = heap[0]
            if held and held[0] < entry:
                break
            run: AccountRun = entry[-1]
            if entry[-2] != run.ticket:
                heapq.heappop(heap)  # stale: pushed again since
                continue
            # The usual cases inline, without calls (first member pending and
            # keyed, flat account): benchmark B11 of
            # benchmarks/bench_fairshare.py.
            keyed = run.keyed
            account = run.account
            if (
                keyed is not None
                and run.pos < len(run.jobs)
                and run.jobs[run.pos] is keyed
                and keyed.state is PENDING
                and account.depth == 1
            ):
                priority = account.priority
                if priority == run.priority:
                    return run.key
                # Its account was charged since: keyed again as entry() keys
                # it (a start re-keys its account's runs in its other groups,
                # about 9 a start in benchmark B12's first session).
                key = keyed.key
                run.priority = priority
                run.key = (key[0], key[1], -priority, 0, *key[2:])
                heapq.heapreplace(heap, (*run.key, run.rid, run.ticket, run))
                continue
            entered = run.key
            fresh = run.entry()
            if fresh is None:
                heapq.heappop(heap)
                continue
            key = run.key
            if key is not entered and key != entered:
                heapq.heapreplace(heap, fresh)
                continue
            return key
        if held:
            first: AccountRun = held[0][-1]
            return first.key
        return None

    def top_account(self) -> ShareNode:
        """The account of the member :meth:`first_key` keyed (or of the held run
        whose key it gave)."""
        heap = self.heap
        held = self.held
        run: AccountRun
        if held and (not heap or held[0] < heap[0]):
            run = held[0][-1]
        else:
            run = heap[0][-1]
        return run.account

    def take(self) -> Job:
        """Take the member :meth:`first_key` keyed, from the top of the heap (the
        caller hands its batch over before a held run would give the next
        one). Its run is held until :meth:`release`: its account is charged
        only if the job starts, so its next member's key is not known yet; held
        by that key as it is now, the smallest it can be."""
        heap = self.heap
        run: AccountRun = heap[0][-1]
        job = run.jobs[run.pos]
        run.pos += 1
        if not run.touched:
            run.touched = True
            self.touched.append(run)
        self.taken.append(job)
        heapq.heappop(heap)
        held = run.entry()
        if held is not None:
            # Held rather than keyed twice, now and once charged (benchmark
            # B11 of benchmarks/bench_fairshare.py).
            heapq.heappush(self.held, held)
        return job

    def release(self) -> None:
        """The runs held since the last batch enter the heap again, keyed after
        the charges of that batch (which the caller decided)."""
        held, self.held = self.held, []
        for entry in held:
            self._push(entry[-1])

    def covered_pending(self) -> int:
        return sum(1 for job in self.taken if job.state is PENDING)

    def rest_pending(self) -> list[Job]:
        taken = set(self.taken)
        return [job for job in self.jobs[self.head :] if job.state is PENDING and job not in taken]

    def close(self) -> None:
        """Nothing to do: a group settled whole is out of the merge for the rest
        of the session, and its runs are rewound by the next :meth:`begin`."""

    def __repr__(self) -> str:
        return f"FairGroup(fp={self.fingerprint}, live={self.live}, runs={len(self.runs)})"


def _job_key(job: Job) -> tuple[Any, ...]:
    return job.key
