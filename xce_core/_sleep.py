"""Blocked groups that sleep across sessions until something can wake them.

A group proven unsatisfiable in a session (its fingerprint failed, Req 7) is
put to sleep at the session's end instead of being queued for the next one:
later sessions neither attempt nor settle it, and count its members as pended
(``session_end.pended``) in O(1). It wakes, and rejoins the policy order at its
place, when an event happens that could let it start *or change the category
it would pend with*:

- any worker event (``worker_up``, ``worker_down``, ``worker_removed``), any
  ``shared_resource`` or ``queue_config`` event: every sleeping group wakes;
- capacity freed (a running job finished or was cancelled) on a usable host
  its select can match: the groups watching that select wake, each once the
  usable hosts have at least as many free slots in all as its jobs ask for
  tasks (its *need*; a group of wider jobs stays asleep until then);
- for a *fragile* group, any freed capacity at all, and any session that may
  commit something: one that has queued groups to cover, unless each of them
  failed in the last session and nothing since could help it (such a session
  is *barren*: :attr:`PendingQueue.barren`).

Why this never changes a decision: capacity that is not freed only shrinks,
and feasibility is monotone in capacity, so a sleeping group that is not woken
would fail again. A group left asleep below its need would too: each task takes
a slot, so no job of it fits in fewer free slots than its fewest tasks, and only
a release (which looks again) or a worker event (which wakes every group) adds
free slots. Its pend category would also be the same: for a *plain*
group (each primary: a select on static attributes or none, no ``rusage``, no
``order[]``, ``same[]``, host-dependent ``span`` or compound parts), the
category depends only on which usable hosts match its selects, and on nothing
that shrinking capacity can change (``no_workers``, ``no_matching_host`` or
``not_enough_slots``). A *fragile* group's category also depends on how full
its hosts are (``resource_unavailable`` against ``not_enough_slots``, or a
licence), so it sleeps only while nothing at all is committed or freed after
its reason was found:
it is put to sleep only when its reason was found on the capacity the session
ends with: for a requirement of one primary, when it failed after the session's
last commit; for a tree, only by a session that committed nothing (an option or a
part of it may have been explained, and cached, at any point of the session),
and it wakes before any session that could commit. A barren session commits
nothing: each group it covers failed on at least the capacity there is now,
and feasibility is monotone in capacity; so what the fragile sleepers were told
still holds after it.

Groups only sleep when the session cache is on, outside strict FIFO (which
stops at the first job that cannot start, so it needs no sleep to cost what it
decides), and when both allocators declare ``capacity_only`` (their answers
depend on capacity alone, as the built-ins' do).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from xce_core._model import Job, JobGroup, Worker
from xce_core._results import PendReason
from xce_core.resreq import Alternative, Compound, ResReq, SelectExpr

__all__ = ["Sleepers", "watch"]


def reads_free(select: SelectExpr | None, consumables: set[str]) -> bool:
    """Whether ``select`` reads free amounts (``slots``, a consumable): how full
    hosts are, as the session that evaluates it began."""
    return select is not None and bool(select.names & consumables or "slots" in select.names)


def watch(resreq: ResReq, consumables: set[str]) -> tuple[SelectExpr | None, ...] | None:
    """The selects whose freed hosts can wake a group of ``resreq`` (``None`` in
    the tuple: any host), or ``None`` when the group is *fragile* (see the
    module docstring)."""
    selects: list[SelectExpr | None] = []

    def plain(node: ResReq) -> bool:
        if isinstance(node, Compound):
            return False
        if isinstance(node, Alternative):
            return all(plain(option) for option in node.options)
        select = node.select
        if reads_free(select, consumables):
            return False  # reads free amounts: how full hosts are
        if node.rusage or node.order or node.same:
            return False
        if node.span is not None and node.span.varies:
            return False
        selects.append(select)
        return True

    return tuple(selects) if plain(resreq) else None


class _Watch:
    """The plain groups sleeping on one select: by gid, each with its need, and
    by need (a heap of ``(need, gid)`` that may hold entries of groups woken
    since, rebuilt once they are as many as the sleepers)."""

    __slots__ = ("members", "needs", "select")

    def __init__(self, select: SelectExpr | None) -> None:
        self.select = select
        self.members: dict[int, tuple[JobGroup, int]] = {}
        self.needs: list[tuple[int, int]] = []

    def add(self, group: JobGroup, need: int) -> None:
        self.members[group.gid] = (group, need)
        needs = self.needs
        heapq.heappush(needs, (need, group.gid))
        if len(needs) > 2 * len(self.members) + 32:
            self.needs = [(n, gid) for gid, (_, n) in self.members.items()]
            heapq.heapify(self.needs)

    def remove(self, gid: int) -> bool:
        """Forget ``gid``; whether it was here."""
        return self.members.pop(gid, None) is not None


class Sleepers:
    """The sleeping groups, indexed by what can wake them."""

    __slots__ = ("_by_select", "_fragile", "_woken", "groups", "jobs", "unsettled")

    def __init__(self) -> None:
        self.groups: dict[int, JobGroup] = {}  # by gid
        # Pending members of sleeping groups: pended by every session, uncounted.
        self.jobs = 0
        # Sleeping groups with members added since they fell asleep: those
        # members still need their first pend decision.
        self.unsettled: dict[int, JobGroup] = {}
        # Plain groups by the text of a select they watch (None: any host).
        self._by_select: dict[str | None, _Watch] = {}
        self._fragile: dict[int, JobGroup] = {}
        self._woken: list[JobGroup] = []

    def __len__(self) -> int:
        return len(self.groups)

    def sleep(
        self,
        group: JobGroup,
        reason: PendReason,
        selects: tuple[SelectExpr | None, ...] | None,
        need: int,
    ) -> None:
        """Put ``group`` to sleep: every pending member reports ``reason`` (they
        were all covered by the session that proved it unsatisfiable).
        ``selects``: what :func:`watch` says of it; ``need``: its jobs' fewest
        tasks (a plain group wakes on a release only once that many slots are
        free)."""
        group.asleep = reason
        group.settled_reason = reason.category
        group.unsettled = []
        self.groups[group.gid] = group
        self.jobs += group.live
        if selects is None:
            self._fragile[group.gid] = group
            return
        for select in selects:
            text = select.text if select is not None else None
            entry = self._by_select.get(text)
            if entry is None:
                entry = self._by_select[text] = _Watch(select)
            entry.add(group, need)

    # ------------------------------------------------------------------ events

    def submitted(self, job: Job) -> None:
        """A pending job joined a sleeping group."""
        group = job.group
        assert group is not None
        assert group.asleep is not None
        self.jobs += 1
        self.unsettled[group.gid] = group

    def cancelled(self, group: JobGroup) -> None:
        """A pending member of a sleeping group was cancelled."""
        self.jobs -= 1
        if group.live == 0:
            self._wake(group)  # nothing left to sleep: it leaves the order

    def released(self, workers: Iterable[Worker], free: int) -> None:
        """Capacity was freed on ``workers``; the usable hosts now have ``free``
        slots free in all."""
        if self._fragile:
            for group in list(self._fragile.values()):
                self._wake(group)
        if not self._by_select:
            return
        # The selects no freed host has matched yet in this release.
        unmatched = dict(self._by_select)
        for worker in workers:
            if not unmatched:
                return
            if not worker.usable:
                continue  # capacity no session can use
            for text, entry in list(unmatched.items()):
                select = entry.select
                if select is None or select.evaluate(worker.values):
                    del unmatched[text]
                    self._wake_within(entry, free)

    def _wake_within(self, entry: _Watch, free: int) -> None:
        """Wake the groups sleeping on ``entry`` whose need is at most ``free``."""
        needs, members = entry.needs, entry.members
        while needs and needs[0][0] <= free:
            member = members.get(heapq.heappop(needs)[1])
            if member is not None:
                self._wake(member[0])

    def wake_all(self) -> None:
        """Wake every sleeping group (a worker, queue or shared-resource event)."""
        for group in self.groups.values():
            group.asleep = None
            self._woken.append(group)
        self.groups.clear()
        self.unsettled.clear()
        self._by_select.clear()
        self._fragile.clear()
        self.jobs = 0

    def wake_fragile(self) -> None:
        """Wake every fragile group (a session that may commit is about to run)."""
        for group in list(self._fragile.values()):
            self._wake(group)

    def take_woken(self) -> list[JobGroup]:
        """The groups woken since the last call (to be queued again)."""
        woken, self._woken = self._woken, []
        return woken

    def _wake(self, group: JobGroup) -> None:
        if group.asleep is None:
            return
        group.asleep = None
        del self.groups[group.gid]
        self.jobs -= group.live
        self.unsettled.pop(group.gid, None)
        if self._fragile.pop(group.gid, None) is None:
            for text, entry in list(self._by_select.items()):
                if entry.remove(group.gid) and not entry.members:
                    del self._by_select[text]
        self._woken.append(group)
