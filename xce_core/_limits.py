"""Resource allocation limits (LSF's ``lsb.resources`` Limit sections).

A limit covers the running jobs whose user, queue and project match its
consumer lists, and caps their slots, their number and the amounts of named
resources they hold. ``users``/``queues``/``projects`` count the listed
consumers together; ``per_user``/``per_queue``/``per_project`` count each on
its own (``all``: every one). The most restrictive applicable limit wins: a
job starts only if, for every limit that covers it, what it would take fits
beside what the limit's consumers already hold.

A separate check from feasibility: a job held back by a limit pends with
``limit_reached`` and never enters the unsatisfiable cache, so a user at a
limit never makes another user's job of the same shape pend. The check runs
after a successful attempt, on the attempt's exact claims, before the commit:
a job that could not start anyway pends for that reason (what to act on
first). One case is checked before the attempt (:meth:`Limits.held`): when
the limit's consumers already hold so much of a cluster-wide limit that the
job is over it whatever hosts it gets, it pends with ``limit_reached`` at
once (its limit is then what to act on: it cannot start before their jobs
end). No group sleeps across sessions while limits are configured: a start
charges its consumers, which can turn what a fresh attempt of a sleeping
member would say into ``limit_reached``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from events import Limit, QueueConfig
from xce_core._errors import XceError
from xce_core._model import Job, Worker
from xce_core._results import PendReason, Reason

__all__ = ["LimitError", "Limits", "queue_limits"]

Claims = Sequence[tuple[Worker, int, tuple[tuple[str, float], ...]]]

_DIMENSIONS = (("users", "per_user"), ("queues", "per_queue"), ("projects", "per_project"))


class LimitError(XceError):
    """A set of limits that cannot be applied (the previous one stays)."""


@dataclass(slots=True)
class _Usage:
    slots: int = 0
    jobs: int = 0
    amounts: dict[str, float] = field(default_factory=dict)


_BY_ORIGIN_HELD = 100_000  # origins whose covering limits are memoised at most

# A limit covering a consumer: (limit index, consumer key, the limit, its usage
# key when it counts the whole cluster else None, whether it caps a resource).
Cover = tuple[int, tuple[str, ...], Limit, tuple[int, tuple[str, ...]] | None, bool]


class _Covering:
    """The limits covering one consumer (:data:`Cover` each, in limit order),
    and, when every one counts the whole cluster and caps no resource (the
    usual per-user or per-queue slot limit), the same as ``(usage key,
    limit)`` pairs in ``plain``: then a check or a charge is a look-up per
    limit, with no per-part tuples (``None`` otherwise). One per consumer,
    shared: never changed by its users."""

    __slots__ = ("covers", "plain")

    def __init__(self, covers: list[Cover]) -> None:
        self.covers = covers
        self.plain: list[tuple[tuple[int, tuple[str, ...]], Limit]] | None = None
        if all(whole is not None and not resources for _, _, _, whole, resources in covers):
            self.plain = [(whole, limit) for _, _, limit, whole, _ in covers if whole is not None]


class Limits:
    """The configured limits and what running jobs hold under each."""

    __slots__ = (
        "_by_origin",
        "_covering",
        "_groups",
        "_held",
        "_hosts",
        "_limits",
        "_usage",
        "_users",
        "by_host",
    )

    def __init__(self) -> None:
        self._limits: list[Limit] = []
        # User groups by name, and each limit's users / per_user lists with
        # the groups they name expanded (None: not restricted, or "all").
        self._groups: dict[str, list[str]] = {}
        self._users: list[tuple[frozenset[str] | None, frozenset[str] | None]] = []
        # (limit index, consumer key + host part) -> usage; the host part is
        # "*" but under per_host limits, whose usage is also found by host.
        self._usage: dict[tuple[int, tuple[str, ...]], _Usage] = {}
        self._hosts: dict[tuple[int, tuple[str, ...]], dict[str, _Usage]] = {}
        # Whether a limit has a host dimension (else no attempt asks host_room).
        self.by_host = False
        # What _keys found for each (user, queue, project): it depends on
        # nothing else, and a session asks it twice per start (check, charge;
        # benchmark B12 of benchmarks/bench_fairshare.py). Emptied by reindex.
        self._covering: dict[tuple[str, str, str], _Covering] = {}
        # The same by job origin (user, queue, project, priority, run limit):
        # the tuple a job holds, no tuple made per look-up. Emptied by reindex.
        self._by_origin: dict[tuple[Any, ...], _Covering] = {}
        # The reasons held() gives, by (limit index, consumer key, what, figure):
        # a held job is looked at every session, and writing its reason was
        # half of that (a NASA replay under a per-user limit,
        # benchmarks/bench_simulate.py's trace). Emptied by reindex.
        self._held: dict[tuple[int, tuple[str, ...], str, int], PendReason] = {}

    def __bool__(self) -> bool:
        return bool(self._limits)

    def configure(
        self,
        limits: Sequence[Limit],
        running: Iterable[Job],
        user_groups: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Replace the limits (checked whole first) and the user groups they may
        name (``None``: keep them), and recount the ``running`` jobs under them.
        Raises :class:`LimitError` naming what is wrong."""
        groups = (
            dict(self._groups)
            if user_groups is None
            else {name: list(members) for name, members in user_groups.items()}
        )
        if "all" in groups:
            raise LimitError('user group "all": the name means every user')
        names: set[str] = set()
        for limit in limits:
            where = f"limit {limit.name!r}"
            if limit.name in names:
                raise LimitError(f"{where}: defined twice")
            names.add(limit.name)
            if limit.slots is None and limit.jobs is None and not limit.resources:
                raise LimitError(f"{where}: no slots, jobs or resources to cap")
            for together, each in (*_DIMENSIONS, ("hosts", "per_host")):
                if getattr(limit, together) is not None and getattr(limit, each) is not None:
                    raise LimitError(f"{where}: both {together} and {each}")
                for attr in (together, each):
                    names_given = getattr(limit, attr)
                    if names_given is not None and not names_given:
                        raise LimitError(f'{where}: {attr} is empty (use ["all"])')
        self._limits = list(limits)
        self._groups = groups
        self.reindex()
        self._usage = {}
        self._hosts = {}
        for job in running:
            self.charge(job, job.claims, dict(job.shared_claims), +1)

    def reindex(self) -> None:
        """What is derived from the limits and the user groups: each limit's
        users with the groups expanded, and whether any limit is by host."""
        self._covering = {}
        self._by_origin = {}
        self._held = {}
        self._users = [
            (self._expand(limit.users), self._expand(limit.per_user)) for limit in self._limits
        ]
        self.by_host = not all(_whole_cluster(limit) for limit in self._limits)

    def _expand(self, names: Sequence[str] | None) -> frozenset[str] | None:
        """``names`` with the user groups among them replaced by their members;
        ``None`` when not given or ``all``."""
        if names is None or "all" in names:
            return None
        out: set[str] = set()
        for name in names:
            out.update(self._groups.get(name, (name,)))
        return frozenset(out)

    def _keys(self, job: Job) -> _Covering:
        """Each limit that covers ``job`` (see :class:`_Covering`)."""
        origin = job._origin
        known = self._by_origin.get(origin)
        if known is None:
            if len(self._by_origin) >= _BY_ORIGIN_HELD:
                # Origins differ by run limit too (a trace's requested times):
                # bounded, as Fairshare.charged's memo is.
                self._by_origin = {}
            known = self._by_origin[origin] = self._keys_of((origin[0], origin[1], origin[2]))
        return known

    def _keys_of(self, values: tuple[str, str, str]) -> _Covering:
        """:meth:`_keys` of a job of ``(user, queue, project)``."""
        known = self._covering.get(values)
        if known is None:
            known = self._covering[values] = _Covering(self._cover(values))
        return known

    def _cover(self, values: tuple[str, str, str]) -> list[Cover]:
        out: list[Cover] = []
        for index, limit in enumerate(self._limits):
            key: list[str] = []
            users, per_users = self._users[index]
            for (together, each), value in zip(_DIMENSIONS, values, strict=True):
                listed = getattr(limit, together)
                per = getattr(limit, each)
                if together == "users":
                    # Groups expanded ("all" kept as it is).
                    listed = listed if users is None else users
                    per = per if per_users is None else per_users
                if listed is not None:
                    if "all" not in listed and value not in listed:
                        break
                    key.append("*")
                elif per is not None:
                    if "all" not in per and value not in per:
                        break
                    key.append(value)
                else:
                    key.append("*")
            else:
                whole = (index, (*key, "*")) if _whole_cluster(limit) else None
                out.append((index, tuple(key), limit, whole, bool(limit.resources)))
        return out

    def _parts(
        self, job: Job, claims: Claims, shared: dict[str, float]
    ) -> list[tuple[tuple[int, tuple[str, ...]], Limit, int, dict[str, float]]]:
        """What ``job`` holding ``claims`` and ``shared`` counts under each limit
        covering it: (its usage key: limit and consumer key with its host
        part, the limit, slots, amounts). A limit with ``hosts`` counts the
        claims on those hosts (none there: it does not cover the job); one
        with ``per_host`` counts each host apart. Amounts are counted only
        under limits that cap a resource (no other reads them)."""
        parts: list[tuple[tuple[int, tuple[str, ...]], Limit, int, dict[str, float]]] = []
        for index, key, limit, whole, resources in self._keys(job).covers:
            if whole is not None:
                slots = claims[0][1] if len(claims) == 1 else sum(n for _, n, _ in claims)
                held = _amounts(claims, shared) if resources else _NO_AMOUNTS
                parts.append((whole, limit, slots, held))
            elif limit.per_host is not None:
                per_host = limit.per_host
                every = "all" in per_host
                for host, (slots, amounts) in _per_host(claims).items():
                    if every or host in per_host:
                        parts.append(((index, (*key, host)), limit, slots, amounts))
            else:
                hosts = limit.hosts
                assert hosts is not None
                on = [claim for claim in claims if claim[0].name in hosts]
                if on:
                    slots = sum(n for _, n, _ in on)
                    parts.append(((index, (*key, "*")), limit, slots, _amounts(on, {})))
        return parts

    def check(self, job: Job, claims: Claims, shared: dict[str, float]) -> PendReason | None:
        """Why ``job`` may not take ``claims`` and ``shared``, or ``None``."""
        plain = self._keys(job).plain
        if plain is not None:
            # _parts() and the loop below for limits of slots and jobs over the
            # whole cluster, without a tuple per limit (the usual limits: a
            # check per start, benchmark B12 of benchmarks/bench_fairshare.py).
            slots = claims[0][1] if len(claims) == 1 else sum(n for _, n, _ in claims)
            usage = self._usage
            for pair, limit in plain:
                used = usage.get(pair) or _NONE
                if limit.slots is not None and used.slots + slots > limit.slots:
                    return _reached(limit, pair[1], "SLOTS", used.slots, limit.slots)
                if limit.jobs is not None and used.jobs + 1 > limit.jobs:
                    return _reached(limit, pair[1], "JOBS", used.jobs, limit.jobs)
            return None
        for pair, limit, slots, amounts in self._parts(job, claims, shared):
            used = self._usage.get(pair) or _NONE
            if limit.slots is not None and used.slots + slots > limit.slots:
                return _reached(limit, pair[1], "SLOTS", used.slots, limit.slots)
            if limit.jobs is not None and used.jobs + 1 > limit.jobs:
                return _reached(limit, pair[1], "JOBS", used.jobs, limit.jobs)
            for name, cap in (limit.resources or {}).items():
                have = used.amounts.get(name, 0.0)
                if have + amounts.get(name, 0.0) > cap + 1e-9 and amounts.get(name, 0.0) > 0:
                    return _reached(limit, pair[1], name, have, cap)
        return None

    def held(self, job: Job) -> PendReason | None:
        """Why ``job`` cannot start whatever hosts it would get, or ``None``: a
        limit counting the whole cluster (no ``hosts``, no ``per_host``) whose
        consumers already hold so many jobs that one more is over its ``jobs``,
        or so many slots that the job's fewest tasks (each a slot at least)
        are over its ``slots``. The same reason :meth:`check` would give after
        an attempt; checked before one, so a user at a limit costs a few
        lookups a job and session, not an attempt each (a replay of the NASA
        trace under a per-user slot limit took more than 10 minutes)."""
        tasks = job.min_tasks
        for index, key, limit, whole, _ in self._keys(job).covers:
            if whole is None or (limit.slots is None and limit.jobs is None):
                continue
            # (A job over a limit it can never be within is parked, never here.)
            used = self._usage.get(whole)
            if used is None:
                continue
            if limit.slots is not None and used.slots + tasks > limit.slots:
                what, figure, cap = "SLOTS", used.slots, limit.slots
            elif limit.jobs is not None and used.jobs + 1 > limit.jobs:
                what, figure, cap = "JOBS", used.jobs, limit.jobs
            else:
                continue
            memo = (index, key, what, figure)
            reason = self._held.get(memo)
            if reason is None:
                reason = _reached(limit, whole[1], what, figure, cap)
                self._remember(memo, reason)
            return reason
        return None

    def room(self, job: Job) -> int | None:
        """The most slots ``job`` may take under the limits counting the whole
        cluster that cap slots (what is left of the tightest), or ``None``
        when none caps them. A job of a task range takes no more than this
        (LSF's ``bsub -n min,max``: as many as are available, up to the
        most); :meth:`held` has made sure its fewest tasks fit in it."""
        usage = self._usage
        most: int | None = None
        for _, _, limit, whole, _ in self._keys(job).covers:
            if whole is not None and limit.slots is not None:
                left = limit.slots - (usage.get(whole) or _NONE).slots
                if most is None or left < most:
                    most = left
        return most

    def never(self, consumer: tuple[str, str, str], tasks: int) -> PendReason | None:
        """Why a job of ``consumer`` (user, queue, project) and at least ``tasks``
        tasks can never start under these limits, whatever else runs, or
        ``None``: a limit counting the whole cluster whose ``slots`` are fewer
        than its tasks, or whose ``jobs`` is 0. Only new limits (or user
        groups they name) can change the answer: the core parks such a job
        out of every session until then (:meth:`PendingQueue.park`)."""
        for index, key, limit, whole, _ in self._keys_of(consumer).covers:
            if whole is not None:
                reason = self._never(index, key, limit, tasks)
                if reason is not None:
                    return reason
        return None

    def never_for(self, job: Job) -> PendReason | None:
        """:meth:`never` for pending ``job`` (``None`` when there are no limits)."""
        if not self._limits:
            return None
        return self.never((job.user, job.queue, job.project), job.min_tasks)

    def _never(
        self, index: int, key: tuple[str, ...], limit: Limit, tasks: int
    ) -> PendReason | None:
        """:meth:`never` for one limit of the whole cluster covering the job."""
        if limit.slots is not None and tasks > limit.slots:
            what, wanted, cap = "SLOTS", tasks, limit.slots
        elif limit.jobs == 0:
            what, wanted, cap = "JOBS", 1, 0
        else:
            return None
        memo = (index, key, f"never {what}", wanted)
        reason = self._held.get(memo)
        if reason is None:
            who = _who(key)
            reason = PendReason(
                Reason.LIMIT_REACHED,
                f"limit {limit.name}: {what}{f' ({who})' if who else ''}:"
                f" {wanted} wanted, more than its {cap}: never within it",
            )
            self._remember(memo, reason)
        return reason

    def _remember(self, memo: tuple[int, tuple[str, ...], str, int], reason: PendReason) -> None:
        if len(self._held) >= _HELD_MEMO:  # distinct consumers and figures are unbounded
            self._held.clear()
        self._held[memo] = reason

    def charge(self, job: Job, claims: Claims, shared: dict[str, float], sign: int) -> None:
        """Count a job that starts (+1) or ends (-1) with ``claims``/``shared``."""
        if not self._limits:
            return
        plain = self._keys(job).plain
        if plain is not None:
            # What the loop below does for check()'s plain limits (a charge
            # per start and end, benchmark B12 of benchmarks/bench_fairshare.py).
            slots = claims[0][1] if len(claims) == 1 else sum(n for _, n, _ in claims)
            usage = self._usage
            for pair, _ in plain:
                used = usage.get(pair)
                if used is None:
                    used = usage[pair] = _Usage()
                used.slots += sign * slots
                used.jobs += sign
                if used.jobs == 0:
                    del usage[pair]
            return
        for pair, _, slots, amounts in self._parts(job, claims, shared):
            index, key = pair
            used = self._usage.get(pair)
            if used is None:
                used = self._usage[pair] = _Usage()
                if key[-1] != "*":
                    self._hosts.setdefault((index, key[:-1]), {})[key[-1]] = used
            used.slots += sign * slots
            used.jobs += sign
            for name, amount in amounts.items():
                used.amounts[name] = used.amounts.get(name, 0.0) + sign * amount
            if used.jobs == 0:
                del self._usage[pair]
                if key[-1] != "*":
                    on = self._hosts[index, key[:-1]]
                    del on[key[-1]]
                    if not on:
                        del self._hosts[index, key[:-1]]

    def host_room(self, job: Job) -> tuple[dict[str, int], PendReason] | None:
        """For a job covered by host limits: the slots it may still take on each
        host where a ``per_host`` limit already holds something, or a ``hosts``
        limit lists (what is left of it; 0: the host is at its limit), and the
        reason to give if that is what keeps it from starting; ``None`` when no
        host is constrained. What a job spreads over several hosts of a
        ``hosts`` limit, or puts on a host where a ``per_host`` limit holds
        nothing yet, is checked after the attempt (:meth:`check`)."""
        rooms: dict[str, int] = {}
        reason: PendReason | None = None
        for index, key, limit, _, _ in self._keys(job).covers:
            if limit.slots is None and limit.jobs is None:
                continue
            if limit.hosts is not None and "all" not in limit.hosts:
                # The listed hosts together: none may take more than is left.
                room = _room(limit, self._usage.get((index, (*key, "*"))) or _NONE)
                for host in limit.hosts:
                    if room < rooms.get(host, 1 << 30):
                        rooms[host] = room
                if room == 0 or reason is None:
                    who = _who(key)
                    reason = PendReason(
                        Reason.LIMIT_REACHED,
                        f"limit {limit.name}: HOSTS {' '.join(limit.hosts)}"
                        f"{' (' + who + ')' if who else ''}: at the limit for this job",
                    )
                continue
            if limit.per_host is None:
                continue
            who = _who(key)
            scope = f"PER_HOST, {who}" if who else "PER_HOST"
            for host, used in self._hosts.get((index, (*key,)), {}).items():
                room = _room(limit, used)
                if limit.jobs is not None and used.jobs >= limit.jobs:
                    what = f"JOBS ({scope}): {limit.jobs}/{limit.jobs}"
                else:
                    what = f"SLOTS ({scope}): {limit.slots}/{limit.slots}"
                if room < rooms.get(host, 1 << 30):
                    rooms[host] = room
                    if reason is None or room == 0:
                        reason = PendReason(
                            Reason.LIMIT_REACHED,
                            f"limit {limit.name}: {what} in use on every host it fits on",
                        )
        if not rooms or reason is None:
            return None
        return rooms, reason


