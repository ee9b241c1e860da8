"""The cluster of a trace replay: groups of identical hosts, licences and queues,
from options or a TOML cluster file.

A TOML cluster file holds ``[[group]]`` tables (at least one), and optionally a
``[licences]`` table and ``[[queue]]`` tables::

    [[group]]
    count = 48            # hosts in the group (required): an integer >= 1
    slots = 4             # slots per host (required): 1 to MAX_SLOTS
    name = "n"            # host name prefix (default "h"): n0001, n0002...
    attrs = { partition = 1, type = "x86" }
    resources = { mem = 16384 }     # consumables; mem in MB

    [licences]            # cluster-wide consumables (shared_resource events)
    matlab = 10           # jobs claim them with rusage[matlab=1] (--resreq)

    [[queue]]             # queue_config events; the replay names SWF queue N qN
    name = "q1"
    priority = 50         # default 0
    picker = "fcfs"       # optional: the queue's own picker

The file is decoded by msgspec into :class:`ClusterSpec` (:class:`HostGroup`,
:class:`QueueSpec`): an unknown key, a value of the wrong type or out of range
is an error naming the file and the path of the value
(``c.toml: Expected `int` >= 1 - at `$.group[1].count```; list indexes count
from 0). Host numbers run on across groups sharing a prefix and are zero-padded
to at least four digits. ``name`` is 1 to 64 printable characters without
spaces, and no prefix may be another one followed by digits (``n`` and ``n1``
could both name a host ``n10001``); an attribute is a string, a boolean, an
integer or a finite float (``partition``, which the replay compares with SWF
partition numbers, an integer); a resource or licence total is a finite number
from 0 to MAX_RESOURCE. A replay builds at most ``max_hosts`` hosts,
DEFAULT_MAX_HOSTS unless told otherwise: each costs about 1 KB and 10 us to
register, so a million hosts already take a gigabyte.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Final, TypeAlias

import msgspec
from msgspec import Meta

from events import InputEvent, QueueConfig, SharedResource, WorkerUp
from xce_core import PluginError, XceError, default_registry
from xce_core.sim._swf_record import SwfJob, header_int

__all__ = [
    "DEFAULT_MAX_HOSTS",
    "MAX_RESOURCE",
    "MAX_SLOTS",
    "ClusterSpec",
    "HostGroup",
    "QueueSpec",
    "SimulationError",
    "default_cluster",
    "load_cluster",
]

DEFAULT_MAX_HOSTS: Final = 1_000_000
MAX_SLOTS: Final = 1_000_000
MAX_RESOURCE: Final = 2**53
_MAX_NAME: Final = 64

# The decoded types: msgspec checks these when it reads a file, with the path.
_Count = Annotated[int, Meta(ge=1)]
_Slots = Annotated[int, Meta(ge=1, le=MAX_SLOTS)]
_Prefix = Annotated[str, Meta(min_length=1, max_length=_MAX_NAME, pattern=r"^\S+$")]
_Key = Annotated[str, Meta(min_length=1)]
_Priority = Annotated[int, Meta(ge=-(1 << 31), le=(1 << 31) - 1)]
# Values of attrs, resources and licences are checked by __post_init__, whose
# messages name the key (msgspec's paths stop at the table: `resources[...]`).
AttrValue: TypeAlias = str | bool | int | float


class SimulationError(XceError):
    """A replay cannot go on: a bad cluster description or an inconsistent core reply."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _attr_problem(name: str, value: object) -> str | None:
    if not isinstance(value, str | bool | int | float):
        return "must be a string, a boolean or a number"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if name == "partition" and not _is_int(value):
        return "must be an integer (the SWF partition numbers jobs select)"
    return None


