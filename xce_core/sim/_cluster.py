"""The cluster of a trace replay: groups of identical hosts, from options or TOML.

A TOML cluster file is a list of ``[[group]]`` tables::

    [[group]]
    count = 48            # hosts in the group (required, >= 1)
    slots = 4             # slots per host (required, >= 1)
    name = "n"            # host name prefix (default "h"): n0001, n0002...
    attrs = { partition = 1, type = "x86" }
    resources = { mem = 16384 }     # consumables; mem in MB

Host numbers run on across groups sharing a prefix and are zero-padded to at
least four digits.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from events import WorkerUp
from xce_core import XceError
from xce_core.sim._swf import SwfJob, header_int

__all__ = ["ClusterSpec", "HostGroup", "SimulationError", "default_cluster", "load_cluster"]

AttrValue = str | bool | int | float


class SimulationError(XceError):
    """A replay cannot go on: a bad cluster description or an inconsistent core reply."""


@dataclass(frozen=True, slots=True)
class HostGroup:
    """``count`` identical hosts named ``<name>0001``... with ``slots`` slots each."""

    count: int
    slots: int
    name: str = "h"
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """The hosts of a replay, in the order they are registered with the core."""

    groups: tuple[HostGroup, ...]

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
            for _ in range(g.count):
                n = counters[g.name] = counters.get(g.name, 0) + 1
                out.append(
                    WorkerUp(
                        name=f"{g.name}{n:0{width}d}",
                        slots=g.slots,
                        attrs=dict(g.attrs),
                        resources=dict(g.resources),
                    )
                )
        return out


def default_cluster(
    header: dict[str, str],
    jobs: Sequence[SwfJob],
    *,
    hosts: int | None = None,
    slots: int = 1,
) -> ClusterSpec:
    """``hosts`` x ``slots`` hosts. Without ``hosts``: enough ``slots``-slot hosts for
    the header's MaxProcs, else MaxNodes, else the largest job size (at least 1)."""
    if slots < 1:
        raise SimulationError("--slots must be at least 1")
    if hosts is None:
        total = header_int(header, "MaxProcs") or header_int(header, "MaxNodes")
        if total is None:
            total = max((j.size for j in jobs), default=1)
        hosts = max(1, math.ceil(total / slots))
    if hosts < 1:
        raise SimulationError("--hosts must be at least 1")
    return ClusterSpec((HostGroup(count=hosts, slots=slots),))


def load_cluster(path: Path) -> ClusterSpec:
    """Read a TOML cluster file of ``[[group]]`` tables (``count``, ``slots``,
    optional ``name``, ``attrs``, ``resources``). Raises :class:`SimulationError`
    naming the file and the group for anything malformed."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, tomllib.TOMLDecodeError) as exc:
        raise SimulationError(f"{path}: cannot read cluster file: {exc}") from exc
    tables = data.get("group")
    if not isinstance(tables, list) or not tables:
        raise SimulationError(f"{path}: expected at least one [[group]] table")
    groups = [_group(t, f"{path}: group {i + 1}") for i, t in enumerate(tables)]
    return ClusterSpec(tuple(groups))


def _group(table: Any, where: str) -> HostGroup:
    if not isinstance(table, dict):
        raise SimulationError(f"{where}: not a table")
    unknown = set(table) - {"count", "slots", "name", "attrs", "resources"}
    if unknown:
        raise SimulationError(f"{where}: unknown keys {sorted(unknown)}")
    count, slots = table.get("count"), table.get("slots")
    for key, value in (("count", count), ("slots", slots)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SimulationError(f"{where}: {key} must be a positive integer, got {value!r}")
    assert isinstance(count, int)
    assert isinstance(slots, int)
    name = table.get("name", "h")
    if not isinstance(name, str) or not name:
        raise SimulationError(f"{where}: name must be a non-empty string")
    attrs = table.get("attrs", {})
    if not isinstance(attrs, dict) or not all(
        isinstance(v, str | bool | int | float) for v in attrs.values()
    ):
        raise SimulationError(f"{where}: attrs must map names to strings, numbers or booleans")
    resources = table.get("resources", {})
    if not isinstance(resources, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
        for v in resources.values()
    ):
        raise SimulationError(f"{where}: resources must map names to non-negative numbers")
    return HostGroup(
        count=count,
        slots=slots,
        name=name,
        attrs=dict(attrs),
        resources={k: float(v) for k, v in resources.items()},
    )
