"""The compact outcome table: read back, it is what the replay used to keep as objects."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from unittest import mock

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import HostSlots
from xce_core import SchedulerConfig
from xce_core.sim import (
    ClusterSpec,
    HostGroup,
    JobOutcome,
    OutcomeTable,
    _outcomes,
    default_cluster,
    read_swf,
    simulate,
    summarize,
    timeline,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/synthetic.swf"


def as_objects(outcomes: list[JobOutcome]) -> list[JobOutcome]:
    """Plain copies, so the report reads them field by field, not by column."""
    return [msgspec.structs.replace(o) for o in outcomes]


def summary_of(outcomes: Iterable[JobOutcome]) -> dict[str, object]:
    s = summarize(outcomes, policy="p", hosts=1, total_slots=64, sessions=1, wall_time_s=1)
    return msgspec.structs.asdict(s)


@pytest.mark.parametrize("strict_fifo", [False, True])
async def test_the_report_by_column_is_the_report_by_object(strict_fifo: bool) -> None:
    trace = read_swf(EXAMPLE, limit=600)
    cluster = default_cluster(trace.header, trace.jobs, slots=4)
    config = SchedulerConfig(strict_fifo=strict_fifo)
    result = await simulate(trace.jobs, cluster, config=config)
    assert isinstance(result.jobs, OutcomeTable)
    objects = as_objects(list(result.jobs))
    assert summary_of(result.jobs) == summary_of(objects)
    assert timeline(result.jobs) == timeline(objects)
    started = [o for o in objects if o.status == "started"]
    assert started
    # The replay books the tasks asked for as the slots held: the hosts agree.
    assert all(o.slots == o.procs for o in started)
    assert all(o.end == o.start + o.run_time and o.wait == o.start - o.submit for o in started)  # type: ignore[operator]


async def test_without_hosts_only_the_hosts_are_missing() -> None:
    trace = read_swf(EXAMPLE, limit=300)
    cluster = default_cluster(trace.header, trace.jobs)
    kept = await simulate(trace.jobs, cluster)
    light = await simulate(trace.jobs, cluster, keep_hosts=False)
    assert kept.jobs[0].hosts
    assert not light.jobs[0].hosts
    assert [msgspec.structs.replace(o, hosts=[]) for o in kept.jobs] == light.jobs
    assert kept.jobs == list(kept.jobs)
    assert kept.jobs != light.jobs
    assert summary_of(light.jobs) == summary_of(kept.jobs)
    assert timeline(light.jobs) == timeline(kept.jobs)


def test_hosts_read_back_in_allocation_order() -> None:
    table = OutcomeTable(["a1", "a2", "a3", "a4"])
    wide = [("a1", 2), ("a2", 2), ("a3", 1), ("a1", 1), ("x9", 3), ("a4", 1), ("a3", 1)]
    table.append("1", 0.0, 5.0, 11)
    table.append("2", 1.0, 5.0, 4)
    table.append("3", 2.0, 5.0, 1)
    table.append("4", 2.0, 5.0, 1)
    table.started(0, 3.0, 11, [HostSlots(host=h, slots=n) for h, n in wide])
    table.started(1, 4.0, 4, [HostSlots(host=h, slots=1) for h in ("a1", "a2", "a3", "a4")])
    table.rejected(2, "no_size")
    table.set_never_started_reason("stuck")
    assert table[0].hosts == wide
    assert table[1].hosts == [("a1", 1), ("a2", 1), ("a3", 1), ("a4", 1)]
    assert (table[0].start, table[0].end, table[0].wait, table[0].slots) == (3.0, 8.0, 3.0, 11)
    assert (table[2].status, table[2].reason, table[2].hosts) == ("rejected", "no_size", [])
    assert (table[3].status, table[3].reason, table[3].start) == ("never_started", "stuck", None)
    assert [o.job_id for o in table[1:]] == ["2", "3", "4"]
    assert table[-1].job_id == "4"
    with pytest.raises(IndexError):
        table[4]


def test_a_table_without_hosts_still_counts_slots() -> None:
    table = OutcomeTable()
    table.append("1", 0.0, 10.0, 3)
    table.started(0, 0.0, 3, [HostSlots(host="h1", slots=3)])
    assert not table.keeps_hosts
    assert table[0].hosts == []
    assert timeline(table) == ([0.0, 10.0], [3, 0], [0, 0])


async def test_the_result_of_a_replay_prints_short() -> None:
    # asyncio formats a finished task's result (Runner restoring the SIGINT
    # handler, 3.11): a repr of every outcome cost seconds and a gigabyte at the
    # end of a 200,000-job replay.
    cluster = ClusterSpec((HostGroup(count=64, slots=1),))
    trace = read_swf(EXAMPLE, limit=100)
    result = await simulate(trace.jobs, cluster)
    assert len(repr(result)) < 2000


_POOL = [f"n{i}" for i in range(6)]
# Allocations: a run of consecutive pool hosts with equal slots (the usual
# case), or any hosts (pool or not, repeated, in any order) with any slots.
_allocation = st.one_of(
    st.tuples(st.integers(0, 5), st.integers(1, 6), st.integers(1, 3)).map(
        lambda a: [(_POOL[h], a[2]) for h in range(a[0], min(a[0] + a[1], len(_POOL)))]
    ),
    st.lists(
        st.tuples(st.sampled_from([*_POOL, "x1", "x2"]), st.integers(1, 3)),
        min_size=1,
        max_size=8,
    ),
)


@given(st.lists(_allocation, max_size=12), st.booleans(), st.integers(1, 20), st.booleans())
def test_any_allocation_reads_back_as_given(
    allocations: list[list[tuple[str, int]]], named: bool, pack_at: int, shared: bool
) -> None:
    # Kept as runs of hosts (the fast path for one run of the table's hosts in
    # order, the general one otherwise; made runs a few jobs at a time, as
    # ``pack_at`` hosts are reached, and when read), each reads back host by host.
    # With ``shared``, one object per (host, slots), as the core lists one-slot
    # hosts (which the table then keeps for the fast path's comparison).
    made: dict[tuple[str, int], HostSlots] = {}

    def host_slots(host: str, slots: int) -> HostSlots:
        if not shared:
            return HostSlots(host=host, slots=slots)
        return made.setdefault((host, slots), HostSlots(host=host, slots=slots))

    with mock.patch.object(_outcomes, "_PACK_AT", pack_at):
        table = OutcomeTable(_POOL if named else [])
        for i, hosts in enumerate(allocations):
            table.append(str(i), 0.0, 1.0, len(hosts))
            table.started(i, 0.0, sum(n for _, n in hosts), [host_slots(h, n) for h, n in hosts])
            if i == len(allocations) // 2:
                assert table.hosts(i) == hosts  # read while others wait to be made runs
        assert [table.hosts(i) for i in range(len(allocations))] == allocations
