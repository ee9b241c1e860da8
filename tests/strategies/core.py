"""Hosts and wants for the fit rule (used by tests/core)."""

from __future__ import annotations

from hypothesis import strategies as st

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
