"""SchedContext's bookkeeping of tentative claims (docs/design.md, R3 and R4)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.allocators.conftest import build, context_for
from tests.helpers import up
from xce_core import SchedulerCore

HOSTS = [f"h{i}" for i in range(4)]

# One step of an attempt: a claim, a claim on several hosts at once, a mark
# and a rollback to the newest mark, or per-host rooms (limits) set first.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("claim"), st.sampled_from(HOSTS), st.integers(1, 2)),
        st.tuples(
            st.just("many"),
            st.lists(st.sampled_from(HOSTS), min_size=1, max_size=3, unique=True),
            st.integers(1, 2),
        ),
        st.tuples(st.just("mark")),
        st.tuples(st.just("rollback")),
        st.tuples(st.just("rooms"), st.sampled_from(HOSTS), st.integers(0, 3)),
        st.tuples(st.just("reset")),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(steps=steps)
def test_distinct_is_true_only_when_no_worker_has_two_claims(steps: list[tuple[Any, ...]]) -> None:
    """``distinct()`` lets a commit skip merging the claims per host: it must
    never say so when a worker has two claims, whatever the attempt did
    (rollbacks, per-host rooms); and with neither it says so whenever it is
    true."""
    core: SchedulerCore = build([up(name, 8) for name in HOSTS])
    ctx = context_for(core)
    workers = {w.name: w for w in core.state.workers if w is not None}
    marks: list[Any] = []
    plain = True  # no rooms and no rollback since the last reset
    for step in steps:
        match step:
            case ("claim", host, slots):
                ctx.claim(workers[host], slots, ())
            case ("many", hosts, slots):
                ctx.claim_many([workers[h] for h in hosts], slots, ())
            case ("mark",):
                marks.append(ctx.mark())
            case ("rollback",):
                if marks:
                    ctx.rollback_to(marks.pop())
                    plain = False
            case ("rooms", host, room):
                if not ctx.journal:  # before the attempt's first claim
                    ctx.keep_within({host: room})
                    plain = False
            case ("reset",):
                ctx.reset(ctx.job)
                marks.clear()
                plain = True
        claimed = [worker for worker, _, _ in ctx.journal]
        no_repeat = len(set(claimed)) == len(claimed)
        if ctx.distinct():
            assert no_repeat
        elif plain:
            assert not no_repeat


def test_a_claim_of_no_slot_is_refused_by_name() -> None:
    # A plugin's bug: a bucket of 0 tasks would leave the per-worker sums
    # unable to roll back (two such claims on one host made rollback_to raise
    # KeyError).
    core = build([up(name, 8) for name in HOSTS])
    ctx = context_for(core)
    worker = next(w for w in core.state.workers if w is not None)
    with pytest.raises(ValueError, match="a claim of 0 slots on h0"):
        ctx.claim(worker, 0, ())
    with pytest.raises(ValueError, match="a claim of 0 slots"):
        ctx.claim_many([worker], 0, ())
    assert ctx.journal == []
    assert ctx.slots == {}


def test_a_journal_put_in_from_outside_is_not_known_distinct() -> None:
    # Conservative backfill places a job again and puts those claims in the
    # context (Reservations.holds_back): what they hold is not known here.
    core = build([up(name, 8) for name in HOSTS])
    ctx = context_for(core)
    workers = [w for w in core.state.workers if w is not None]
    ctx.claim(workers[0], 1, ())
    ctx.claim(workers[2], 1, ())
    assert ctx.distinct()
    # As many claims as the sums it keeps, but both on one host.
    ctx.journal = [(workers[1], 1, ()), (workers[1], 1, ())]
    assert not ctx.distinct()
