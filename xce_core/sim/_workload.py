"""A synthetic parallel workload in the shape of Lublin & Feitelson (2003), simplified.

U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers: modeling
the characteristics of rigid jobs", JPDC 63(11), 2003. This generator keeps the
model's *shape*, not its fitted parameters, and uses only ``random.Random(seed)``
so that a seed always gives the same trace (on any platform, any Python >= 3.11).

Job size (processors), capped at ``procs``:
  * serial with probability ``SERIAL_SHARE`` (0.25);
  * otherwise ``log2(size)`` is drawn from a two-stage uniform distribution
    (``SMALL_SHARE`` of the jobs uniform on ``[1, log2(procs)/2]``, the rest on
    ``[log2(procs)/2, log2(procs)]``), then with probability ``POW2_SHARE`` (0.75)
    rounded to the nearest power of two, else rounded to the nearest integer
    (at least 2).

Run time (seconds, integral, in ``[1, MAX_RUNTIME]``): ``ln(run time)`` follows a
hyper-gamma distribution, the mix of a short component Gamma(4.2, 0.94) (median
around 50 s) and a long one Gamma(312, 0.03) (around 3 h), the model's own
parameters. The probability of the short component falls with ``log2(size)``
(``0.78 - 0.06 * log2(size)``, clamped to ``[0.1, 0.9]``): big jobs run longer.

Arrivals: a Poisson process whose rate follows a daily cycle (lowest around
04:00, highest around 14:00; ``1 + 0.8 * cos(2 pi (hour - 14) / 24)``), drawn by
thinning. The mean rate is chosen so that the offered load (total
processor-seconds / (span * procs)) is ``load``: sizes and run times are drawn
first, then the span follows from their total work.

Other fields: wait -1 (unknown: the trace is a workload, not a schedule);
requested processors = allocated = size; requested time = run time rounded up to
the next of 5 min, 15 min, 30 min, 1, 2, 4, 8, 12, 24, 48 h; status 1;
``USERS`` users with Zipf-like activity, group ``1 + user % 5``; queue 1,
partition 1; the remaining fields -1.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from xce_core.sim._swf_record import MAX_INTEGER, MAX_SECONDS, SwfJob

__all__ = [
    "MAX_JOBS",
    "MAX_LOAD",
    "MAX_RUNTIME",
    "MIN_LOAD",
    "WorkloadModel",
    "generate_jobs",
    "swf_header",
]

SERIAL_SHARE: Final = 0.25
SMALL_SHARE: Final = 0.6
POW2_SHARE: Final = 0.75
MAX_RUNTIME: Final = 48 * 3600
MIN_LOAD: Final = 0.001
MAX_LOAD: Final = 1000.0
# The most jobs one generated trace holds: they are made in memory (about 200
# bytes each) before any is written, a few times the largest archive traces.
MAX_JOBS: Final = 10_000_000
USERS: Final = 40
_SHORT: Final = (4.2, 0.94)
_LONG: Final = (312.0, 0.03)
_REQ_TIMES: Final = (300, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800)
_DAY: Final = 86400.0
_CYCLE_AMPLITUDE: Final = 0.8
_PEAK_HOUR: Final = 14.0


@dataclass(frozen=True, slots=True)
class WorkloadModel:
    """Parameters of the generator: ``jobs`` from 1 to MAX_JOBS, ``procs`` from 1
    to MAX_INTEGER, ``load`` from MIN_LOAD to MAX_LOAD; :class:`ValueError`
    otherwise."""

    jobs: int = 2000
    procs: int = 64
    seed: int = 1
    load: float = 0.7

    def __post_init__(self) -> None:
        if not 1 <= self.jobs <= MAX_JOBS:
            raise ValueError(f"jobs must be from 1 to {MAX_JOBS}")
        if not 1 <= self.procs <= MAX_INTEGER:
            raise ValueError(f"procs must be from 1 to {MAX_INTEGER}")
        if not MIN_LOAD <= self.load <= MAX_LOAD:  # false for nan
            raise ValueError(f"load must be from {MIN_LOAD:g} to {MAX_LOAD:g}")


def _size(rng: random.Random, procs: int) -> int:
    if procs == 1 or rng.random() < SERIAL_SHARE:
        return 1
    top = math.log2(procs)
    mid = top / 2
    if rng.random() < SMALL_SHARE:
        exponent = rng.uniform(1.0, max(1.0, mid))
    else:
        exponent = rng.uniform(min(mid, top), top) if top > 1 else top
    if rng.random() < POW2_SHARE:
        size = 1 << round(exponent)
    else:
        size = max(2, round(2**exponent))
    return max(1, min(procs, size))


def _run_time(rng: random.Random, size: int) -> int:
    p_short = min(0.9, max(0.1, 0.78 - 0.06 * math.log2(size)))
    alpha, beta = _SHORT if rng.random() < p_short else _LONG
    log_run = rng.gammavariate(alpha, beta)
    return int(min(MAX_RUNTIME, max(1.0, round(math.exp(log_run)))))


def _cycle(t: float) -> float:
    """Relative arrival rate at time ``t`` (seconds from midnight of day 0); mean 1."""
    hour = (t % _DAY) / 3600.0
    return 1.0 + _CYCLE_AMPLITUDE * math.cos(2 * math.pi * (hour - _PEAK_HOUR) / 24.0)


def _arrivals(rng: random.Random, count: int, mean_rate: float) -> Iterator[int]:
    """``count`` integral arrival times by thinning a Poisson process of rate
    ``mean_rate * (1 + amplitude)``."""
    peak = mean_rate * (1.0 + _CYCLE_AMPLITUDE)
    t = 0.0
    made = 0
    while made < count:
        t += rng.expovariate(peak)
        if rng.random() * (1.0 + _CYCLE_AMPLITUDE) <= _cycle(t):
            made += 1
            yield int(t)


def _user(rng: random.Random) -> int:
    # Zipf-like: user k is chosen with weight 1/k.
    return min(USERS, int(math.exp(rng.random() * math.log(USERS + 1))))


def _requested_time(run: int) -> int:
    for limit in _REQ_TIMES:
        if run <= limit:
            return limit
    return run


def generate_jobs(model: WorkloadModel) -> list[SwfJob]:
    """The jobs of ``model``, in submit order, numbered from 1. Deterministic per model.

    Raises ``ValueError`` when the arrivals would run past the SWF limit of
    MAX_SECONDS (a load too low for so many jobs)."""
    rng = random.Random(model.seed)
    shapes = [
        (size, _run_time(rng, size))
        for size in (_size(rng, model.procs) for _ in range(model.jobs))
    ]
    work = sum(size * run for size, run in shapes)
    span = work / (model.load * model.procs)
    mean_rate = model.jobs / span
    users = [_user(rng) for _ in shapes]
    submits = list(_arrivals(rng, model.jobs, mean_rate))
    if submits[-1] > MAX_SECONDS:
        raise ValueError(
            f"at load {model.load:g} the {model.jobs} jobs would arrive over"
            f" {submits[-1]:.3g} s, past the SWF limit of {MAX_SECONDS:.0e} s: raise the load"
        )
    jobs: list[SwfJob] = []
    for number, ((size, run), user, submit) in enumerate(
        zip(shapes, users, submits, strict=True), start=1
    ):
        jobs.append(
            SwfJob(
                job_id=number,
                submit=float(submit),
                wait=-1.0,
                run_time=float(run),
                alloc_procs=size,
                avg_cpu=-1.0,
                used_mem=-1.0,
                req_procs=size,
                req_time=float(_requested_time(run)),
                req_mem=-1.0,
                status=1,
                user=user,
                group=1 + user % 5,
                executable=-1,
                queue=1,
                partition=1,
                preceding_job=-1,
                think_time=-1.0,
            )
        )
    return jobs


def swf_header(model: WorkloadModel, command: str) -> list[tuple[str, str]]:
    """SWF header lines for a generated trace; ``command`` is the exact command line."""
    return [
        ("Version", "2.2"),
        ("Computer", "xce synthetic"),
        ("Installation", "none (synthetic workload)"),
        ("MaxJobs", str(model.jobs)),
        ("MaxRecords", str(model.jobs)),
        ("MaxProcs", str(model.procs)),
        ("MaxNodes", str(model.procs)),
        ("MaxQueues", "1"),
        ("MaxPartitions", "1"),
        ("Preemption", "No"),
        ("Note", f"generated by `{command}`"),
        (
            "Note",
            "simplified Lublin-Feitelson (2003) shape: 25% serial jobs, log-uniform\n"
            "parallel sizes (75% powers of two), hyper-gamma run times correlated\n"
            f"with size, daily-cycle Poisson arrivals at offered load {model.load:g};\n"
            "see xce_core/sim/_workload.py",
        ),
    ]
