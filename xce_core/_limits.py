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
first), which also keeps a sleeping group's reason true whatever the limits do
(a check before the attempt would let commits under a limit change the
category of jobs that sleep).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

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


class Limits:
    """The configured limits and what running jobs hold under each."""

    __slots__ = ("_limits", "_usage")

    def __init__(self) -> None:
        self._limits: list[Limit] = []
        # (limit index, consumer key) -> usage
        self._usage: dict[tuple[int, tuple[str, ...]], _Usage] = {}

    def __bool__(self) -> bool:
        return bool(self._limits)

    def configure(self, limits: Sequence[Limit], running: Iterable[Job]) -> None:
        """Replace the limits (checked whole first) and recount the ``running``
        jobs under them. Raises :class:`LimitError` naming what is wrong."""
        names: set[str] = set()
        for limit in limits:
            where = f"limit {limit.name!r}"
            if limit.name in names:
                raise LimitError(f"{where}: defined twice")
            names.add(limit.name)
            if limit.slots is None and limit.jobs is None and not limit.resources:
                raise LimitError(f"{where}: no slots, jobs or resources to cap")
            for together, each in _DIMENSIONS:
                if getattr(limit, together) is not None and getattr(limit, each) is not None:
                    raise LimitError(f"{where}: both {together} and {each}")
                for attr in (together, each):
                    names_given = getattr(limit, attr)
                    if names_given is not None and not names_given:
                        raise LimitError(f'{where}: {attr} is empty (use ["all"])')
        self._limits = list(limits)
        self._usage = {}
        for job in running:
            self.charge(job, job.claims, dict(job.shared_claims), +1)

    def _keys(self, job: Job) -> list[tuple[int, tuple[str, ...]]]:
        """The (limit, consumer key) pairs that cover ``job``."""
        values = (job.user, job.queue, job.project)
        out = []
        for index, limit in enumerate(self._limits):
            key: list[str] = []
            for (together, each), value in zip(_DIMENSIONS, values, strict=True):
                listed = getattr(limit, together)
                per = getattr(limit, each)
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
                out.append((index, tuple(key)))
        return out

    def check(self, job: Job, claims: Claims, shared: dict[str, float]) -> PendReason | None:
        """Why ``job`` may not take ``claims`` and ``shared``, or ``None``."""
        return self._check(job, sum(n for _, n, _ in claims), _amounts(claims, shared))

    def _check(self, job: Job, slots: int, amounts: dict[str, float]) -> PendReason | None:
        for index, key in self._keys(job):
            limit = self._limits[index]
            used = self._usage.get((index, key)) or _Usage()
            if limit.slots is not None and used.slots + slots > limit.slots:
                return _reached(limit, key, "SLOTS", used.slots, limit.slots)
            if limit.jobs is not None and used.jobs + 1 > limit.jobs:
                return _reached(limit, key, "JOBS", used.jobs, limit.jobs)
            for name, cap in (limit.resources or {}).items():
                have = used.amounts.get(name, 0.0)
                if have + amounts.get(name, 0.0) > cap + 1e-9 and amounts.get(name, 0.0) > 0:
                    return _reached(limit, key, name, have, cap)
        return None

    def charge(self, job: Job, claims: Claims, shared: dict[str, float], sign: int) -> None:
        """Count a job that starts (+1) or ends (-1) with ``claims``/``shared``."""
        if not self._limits:
            return
        slots = sum(n for _, n, _ in claims)
        amounts = _amounts(claims, shared)
        for pair in self._keys(job):
            used = self._usage.get(pair)
            if used is None:
                used = self._usage[pair] = _Usage()
            used.slots += sign * slots
            used.jobs += sign
            for name, amount in amounts.items():
                used.amounts[name] = used.amounts.get(name, 0.0) + sign * amount
            if used.jobs == 0:
                del self._usage[pair]


def queue_limits(event: QueueConfig) -> list[Limit]:
    """The limits LSF's queue shorthands stand for: ``UJOB_LIMIT`` (slots per
    user in the queue) and ``QJOB_LIMIT`` (slots of the whole queue)."""
    limits = []
    if event.ujob_limit is not None:
        limits.append(
            Limit(
                name=f"{event.name}:UJOB_LIMIT",
                queues=[event.name],
                per_user=["all"],
                slots=event.ujob_limit,
            )
        )
    if event.qjob_limit is not None:
        limits.append(
            Limit(name=f"{event.name}:QJOB_LIMIT", queues=[event.name], slots=event.qjob_limit)
        )
    return limits


def _amounts(claims: Claims, shared: dict[str, float]) -> dict[str, float]:
    out = dict(shared)
    for _, _, need in claims:
        for name, amount in need:
            out[name] = out.get(name, 0.0) + amount
    return out


def _reached(limit: Limit, key: tuple[str, ...], what: str, used: float, cap: float) -> PendReason:
    who = []
    for (_, each), value in zip(_DIMENSIONS, key, strict=True):
        if value != "*":
            who.append(f"{each.upper()} {value}")
    scope = f" ({', '.join(who)})" if who else ""
    return PendReason(
        Reason.LIMIT_REACHED, f"limit {limit.name}: {what}{scope}: {used:g}/{cap:g} in use"
    )
