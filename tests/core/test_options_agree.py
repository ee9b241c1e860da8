"""Options that only change how fast the core decides never change what it
decides, with every policy feature at once: limits (host limits too), task
ranges, alternatives and ``span[block=]`` shapes (whose task counts are not
monotone), fairshare or FCFS, strict FIFO, EASY or conservative backfill with
run limits and the clock moving on between events, and a snapshot restored
mid-stream.

Each of the other property tests varies one option over the features it
concerns; this one crosses them. Compared per session: starts with their
hosts and pends with their category (:func:`tests.core.test_sleep.per_session`);
without the unsatisfiable cache, starts only (a cache hit reports the category
the first miss found, by design: ``SchedulerConfig.unsatisfiable_cache``).
After every session of every run: every invariant holds and no limit is
exceeded.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import InputEvent, JobSubmitted, Limit, LimitsConfig, SharedResource
from tests.core.test_invariants import NAMES, RESREQS, check_invariants, ops_over, to_events
from tests.core.test_limits import assert_within, limit_sets
from tests.core.test_sleep import per_session
from tests.helpers import up
from xce_core import FairshareParams, SchedulerConfig, SchedulerCore, VirtualClock

SHAPES = [*RESREQS, "span[block=3]", "{span[block=3]} || {span[hosts=1]}", "span[ptile=2]"]
# Submissions, sessions and finishes weighted up (the rest of ops_over's mix
# takes hosts down and away): most streams then have jobs running, pending
# and ending at any point.
submissions = st.tuples(
    st.just("submit"),
    st.sampled_from(SHAPES),
    st.integers(1, 5),  # tasks
    st.integers(0, 2),  # fewer tasks at least (a range)
    st.integers(0, 2),  # priority
)
sessions = st.just(("session",))
finishes = st.tuples(st.just("finish"), st.integers(0, 40))
streams = st.lists(
    st.one_of(submissions, sessions, finishes, submissions, sessions, ops_over(SHAPES, NAMES[:3])),
    min_size=12,
    max_size=60,
)
# Limits likely to bind on three hosts and three users (u0, u1, u2).
binding = st.lists(
    st.builds(
        lambda name, who, hosts, slots: Limit(name=name, **who, **hosts, slots=slots),
        st.sampled_from(["l1", "l2"]),
        st.sampled_from(
            [
                {"per_user": ["u1"]},
                {"per_user": ["all"]},
                {"users": ["u2"]},
                {"per_queue": ["all"]},
            ]
        ),
        st.sampled_from([{}, {"hosts": ["w0"]}, {"per_host": ["all"]}, {"hosts": ["w0", "w1"]}]),
        st.integers(0, 3),
    ),
    max_size=2,
    unique_by=lambda limit: limit.name,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=streams,
    limits=st.one_of(limit_sets, binding),
    picker=st.sampled_from(["fcfs", "fairshare"]),
    batch=st.sampled_from([2, 256]),
    cut=st.integers(0, 60),
    strict=st.booleans(),
    backfill=st.sampled_from(["none", "easy", "conservative"]),
    seed=st.integers(0, 1000),
)
async def test_speed_options_never_change_a_decision(
    ops: list[Any],
    limits: list[Limit],
    picker: str,
    batch: int,
    cut: int,
    strict: bool,
    backfill: str,
    seed: int,
) -> None:
    rng = random.Random(seed)
    # Hosts up from the start, so most streams start jobs (the stream may take
    # them down, redefine or remove them).
    events: list[InputEvent] = [
        LimitsConfig(limits=limits),
        up("w0", 3, {"mem": 300.0}, type="a"),
        up("w1", 2, {"mem": 100.0}, type="b"),
        up("w2", 4, {"mem": 300.0}, type="a"),
        SharedResource(name="lic", total=2.0),
    ]
    for i, event in enumerate(to_events(ops)):
        if isinstance(event, JobSubmitted):
            event = msgspec.structs.replace(
                event,
                user=f"u{i % 3}",
                queue=f"q{i % 2}",
                run_limit=rng.choice([None, 5.0, 10.0, 50.0]),
            )
        events.append(event)

    # The clock moves on between events (backfill plans with run limits).
    steps = [rng.choice([0.0, 0.0, 1.0, 3.0, 7.0]) for _ in events]

    def make(**options: Any) -> Callable[[VirtualClock], SchedulerCore]:
        config = SchedulerConfig(
            picker=picker,
            strict_fifo=strict,
            backfill=backfill,
            fairshare=FairshareParams(recalc_interval=0),
            **options,
        )
        return lambda clock: SchedulerCore(config, clock=clock)

    async def drive(core_on: Callable[[VirtualClock], SchedulerCore], cut: int = -1) -> list[Any]:
        """The stream through a core, restored from its snapshot before event
        ``cut``; invariants checked after every session, and that no limit is
        exceeded."""
        clock = VirtualClock()
        core = core_on(clock)
        out: list[Any] = []
        for k, (event, step) in enumerate(zip(events, steps, strict=True)):
            clock.advance_to(clock.now() + step)
            if k == cut:
                core = SchedulerCore.restore(core.snapshot(), clock=clock)
            if core.apply(event):
                await core.run_session()
                check_invariants(core)
                assert_within(core, limits)
            out.extend(core.take_decisions())
        return out

    decided = per_session(await drive(make()))
    assert decided == per_session(await drive(make(sleep_blocked_groups=False)))
    # batch 2: the picker and the allocator run as two tasks.
    assert decided == per_session(await drive(make(batch_size=batch)))
    uncached = per_session(await drive(make(unsatisfiable_cache=False)))
    assert [(n, alloc, end) for n, alloc, _, end in decided] == [
        (n, alloc, end) for n, alloc, _, end in uncached
    ]
    # A snapshot taken before event ``cut`` (of the stream's length) and
    # restored goes on alike.
    assert decided == per_session(await drive(make(), cut % len(events)))
