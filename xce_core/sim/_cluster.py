"""The cluster of a trace replay: groups of identical hosts, from options or TOML.

A TOML cluster file is a list of ``[[group]]`` tables and nothing else::

    [[group]]
    count = 48            # hosts in the group (required): an integer >= 1
    slots = 4             # slots per host (required): 1 to MAX_SLOTS
    name = "n"            # host name prefix (default "h"): n0001, n0002...
    attrs = { partition = 1, type = "x86" }
    resources = { mem = 16384 }     # consumables; mem in MB

Host numbers run on across groups sharing a prefix and are zero-padded to at
least four digits. Every value is checked (:class:`HostGroup`): ``name`` is 1 to
64 printable characters without spaces, and no prefix may be another one
followed by digits (``n`` and ``n1`` could both name a host ``n10001``); an
attribute is a string, a boolean, an integer or a finite float (``partition``,
which the replay compares with SWF partition numbers, an integer); a resource is
a finite number from 0 to MAX_RESOURCE. A replay builds at most ``max_hosts``
hosts, DEFAULT_MAX_HOSTS unless told otherwise: each costs about 1 KB and 10 us
to register, so a million hosts already take a gigabyte.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from events import WorkerUp
from xce_core import XceError
from xce_core.sim._swf_record import SwfJob, header_int

__all__ = [
    "DEFAULT_MAX_HOSTS",
    "MAX_RESOURCE",
    "MAX_SLOTS",
    "ClusterSpec",
    "HostGroup",
    "SimulationError",
    "default_cluster",
    "load_cluster",
]

DEFAULT_MAX_HOSTS: Final = 1_000_000
MAX_SLOTS: Final = 1_000_000
MAX_RESOURCE: Final = 2**53
_MAX_NAME: Final = 64
_KEYS: Final = ("count", "slots", "name", "attrs", "resources")

AttrValue = str | bool | int | float


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


@dataclass(frozen=True, slots=True)
class HostGroup:
    """``count`` identical hosts named ``<name>0001``... with ``slots`` slots each.

    Construction checks every field (see the module docstring) and raises
    ``ValueError`` naming the first bad one."""

    count: int
    slots: int
    name: str = "h"
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = _group_problem(self)
        if problem is not None:
            raise ValueError(problem)


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """The hosts of a replay, in the order they are registered with the core.

    Raises ``ValueError`` when two groups' name prefixes could make the same
    host name (one is the other followed by digits)."""

    groups: tuple[HostGroup, ...]

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
    :class:`SimulationError` naming the file, the group and the field for
    anything malformed, and when the groups hold more than ``max_hosts`` hosts."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, tomllib.TOMLDecodeError) as exc:
        raise SimulationError(f"{path}: cannot read cluster file: {exc}") from None
    unknown = sorted(set(data) - {"group"})
    if unknown:
        raise SimulationError(f"{path}: unknown top-level keys {unknown}: only [[group]] tables")
    tables = data.get("group")
    if not isinstance(tables, list) or not tables:
        raise SimulationError(f"{path}: expected at least one [[group]] table")
    groups = tuple(_group(t, f"{path}: group {i}") for i, t in enumerate(tables, start=1))
    total = sum(g.count for g in groups)
    if total > max_hosts:
        raise SimulationError(
            f"{path}: {total} hosts in all, more than the limit of {max_hosts} (--max-hosts)"
        )
    try:
        return ClusterSpec(groups)
    except ValueError as exc:
        raise SimulationError(f"{path}: {exc}") from None


def _group(table: Any, where: str) -> HostGroup:
    if not isinstance(table, dict):
        raise SimulationError(f"{where}: not a table")
    name = table.get("name")
    if isinstance(name, str):
        where = f"{where} ({name!r})"
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise SimulationError(f"{where}: unknown keys {unknown} (known: {', '.join(_KEYS)})")
    for key in ("count", "slots"):
        if key not in table:
            raise SimulationError(f"{where}: {key} is required")
    try:
        return HostGroup(
            count=table["count"],
            slots=table["slots"],
            name=table.get("name", "h"),
            attrs=table.get("attrs", {}),
            resources=table.get("resources", {}),
        )
    except ValueError as exc:
        raise SimulationError(f"{where}: {exc}") from None
