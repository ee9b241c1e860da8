"""The fit rule: one answer to "does this bucket fit on this host" (shortfall)
and its companion "how many tasks fit" (tasks_that_fit)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.allocators.conftest import build, context_for
from tests.helpers import up
from tests.strategies import (
    exact_amounts,
    fit_boundary_cases,
    fit_taken,
    fit_wants,
    fit_workers,
)
from xce_core.plugin import SLOTS, Want, Worker, shortfall, tasks_that_fit


@settings(max_examples=500, deadline=None)
@given(fit_workers(), fit_wants(), st.integers(0, 4), fit_taken())
def test_a_bucket_fits_exactly_up_to_tasks_that_fit(
    worker: Worker, want: Want, taken_slots: int, taken: dict[str, float]
) -> None:
    most = tasks_that_fit(worker, want, taken_slots, taken)
    assert 0 <= most <= max(worker.slots - worker.used_slots - taken_slots, 0)
    for tasks in range(1, 12):  # past any worker's slots
        fits = shortfall(worker, tasks, want, taken_slots, taken) is None
        assert fits == (tasks <= most), (tasks, most)


@settings(max_examples=300, deadline=None)
@given(fit_boundary_cases())
def test_the_two_agree_where_rounding_decides(case: tuple[Worker, Want]) -> None:
    worker, want = case
    most = tasks_that_fit(worker, want)
    for tasks in range(1, 10):
        assert (shortfall(worker, tasks, want) is None) == (tasks <= most), (tasks, most)


def reference_shortfall(
    worker: Worker, tasks: int, want: Want, taken_slots: int, taken: dict[str, float]
) -> str | None:
    """The rule in words, in exact arithmetic: too few free slots → "slots";
    else the first wanted consumable the host lacks, or of which less is free
    (never below zero) after what is taken than the bucket needs."""
    if worker.slots - worker.used_slots - taken_slots < tasks:
        return "slots"
    for name, per_task, per_host in want:
        if name not in worker.resources:
            return name
        free = max(Fraction(worker.resources[name]) - Fraction(worker.used.get(name, 0.0)), 0)
        free -= Fraction(taken.get(name, 0.0))
        if Fraction(per_task) * tasks + Fraction(per_host) > free:
            return name
    return None


@settings(max_examples=500, deadline=None)
@given(
    fit_workers(exact_amounts),
    fit_wants(exact_amounts),
    st.integers(1, 10),
    st.integers(0, 4),
    fit_taken(exact_amounts),
)
def test_shortfall_agrees_with_an_exact_reference(
    worker: Worker, want: Want, tasks: int, taken_slots: int, taken: dict[str, float]
) -> None:
    # Amounts in eighths: float arithmetic on them is exact, so the tolerance
    # can never decide, and the float rule must match the exact one.
    assert shortfall(worker, tasks, want, taken_slots, taken) == reference_shortfall(
        worker, tasks, want, taken_slots, taken
    )


def test_the_tolerance_lets_an_exact_fit_through_float_rounding() -> None:
    worker = Worker("h", 0, 4, {}, {"mem": 0.3})
    worker.used = {"mem": 0.1 + 0.1}  # two earlier claims of 0.1
    assert 0.3 - (0.1 + 0.1) < 0.1  # what is free came out one ulp short
    want: Want = (("mem", 0.1, 0.0),)
    assert shortfall(worker, 1, want) is None
    assert tasks_that_fit(worker, want) == 1
    assert shortfall(worker, 2, want) == "mem"


def test_tasks_that_fit_settles_division_rounding_with_shortfalls_comparison() -> None:
    # (limit - 0.2) // 0.3 rounds down to 2, yet 0.3 * 3 + 0.2 is within the limit.
    worker = Worker("h", 0, 8, {}, {"mem": 1.0999999989999998})
    want: Want = (("mem", 0.3, 0.2),)
    assert shortfall(worker, 3, want) is None
    assert shortfall(worker, 4, want) == "mem"
    assert tasks_that_fit(worker, want) == 3


def test_shortfall_names_slots_first_then_the_first_consumable_lacking() -> None:
    worker = Worker("h", 0, 2, {}, {"mem": 100.0, "tmp": 10.0})
    want: Want = (("mem", 60.0, 0.0), ("scratch", 1.0, 0.0), ("tmp", 20.0, 0.0))
    assert shortfall(worker, 3, want) == SLOTS
    assert shortfall(worker, 2, want) == "mem"
    assert shortfall(worker, 1, want) == "scratch"  # a consumable the host lacks
    assert shortfall(worker, 1, (("tmp", 5.0, 5.0),)) is None
    assert shortfall(worker, 1, (("tmp", 5.0, 5.0),), taken={"tmp": 0.5}) == "tmp"
    assert shortfall(worker, 2, (), taken_slots=1) == SLOTS


def test_the_attempt_context_applies_its_tentative_claims() -> None:
    core = build([up("a", 4, {"mem": 100.0}), up("b", 4, {"mem": 100.0})])
    ctx = context_for(core)
    a, b = core.state.by_name["a"], core.state.by_name["b"]
    want: Want = (("mem", 30.0, 0.0),)
    ctx.claim(a, 2, want)  # 60 of a's mem, 2 of its slots
    assert ctx.taken(a) == {"mem": 60.0}
    assert ctx.tasks_that_fit(a, want) == 1
    assert ctx.shortfall(a, 2, want) == "mem"
    assert ctx.shortfall(a, 3, ()) == SLOTS
    assert ctx.tasks_that_fit(b, want) == 3
    assert ctx.fits(b, 3, want)
    ctx.rollback_to((0, {}))
    assert ctx.tasks_that_fit(a, want) == 3
