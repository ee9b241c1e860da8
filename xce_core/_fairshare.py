"""Fairshare: share trees, dynamic priorities, and where pending jobs of a
fairshare queue sit in the policy order (LSF's fairshare scheduling).

A *share account* (:class:`ShareNode`) is a leaf of a share tree: a user, or
a user group whose members share one account. Hierarchical groups are inner
nodes with a share level of their own. Every node carries what LSF's dynamic
priority needs::

    priority = shares / (cpu_time·CPU_TIME_FACTOR + run_time·RUN_TIME_FACTOR
                         + (1 + job_slots)·RUN_JOB_FACTOR
                         + adjustment·FAIRSHARE_ADJUSTMENT_FACTOR)

The core has no CPU-time feed: ``cpu_time`` and ``adjustment`` are 0, and
``run_time`` is the account's *usage*: slot-hours of its jobs, from the
injected clock, decayed continuously so that an hour of use counts 0.1 h after
``hist_hours`` hours (LSF's HIST_HOURS; 0: no decay). ``job_slots`` is the
slots its running jobs hold now. A group's usage and slots are its members'
sums.

Order: each account's pending jobs in a fairshare queue sit in the policy
order as one entry, its lane (:mod:`xce_core._fairgroup`), by the account's
*path key*: (-priority, id) of each node from the top level down, so the
merge takes the highest priority at each level (hierarchical fairshare), then
FCFS within the account. Users are ordered, not jobs:

- a job that starts lowers its account's priority at once (``job_slots``), so a
  session never hands one user the cluster while others with equal shares
  wait; the order learns it lazily: a lane whose key grew is re-keyed when it
  surfaces (:mod:`xce_core._order`);
- a job that ends raises its account's priority: a top-level account's lanes
  move up as the event is applied (:meth:`Fairshare.ended`), the accounts
  under a group once, before the next session (:meth:`Fairshare.take_risen`);
- usage history enters priorities at each recalculation, every
  ``recalc_interval`` seconds of the clock (0: every session), when the whole
  order is re-keyed, like Slurm's PriorityCalcPeriod. Between two, only the
  accounts whose jobs start or end move. Usage enters them rounded
  (:func:`settled`), so equal histories tie whatever steps counted them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from events import ShareTree, UserGroup
from xce_core._config import FairshareParams
from xce_core._model import RUNNING
from xce_core._state import EventInconsistent

if TYPE_CHECKING:
    from xce_core._fairgroup import Lane
    from xce_core._model import Job, Queue
    from xce_core._registry import Registry
    from xce_core._state import ClusterState

__all__ = ["Fairshare", "ShareNode", "ShareTreeState", "dynamic_priority"]

DEFAULT = "default"
# Levels of hierarchical groups a share tree may nest (LSF trees are a few deep;
# the bound keeps building one, and walking it, shallow).
MAX_DEPTH = 32


# Bits of usage kept when it enters priorities (about 11 significant digits).
_SETTLED_BITS = 36
_BY_ORIGIN_HELD = 100_000  # origins whose account is memoised at most
_SPLIT = float((1 << (53 - _SETTLED_BITS)) + 1)


def settled(usage: float) -> float:
    """``usage`` rounded to ``_SETTLED_BITS`` bits, as it enters priorities.

    Usage is decayed step by step, at every start and end of the account's
    jobs, so two accounts with the same history but different steps differ in
    the last bits (2 units in the last place after a few steps): their tie
    would be decided by rounding, not first come first served. Rounded, equal
    histories give equal priorities (unless the two values straddle a rounding
    boundary: about one chance in 10**4 for such noise)."""
    if 0.0 < usage < 1e300:
        # Veltkamp's split: the high part of a double holds 53 - 17 = 36 bits,
        # rounded to nearest, ties to even, as the exact path below (checked
        # against it, halfway cases included, in tests/core/test_fairshare.py).
        # Every account is settled at every recalculation: a replay of the
        # NASA trace under fairshare recalculates at almost every session
        # (benchmarks/bench_simulate.py, the fairshare row).
        split = usage * _SPLIT
        return split - (split - usage)
    if usage == 0.0 or not math.isfinite(usage):
        return usage
    mantissa, exponent = math.frexp(usage)
    return math.ldexp(round(mantissa * (1 << _SETTLED_BITS)), exponent - _SETTLED_BITS)


def dynamic_priority(
    shares: float, usage_hours: float, job_slots: int, params: FairshareParams
) -> float:
    """LSF's dynamic share priority with no CPU time and no adjustment (see the
    module docstring). A divisor of 0 (every factor 0) counts as a tiny one."""
    divisor = usage_hours * params.run_time_factor + (1 + job_slots) * params.run_job_factor
    return shares / divisor if divisor > 0 else shares * 1e12


class ShareNode:
    """One node of a share tree: an account (a leaf) or a group with a share
    level of its own. ``usage`` is slot-seconds decayed to ``stamp``; ``slots``
    what running jobs of the subtree hold; ``frozen`` the usage as of the last
    recalculation (what the priority reads)."""

    __slots__ = (
        "children",
        "default",
        "depth",
        "frozen",
        "lanes",
        "level",
        "members",
        "name",
        "parent",
        "priority",
        "shares",
        "slots",
        "stamp",
        "top",
        "uid",
        "usage",
        "users",
    )

    def __init__(self, name: str, shares: int, parent: ShareNode | None, uid: int) -> None:
        self.name = name
        self.shares = shares
        self.parent = parent
        self.uid = uid
        self.depth: int = 0 if parent is None else parent.depth + 1
        # The top-level node above (itself at the top level; None for a root).
        self.top: ShareNode | None = (
            None if parent is None else (self if parent.parent is None else parent.top)
        )
        self.slots = 0
        self.usage = 0.0
        self.frozen = 0.0
        self.stamp = 0.0
        self.priority = 0.0
        # A share level (roots and hierarchical groups): accounts by user name
        # (explicit, ``group@`` members, and defaults made on first use), the
        # inner and flat group nodes with their member sets, the default share.
        self.users: dict[str, ShareNode] = {}
        self.members: list[tuple[frozenset[str], ShareNode]] = []
        self.default: int | None = None
        self.level = parent is None
        self.children: list[ShareNode] = []
        # Its lanes in the policy order, by fairshare queue (leaves only).
        self.lanes: dict[str, Lane] = {}

    def path_key(self) -> tuple[float | int, ...]:
        """From the top level down: ``(-priority, 1, uid)`` of each group node,
        then this account's ``(-priority, 0)``. At a tie an account goes before
        a group of its level, and accounts of equal priority under one parent
        are not told apart here: the first-come-first-served fields after the
        path interleave them (so an account whose job was just taken does not
        come straight back at a tie)."""
        if self.depth == 1:
            return (-self.priority, 0)
        parts: list[float | int] = [0, -self.priority]
        node = self.parent
        while node is not None and node.parent is not None:
            parts += (node.uid, 1, -node.priority)
            node = node.parent
        parts.reverse()
        return tuple(parts)

    def leaves(self) -> Iterator[ShareNode]:
        stack = [self]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children)
            else:
                yield node

    def __repr__(self) -> str:
        return f"ShareNode({self.name!r}, shares={self.shares}, priority={self.priority:.4g})"


class ShareTreeState:
    """One share tree (a queue's, or the cluster's) built from a
    :class:`events.ShareTree`. Raises :class:`EventInconsistent` naming what is
    wrong (an unknown or recursive group, a repeated name)."""

    def __init__(self, spec: ShareTree, where: str, uids: Iterator[int]) -> None:
        self.where = where
        self._uids = uids
        self._groups = spec.groups
        self.root = ShareNode("", 0, None, next(uids))
        self._every: list[ShareNode] | None = None
        self._level(self.root, spec.shares, f"{where} shares", ())

    def _level(
        self,
        node: ShareNode,
        entries: Sequence[tuple[str, int]],
        where: str,
        within: tuple[str, ...],
    ) -> None:
        if len(within) > MAX_DEPTH:
            raise EventInconsistent(
                f"{where}: groups nested more than {MAX_DEPTH} deep ({' > '.join(within)})"
            )
        seen: set[str] = set()
        for name, shares in entries:
            if name in seen:
                raise EventInconsistent(f"{where}: {name!r} is listed twice")
            seen.add(name)
            if name == DEFAULT:
                node.default = shares
            elif name.endswith("@"):
                group = self._group(name[:-1], where)
                for member in group.members:
                    if member not in node.users:
                        node.users[member] = self._child(node, member, shares)
            elif name in self._groups:
                if name in within:
                    raise EventInconsistent(f"{where}: group {name!r} contains itself")
                group = self._groups[name]
                child = self._child(node, name, shares)
                node.members.append((frozenset(group.members), child))
                if group.shares is not None:
                    child.level = True
                    self._level(
                        child, group.shares, f"{self.where} group {name} shares", (*within, name)
                    )
            else:
                node.users[name] = self._child(node, name, shares)

    def _group(self, name: str, where: str) -> UserGroup:
        group = self._groups.get(name)
        if group is None:
            raise EventInconsistent(f"{where}: {name + '@'!r} names no user group")
        return group

    def _child(self, parent: ShareNode, name: str, shares: int) -> ShareNode:
        child = ShareNode(name, shares, parent, next(self._uids))
        parent.children.append(child)
        self._every = None
        return child

    def account(self, user: str) -> tuple[ShareNode, bool]:
        """The account charged for ``user``'s jobs, and whether it was made now.
        At each level down: the user's own entry, else the first group listing
        it (a hierarchical group is entered, a flat one is the account), else a
        new entry with the level's ``default`` share, else one with no share (it
        runs only when no one with shares can)."""
        node = self.root
        while True:
            leaf = node.users.get(user)
            if leaf is not None:
                return leaf, False
            for members, child in node.members:
                if user in members:
                    if not child.level:
                        return child, False
                    node = child
                    break
            else:
                shares = node.default if node.default is not None else 0
                leaf = node.users[user] = self._child(node, user, shares)
                return leaf, True

    def every(self) -> list[ShareNode]:
        """Every node but the root, in no particular order: :meth:`nodes` kept
        as a list until a node is added (a recalculation visits them all)."""
        every = self._every
        if every is None:
            every = self._every = list(self.nodes())
        return every

    def nodes(self) -> Iterator[ShareNode]:
        stack = list(self.root.children)
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children)


class Fairshare:
    """The share trees and accounts of a core, and their charges (see the module
    docstring). ``params`` are LSF's factors and the recalculation interval."""

    def __init__(self, params: FairshareParams, registry: Registry, default_picker: str) -> None:
        self.params = params
        self._registry = registry
        self._default_picker = default_picker
        self._fair_pickers: dict[str, bool] = {}
        # Whether any job was ever given an account (sessions then run inline,
        # so a job's charge is seen before the next pick under its account).
        self.used = False
        self._decay = math.log(10) / (params.hist_hours * 3600) if params.hist_hours > 0 else 0.0
        self._uids = Ids()
        self.cluster: ShareTreeState | None = None
        self.queues: dict[str, ShareTreeState] = {}
        # The implicit tree of a fairshare queue with no tree anywhere:
        # every user an equal share.
        self._implicit: ShareTreeState | None = None
        # Running jobs charged, with their account and slots.
        self.running: dict[Job, tuple[ShareNode, int]] = {}
        self._risen: set[ShareNode] = set()
        self.recalculated: float | None = None
        # The account charged for a job of each origin (user, queue, project,
        # priority, run limit: the tuple a job holds), as account() finds it:
        # looked up at every start (benchmark B11 of
        # benchmarks/bench_fairshare.py). Emptied when a tree is installed.
        self.by_origin: dict[tuple[Any, ...], ShareNode] = {}

    @property
    def configured(self) -> bool:
        """Whether a tree was ever set up or an account ever given."""
        return (
            self.used
            or self.cluster is not None
            or bool(self.queues)
            or self._implicit is not None
        )

    def account_of(self, job: Job, queue: Queue) -> ShareNode | None:
        """The account of pending ``job`` in ``queue``; ``None`` unless the queue's
        picker is a fairshare one (:meth:`is_fair`)."""
        if not self.is_fair(queue):
            return None
        self.used = True
        return self.account(job.user, queue.name)

    def is_fair(self, queue: Queue) -> bool:
        """Whether ``queue``'s picker is a fairshare one (it declares
        ``fairshare = True``). Raises :class:`PluginError` for an unknown one."""
        name = queue.picker or self._default_picker
        fair = self._fair_pickers.get(name)
        if fair is None:
            picker = self._registry.picker(name)
            fair = self._fair_pickers[name] = bool(getattr(picker, "fairshare", False))
        return fair

    def configure(
        self, state: ClusterState, queue: str | None, tree: ShareTreeState | None, now: float
    ) -> None:
        """Install ``tree`` for ``queue`` (``None``: the cluster's) and move the
        pending and running jobs it covers to their accounts in it. The caller
        rebuilds the policy order."""
        self.install(queue, tree, now)
        names = [queue] if queue is not None else [q for q in state.queues if q not in self.queues]
        names = [name for name in names if name in state.queues]
        for name in names:
            state.regroup(name)
        # One pass over the jobs, whatever the number of queues.
        covered = set(names)
        running = {
            job: self.account_of(job, state.queues[job.queue])
            for job in state.jobs.values()
            if job.state is RUNNING and job.queue in covered
        }
        self.recharge(running, now)

    # ------------------------------------------------------------ configuration

    def build(self, spec: ShareTree, where: str) -> ShareTreeState:
        """A tree from ``spec`` (raises :class:`EventInconsistent`); not installed."""
        tree = ShareTreeState(spec, where, self._uids)
        for node in tree.nodes():
            node.stamp = self.recalculated or 0.0
            self._prioritise(node)
        return tree

    def tree_for(self, queue: str) -> ShareTreeState:
        tree = self.queues.get(queue) or self.cluster
        if tree is None:
            if self._implicit is None:
                self._implicit = self.build(ShareTree(shares=[(DEFAULT, 1)]), "implicit")
            tree = self._implicit
        return tree

    def install(self, queue: str | None, tree: ShareTreeState | None, now: float) -> None:
        """Make ``tree`` the share tree of ``queue`` (``None``: the cluster's);
        ``None`` removes it. Usage carries over by user name; running jobs are
        charged to their new accounts by :meth:`recharge`."""
        self.by_origin = {}
        old = self.cluster if queue is None else self.queues.get(queue)
        if tree is not None and old is not None:
            self._advance_all(old, now)
            usage = {n.name: n.usage for n in old.nodes() if not n.children}
            for user, amount in usage.items():
                tree.account(user)[0].usage = amount
            _sum_up(tree)
        if tree is not None:
            for node in tree.nodes():
                node.stamp = now
                node.frozen = settled(node.usage)
                self._prioritise(node)
        if queue is None:
            self.cluster = tree
        elif tree is None:
            self.queues.pop(queue, None)
        else:
            self.queues[queue] = tree

    def recharge(self, jobs: Mapping[Job, ShareNode | None], now: float) -> None:
        """Running ``jobs`` are charged to these accounts from now on (after a
        reconfiguration)."""
        for job, account in jobs.items():
            held = self.running.pop(job, None)
            if held is not None:
                self._charge(held[0], -held[1], now)
            if account is not None:
                self.started(job, account, now)

    # ------------------------------------------------------------ charges

    def started(self, job: Job, account: ShareNode, now: float) -> None:
        """``job`` started on its allocation: its account's priority drops now."""
        allocation = job.allocation
        slots = allocation[0][1] if len(allocation) == 1 else sum(n for _, n in allocation)
        self.running[job] = (account, slots)
        self._charge(account, slots, now)

    def ended(self, job: Job, now: float) -> ShareNode | None:
        """A running job ended: its account's priority rises. Returns the
        account when it is a top-level one, whose lanes the caller moves up
        now (the order kept up to date as jobs end, not at the next session:
        benchmark B12 of benchmarks/bench_fairshare.py lifts 1,000 accounts
        after 1,000 finishes); under a group, every account of the top-level
        group moves, once, before the next session (:meth:`take_risen`)."""
        held = self.running.pop(job, None)
        if held is None:
            return None
        account, slots = held
        self._charge(account, -slots, now)
        top = account.top
        if top is account:
            return account
        self._risen.add(top if top is not None else account)
        return None

    def _charge(self, account: ShareNode, slots: int, now: float) -> None:
        # _advance and _prioritise, with their calls saved: one charge per start
        # (benchmark B11 of benchmarks/bench_fairshare.py).
        params = self.params
        node = account
        parent = node.parent
        while parent is not None:  # the account and its groups, up to the root
            if now > node.stamp:
                self._advance(node, now)
            node.slots += slots
            node.priority = dynamic_priority(node.shares, node.frozen / 3600, node.slots, params)
            node, parent = parent, parent.parent

    def _advance(self, node: ShareNode, now: float) -> None:
        """Bring ``node.usage`` to ``now``: decay what was, add what its running
        jobs used since (closed form: exact whatever the step)."""
        dt = now - node.stamp
        if dt <= 0:
            return
        node.stamp = now
        if self._decay:
            kept = math.exp(-self._decay * dt)
            node.usage = node.usage * kept + node.slots * (1.0 - kept) / self._decay
        else:
            node.usage += node.slots * dt

    def _advance_all(self, tree: ShareTreeState, now: float) -> None:
        for node in tree.nodes():
            self._advance(node, now)

    # ------------------------------------------------------------ sessions

    def due(self, now: float) -> bool:
        """Whether usage history should enter priorities now."""
        last = self.recalculated
        return last is None or (now - last >= self.params.recalc_interval and now > last)

    def recalculate(self, now: float) -> None:
        """Every account's usage brought to ``now`` and into its priority (the
        caller re-keys the whole order)."""
        self.recalculated = now
        decay = self._decay
        run_time_factor = self.params.run_time_factor
        run_job_factor = self.params.run_job_factor
        # _advance, settled() and dynamic_priority() inline, each step's decay
        # factor worked out once: every node is visited at every
        # recalculation, and a replay of the NASA trace under fairshare
        # recalculates at most sessions (about a fifth of its time went here:
        # benchmarks/bench_simulate.py, the fairshare row). The same
        # operations in the same order, so the same bits (a property test in
        # tests/core/test_fairshare.py compares them with the functions).
        kept_after: dict[float, float] = {}
        trees = [*self.queues.values(), self.cluster, self._implicit]
        for tree in trees:
            if tree is None:
                continue
            for node in tree.every():
                dt = now - node.stamp
                if dt > 0:
                    node.stamp = now
                    if decay:
                        kept = kept_after.get(dt)
                        if kept is None:
                            kept = kept_after[dt] = math.exp(-decay * dt)
                        node.usage = node.usage * kept + node.slots * (1.0 - kept) / decay
                    else:
                        node.usage += node.slots * dt
                usage = node.usage
                if 0.0 < usage < 1e300:
                    split = usage * _SPLIT
                    frozen = split - (split - usage)
                else:
                    frozen = settled(usage)
                node.frozen = frozen
                divisor = frozen / 3600 * run_time_factor + (1 + node.slots) * run_job_factor
                node.priority = node.shares / divisor if divisor > 0 else node.shares * 1e12
        self._risen.clear()

    def take_risen(self) -> list[ShareNode]:
        """The accounts whose priority rose since the last call."""
        risen, self._risen = self._risen, set()
        # In id order: the same pushes in the same order wherever it runs. (An
        # account is its own leaf: no walk for it, benchmark B12 of
        # benchmarks/bench_fairshare.py lifts about 1,000 a session.)
        out: list[ShareNode] = []
        for node in sorted(risen, key=_uid):
            if node.children:
                out.extend(node.leaves())
            else:
                out.append(node)
        return out

    def charged(self, job: Job) -> ShareNode:
        """The account ``job``'s start charges (:meth:`account`, memoised by
        the job's origin)."""
        origin = job._origin
        account = self.by_origin.get(origin)
        if account is None:
            if len(self.by_origin) >= _BY_ORIGIN_HELD:
                self.by_origin = {}
            account = self.by_origin[origin] = self.account(origin[0], origin[1])
        return account

    def account(self, user: str, queue: str) -> ShareNode:
        """The account ``user``'s jobs in fairshare queue ``queue`` charge."""
        account, made = self.tree_for(queue).account(user)
        if made:
            account.stamp = self.recalculated or 0.0
            self._prioritise(account)
        return account

    def _prioritise(self, node: ShareNode) -> None:
        node.priority = dynamic_priority(node.shares, node.frozen / 3600, node.slots, self.params)


def _uid(node: ShareNode) -> int:
    return node.uid


class Ids:
    """Node ids, from 1 (the next one readable, for snapshots)."""

    __slots__ = ("next",)

    def __init__(self) -> None:
        self.next = 1

    def __iter__(self) -> Ids:
        return self

    def __next__(self) -> int:
        uid = self.next
        self.next = uid + 1
        return uid


def _sum_up(tree: ShareTreeState) -> None:
    """Inner nodes' usage as their members' sums (after usage was carried over)."""

    def total(node: ShareNode) -> float:
        if node.children:
            node.usage = sum(total(child) for child in node.children)
        return node.usage

    for child in tree.root.children:
        total(child)
