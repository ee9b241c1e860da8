"""The embedding API: open_scheduler, send/send_batch, decisions, run_events."""

from __future__ import annotations

import anyio

from events import Decision, JobAllocated, SessionBegin, SessionEnd
from tests.helpers import GO, allocations, submit, up
from xce_core import SchedulerConfig, open_scheduler, run_events


async def test_open_scheduler_round_trip() -> None:
    got: list[Decision] = []
    async with anyio.create_task_group() as tg, open_scheduler() as sched:

        async def read() -> None:
            async for d in sched.decisions():
                got.append(d)

        tg.start_soon(read)
        await sched.send_batch([up("a", 2), submit("j1"), submit("j2", tasks=2)])
        await sched.send(GO)
        # Leaving the block ended the decision stream, so the reader finishes.
    assert sched.core.session_count == 1
    assert allocations(got) == {"j1": [("a", 1)]}
    assert isinstance(got[-1], SessionEnd)


async def test_decisions_readable_after_the_block() -> None:
    async with open_scheduler() as sched:
        await sched.send_batch([up("a"), submit("j"), SessionBegin()])
    out = [d async for d in sched.decisions()]
    assert [type(d) for d in out] == [JobAllocated, SessionEnd]


async def test_backpressure_bounded_input() -> None:
    async with open_scheduler(buffer=1) as sched:
        for i in range(200):
            await sched.send(submit(f"j{i}"))
        await sched.send_batch([up("a", 500), GO])
    out = [d async for d in sched.decisions()]
    assert len(allocations(out)) == 200


async def test_interval_sessions_run_when_something_changed() -> None:
    async with open_scheduler(SchedulerConfig(session_interval=0.01)) as sched:
        await sched.send_batch([up("a"), submit("j")])
        with anyio.fail_after(5):
            async for d in sched.decisions():
                if isinstance(d, SessionEnd):
                    break
    assert sched.core.session_count >= 1


def test_run_events_is_synchronous() -> None:
    out = run_events([up("a", 4), submit("j", tasks=3), GO])
    assert allocations(out) == {"j": [("a", 3)]}


async def test_reader_going_away_does_not_break_the_scheduler() -> None:
    async with open_scheduler() as sched:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    async for _ in sched.decisions():
                        pass

                tg.start_soon(read)
                await anyio.sleep(0.01)
                scope.cancel()
        # The reader is gone; sessions still run and leaving the block is clean.
        await sched.send_batch([up("a"), submit("j"), GO])
    assert sched.core.state.jobs["j"].state.value == "running"
    # What was decided meanwhile is still there to read.
    assert "j" in allocations([d async for d in sched.decisions()])


async def test_job_without_min_tasks_asks_for_exactly_max_tasks() -> None:
    from events import JobSubmitted
    from xce_core import process_events

    out = await process_events(
        [up("a", 2), up("b", 2), JobSubmitted(job_id="exact", max_tasks=8), GO]
    )
    assert allocations(out) == {}
    out = await process_events(
        [up("a", 2), up("b", 2), JobSubmitted(job_id="flex", min_tasks=1, max_tasks=8), GO]
    )
    assert allocations(out) == {"flex": [("a", 2), ("b", 2)]}