_HELD_MEMO = 10_000


def _whole_cluster(limit: Limit) -> bool:
    """Whether ``limit`` counts what its consumers hold on every host together
    (no ``per_host``; no ``hosts``, or ``hosts = ["all"]``)."""
    hosts = limit.hosts
    return limit.per_host is None and (hosts is None or "all" in hosts)


# What a limit's consumers hold when they hold nothing, and amounts not
# counted (read only, both).
_NONE = _Usage()
_NO_AMOUNTS: dict[str, float] = {}


def queue_limits(event: QueueConfig) -> list[Limit]:
    """The limits LSF's queue shorthands stand for: ``UJOB_LIMIT`` (slots per
    user in the queue), ``QJOB_LIMIT`` (slots of the whole queue) and
    ``HJOB_LIMIT`` (the queue's slots per host)."""
    every = ["all"]
    shorthands: tuple[tuple[str, int | None, list[str] | None, list[str] | None], ...] = (
        ("UJOB_LIMIT", event.ujob_limit, every, None),
        ("QJOB_LIMIT", event.qjob_limit, None, None),
        ("HJOB_LIMIT", event.hjob_limit, None, every),
    )
    return [
        Limit(
            name=f"{event.name}:{what}",
            queues=[event.name],
            per_user=per_user,
            per_host=per_host,
            slots=slots,
        )
        for what, slots, per_user, per_host in shorthands
        if slots is not None
    ]


