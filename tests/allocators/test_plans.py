"""Plan iterators (Req 2): order, span, laziness, exhaustion, close, cancellation."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocators._plans import (
    balanced_plans,
    block_plan,
    can_fit,
    host_capacities,
    span_plan,
    stripe_plan,
)
from tests.allocators.conftest import build, context_for
from tests.helpers import up
from xce_core import SchedulerConfig, SchedulerCore, parse_resreq
from xce_core._context import SchedContext
from xce_core._iterators import _place_plan
from xce_core._pacer import SessionInterrupted
from xce_core.plugin import PlanStream, PrimaryRequest, Status, Want, balanced_partition
from xce_core.resreq import Primary, Span


def test_balanced_partition_is_largest_first() -> None:
    assert balanced_partition(7, 3) == (3, 2, 2)
    assert balanced_partition(8, 4) == (2, 2, 2, 2)
    assert balanced_partition(5, 5) == (1, 1, 1, 1, 1)


def test_v1_order_ascending_host_count() -> None:
    assert list(balanced_plans(7)) == [
        (7,),
        (4, 3),
        (3, 2, 2),
        (2, 2, 2, 1),
        (2, 2, 1, 1, 1),
        (2, 1, 1, 1, 1, 1),
        (1, 1, 1, 1, 1, 1, 1),
    ]
    assert list(balanced_plans(4)) == [(4,), (2, 2), (2, 1, 1), (1, 1, 1, 1)]
    assert list(balanced_plans(1)) == [(1,)]


def test_span_plans() -> None:
    assert list(balanced_plans(6, Span(hosts=1))) == [(6,)]
    assert list(balanced_plans(10, Span(ptile=4))) == [(4, 4, 2)]
    assert list(balanced_plans(8, Span(ptile=4))) == [(4, 4)]
    assert list(balanced_plans(3, Span(ptile=4))) == [(3,)]
    assert span_plan(5, Span(hosts=-1)) is None
    # A ptile resolved for the candidates ('!' or per type) overrides the plain value.
    varying = Span(ptile_max=True, ptile_by=(("HP", 2),))
    assert span_plan(5, varying, 2) == (2, 2, 1)
    assert span_plan(8, varying, 8) == (8,)
    assert span_plan(5, varying) is None  # unresolved: the shape is free
    assert list(balanced_plans(6, varying, ptile=4)) == [(4, 2)]
    assert list(balanced_plans(3, Span(hosts=-1))) == [(3,), (2, 1), (1, 1, 1)]


def test_pruning_skips_only_plans_that_cannot_fit() -> None:
    full = list(balanced_plans(9))
    pruned = list(balanced_plans(9, max_bucket=3, max_hosts=5))
    assert pruned == [p for p in full if p[0] <= 3 and len(p) <= 5]
    assert list(balanced_plans(9, max_bucket=0)) == []


def test_plans_are_lazy() -> None:
    gen = balanced_plans(10**9)
    assert next(gen) == (10**9,)
    assert next(gen) == (500_000_000, 500_000_000)


async def test_plan_stream_one_per_step_and_stays_exhausted() -> None:
    core = build([up("a")])
    ctx = context_for(core)
    stream = PlanStream(ctx, balanced_plans(3))
    assert [p async for p in stream] == [(3,), (2, 1), (1, 1, 1)]
    for _ in range(3):
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()


async def test_plan_stream_close_releases_generator() -> None:
    core = build([up("a")])
    ctx = context_for(core)
    released: list[bool] = []

    def plans():  # type: ignore[no-untyped-def]
        try:
            yield (2,)
            yield (1, 1)
        finally:
            released.append(True)

    stream = PlanStream(ctx, plans())
    assert await stream.__anext__() == (2,)
    await stream.aclose()
    assert released == [True]
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    await stream.aclose()  # idempotent


async def test_with_a_budget_of_one_every_plan_step_is_a_cancellation_point() -> None:
    core = build([up("a")])
    ctx = context_for(core)
    ctx.session.pacer.every = 1  # yield to the loop on every step
    ctx.session.pacer.restart(timed=False)
    stream = PlanStream(ctx, balanced_plans(10**6))
    taken = 0
    with anyio.CancelScope() as scope:
        async for _ in stream:
            taken += 1
            if taken == 5:
                scope.cancel()
    assert taken == 5
    assert scope.cancelled_caught
    await stream.aclose()


async def test_cancelled_session_interrupts_at_next_step() -> None:
    core = build([up("a")])
    ctx = context_for(core)
    stream = PlanStream(ctx, balanced_plans(100))
    with anyio.CancelScope() as scope:
        await stream.__anext__()
        scope.cancel()
        ctx.session.pacer.interrupt = True
        await stream.__anext__()
        pytest.fail("step after cancel did not raise")
    assert scope.cancelled_caught


def test_block_plan_packs_whole_blocks_host_by_host() -> None:
    # LSF's example: 16 tasks in blocks of 4 on hosts with 8 free slots each.
    assert block_plan(16, 4, [8, 8, 8, 8]) == (8, 8)
    assert block_plan(16, 4, [3, 8, 6, 8]) == (8, 4, 4)  # 3 < 4: skipped; 6 takes one block
    assert block_plan(10, 4, [8, 8]) == (8, 2)  # the remainder is one more bucket
    assert block_plan(16, 4, [8, 7]) is None
    assert block_plan(2, 4, [1, 2]) == (2,)


def test_stripe_plan_spreads_as_evenly_as_capacity_allows() -> None:
    # LSF's examples: 4 tasks on 1, 2, 3 and 4 free hosts.
    assert stripe_plan(4, [8]) == (4,)
    assert stripe_plan(4, [8, 8]) == (2, 2)
    assert stripe_plan(4, [8, 8, 8]) == (2, 1, 1)
    assert stripe_plan(4, [8, 8, 8, 8]) == (1, 1, 1, 1)
    assert stripe_plan(5, [1, 0, 8, 8]) == (1, 2, 2)  # full hosts are passed over
    assert stripe_plan(4, [8, 8], per_host=1) is None
    assert stripe_plan(4, [8, 8, 8], per_host=1) is None
    assert stripe_plan(3, [8, 8, 8], per_host=1) == (1, 1, 1)


def _dealt_stripe(tasks: int, caps: list[int], per_host: int | None) -> tuple[int, ...] | None:
    """Reference model: deal one task at a time round the hosts with room."""
    room = [min(c, per_host) if per_host is not None else c for c in caps]
    room = [c for c in room if c > 0]
    if sum(room) < tasks:
        return None
    counts = [0] * len(room)
    left = tasks
    while left:
        for i, cap in enumerate(room):
            if left and counts[i] < cap:
                counts[i] += 1
                left -= 1
    return tuple(n for n in counts if n)


@given(
    st.integers(0, 60),
    st.lists(st.integers(-1, 12), max_size=12),
    st.one_of(st.none(), st.integers(1, 6)),
)
def test_stripe_plan_matches_dealing_one_task_at_a_time(
    tasks: int, caps: list[int], per_host: int | None
) -> None:
    assert stripe_plan(tasks, caps, per_host) == _dealt_stripe(tasks, caps, per_host)


def test_stripe_plan_of_a_huge_job_is_computed_not_dealt() -> None:
    # Dealt task by task this would take 10^12 steps.
    plan = stripe_plan(10**12, [10**12] * 3)
    assert plan is not None
    assert sum(plan) == 10**12
    assert max(plan) - min(plan) <= 1


def test_a_span_plan_too_wide_for_the_candidates_is_never_built() -> None:
    # span[ptile=1] over 10^12 tasks would be a 10^12-tuple; with 4 candidate
    # hosts it cannot fit, and is pruned before it is built.
    span = Span(ptile=1)
    assert list(balanced_plans(10**12, span, max_hosts=4)) == []
    assert list(balanced_plans(4, span, max_hosts=4)) == [(1, 1, 1, 1)]


async def test_host_capacities_count_what_a_bucket_can_take_after_tentative_claims() -> None:
    core = build(
        [
            up("a", 4, {"mem": 100.0}),
            up("b", 2, {"mem": 1000.0}),
            up("c", 8),  # no mem at all
            up("d", 8, {"mem": 1000.0}),
        ]
    )
    ctx = context_for(core)
    primary = parse_resreq("")
    assert isinstance(primary, Primary)
    want: Want = (("mem", 30.0, 5.0),)  # 30 per task, 5 once per host
    request = PrimaryRequest(primary, 4, want, ctx.session.candidates(primary))
    assert host_capacities(ctx, request) == [3, 2, 0, 8]  # a: 3 * 30 + 5 <= 100
    ctx.claim(core.state.by_name["d"], 5, want)  # 155 of d's mem, 5 of its slots
    assert host_capacities(ctx, request) == [3, 2, 0, 3]
    # Each count is the largest bucket the bucket loop would place there.
    for w, most in zip(request.candidates.workers, host_capacities(ctx, request), strict=True):
        assert ctx.fits(w, most, want) or most == 0
        assert not ctx.fits(w, most + 1, want)


async def test_an_outer_cancellation_arrives_at_the_next_budgeted_checkpoint() -> None:
    """Steps are paced, not each a checkpoint: a cancellation the session was
    not told about (cancel_session() was not called) is delivered when the
    budget of `every` steps is spent."""
    core = build([up("a")])
    ctx = context_for(core)
    ctx.session.pacer.every = 8
    ctx.session.pacer.restart(timed=False)  # a budget of steps alone
    stream = PlanStream(ctx, balanced_plans(10**6))
    taken = 0
    with anyio.CancelScope() as scope:
        scope.cancel()  # before the first step
        async for _ in stream:
            taken += 1
    assert scope.cancelled_caught
    assert taken == 7  # the 8th step spent the budget, checkpointed, and stopped
    await stream.aclose()


async def test_with_a_time_budget_steps_yield_once_the_interval_has_passed() -> None:
    """With ``yield_interval`` the budget is looked at every ``every`` steps and
    spent only once the interval has passed since the session began or last
    yielded (a fake clock here): a cancellation the session was not told about
    waits for that, then arrives at the next look; cancel_session() still stops
    the very next step."""
    now = [0.0]
    core = build([up("a")])
    ctx = context_for(core)
    pacer = ctx.session.pacer
    pacer.every, pacer.interval, pacer.clock = 8, 1.0, lambda: now[0]
    pacer.restart()  # the interval runs from t=0
    stream = PlanStream(ctx, balanced_plans(10**6))
    taken = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        async for _ in stream:
            taken += 1
            if taken == 20:
                now[0] = 1.5  # the interval has passed: the 24th step yields
    assert scope.cancelled_caught
    assert taken == 23
    await stream.aclose()

    pacer.restart()  # due at t=2.5
    assert [pacer.tick() for _ in range(16)] == [False] * 16
    now[0] = 2.5
    assert [pacer.tick() for _ in range(8)] == [False] * 7 + [True]
    await pacer.pause()  # due again at t=3.5
    assert [pacer.tick() for _ in range(8)] == [False] * 8
    pacer.interrupt = True
    assert pacer.tick()
    with pytest.raises(SessionInterrupted):
        await pacer.pause()


def _placeable(plan: tuple[int, ...], caps: list[int]) -> bool:
    """Reference model: some distinct host per bucket holds it (brute force)."""
    from itertools import permutations

    return any(
        all(caps[h] >= b for h, b in zip(hosts, plan, strict=True))
        for hosts in permutations(range(len(caps)), len(plan))
    )


@given(
    st.lists(st.integers(0, 6), max_size=6),
    st.lists(st.integers(1, 6), min_size=1, max_size=5),
)
def test_can_fit_matches_a_brute_force_matching(caps: list[int], buckets: list[int]) -> None:
    plan = tuple(sorted(buckets, reverse=True))
    assert can_fit(plan, sorted(caps)) == _placeable(plan, caps)


async def test_a_plan_of_equal_buckets_is_paced_a_step_per_host() -> None:
    """Equal buckets are scanned and claimed in bursts, with the checkpoints of
    a tick per host: a cancellation arrives at the same host, a placement
    leaves the budget where that many ticks would, and so does a failure (its
    last, failed step included), with no claim left."""
    core = build([up(f"h{i:02}", 1) for i in range(30)])
    primary = parse_resreq("")
    assert isinstance(primary, Primary)

    def attempt() -> tuple[SchedContext, PrimaryRequest]:
        ctx = context_for(core)
        ctx.session.pacer.every = 8
        ctx.session.pacer.restart(timed=False)
        return ctx, PrimaryRequest(primary, 20, (), ctx.session.candidates(primary))

    ctx, request = attempt()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await _place_plan(ctx, request, (1,) * 20)
    assert scope.cancelled_caught
    assert len(ctx.journal) == 7  # the 8th step spent the budget and checkpointed

    ctx, request = attempt()
    assert await _place_plan(ctx, request, (1,) * 20) is Status.OK
    assert [w.name for w, _, _ in ctx.journal] == [f"h{i:02}" for i in range(20)]
    assert ctx.session.pacer.count == 20 % 8

    ctx, _ = attempt()
    ctx.claim_many([core.state.by_name[f"h{i:02}"] for i in range(10)], 1, ())  # 20 left
    before = list(ctx.journal)
    request = PrimaryRequest(primary, 25, (), ctx.session.candidates(primary))
    assert await _place_plan(ctx, request, (1,) * 25) is Status.UNSCHEDULABLE
    assert ctx.journal == before  # this plan's claims rolled back exactly
    assert ctx.session.pacer.count == 21 % 8  # 20 hosts found, the 21st step failed


@pytest.mark.parametrize("interval", [-0.001, float("inf"), float("nan")])
def test_a_time_budget_must_be_finite_and_not_negative(interval: float) -> None:
    with pytest.raises(ValueError, match="yield_interval must be a finite number of seconds"):
        SchedulerConfig(yield_interval=interval)


def test_the_time_budget_reaches_the_session_pacer() -> None:
    pacer = SchedulerCore(SchedulerConfig(yield_every=4, yield_interval=0.25)).scratch.pacer
    assert (pacer.every, pacer.interval) == (4, 0.25)
