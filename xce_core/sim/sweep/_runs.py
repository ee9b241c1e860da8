"""What one run of a sweep is (:class:`SweepRun`), its stable key, and what it
produced (:class:`RunRecord`: the figures of a row and the per-job columns the
comparison plots need).

A run is a trace, a cluster variant and a policy. Its key is the SHA-256 of a
canonical JSON text of everything that can change the schedule: the trace's
SHA-256 (and ``limit``/``skip_bad``), the cluster (sizes, or a cluster file's
groups as read), the policy (plugins, backfill, strict FIFO, resreq, the limits
as read) and the xce version. Names given in the study file are labels: they
are not in the key, so renaming a policy keeps its cached result.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Final

import msgspec

from events import Limit
from xce_core.sim import DEFAULT_MAX_HOSTS, HostGroup, QueueSpec, _provenance

__all__ = [
    "CACHE_FORMAT",
    "ClusterVariant",
    "PolicyVariant",
    "RunMetrics",
    "RunRecord",
    "SweepRun",
    "TIMING_COLUMNS",
    "TraceInput",
    "file_sha256",
    "xce_version",
]

# Bumped when a cached record's layout or meaning changes: part of every key.
CACHE_FORMAT: Final = 1


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of the bytes of the file at ``path`` (``OSError`` if unreadable)."""
    return _provenance.file_sha256(path)[0]


# The installed xce's version (part of every run key): the provenance's.
xce_version = _provenance.xce_version


class TraceInput(msgspec.Struct, frozen=True, kw_only=True):
    """A trace of the study: ``path`` as the sweep's process sees it, and the
    SHA-256 of its bytes, computed when the sweep was planned."""

    name: str
    path: str
    sha256: str
    limit: int | None = None
    skip_bad: bool = False


class ClusterVariant(msgspec.Struct, frozen=True, kw_only=True):
    """A cluster as ``xce simulate`` takes it: ``groups`` read from a cluster
    file, with its ``licences`` and ``queues``, else ``hosts`` x ``slots``
    (``hosts`` unset: from the trace's header, as
    :func:`~xce_core.sim.default_cluster` decides). ``file`` is a label."""

    name: str
    hosts: int | None = None
    slots: int = 1
    groups: tuple[HostGroup, ...] | None = None
    licences: tuple[tuple[str, float], ...] = ()
    queues: tuple[QueueSpec, ...] = ()
    file: str | None = None
    max_hosts: int = DEFAULT_MAX_HOSTS


class PolicyVariant(msgspec.Struct, frozen=True, kw_only=True):
    """A policy as ``xce simulate``'s options give it. ``limits`` are those of
    a ``--policy`` file, read when the sweep was planned; ``limits_file`` is a
    label."""

    name: str
    picker: str = "fcfs"
    sequential_allocator: str = "seqjob"
    parallel_allocator: str = "parjob"
    strict_fifo: bool = False
    backfill: str = "none"
    backfill_depth: int = 500
    resreq: str | None = None
    limits: tuple[Limit, ...] = ()
    limits_file: str | None = None


class SweepRun(msgspec.Struct, frozen=True, kw_only=True):
    """One run of a sweep. Picklable; its :attr:`key` is stable across
    processes and machines (see the module docstring)."""

    trace: TraceInput
    cluster: ClusterVariant
    policy: PolicyVariant

    @property
    def label(self) -> str:
        return f"{self.trace.name} / {self.cluster.name} / {self.policy.name}"

    def description(self) -> str:
        """The canonical JSON text the key hashes (names and file labels left out)."""
        cluster = msgspec.to_builtins(self.cluster)
        policy = msgspec.to_builtins(self.policy)
        for labels, names in ((cluster, ("name", "file")), (policy, ("name", "limits_file"))):
            for name in names:
                labels.pop(name, None)
        for name in ("licences", "queues"):
            if not cluster[name]:
                del cluster[name]  # a cluster without them keeps the key it had
        described = {
            "format": CACHE_FORMAT,
            "xce": xce_version(),
            "trace": {
                "sha256": self.trace.sha256,
                "limit": self.trace.limit,
                "skip_bad": self.trace.skip_bad,
            },
            "cluster": cluster,
            "policy": policy,
        }
        return json.dumps(described, sort_keys=True, separators=(",", ":"), allow_nan=False)

    @property
    def key(self) -> str:
        """Hex SHA-256 of :meth:`description`."""
        return hashlib.sha256(self.description().encode()).hexdigest()


class RunMetrics(msgspec.Struct, kw_only=True):
    """The figures of one run (a results row without its labels). Definitions
    as in :mod:`xce_core.sim`'s summary, plus ``slowdown_mean`` and
    ``slowdown_max``: ``(wait + run) / run`` over started jobs with a run time
    above 0. ``wall_time_s``, ``jobs_per_s`` and ``cpu_time_s`` (the CPU time
    of the thread that replayed: reading the trace and the replay) are
    timings: they differ from one execution to the next."""

    hosts: int
    total_slots: int
    jobs: int
    started: int
    rejected: int
    never_started: int
    makespan: float
    utilisation: float
    wait_mean: float
    wait_median: float
    wait_p95: float
    wait_max: float
    slowdown_mean: float
    slowdown_max: float
    bounded_slowdown_mean: float
    backfilled: int
    limits_raised: int
    sessions: int
    sessions_skipped: int
    wall_time_s: float
    jobs_per_s: float
    cpu_time_s: float


TIMING_COLUMNS: Final = ("wall_time_s", "jobs_per_s", "cpu_time_s")


class RunRecord(msgspec.Struct, kw_only=True):
    """What a run produced, as cached: its key and the text it hashes, the
    figures, and for every job that was not rejected, in trace order, its
    submit time, start time (NaN if it never started) and run time."""

    key: str
    description: str
    metrics: RunMetrics
    submit: list[float]
    start: list[float]
    run_time: list[float]

    def waits(self) -> list[float]:
        """Waits of the started jobs."""
        return [s - b for b, s in zip(self.submit, self.start, strict=True) if s == s]

    def bounded_slowdowns(self, tau: float) -> list[float]:
        """``max(1, (wait + run) / max(run, tau))`` of the started jobs."""
        return [
            max(1.0, (s - b + r) / max(r, tau))
            for b, s, r in zip(self.submit, self.start, self.run_time, strict=True)
            if s == s
        ]
