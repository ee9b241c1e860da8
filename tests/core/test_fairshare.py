"""Fairshare (xce_core._fairshare and the ``fairshare`` picker): LSF's dynamic
priority worked by hand, share trees (flat, ``group@``, hierarchical,
``default``), configuration errors, and properties: equal shares keep two
endless users within one job's usage of each other; the cache and sleeping
never change a fairshare decision."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from events import (
    EventRejected,
    FairshareConfig,
    InputEvent,
    JobAllocated,
    JobFinished,
    JobPended,
    JobSubmitted,
    Limit,
    LimitsConfig,
    QueueConfig,
    SessionBegin,
    SessionEnd,
    ShareTree,
    UserGroup,
)
from tests.core.test_invariants import check_invariants, to_events
from tests.core.test_sleep import SHAPES, ops_over, per_session, run
from tests.helpers import submit, up
from xce_core import FairshareParams, JobState, SchedulerConfig, SchedulerCore, VirtualClock
from xce_core._fairshare import ShareNode, dynamic_priority, settled
from xce_core._pending import PendingQueue

GO = SessionBegin()
HOUR = 3600.0


def started(out: list[Any]) -> list[str]:
    return [d.job_id for d in out if isinstance(d, JobAllocated)]


def core_with(
    tree: ShareTree | None = None, clock: VirtualClock | None = None, **params: Any
) -> SchedulerCore:
    config = SchedulerConfig(picker="fairshare", fairshare=FairshareParams(**params))
    core = SchedulerCore(config, clock=clock or VirtualClock())
    if tree is not None:
        core.apply(FairshareConfig(tree=tree))
        assert core.take_decisions() == []
    return core


def account(core: SchedulerCore, *path: str) -> ShareNode:
    tree = core._fairshare.cluster
    assert tree is not None
    node = tree.root
    for name in path:
        node = next(c for c in node.children if c.name == name)
    return node


async def session(core: SchedulerCore) -> list[str]:
    await core.run_session()
    check_invariants(core)
    return started(core.take_decisions())


# ------------------------------------------------------------ the formula


def test_priority_with_lsf_defaults_worked_by_hand() -> None:
    defaults = FairshareParams()
    # Nothing used, nothing running: shares / (1 · RUN_JOB_FACTOR 3.0).
    assert dynamic_priority(10, 0.0, 0, defaults) == pytest.approx(10 / 3)
    # 2 slot-hours used and 2 slots running: 10 / (2·0.7 + 3·3) = 10 / 10.4.
    assert dynamic_priority(10, 2.0, 2, defaults) == pytest.approx(0.961538, rel=1e-6)
    # Every factor 0 cannot divide by zero.
    zero = FairshareParams(run_time_factor=0, run_job_factor=0)
    assert dynamic_priority(1, 0.0, 0, zero) > 1e9


async def test_usage_decays_to_a_tenth_after_hist_hours_worked_by_hand() -> None:
    clock = VirtualClock()
    core = core_with(ShareTree(shares=[("alice", 10)]), clock, recalc_interval=0)
    core.apply(up("h", slots=2))
    core.apply(submit("j", tasks=2, user="alice"))
    assert await session(core) == ["j"]
    alice = account(core, "alice")
    # Running 2 slots: 10 / (0 · 0.7 + (1 + 2) · 3) = 10 / 9.
    assert alice.priority == pytest.approx(10 / 9)
    clock.advance_to(HOUR)
    core.apply(JobFinished(job_id="j"))
    await session(core)  # recalculation: history enters the priority
    # 2 slots for an hour, decaying as it accrues (an hour counts 0.1 h after 5 h):
    # 2 · (1 - 0.1^(1/5)) / (ln 10 / 5) = 1.602733 slot-hours.
    used = 2 * (1 - 0.1 ** (1 / 5)) / (math.log(10) / 5)
    assert used == pytest.approx(1.602733, rel=1e-6)
    assert alice.usage / HOUR == pytest.approx(used, rel=1e-9)
    assert alice.priority == pytest.approx(10 / (0.7 * 1.602733 + 3), rel=1e-6)
    clock.advance_to(6 * HOUR)
    core.apply(up("h2"))  # something changed: a session runs
    await session(core)
    # Five hours later a tenth is left: 10 / (0.7 · 0.1602733 + 3) = 3.21317.
    assert alice.usage / HOUR == pytest.approx(used / 10, rel=1e-9)
    assert alice.priority == pytest.approx(3.21317, rel=1e-5)


async def test_without_decay_usage_is_slot_hours() -> None:
    clock = VirtualClock()
    core = core_with(ShareTree(shares=[("alice", 1)]), clock, hist_hours=0, recalc_interval=0)
    core.apply(up("h", slots=4))
    core.apply(submit("j", tasks=3, user="alice"))
    await session(core)
    clock.advance_to(2 * HOUR)
    core.apply(JobFinished(job_id="j"))
    await session(core)
    assert account(core, "alice").usage == pytest.approx(6 * HOUR)


async def test_recalculation_due_follows_the_interval_from_the_last_one() -> None:
    clock = VirtualClock()
    core = core_with(ShareTree(shares=[("alice", 1)]), clock, recalc_interval=60)
    core.apply(up("h"))
    assert not core.recalculation_due(0.0)  # no account yet: nothing to bring in
    core.apply(submit("j", user="alice"))
    assert core.recalculation_due(0.0)  # never recalculated
    await session(core)
    assert not core.recalculation_due(0.0)
    assert not core.recalculation_due(59.0)
    assert core.recalculation_due(60.0)
    clock.advance_to(75.0)
    await session(core)
    assert not core.recalculation_due(134.0)
    assert core.recalculation_due(135.0)


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=1e-300, max_value=1e299, allow_nan=False),
        # Exactly halfway between two 36-bit values: ties go to even.
        st.tuples(st.integers(1 << 35, (1 << 36) - 1), st.integers(-60, 60)).map(
            lambda m: math.ldexp((m[0] << 1) | 1, m[1] - 37)
        ),
    )
)
def test_usage_is_settled_to_36_bits_rounded_to_nearest_even(usage: float) -> None:
    mantissa, exponent = math.frexp(usage)
    exact = math.ldexp(
        round(mantissa * (1 << 36)), exponent - 36
    )  # exact: round() on an exact value
    assert settled(usage) == exact


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(
            st.one_of(
                st.just(0.0),
                st.floats(min_value=0.0, max_value=1e12, allow_nan=False),
                st.floats(min_value=1e-320, max_value=1e-290),  # subnormal and near
                st.floats(min_value=1e299, max_value=1e305),  # past the fast split
            ),
            st.integers(0, 10_000),  # slots held
            st.sampled_from([0.0, 1.0, 37.5, 3600.0, 1e6]),  # seconds since its stamp
            st.integers(0, 100),  # shares
        ),
        min_size=1,
        max_size=6,
    ),
    hist_hours=st.sampled_from([0.0, 0.5, 5.0]),
    run_time_factor=st.sampled_from([0.0, 0.7, 1.3]),
    run_job_factor=st.sampled_from([0.0, 3.0]),
)
def test_a_recalculation_gives_what_advance_settled_and_the_formula_give(
    nodes: list[tuple[float, int, float, int]],
    hist_hours: float,
    run_time_factor: float,
    run_job_factor: float,
) -> None:
    """Fairshare.recalculate works the three rules out inline (for speed): for
    any usage, slots, step and factors it leaves each account exactly as
    Fairshare._advance, settled() and dynamic_priority() would, bit for bit."""
    core = core_with(
        ShareTree(shares=[(f"u{i}", n[3]) for i, n in enumerate(nodes)]),
        hist_hours=hist_hours,
        run_time_factor=run_time_factor,
        run_job_factor=run_job_factor,
    )
    fairshare = core._fairshare
    now = 2e6
    expected = []
    for i, (usage, slots, since, shares) in enumerate(nodes):
        node = account(core, f"u{i}")
        node.usage, node.slots, node.stamp = usage, slots, now - since
        reference = ShareNode("reference", shares, None, -1)
        reference.usage, reference.slots, reference.stamp = usage, slots, now - since
        fairshare._advance(reference, now)
        frozen = settled(reference.usage)
        priority = dynamic_priority(shares, frozen / 3600, slots, fairshare.params)
        expected.append((reference.usage, frozen, priority))
    fairshare.recalculate(now)
    for i in range(len(nodes)):
        node = account(core, f"u{i}")
        assert (node.usage, node.frozen, node.priority) == expected[i]
        assert node.stamp == now


async def test_an_account_made_after_a_recalculation_enters_the_next_one() -> None:
    """Accounts are made as unlisted users first submit (``default`` shares);
    every recalculation after that brings the new account's usage into its
    priority as it does for the others."""
    clock = VirtualClock()
    core = core_with(ShareTree(shares=[("default", 1)]), clock, recalc_interval=0)
    core.apply(up("h", slots=2))
    core.apply(submit("a1", user="alice"))
    assert await session(core) == ["a1"]  # a recalculation, alice's account only
    clock.advance_to(HOUR)
    core.apply(submit("b1", user="bob"))  # bob's account is made now
    assert await session(core) == ["b1"]
    clock.advance_to(2 * HOUR)
    core.apply(JobFinished(job_id="b1"))
    core.apply(JobFinished(job_id="a1"))
    await session(core)
    bob, alice = account(core, "bob"), account(core, "alice")
    assert bob.frozen == settled(bob.usage) > 0
    assert alice.frozen == settled(alice.usage) > bob.frozen
    assert bob.priority > alice.priority


# ------------------------------------------------------------ order


async def test_equal_shares_alternate_users_within_one_session() -> None:
    core = core_with()  # no tree: every user an equal share
    for i in range(4):
        core.apply(up(f"h{i}"))
    for i in range(6):
        core.apply(submit(f"a{i}", user="alice"))
    for i in range(6):
        core.apply(submit(f"b{i}", user="bob"))
    # FCFS would start a0..a3; fairshare charges alice as her jobs start.
    assert await session(core) == ["a0", "b0", "a1", "b1"]
    core.apply(JobFinished(job_id="a0"))
    core.apply(JobFinished(job_id="a1"))
    # Alice now runs nothing and bob two: alice's priority is higher.
    assert await session(core) == ["a2", "a3"]


async def test_shares_three_to_one_give_three_to_one_slots() -> None:
    core = core_with(ShareTree(shares=[("alice", 3), ("bob", 1)]))
    for i in range(8):
        core.apply(up(f"h{i}"))
    for i in range(10):
        core.apply(submit(f"b{i}", user="bob"))
        core.apply(submit(f"a{i}", user="alice"))
    out = await session(core)
    # By hand: alice 3/(3(1+Sa)) against bob 1/(3(1+Sb)); a tie goes to the
    # earlier job (bob's b_i was submitted before a_i): a a b a a a b a.
    assert [j[0] for j in out] == list("aabaaaba")


async def test_hierarchical_groups_take_the_highest_priority_at_each_level() -> None:
    tree = ShareTree(
        shares=[("eng", 1), ("ops", 1)],
        groups={"eng": UserGroup(members=["u1", "u2"], shares=[("u1", 1), ("u2", 1)])},
    )
    core = core_with(tree)
    for i in range(6):
        core.apply(up(f"h{i}"))
    for i in range(5):
        for user in ("u1", "u2", "ops"):
            core.apply(submit(f"{user}-{i}", user=user))
    out = await session(core)
    users = [j.split("-")[0] for j in out]
    # eng and ops alternate at the top (a tie goes to the account, ops, before
    # the group); u1 and u2 alternate inside eng (a tie: the earlier job).
    assert users == ["ops", "u1", "ops", "u2", "ops", "u1"]
    eng = account(core, "eng")
    u1, u2 = account(core, "eng", "u1"), account(core, "eng", "u2")
    # A group's use is its members' sum.
    assert (eng.slots, u1.slots, u2.slots, account(core, "ops").slots) == (3, 2, 1, 3)
    core.apply(JobFinished(job_id=out[0]))
    await session(core)
    assert eng.slots == u1.slots + u2.slots == 3


async def test_group_at_gives_each_member_a_share_and_a_flat_group_one_account() -> None:
    tree = ShareTree(
        shares=[("eng@", 1), ("ops", 2)],
        groups={"eng": UserGroup(members=["u1", "u2"]), "ops": UserGroup(members=["o1", "o2"])},
    )
    core = core_with(tree)
    for i in range(8):
        core.apply(up(f"h{i}"))
    for i in range(6):
        for user in ("u1", "u2", "o1", "o2"):
            core.apply(submit(f"{user}-{i}", user=user))
    out = await session(core)
    count = {u: sum(j.startswith(u) for j in out) for u in ("u1", "u2", "o")}
    # u1 and u2 have 1 share each, the ops account (o1 and o2 together) 2.
    assert count == {"u1": 2, "u2": 2, "o": 4}
    assert account(core, "ops").slots == 4


async def test_default_shares_and_users_without_shares() -> None:
    core = core_with(ShareTree(shares=[("alice", 1)]))
    core.apply(up("h0"))
    core.apply(up("h1"))
    core.apply(submit("z0", user="zed"))  # no share: runs only when alice cannot
    core.apply(submit("a0", user="alice"))
    assert await session(core) == ["a0", "z0"]
    core = core_with(ShareTree(shares=[("default", 1)]))
    for i in range(4):
        core.apply(up(f"h{i}"))
    for user in ("x", "y"):
        for i in range(3):
            core.apply(submit(f"{user}{i}", user=user))
    assert await session(core) == ["x0", "y0", "x1", "y1"]


async def test_a_queue_tree_applies_to_its_queue_and_a_reconfiguration_regroups() -> None:
    core = SchedulerCore(clock=VirtualClock())
    for i in range(4):
        core.apply(up(f"h{i}"))
    for i in range(4):
        core.apply(submit(f"a{i}", user="alice", queue="q"))
    for i in range(4):
        core.apply(submit(f"b{i}", user="bob", queue="q"))
    core.apply(QueueConfig(name="q", picker="fairshare"))
    assert core.take_decisions() == []
    assert await session(core) == ["a0", "b0", "a1", "b1"]
    # Bob gets all the shares: his jobs go first now.
    tree = ShareTree(shares=[("bob", 10), ("alice", 1)])
    core.apply(QueueConfig(name="q", picker="fairshare", fairshare=tree))
    core.apply(up("h4"))
    core.apply(up("h5"))
    assert await session(core) == ["b2", "b3"]


@pytest.mark.parametrize(
    ("tree", "error"),
    [
        (ShareTree(shares=[("eng@", 1)]), "'eng@' names no user group"),
        (ShareTree(shares=[("alice", 1), ("alice", 2)]), "'alice' is listed twice"),
        (
            ShareTree(
                shares=[("g", 1)], groups={"g": UserGroup(members=["x"], shares=[("g", 1)])}
            ),
            "group 'g' contains itself",
        ),
    ],
)
async def test_a_bad_tree_is_rejected_and_the_previous_stays(tree: ShareTree, error: str) -> None:
    core = core_with(ShareTree(shares=[("alice", 3), ("bob", 1)]))
    core.apply(FairshareConfig(tree=tree))
    [rejected] = core.take_decisions()
    assert isinstance(rejected, EventRejected)
    assert error in rejected.error
    assert account(core, "alice").shares == 3
    core.apply(QueueConfig(name="q", picker="fairshare", fairshare=tree))
    [rejected] = core.take_decisions()
    assert isinstance(rejected, EventRejected)
    assert error in rejected.error
    assert "queue q fairshare" in rejected.error
    assert core.state.queues.get("q") is None or core.state.queues["q"].picker is None


def test_share_trees_decode_with_field_paths() -> None:
    decoder = msgspec.json.Decoder(FairshareConfig)
    good = b'{"type":"fairshare_config","tree":{"shares":[["a",1],["default",2]]}}'
    assert decoder.decode(good).tree == ShareTree(shares=[("a", 1), ("default", 2)])
    with pytest.raises(msgspec.ValidationError, match=r"tree.shares\[0\]"):
        decoder.decode(b'{"type":"fairshare_config","tree":{"shares":[["a",-1]]}}')
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        decoder.decode(b'{"type":"fairshare_config","tree":{"shares":[],"share":1}}')


# ------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hosts=st.integers(1, 6),
    slots=st.integers(1, 3),
    run=st.integers(1, 7200),
    rounds=st.integers(20, 80),
    hist_hours=st.sampled_from([0.0, 5.0]),
)
async def test_equal_shares_keep_two_endless_users_within_one_job_of_usage(
    hosts: int, slots: int, run: int, rounds: int, hist_hours: float
) -> None:
    clock = VirtualClock()
    core = core_with(
        ShareTree(shares=[("a", 1), ("b", 1)]), clock, hist_hours=hist_hours, recalc_interval=0
    )
    for i in range(hosts):
        core.apply(up(f"h{i}", slots=3))
    submitted = {"a": 0, "b": 0}
    ends: dict[str, float] = {}

    def top_up() -> None:
        for user in ("a", "b"):
            while submitted[user] - sum(1 for j in ends if j.startswith(user)) < 3 * hosts:
                core.apply(submit(f"{user}{submitted[user]}", tasks=slots, user=user))
                submitted[user] += 1

    one_job = slots * run  # slot-seconds of one job
    for _ in range(rounds):
        top_up()
        core.apply(GO)
        await core.run_session()
        for job_id in started(core.take_decisions()):
            ends[job_id] = clock.now() + run
        # Both accounts brought to now: charged usage within one job's worth.
        a, b = account(core, "a"), account(core, "b")
        for node in (a, b):
            core._fairshare._advance(node, clock.now())
        assert abs(a.usage - b.usage) <= one_job * (1 + 1e-9)
        assert abs(a.slots - b.slots) <= slots
        # The earliest running jobs end.
        first = min(ends.values())
        clock.advance_to(first)
        for job_id, end in list(ends.items()):
            if end <= first and core.state.job_state(job_id) is JobState.RUNNING:
                core.apply(JobFinished(job_id=job_id))


def with_users(events: list[InputEvent], tree: bool) -> list[InputEvent]:
    head: list[InputEvent] = [
        LimitsConfig(limits=[Limit(name="two", per_user=["all"], slots=3)]),
    ]
    if tree:
        head.append(
            FairshareConfig(
                tree=ShareTree(
                    shares=[("u0", 3), ("g", 1), ("default", 1)],
                    groups={"g": UserGroup(members=["u1", "u2"], shares=[("u1", 2), ("u2", 1)])},
                )
            )
        )
    return [
        *head,
        *(
            msgspec.structs.replace(e, user=f"u{i % 4}") if isinstance(e, JobSubmitted) else e
            for i, e in enumerate(events)
        ),
    ]


ops = st.lists(ops_over(SHAPES, [f"w{i}" for i in range(5)], sessions=2), min_size=1, max_size=70)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.booleans(), st.sampled_from([2, 256]))
# Found by this test: j0 (3 tasks) failed on capacity and slept; j1, of the same
# user, then started, and under the per-user limit of 3 slots a fresh attempt
# of j0 says limit_reached (no group sleeps under limits now).
@example(
    stream=[
        ("submit", "", 3, 0, 0),
        ("session",),
        ("down", "w0"),
        ("session",),
        ("submit", "", 1, 0, 0),
        ("up", "w0", 0, 0, "a"),
        ("up", "w0", 0, 0, "a"),
        ("up", "w0", 1, 0, "a"),
        ("session",),
    ],
    tree=False,
    batch=2,
)
async def test_cache_and_sleeping_never_change_a_fairshare_decision(
    stream: list[tuple[Any, ...]], tree: bool, batch: int
) -> None:
    events = with_users(to_events(stream), tree)

    def make(**options: Any) -> SchedulerCore:
        config = SchedulerConfig(
            picker="fairshare",
            batch_size=batch,
            fairshare=FairshareParams(recalc_interval=0),
            **options,
        )
        return SchedulerCore(config, clock=VirtualClock())

    fast = per_session(await run(events, make()))
    assert fast == per_session(await run(events, make(sleep_blocked_groups=False)))
    # Without the cache the same jobs start in the same places; a pend may
    # report another category (a cache hit reports the first miss's, as
    # SchedulerConfig.unsatisfiable_cache says).
    uncached = per_session(await run(events, make(unsatisfiable_cache=False)))
    assert [(n, alloc, end) for n, alloc, _, end in fast] == [
        (n, alloc, end) for n, alloc, _, end in uncached
    ]


# ------------------------------------------------------------ a reference of the order

FAIR_SHAPES = ["select[type==a]", "select[type==b]", "", "select[type==c]"]  # c: no host

fair_jobs = st.lists(
    st.tuples(
        st.integers(0, 3),  # user
        st.integers(0, len(FAIR_SHAPES) - 1),  # shape
        st.integers(1, 2),  # tasks
        st.integers(0, 1),  # job priority
    ),
    min_size=1,
    max_size=24,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shares=st.lists(st.integers(1, 4), min_size=4, max_size=4),
    hosts=st.lists(
        st.tuples(st.integers(1, 3), st.sampled_from(["a", "b"])), min_size=1, max_size=4
    ),
    first=fair_jobs,
    second=fair_jobs,
    finish=st.sets(st.integers(0, 23)),
    batch=st.sampled_from([1, 2, 256]),
)
async def test_each_job_taken_is_the_first_of_a_reference_that_orders_accounts_then_jobs(
    shares: list[int],
    hosts: list[tuple[int, str]],
    first: list[tuple[int, int, int, int]],
    second: list[tuple[int, int, int, int]],
    finish: set[int],
    batch: int,
) -> None:
    """A reference of the order, written apart from the core's heaps: at each
    job the session takes (started, or pended on a first try), every account
    has LSF's priority for the slots it holds at that point (no usage history:
    time stands still), and the job taken is the first, by (account priority,
    job priority, submission), of the pending jobs not taken yet whose shape
    has not failed this session. Two sessions, with jobs ending and new ones
    arriving between them; batches of 1, 2 and many."""
    params = FairshareParams(recalc_interval=0)
    config = SchedulerConfig(
        picker="fairshare", fairshare=params, batch_size=batch, sleep_blocked_groups=False
    )
    core = SchedulerCore(config, clock=VirtualClock())
    users = [f"u{i}" for i in range(4)]
    core.apply(FairshareConfig(tree=ShareTree(shares=list(zip(users, shares, strict=True)))))
    for i, (slots, kind) in enumerate(hosts):
        core.apply(up(f"h{i}", slots=slots, type=kind))
    held = dict.fromkeys(users, 0)  # slots each account holds
    pending: dict[str, tuple[str, tuple[str, int], int, int, int]] = {}
    running: list[tuple[str, str, int]] = []
    pended_before: set[str] = set()
    seq = 0

    def add(jobs: list[tuple[int, int, int, int]], tag: str) -> None:
        nonlocal seq
        for n, (user, shape, tasks, priority) in enumerate(jobs):
            job_id = f"{tag}{n}"
            seq += 1
            resreq = FAIR_SHAPES[shape]
            core.apply(submit(job_id, resreq, tasks=tasks, user=users[user], priority=priority))
            pending[job_id] = (users[user], (resreq, tasks), tasks, priority, seq)

    async def check_session() -> None:
        core.apply(GO)
        await core.run_session()
        check_invariants(core)
        failed: set[tuple[str, int]] = set()
        taken: set[str] = set()

        def order(job_id: str) -> tuple[float, int, int]:
            user, _, _, priority, arrival = pending[job_id]
            return (-dynamic_priority(shares[users.index(user)], 0.0, held[user], params),
                    -priority, arrival)  # fmt: skip

        def first_untaken() -> str | None:
            candidates = [
                j for j, job in pending.items() if j not in taken and job[1] not in failed
            ]
            return min(candidates, key=order, default=None)

        for d in core.take_decisions():
            if isinstance(d, JobPended) and d.cached:
                taken.add(d.job_id)  # its shape failed: settled with it
                continue
            if not isinstance(d, JobAllocated | JobPended):
                continue
            expected = first_untaken()
            # A job that pended before and fails again for the same reason is
            # told nothing: its shape failed silently this session.
            while expected is not None and expected != d.job_id and expected in pended_before:
                failed.add(pending[expected][1])
                expected = first_untaken()
            assert expected is not None, d
            assert order(d.job_id) == order(expected), (d, expected)
            taken.add(d.job_id)
            user, shape, tasks, _, _ = pending[d.job_id]
            if isinstance(d, JobAllocated):
                del pending[d.job_id]
                held[user] += tasks
                running.append((d.job_id, user, tasks))
            else:
                failed.add(shape)
                pended_before.add(d.job_id)
        # Nothing the session did not take could have been taken: what is left
        # is of shapes that failed (silently, for jobs told before).
        left = first_untaken()
        while left is not None and left in pended_before:
            failed.add(pending[left][1])
            left = first_untaken()
        assert left is None, left
        pended_before.update(pending)

    add(first, "a")
    await check_session()
    for i, (job_id, user, tasks) in enumerate(list(running)):
        if i in finish:
            core.apply(JobFinished(job_id=job_id))
            held[user] -= tasks
            running.remove((job_id, user, tasks))
    add(second, "b")
    await check_session()


recalc_steps = st.lists(
    st.tuples(
        st.sampled_from(["submit", "finish", "wait"]),
        st.integers(0, 2),  # user, or which running job ends
        st.sampled_from([1.0, 5.0, 30.0, 120.0]),  # seconds before the session
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recalc_steps, st.integers(1, 3))
async def test_a_recalculation_keys_lanes_again_as_a_rebuild_of_the_whole_order_would(
    steps: list[tuple[str, int, float]], slots: int
) -> None:
    """A recalculation keys only the accounts' lanes again (jobs keep their
    keys); rebuilding the whole order instead, as a queue change does, gives
    the same decisions, in the same order, as usage accrues and decays (three
    users with endless work on a small cluster, sessions at random gaps)."""

    async def decide(rebuild: bool) -> list[Any]:
        clock = VirtualClock()
        params = FairshareParams(recalc_interval=5.0, hist_hours=0.02)
        core = SchedulerCore(SchedulerConfig(picker="fairshare", fairshare=params), clock=clock)
        core.apply(up("h", slots=slots))
        out: list[Any] = []
        running: list[str] = []
        with pytest.MonkeyPatch.context() as patch:
            if rebuild:
                patch.setattr(PendingQueue, "reprioritised", PendingQueue.broken)
            for n, (what, which, wait) in enumerate(steps):
                if what == "submit":
                    core.apply(submit(f"j{n}", user=f"u{which}"))
                elif what == "finish" and running:
                    core.apply(JobFinished(job_id=running.pop(which % len(running))))
                clock.advance_to(clock.now() + wait)
                core.apply(GO)
                await core.run_session()
                check_invariants(core)
                decisions = core.take_decisions()
                running += started(decisions)
                out += [
                    msgspec.structs.replace(d, elapsed_s=0.0) if isinstance(d, SessionEnd) else d
                    for d in decisions
                ]
        return out

    assert await decide(rebuild=False) == await decide(rebuild=True)


async def test_a_share_tree_nested_too_deep_is_rejected_with_its_path() -> None:
    groups = {f"g{i}": UserGroup(members=[f"u{i}"], shares=[(f"g{i + 1}", 1)]) for i in range(40)}
    groups["g40"] = UserGroup(members=["last"])
    core = core_with(ShareTree(shares=[("alice", 1)]))
    core.apply(FairshareConfig(tree=ShareTree(shares=[("g0", 1)], groups=groups)))
    [rejected] = core.take_decisions()
    assert isinstance(rejected, EventRejected)
    assert "nested more than 32 deep (g0 > g1 > " in rejected.error
    assert account(core, "alice").shares == 1  # the previous tree stands
