"""Hosts and wants for the fit rule, and streams of submissions (used by tests/core)."""

from __future__ import annotations

from hypothesis import strategies as st

import events as _events
from xce_core.plugin import Want as _Want
from xce_core.plugin import Worker as _Worker

_FIT_NAMES = ["mem", "tmp", "gpu"]
# Decimal fractions (inexact in binary, so sums round), exact binary fractions,
# and arbitrary floats.
_FIT_AMOUNTS = st.one_of(
    st.sampled_from([0.0, 0.1, 0.2, 0.3, 1 / 3, 0.7, 1.0, 2.5, 100.0]),
    st.integers(0, 64).map(lambda n: n / 8),
    st.floats(0, 1e6, allow_nan=False),
)


@st.composite
def fit_workers(draw: st.DrawFn, amounts: st.SearchStrategy[float] = _FIT_AMOUNTS) -> _Worker:
    """A worker with 0–8 slots and some of ``_FIT_NAMES`` as consumables, part of
    them in use (use may exceed the total, as after a worker is redefined)."""
    names = draw(st.lists(st.sampled_from(_FIT_NAMES), unique=True))
    worker = _Worker("h", 0, draw(st.integers(0, 8)), {}, {n: draw(amounts) for n in names})
    worker.used_slots = draw(st.integers(0, 10))
    worker.used = {n: draw(amounts) for n in names if draw(st.booleans())}
    return worker


def fit_wants(amounts: st.SearchStrategy[float] = _FIT_AMOUNTS) -> st.SearchStrategy[_Want]:
    """A ``Want``: (name, per_task, per_host) triples, names unique, including
    names a worker may lack (``lic``)."""
    return st.lists(
        st.tuples(st.sampled_from([*_FIT_NAMES, "lic"]), amounts, amounts),
        max_size=3,
        unique_by=lambda t: t[0],
    ).map(tuple)


def fit_taken(
    amounts: st.SearchStrategy[float] = _FIT_AMOUNTS,
) -> st.SearchStrategy[dict[str, float]]:
    """Amounts an attempt has already claimed on a host, by name."""
    return st.dictionaries(st.sampled_from(_FIT_NAMES), amounts, max_size=3)


exact_amounts = st.integers(0, 512).map(lambda n: n / 8)
"""Amounts exactly representable in binary: float sums of these are exact."""


@st.composite
def fit_boundary_cases(draw: st.DrawFn) -> tuple[_Worker, _Want]:
    """A worker whose one consumable is within a few tolerances of exactly what
    some bucket of the want needs: where rounding decides."""
    from xce_core.plugin import AMOUNT_TOLERANCE

    per_task = draw(st.sampled_from([0.1, 0.2, 0.3, 0.6, 0.7, 1 / 3, 0.05, 1.1]))
    per_host = draw(st.sampled_from([0.0, 0.1, 0.2, 0.3]))
    tasks = draw(st.integers(1, 8))
    offset = draw(st.sampled_from([-2, -1, 0, 1, 2])) * AMOUNT_TOLERANCE
    worker = _Worker("h", 0, 8, {}, {"mem": per_task * tasks + per_host + offset})
    return worker, (("mem", per_task, per_host),)


_INGEST_RESREQS = [
    "",
    "select[type==a]",
    "select[type==b] rusage[mem=100]",
    "select[type==a]  rusage[mem=100]",  # a second text of one canonical shape
    "rusage[mem=5000]",  # fits nowhere
    "2*{select[type==a]} + {select[type==b]}",
    "select[",  # does not parse
]
_INGEST_QUEUES = ["", "normal", "high", "fair"]
_INGEST_PICKERS = [None, "fcfs", "fairshare", "picky", "ragged"]
_ingest_ids = st.integers(0, 99).map(lambda n: f"j{n}")


@st.composite
def _ingest_submission(draw: st.DrawFn) -> _events.JobSubmitted:
    tasks = draw(st.integers(1, 3))
    return _events.JobSubmitted(
        job_id=draw(_ingest_ids),  # a small pool: duplicates
        user=draw(st.sampled_from(["u0", "u1", "u2", "mallory", "odd"])),
        queue=draw(st.sampled_from(_INGEST_QUEUES)),
        project=draw(st.sampled_from(["", "p"])),
        priority=draw(st.sampled_from([0, 0, 5])),
        submit_time=draw(st.sampled_from([0.0, 1.0, 2.0])),
        min_tasks=draw(st.sampled_from([None, None, 1, tasks + 1])),  # +1: impossible
        max_tasks=tasks,
        resreq=draw(st.sampled_from(_INGEST_RESREQS)),
        run_limit=draw(st.sampled_from([None, 60.0])),
    )


_INGEST_TREE = _events.ShareTree(shares=[("u0", 3), ("default", 1)])

_ingest_workers = st.builds(
    _events.WorkerUp,
    name=st.sampled_from(["w0", "w1", "w2"]),
    slots=st.integers(0, 4),
    attrs=st.sampled_from([{"type": "a"}, {"type": "b"}]),
    resources=st.just({"mem": 1000.0}),
)
_ingest_ends = st.one_of(
    st.builds(_events.JobFinished, job_id=_ingest_ids),
    st.builds(_events.JobCancelled, job_id=_ingest_ids),
)
# Rare: each makes the next session build the policy order afresh.
_ingest_configs = st.one_of(
    st.builds(
        _events.QueueConfig,
        name=st.sampled_from(_INGEST_QUEUES),
        priority=st.sampled_from([-1, 0, 3]),
        picker=st.sampled_from(_INGEST_PICKERS),
        fairshare=st.sampled_from([None, _INGEST_TREE]),
    ),
    st.builds(_events.FairshareConfig, tree=st.sampled_from([None, _INGEST_TREE])),
    st.builds(
        _events.LimitsConfig,
        limits=st.sampled_from(
            [[], [_events.Limit(name="two", per_user=["all"], slots=2)]]  # 3 tasks: parked
        ),
    ),
)


@st.composite
def ingest_events(draw: st.DrawFn) -> _events.InputEvent:
    """An event of a stream that submits many jobs (tests/core/test_ingest.py):
    duplicate ids, rejected requirements and task ranges, queues whose
    priority, picker (``picky`` and ``ragged`` break for some users, see
    there) and share tree change, limits that park jobs, ends and sessions.
    Submissions most of all, so that runs of them are long; configuration
    seldom."""
    kind = draw(st.integers(0, 19))
    if kind < 14:
        return draw(_ingest_submission())
    if kind < 16:
        return _events.SessionBegin()
    if kind < 18:
        return draw(_ingest_ends)
    return draw(_ingest_workers if kind == 18 else _ingest_configs)
