"""The shared host iterator (Req 3) and the bucket loop (Req 4)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from tests.allocators.conftest import build, context_for
from tests.helpers import up
from xce_core import parse_resreq
from xce_core.plugin import HostIterator, Plan, PrimaryRequest, SchedContext, allocate_plans


async def hosts(ctx: SchedContext, resreq: str, bucket: int, want=()) -> list[str]:  # type: ignore[no-untyped-def]
    cset = ctx.session.candidates(parse_resreq(resreq))  # type: ignore[arg-type]
    return [w.name async for w in HostIterator(ctx, cset, bucket, want)]


async def test_filters_by_select_free_slots_and_scaled_rusage() -> None:
    core = build(
        [
            up("a", 4, {"mem": 100}, type="x"),
            up("b", 1, {"mem": 500}, type="x"),
            up("c", 8, {"mem": 1000}, type="y"),
            up("d", 8, {"mem": 150}, type="x"),
        ]
    )
    ctx = context_for(core)
    assert await hosts(ctx, "select[type==x]", 1) == ["a", "b", "d"]
    assert await hosts(ctx, "select[type==x]", 2) == ["a", "d"]
    assert await hosts(ctx, "", 2, (("mem", 60.0, 0.0),)) == ["c", "d"]  # 120 > a's 100
    assert await hosts(ctx, "", 3, (("mem", 60.0, 0.0),)) == ["c"]
    assert await hosts(ctx, "select[type==z]", 1) == []


async def test_down_workers_are_not_candidates() -> None:
    from events import WorkerDown

    core = build([up("a"), up("b"), WorkerDown(name="a")])
    ctx = context_for(core)
    assert await hosts(ctx, "", 1) == ["b"]


async def test_fresh_iterator_per_bucket_offers_host_rejected_by_larger_bucket() -> None:
    """The adversarial case: a host too small for an earlier bucket is still
    offered for a later, smaller one."""
    core = build([up("small", 1), up("big", 3)])
    ctx = context_for(core)
    cset = ctx.session.candidates(parse_resreq(""))  # type: ignore[arg-type]
    first = [w.name async for w in HostIterator(ctx, cset, 3, ())]
    assert first == ["big"]
    second = [w.name async for w in HostIterator(ctx, cset, 1, ())]
    assert second[0] == "small"


class Plans:
    def __init__(self, *plans: Plan) -> None:
        self.plans = list(plans)
        self.closed = False

    def __aiter__(self) -> AsyncIterator[Plan]:
        return self

    async def __anext__(self) -> Plan:
        if not self.plans:
            raise StopAsyncIteration
        return self.plans.pop(0)

    async def aclose(self) -> None:
        self.closed = True


def request(ctx: SchedContext, tasks: int, resreq: str = "", want=()) -> PrimaryRequest:  # type: ignore[no-untyped-def]
    primary = parse_resreq(resreq)
    return PrimaryRequest(primary, tasks, want, ctx.session.candidates(primary))  # type: ignore[arg-type]


def claims(ctx: SchedContext) -> list[tuple[str, int]]:
    return [(w.name, n) for w, n, _ in ctx.journal]


async def test_descending_buckets_succeed_where_ascending_fails() -> None:
    """Req 4 worked example: with hosts [L(2 free), S(1 free)], ascending (1, 2)
    claims L for the small bucket and then finds no host for 2; descending (2, 1)
    fits on the same hosts."""
    core = build([up("L", 2), up("S", 1)])
    ctx = context_for(core)
    ascending = Plans((1, 2))
    assert not await allocate_plans(ctx, request(ctx, 3), ascending)
    assert ctx.journal == []
    assert ctx.slots == {}
    assert ascending.closed
    assert await allocate_plans(ctx, request(ctx, 3), Plans((2, 1)))
    assert claims(ctx) == [("L", 2), ("S", 1)]


async def test_fresh_per_bucket_in_the_loop() -> None:
    core = build([up("small", 1), up("big", 3)])
    ctx = context_for(core)
    assert await allocate_plans(ctx, request(ctx, 4), Plans((3, 1)))
    assert claims(ctx) == [("big", 3), ("small", 1)]


async def test_failed_plan_rolls_back_exactly_then_next_plan_wins() -> None:
    core = build([up("a", 3, {"mem": 90}), up("b", 2, {"mem": 90}), up("c", 2, {"mem": 90})])
    ctx = context_for(core)
    want = (("mem", 30.0, 0.0),)
    plans = Plans((3, 3), (2, 2, 2))
    assert await allocate_plans(ctx, request(ctx, 6, want=want), plans)
    assert claims(ctx) == [("a", 2), ("b", 2), ("c", 2)]
    assert ctx.slots == {0: 2, 1: 2, 2: 2}
    assert ctx.amounts == {(0, "mem"): 60.0, (1, "mem"): 60.0, (2, "mem"): 60.0}


async def test_exhaustion_leaves_no_phantom_claim() -> None:
    core = build([up("a", 2), up("b", 1)])
    ctx = context_for(core)
    assert not await allocate_plans(ctx, request(ctx, 4), Plans((2, 2), (2, 1, 1)))
    assert (ctx.journal, ctx.slots, ctx.amounts) == ([], {}, {})


async def test_host_exclusivity_within_a_plan() -> None:
    core = build([up("a", 8)])
    ctx = context_for(core)
    assert not await allocate_plans(ctx, request(ctx, 4), Plans((2, 2)))


async def test_cursor_skips_full_hosts_but_not_tentatively_full_ones() -> None:
    core = build([up("a", 1), up("b", 1), up("c", 1)])
    core.state.by_name["a"].used_slots = 1  # committed full
    ctx = context_for(core)
    cset = ctx.session.candidates(parse_resreq(""))  # type: ignore[arg-type]
    ctx.claim(core.state.by_name["b"], 1, ())  # tentatively full
    assert [w.name async for w in HostIterator(ctx, cset, 1, ())] == ["c"]
    ctx.rollback_to((0, {}))
    # b is offered again once the tentative claim is gone; a is never revisited.
    assert [w.name async for w in HostIterator(ctx, cset, 1, ())] == ["b", "c"]
    assert ctx.session.cursors[(cset.key, 1, ())].start == 1


async def test_a_fresh_iterator_honours_committed_and_tentative_claims() -> None:
    """The one scan: the committed check moves the session cursor past hosts
    that are full for good; a tentative claim only hides a host from this
    attempt, and only for buckets it leaves no room for."""
    core = build([up(n, s, {"mem": m}) for n, s, m in [("a", 1, 10), ("b", 2, 50), ("c", 4, 90)]])
    core.state.by_name["a"].used_slots = 1  # committed full: the cursor passes it
    ctx = context_for(core)
    cset = ctx.session.candidates(parse_resreq(""))  # type: ignore[arg-type]
    ctx.claim(core.state.by_name["b"], 1, (("mem", 30.0, 0.0),))  # tentatively half used
    cases = [
        (1, (), "b"),
        (2, (), "c"),  # b has one slot left in this attempt
        (1, (("mem", 20.0, 0.0),), "b"),  # b has 20 mem left in this attempt
        (1, (("mem", 30.0, 0.0),), "c"),
        (3, (), "c"),
        (5, (), None),
    ]
    for bucket, want, expected in cases:
        found = HostIterator(ctx, cset, bucket, want).next_host()
        assert (found.name if found else None) == expected, (bucket, want)
        assert ctx.session.cursors[(cset.key, bucket, want)].start >= 1  # past a
