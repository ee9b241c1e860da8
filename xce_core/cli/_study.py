"""Study files of ``xce sweep``: TOML decoded with msgspec into typed structs,
checked, and expanded into :class:`~xce_core.sim.sweep.SweepRun` descriptions.

A study lists traces, cluster variants and policies; its runs are every
combination (trace, then cluster, then policy), or the ``[[run]]`` tables when
it has some::

    trace = ["synthetic.swf"]            # or [[trace]] tables: path, name, limit, skip_bad

    [[cluster]]                          # as xce simulate: hosts/slots, or file
    name = "64x1"
    hosts = 64

    [[policy]]                           # picker, backfill, backfill_depth, strict_fifo,
    name = "easy"                        # sequential_allocator, parallel_allocator,
    backfill = "easy"                    # resreq, limits (a --policy file)

Paths are relative to the study file. Without ``[[cluster]]`` the cluster is
``xce simulate``'s default; without ``[[policy]]`` the policy is. Errors name
the study file and the field path (``$.policy[1].backfill``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, TypeVar

import click
import msgspec

from events import Limit
from xce_core import (
    ResReqSyntaxError,
    SchedulerConfig,
    XceError,
    default_registry,
    parse_resreq,
)
from xce_core.cli._policy import read_policy, unknown_plugin
from xce_core.sim import DEFAULT_MAX_HOSTS, MAX_SLOTS, load_cluster
from xce_core.sim.sweep import (
    ClusterVariant,
    PolicyVariant,
    SweepRun,
    TraceInput,
    file_sha256,
)

__all__ = ["StudyError", "read_study"]

_DEFAULTS = SchedulerConfig()
T = TypeVar("T")
Positive = Annotated[int, msgspec.Meta(ge=1)]


class StudyError(click.ClickException):
    """A study file that cannot be used: one line, exit status 2."""

    exit_code = 2


class TraceEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    path: str
    name: str | None = None
    limit: Positive | None = None
    skip_bad: bool = False


class ClusterEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str | None = None
    hosts: Positive | None = None
    slots: Annotated[int, msgspec.Meta(ge=1, le=MAX_SLOTS)] | None = None
    file: str | None = None
    max_hosts: Positive = DEFAULT_MAX_HOSTS


class PolicyEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str | None = None
    picker: str = _DEFAULTS.picker
    sequential_allocator: str = _DEFAULTS.sequential_allocator
    parallel_allocator: str = _DEFAULTS.parallel_allocator
    strict_fifo: bool = False
    backfill: Literal["none", "easy", "conservative"] = "none"
    backfill_depth: Positive = _DEFAULTS.backfill_depth
    resreq: str | None = None
    limits: str | None = None


class RunEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    trace: str
    cluster: str
    policy: str


class Study(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    trace: Annotated[list[str | TraceEntry], msgspec.Meta(min_length=1)]
    cluster: Annotated[list[ClusterEntry], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: [ClusterEntry()]
    )
    policy: Annotated[list[PolicyEntry], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: [PolicyEntry()]
    )
    run: list[RunEntry] | None = None


def read_study(path: Path) -> list[SweepRun]:
    """The runs of the study file at ``path``, in its order. Reads (and hashes)
    every trace, cluster file and limits file it names. Raises
    :class:`StudyError` naming the file and the field path for anything wrong."""

    try:
        study = msgspec.toml.decode(path.read_bytes(), type=Study)
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _fail(path, str(exc).replace("\n", " ")) from None
    traces = [_trace(entry, path, f"$.trace[{i}]") for i, entry in enumerate(study.trace)]
    clusters = [_cluster(c, path, f"$.cluster[{i}]") for i, c in enumerate(study.cluster)]
    policies = [_policy(p, path, f"$.policy[{i}]") for i, p in enumerate(study.policy)]
    for kind, named in (("trace", traces), ("cluster", clusters), ("policy", policies)):
        seen: set[str] = set()
        for item in named:
            if item.name in seen:
                message = f"two {kind} entries are named {item.name!r}: give each its own name"
                raise _fail(path, message)
            seen.add(item.name)
    if study.run is None:
        return [
            SweepRun(trace=t, cluster=c, policy=p)
            for t in traces
            for c in clusters
            for p in policies
        ]
    by_trace = {t.name: t for t in traces}
    by_cluster = {c.name: c for c in clusters}
    by_policy = {p.name: p for p in policies}
    runs: list[SweepRun] = []
    for i, entry in enumerate(study.run):
        where = f"$.run[{i}]"
        trace = _pick(by_trace, entry.trace, path, f"{where}.trace")
        cluster = _pick(by_cluster, entry.cluster, path, f"{where}.cluster")
        policy = _pick(by_policy, entry.policy, path, f"{where}.policy")
        runs.append(SweepRun(trace=trace, cluster=cluster, policy=policy))
    return runs


def _pick(table: dict[str, T], name: str, study: Path, where: str) -> T:
    if name not in table:
        known = ", ".join(repr(n) for n in table)
        raise _fail(study, f"{where}: none is named {name!r} (known: {known})")
    return table[name]


def _trace(entry: str | TraceEntry, study: Path, where: str) -> TraceInput:
    if isinstance(entry, str):
        entry = TraceEntry(path=entry)
        where_path = where
    else:
        where_path = f"{where}.path"
    file = study.parent / entry.path
    try:
        sha = file_sha256(file)
    except OSError as exc:
        raise _fail(study, f"{where_path}: {file}: {exc.strerror or exc}") from None
    return TraceInput(
        name=entry.name or Path(entry.path).name,
        path=str(file),
        sha256=sha,
        limit=entry.limit,
        skip_bad=entry.skip_bad,
    )


def _cluster(entry: ClusterEntry, study: Path, where: str) -> ClusterVariant:
    if entry.file is not None:
        if entry.hosts is not None or entry.slots is not None:
            raise _fail(study, f"{where}: file excludes hosts and slots")
        file = study.parent / entry.file
        try:
            spec = load_cluster(file, max_hosts=entry.max_hosts)
        except XceError as exc:
            raise _fail(study, f"{where}.file: {exc}") from None
        return ClusterVariant(
            name=entry.name or Path(entry.file).stem,
            groups=spec.groups,
            licences=tuple(spec.licences.items()),
            queues=spec.queues,
            file=entry.file,
            max_hosts=entry.max_hosts,
        )
    slots = entry.slots or 1
    if entry.hosts is not None and entry.hosts > entry.max_hosts:
        raise _fail(study, f"{where}.hosts: {entry.hosts} is more than max_hosts")
    if entry.name is not None:
        name = entry.name
    elif entry.hosts is not None:
        name = f"{entry.hosts}x{slots}"
    else:
        name = "default" if slots == 1 else f"default/{slots}"
    return ClusterVariant(name=name, hosts=entry.hosts, slots=slots, max_hosts=entry.max_hosts)


_OPTION_FIELDS = {
    "--picker": "picker",
    "--sequential-allocator": "sequential_allocator",
    "--parallel-allocator": "parallel_allocator",
}


def _policy(entry: PolicyEntry, study: Path, where: str) -> PolicyVariant:
    config = SchedulerConfig(
        picker=entry.picker,
        sequential_allocator=entry.sequential_allocator,
        parallel_allocator=entry.parallel_allocator,
    )
    try:
        unknown = unknown_plugin(default_registry(), config)
    except XceError as exc:  # a broken or clashing installed plugin
        raise _fail(study, str(exc)) from None
    if unknown is not None:
        option, message = unknown
        raise _fail(study, f"{where}.{_OPTION_FIELDS[option]}: {message}")
    if entry.resreq is not None:
        try:
            parse_resreq(entry.resreq)
        except ResReqSyntaxError as exc:
            raise _fail(study, f"{where}.resreq: {exc}") from None
    limits: tuple[Limit, ...] = ()
    if entry.limits is not None:
        try:
            limits = tuple(read_policy(study.parent / entry.limits).limits)
        except click.BadParameter as exc:
            raise _fail(study, f"{where}.limits: {exc.message}") from None
    return PolicyVariant(
        name=entry.name or _policy_name(entry),
        picker=entry.picker,
        sequential_allocator=entry.sequential_allocator,
        parallel_allocator=entry.parallel_allocator,
        strict_fifo=entry.strict_fifo,
        backfill=entry.backfill,
        backfill_depth=entry.backfill_depth,
        resreq=entry.resreq,
        limits=limits,
        limits_file=entry.limits,
    )


def _policy_name(entry: PolicyEntry) -> str:
    """A name from what differs from ``xce simulate``'s defaults."""
    parts = [entry.picker]
    if entry.backfill != "none":
        parts.append(entry.backfill)
        if entry.backfill == "conservative" and entry.backfill_depth != _DEFAULTS.backfill_depth:
            parts[-1] += f"/{entry.backfill_depth}"
    elif entry.strict_fifo:
        parts.append("strict-fifo")
    if entry.sequential_allocator != _DEFAULTS.sequential_allocator:
        parts.append(entry.sequential_allocator)
    if entry.parallel_allocator != _DEFAULTS.parallel_allocator:
        parts.append(entry.parallel_allocator)
    if entry.resreq is not None:
        parts.append(f"resreq={entry.resreq}")
    if entry.limits is not None:
        parts.append(f"limits={Path(entry.limits).stem}")
    return " ".join(parts)


def _fail(study: Path, message: str) -> StudyError:
    return StudyError(f"{study}: {message}")
