"""Runs of submissions (``SchedulerCore.submit_run``, for benchmark B5 of
benchmarks/bench_ingest.py): applied in one call, with each queue's order keys
looked up once and the usual job admitted inline, they decide and leave the
state exactly as the general rules applied event by event."""

from __future__ import annotations

import enum
import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import Decision, EventRejected, InputEvent, WorkerDown
from tests.core.test_admission import plain
from tests.core.test_faults import PickyPicker
from tests.core.test_session import SpyAllocator, registry_with
from tests.helpers import GO, submit, up
from tests.strategies import ingest_events
from xce_core import SchedulerConfig, SchedulerCore, SchedulerLoop, VirtualClock
from xce_core._core import RUN_END
from xce_core._fairgroup import Lane, Lanes
from xce_core._fairshare import ShareNode
from xce_core._model import JobGroup
from xce_core.plugin import Job, Picker, Queue, SchedContext, Worker


class RaggedPicker(Picker):
    """Breaks the picker contract for user "odd": a shorter key, and a list."""

    name = "ragged"

    def order_key(self, job: Job, queue: Queue) -> tuple[Any, ...]:
        if job.user == "odd":
            return [-job.priority, job.seq]  # type: ignore[return-value]
        return (-job.priority, job.submit_time, job.seq)


def new_core(strict_fifo: bool) -> SchedulerCore:
    return SchedulerCore(
        SchedulerConfig(strict_fifo=strict_fifo),
        registry=registry_with(pickers=(PickyPicker(), RaggedPicker())),
        clock=VirtualClock(),  # snapshots hold the time shares were configured
    )


def _slots(obj: object) -> list[str]:
    return [name for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())]


def described(value: Any, top: bool = False) -> Any:
    """``value`` as plain comparable data: records by their fields (those of
    jobs and groups only at the top, else by name), containers by content."""
    if isinstance(value, Job) and not top:
        return ("job", value.job_id)
    if isinstance(value, JobGroup) and not top:
        return ("group", value.gid)
    if isinstance(value, ShareNode):
        return ("account", value.uid)
    if isinstance(value, Lane) and not top:
        return ("lane", value.lid)
    if isinstance(value, Lanes):
        return "lanes"  # the order's side: state_of describes it
    if isinstance(value, Worker):
        return ("worker", value.name)
    if isinstance(value, list | tuple):
        return [described(v) for v in value]
    if isinstance(value, dict):
        return [(described(k), described(v)) for k, v in value.items()]
    if isinstance(value, set):
        return sorted(map(repr, map(described, value)))
    if hasattr(value, "__slots__") and not isinstance(value, enum.Enum):
        return (type(value).__name__, [(n, described(getattr(value, n))) for n in _slots(value)])
    return value


def state_of(core: SchedulerCore) -> Any:
    """Everything a submission may change, in order: jobs, groups, the policy
    order, sleepers, parked and untold jobs, counters. (Not the state's memo of
    the queues it placed by shape, which the inline path does not need.)"""
    state, pending = core.state, core._pending
    return (
        [described(job, top=True) for job in state.jobs.values()],
        [(described(home), described(group, top=True)) for home, group in state.groups.items()],
        described(pending._order._heap),
        [(described(e[:-1]), described(e[-1].heap)) for e in pending._order.lanes.heap],
        sorted(group.gid for group in pending._order.fair),
        pending._order.broken,
        described(pending._sleepers),
        described(pending._parked),
        described(pending._untold_parked),
        described(core._untold),
        described(state.ended),
        described(state.queues),
        (state.pending_count, state._seq, state._groups_made, core.events_received, core.changed),
        described(state.order_key._ranks),
    )


async def event_by_event(events: list[InputEvent], core: SchedulerCore) -> list[Decision]:
    """The general rules: each event on its own (a run of one), its shape and
    origin asked of the ``ShapeCache``, every job admitted by
    ``ClusterState.job_submitted`` and keyed by ``OrderKeys`` itself."""

    def general(self: SchedulerCore, name: str) -> Any:
        return functools.partial(self.state.order_key, queue=self.state.queue(name)), None

    out: list[Decision] = []
    core._shape_tables = ({}, {})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SchedulerCore, "_queue_seen", general)
        for event in events:
            if core.apply(event):
                await core.run_session()
            out += core.take_decisions()
    return out


async def in_runs(events: list[InputEvent], core: SchedulerCore) -> list[Decision]:
    """What drivers do: the whole stream through the loop, submissions in runs."""
    out: list[Decision] = []

    async def sink(decisions: list[Decision]) -> None:
        out.extend(decisions)

    await SchedulerLoop(core, sink).apply(events)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ingest_events(), min_size=20, max_size=120), st.booleans())
async def test_a_run_of_submissions_decides_as_the_general_rules(
    events: list[InputEvent], strict_fifo: bool
) -> None:
    events = [up("w0", 2, type="a"), *events, GO]
    general, runs = new_core(strict_fifo), new_core(strict_fifo)
    expected = await event_by_event(events, general)
    assert plain(await in_runs(events, runs)) == plain(expected)
    # The state too, to the last key, ticket and arrival number.
    assert state_of(runs) == state_of(general)
    assert runs.snapshot() == general.snapshot()


async def test_a_run_stops_at_the_first_other_item_without_applying_it() -> None:
    core = new_core(False)
    more = iter([submit("b"), WorkerDown(name="x"), submit("c")])
    item, count = core.submit_run(submit("a"), more, 10)
    assert (item, count) == (WorkerDown(name="x"), 2)
    assert next(more) == submit("c")
    assert list(core.state.jobs) == ["a", "b"]
    assert core.events_received == 2
    assert core.submit_run(submit("c"), iter(()), None) == (RUN_END, 1)
    # A duplicate id is rejected under its own index, and the run goes on.
    item, count = core.submit_run(submit("a"), iter([submit("d")]), 7)
    assert (item, count) == (RUN_END, 2)
    (rejected,) = core.take_decisions()
    assert (rejected.index, rejected.job_id) == (7, "a")  # type: ignore[union-attr]
    assert "d" in core.state.jobs


async def test_a_run_during_a_session_waits_until_it_ends() -> None:
    spy = SpyAllocator()
    core = SchedulerCore(SchedulerConfig(sequential_allocator="spy"), registry=registry_with(spy))
    seen: list[Any] = []

    async def meddle(ctx: SchedContext) -> None:
        if ctx.job.job_id == "j1":
            seen.append(core.submit_run(submit("late"), iter([submit("j1"), GO]), None))
            seen.append("late" in core.state.jobs)

    spy.on_call = meddle
    out = await in_runs([up("a"), submit("j1"), GO], core)
    assert seen == [(GO, 2), False]  # deferred (as events 3 and 4)
    assert "late" in core.state.jobs
    (rejected,) = [d for d in out if isinstance(d, EventRejected)]
    assert (rejected.index, rejected.job_id) == (4, "j1")