def _resource_problem(name: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be a number"
    if not 0 <= value <= MAX_RESOURCE:  # true for nan
        return f"must be a non-negative finite number up to {MAX_RESOURCE}"
    return None


def _table_problem(
    table: str, values: object, check: Callable[[str, object], str | None]
) -> str | None:
    if not isinstance(values, Mapping):
        return f"{table} must be a table of names, got {values!r}"
    for key, value in values.items():
        if not isinstance(key, str) or not key:
            return f"{table}: names must be non-empty strings, got {key!r}"
        problem = check(key, value)
        if problem is not None:
            return f"{table}.{key} {problem}, got {value!r}"
    return None


def _group_problem(group: HostGroup) -> str | None:
    """The first thing wrong with ``group``, naming the field, or ``None``."""
    if not _is_int(group.count) or group.count < 1:
        return f"count must be a positive integer, got {group.count!r}"
    if not _is_int(group.slots) or not 1 <= group.slots <= MAX_SLOTS:
        return f"slots must be a positive integer up to {MAX_SLOTS}, got {group.slots!r}"
    name = group.name
    if not (
        isinstance(name, str)
        and 0 < len(name) <= _MAX_NAME
        and name.isprintable()
        and not any(char.isspace() for char in name)
    ):
        return f"name must be 1 to {_MAX_NAME} printable characters without spaces, got {name!r}"
    return _table_problem("attrs", group.attrs, _attr_problem) or _table_problem(
        "resources", group.resources, _resource_problem
    )


class HostGroup(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``count`` identical hosts named ``<name>0001``... with ``slots`` slots each.

    Construction checks every field (see the module docstring) and raises
    ``ValueError`` naming the first bad one; decoding also gives its path."""

    count: _Count
    slots: _Slots
    name: _Prefix = "h"
    attrs: dict[_Key, AttrValue] = {}
    resources: dict[_Key, float] = {}

    def __post_init__(self) -> None:
        problem = _group_problem(self)
        if problem is not None:
            raise ValueError(problem)


class QueueSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A queue's priority and, optionally, its own picker (a ``queue_config``)."""

    name: str
    priority: _Priority = 0
    picker: str | None = None


class ClusterSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The hosts of a replay, in the order they are registered with the core,
    its licences (shared resources) and its queues.

    Raises ``ValueError`` when two groups' name prefixes could make the same
    host name (one is the other followed by digits), or a licence total is not
    a finite number from 0 to MAX_RESOURCE."""

    groups: tuple[HostGroup, ...]
    licences: dict[_Key, float] = {}
    queues: tuple[QueueSpec, ...] = ()

    def __post_init__(self) -> None:
        names = {g.name for g in self.groups}
        for name in names:
            stem = name.rstrip("0123456789")
            for cut in range(len(stem), len(name)):
                if name[:cut] in names:
                    raise ValueError(
                        f"host name prefixes {name[:cut]!r} and {name!r} could make the same"
                        " host names: rename one"
                    )
        problem = _table_problem("licences", self.licences, _resource_problem)
        if problem is not None:
            raise ValueError(problem)

    @property
    def hosts(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def total_slots(self) -> int:
        return sum(g.count * g.slots for g in self.groups)

    def has_resource(self, name: str) -> bool:
        return any(name in g.resources for g in self.groups)

    def has_attr(self, name: str) -> bool:
        return any(name in g.attrs for g in self.groups)

    def workers(self) -> list[WorkerUp]:
        """One ``worker_up`` per host. Numbering runs on across groups sharing a
        prefix and is zero-padded to at least 4 digits."""
        totals: dict[str, int] = {}
        for g in self.groups:
            totals[g.name] = totals.get(g.name, 0) + g.count
        counters: dict[str, int] = {}
        out: list[WorkerUp] = []
        for g in self.groups:
            width = max(4, len(str(totals[g.name])))
            resources = {key: float(value) for key, value in g.resources.items()}
            for _ in range(g.count):
                n = counters[g.name] = counters.get(g.name, 0) + 1
                out.append(
                    WorkerUp(
                        name=f"{g.name}{n:0{width}d}",
                        slots=g.slots,
                        attrs=dict(g.attrs),
                        resources=dict(resources),
                    )
                )
        return out

    def setup_events(self) -> list[InputEvent]:
        """The ``shared_resource`` and ``queue_config`` events of the licences and
        queues, applied after the hosts."""
        events: list[InputEvent] = [
            SharedResource(name=name, total=float(total)) for name, total in self.licences.items()
        ]
        events += [
            QueueConfig(name=q.name, priority=q.priority, picker=q.picker) for q in self.queues
        ]
        return events


class _ClusterFile(msgspec.Struct, forbid_unknown_fields=True):
    group: Annotated[list[HostGroup], Meta(min_length=1)]
    licences: dict[_Key, float] = {}
    queue: list[QueueSpec] = []


def default_cluster(
    header: dict[str, str],
    jobs: Sequence[SwfJob],
    *,
    hosts: int | None = None,
    slots: int = 1,
    max_hosts: int = DEFAULT_MAX_HOSTS,
) -> ClusterSpec:
    """``hosts`` x ``slots`` hosts. Without ``hosts``: enough ``slots``-slot hosts for
    the header's MaxProcs, else MaxNodes, else the largest job size (at least 1).

    Raises :class:`SimulationError` when ``slots`` is not from 1 to MAX_SLOTS, or
    when the cluster would have more than ``max_hosts`` hosts (the message says
    how to describe the cluster instead), or for a malformed MaxProcs/MaxNodes."""
    if not 1 <= slots <= MAX_SLOTS:
        raise SimulationError(f"--slots must be from 1 to {MAX_SLOTS}, got {slots}")
    if hosts is not None:
        if not 1 <= hosts <= max_hosts:
            raise SimulationError(f"--hosts must be from 1 to {max_hosts} (--max-hosts)")
        return ClusterSpec((HostGroup(count=hosts, slots=slots),))
    try:
        total, source = header_int(header, "MaxProcs"), "the header's MaxProcs"
        if total is None:
            total, source = header_int(header, "MaxNodes"), "the header's MaxNodes"
    except ValueError as exc:
        raise SimulationError(str(exc)) from None
    if total is None:
        total, source = max((j.size for j in jobs), default=1), "the largest job"
    needed = max(1, -(-total // slots))
    if needed > max_hosts:
        raise SimulationError(
            f"{source} ({total} processors) would make {needed} hosts of {slots}"
            f" slot{'' if slots == 1 else 's'},"
            f" more than the limit of {max_hosts} (--max-hosts): describe the cluster"
            " with --hosts and --slots, or --cluster"
        )
    return ClusterSpec((HostGroup(count=needed, slots=slots),))


def load_cluster(path: Path, *, max_hosts: int = DEFAULT_MAX_HOSTS) -> ClusterSpec:
    """Read a TOML cluster file (see the module docstring). Raises
    :class:`SimulationError` naming the file and the path of anything malformed,
    and when the groups hold more than ``max_hosts`` hosts."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SimulationError(f"{path}: cannot read cluster file: {exc.strerror or exc}") from None
    try:
        spec = msgspec.toml.decode(data, type=_ClusterFile)
    except msgspec.ValidationError as exc:
        raise SimulationError(f"{path}: {exc}") from None
    except (msgspec.DecodeError, UnicodeError) as exc:
        raise SimulationError(f"{path}: cannot read cluster file: {exc}") from None
    total = sum(g.count for g in spec.group)
    if total > max_hosts:
        raise SimulationError(
            f"{path}: {total} hosts in all, more than the limit of {max_hosts} (--max-hosts)"
        )
    names = [q.name for q in spec.queue]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise SimulationError(f"{path}: queue {name!r} is declared twice - at `$.queue[{i}]`")
    registry = default_registry()
    for i, queue in enumerate(spec.queue):
        if queue.picker is not None:
            try:
                registry.picker(queue.picker)
            except PluginError as exc:
                raise SimulationError(f"{path}: {exc} - at `$.queue[{i}].picker`") from None
    try:
        return ClusterSpec(tuple(spec.group), licences=spec.licences, queues=tuple(spec.queue))
    except ValueError as exc:
        raise SimulationError(f"{path}: {exc}") from None