def _room(limit: Limit, used: _Usage) -> int:
    """Slots one more job covered by ``limit`` may take beside ``used`` (0 when
    its jobs cap is reached; a large number when it caps no slots)."""
    if limit.jobs is not None and used.jobs >= limit.jobs:
        return 0
    return max(limit.slots - used.slots, 0) if limit.slots is not None else 1 << 30


def _amounts(claims: Claims, shared: dict[str, float]) -> dict[str, float]:
    out = dict(shared)
    for _, _, need in claims:
        for name, amount in need:
            out[name] = out.get(name, 0.0) + amount
    return out


def _per_host(claims: Claims) -> dict[str, tuple[int, dict[str, float]]]:
    """Slots and host consumables per host name."""
    out: dict[str, tuple[int, dict[str, float]]] = {}
    for worker, slots, need in claims:
        held, amounts = out.get(worker.name, (0, {}))
        for name, amount in need:
            amounts[name] = amounts.get(name, 0.0) + amount
        out[worker.name] = (held + slots, amounts)
    return out


def _who(key: tuple[str, ...]) -> str:
    """The consumers of a usage key, as ``bjobs -p`` names them."""
    who = []
    for (_, each), value in zip(_DIMENSIONS, key, strict=False):
        if value != "*":
            who.append(f"{each.upper()} {value}")
    return ", ".join(who)


def _reached(limit: Limit, key: tuple[str, ...], what: str, used: float, cap: float) -> PendReason:
    who = _who(key)
    if len(key) > len(_DIMENSIONS) and key[-1] != "*":
        who = f"{who}, PER_HOST {key[-1]}" if who else f"PER_HOST {key[-1]}"
    scope = f" ({who})" if who else ""
    return PendReason(
        Reason.LIMIT_REACHED, f"limit {limit.name}: {what}{scope}: {used:g}/{cap:g} in use"
    )
