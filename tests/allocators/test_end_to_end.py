"""Allocation through the event interface: parallel, compound, alternative, licences."""

from __future__ import annotations

import pytest

from events import JobFinished, SharedResource
from tests.helpers import GO, allocations, ends, pends, submit, up
from xce_core import SchedulerConfig, SchedulerCore, process_events


async def test_parallel_job_spans_several_hosts_with_right_slots() -> None:
    out = await process_events([up("a", 3), up("b", 3), up("c", 3), submit("p", tasks=7), GO])
    assert allocations(out) == {"p": [("a", 3), ("b", 2), ("c", 2)]}


async def test_parallel_prefers_fewest_hosts() -> None:
    out = await process_events([up("a", 2), up("b", 8), submit("p", tasks=6), GO])
    assert allocations(out) == {"p": [("b", 6)]}


async def test_an_uneven_split_is_left_to_parjob_pack_and_the_reason_says_so() -> None:
    # Hosts of 3 and 1 free slots hold 4 tasks, but parjob tries balanced
    # splits only (4, then 2+2, 2+1+1...): the job pends saying there is room,
    # just not in a split parjob tries. parjob_pack takes the split the free
    # capacity offers.
    events = [up("a", 3), up("b", 1), submit("p", tasks=4), GO]
    out = await process_events(events)
    assert (pends(out)["p"].reason, pends(out)["p"].detail) == (
        "not_enough_slots",
        "2 hosts: room for 4 tasks together, but in no split the allocator tries for 4",
    )
    packed = await process_events(events, SchedulerConfig(parallel_allocator="parjob_pack"))
    assert allocations(packed) == {"p": [("a", 3), ("b", 1)]}
    events = [up("a", 2), up("b", 1), submit("p", tasks=4), GO]
    assert pends(await process_events(events))["p"].detail == (
        "4 tasks wanted, more than the 3 slots of all usable hosts together (3 free)"
    )


async def test_rusage_scales_with_bucket_slots() -> None:
    core = SchedulerCore()
    out = await process_events(
        [up("a", 4, {"mem": 100}), up("b", 4, {"mem": 100}), submit("j", "rusage[mem=30]", 4), GO],
        core=core,
    )
    assert allocations(out) == {"j": [("a", 2), ("b", 2)]}
    assert core.state.by_name["a"].used == {"mem": 60.0}
    out = await process_events([JobFinished(job_id="j")], core=core)
    assert core.state.by_name["a"].used == {}


async def test_span_hosts_and_ptile() -> None:
    out = await process_events(
        [
            up("a", 4),
            up("b", 4),
            up("c", 4),
            submit("one", "span[hosts=1]", 3),
            submit("tile", "span[ptile=2]", 5),
            submit("toobig", "span[hosts=1]", 5),
            GO,
        ]
    )
    assert allocations(out) == {"one": [("a", 3)], "tile": [("b", 2), ("c", 2), ("a", 1)]}
    assert pends(out)["toobig"].reason == "not_enough_slots"


async def test_predefined_ptile_takes_each_hosts_slot_count() -> None:
    """LSF's span[ptile='!']: as many tasks per host as the host has slots (its
    MXJ); the remainder goes on one more host of the same size."""
    out = await process_events(
        [
            up("big", 8),
            up("small1", 4),
            up("small2", 4),
            up("small3", 4),
            submit("fills", "span[ptile='!']", 8),
            submit("tiles", "span[ptile='!']", 10),
            GO,
        ]
    )
    # 8 tasks fit the 8-slot host exactly; 10 tasks take 4-slot hosts whole,
    # the last one the remaining 2 (never a mix of host sizes in one job).
    assert allocations(out) == {
        "fills": [("big", 8)],
        "tiles": [("small1", 4), ("small2", 4), ("small3", 2)],
    }


async def test_a_one_task_job_with_predefined_ptile_takes_the_first_host() -> None:
    """Any ptile gives one task one host, so worker order decides, not ptile groups."""
    out = await process_events(
        [
            up("a", 4),
            up("b", 8),
            up("c", 4),
            submit("r", "", 4),
            submit("one", "span[ptile='!']"),
            GO,
        ]
    )
    assert allocations(out) == {"r": [("a", 4)], "one": [("b", 1)]}


async def test_predefined_ptile_needs_whole_free_hosts() -> None:
    out = await process_events(
        [up("a", 4), up("b", 4), submit("r", "", 1), submit("p", "span[ptile='!']", 8), GO]
    )
    assert allocations(out) == {"r": [("a", 1)]}
    assert pends(out)["p"].reason == "not_enough_slots"


async def test_ptile_per_host_type() -> None:
    """span[ptile='!',HP:2] same[type]: 2 tasks per HP host, the slot count of others."""
    events = [
        up("hp1", 4, type="HP"),
        up("hp2", 4, type="HP"),
        up("lx1", 8, type="LINUX"),
    ]
    out = await process_events([*events, submit("j", "span[ptile='!',HP:2] same[type]", 4), GO])
    assert allocations(out) == {"j": [("hp1", 2), ("hp2", 2)]}
    out = await process_events([*events, submit("j", "span[ptile='!',HP:2] same[type]", 8), GO])
    assert allocations(out) == {"j": [("lx1", 8)]}  # HP would need 4 hosts of 2
    # Without a default, hosts of unlisted types are not candidates: 8 tasks at
    # 4 per LINUX host need two LINUX hosts, however many HP slots are free.
    out = await process_events([*events, submit("j", "span[ptile=LINUX:4] same[type]", 8), GO])
    assert pends(out)["j"].reason == "not_enough_slots"
    more = [*events, up("lx2", 8, type="LINUX")]
    out = await process_events([*more, submit("j", "span[ptile=LINUX:4] same[type]", 8), GO])
    assert allocations(out) == {"j": [("lx1", 4), ("lx2", 4)]}


@pytest.mark.parametrize("allocator", ["parjob", "parjob_pack"])
async def test_span_block_and_stripe(allocator: str) -> None:
    """LSF 10.1's span[block=B] packs whole blocks host by host; span[stripe]
    spreads tasks over as many hosts as it can."""
    core = SchedulerCore(SchedulerConfig(parallel_allocator=allocator))
    hosts = [up("a", 8), up("b", 8), up("c", 8), up("d", 8)]
    out = await process_events(
        [*hosts, up("busy", 8), submit("r", "", 5), submit("blk", "span[block=4]", 16), GO],
        core=core,
    )
    assert allocations(out)["blk"] == [("b", 8), ("c", 8)]  # a has 3 free: no block fits
    core = SchedulerCore(SchedulerConfig(parallel_allocator=allocator))
    out = await process_events(
        [*hosts[:3], submit("s", "span[stripe]", 4), submit("m", "span[stripe=1]", 3), GO],
        core=core,
    )
    assert allocations(out) == {
        "s": [("a", 2), ("b", 1), ("c", 1)],
        "m": [("a", 1), ("b", 1), ("c", 1)],
    }


async def test_same_attribute_keeps_hosts_in_one_group() -> None:
    out = await process_events(
        [
            up("x1", 2, rack="r1"),
            up("y1", 2, rack="r2"),
            up("y2", 2, rack="r2"),
            submit("j", "same[rack]", 4),
            GO,
        ]
    )
    assert allocations(out) == {"j": [("y1", 2), ("y2", 2)]}


async def test_order_section_sorts_candidates() -> None:
    out = await process_events(
        [
            up("a", 1, {"mem": 10}),
            up("b", 1, {"mem": 300}),
            up("c", 1, {"mem": 200}),
            submit("j1", "order[mem]"),
            submit("j2", "order[-mem]"),
            GO,
        ]
    )
    assert allocations(out) == {"j1": [("b", 1)], "j2": [("a", 1)]}


async def test_compound_allocates_all_parts_or_none() -> None:
    core = SchedulerCore()
    out = await process_events(
        [
            up("a1", 2, type="a"),
            up("a2", 2, type="a"),
            up("g", 1, type="gpu"),
            submit("both", "2*{select[type==a]} + 1*{select[type==gpu]}"),
            submit("nope", "3*{select[type==a]} + 1*{select[type==gpu]}"),
            submit("after", "select[type==a]", 2),
            GO,
        ],
        core=core,
    )
    assert allocations(out) == {"both": [("a1", 2), ("g", 1)], "after": [("a2", 2)]}
    # "nope" claimed a's part before its gpu part failed: rolled back, so "after" ran.
    assert pends(out)["nope"].reason == "not_enough_slots"


@pytest.mark.parametrize(
    ("resreq", "reason", "detail"),
    [
        (
            "1*{select[type==a]} + 1*{select[type==a]} + 1*{select[type==a]}",
            "not_enough_slots",
            "compound part 3 of 3 (1 task), after parts 1-2: 1 host: not enough slots;"
            " 1 host: select not satisfied",
        ),
        (
            "2*{} + 2*{}",
            "not_enough_slots",
            "4 tasks wanted, more than the 3 slots of all usable hosts together (3 free)",
        ),
        (
            "1*{rusage[mem=1]} + 1*{rusage[mem=1]}",
            "resource_unavailable",
            "compound part 2 of 2 (1 task), after part 1: 2 hosts: mem",
        ),
        (
            "1*{} + 1*{select[type==b]}",
            "no_matching_host",
            "compound part 2 of 2 (1 task), after part 1: 2 hosts: select not satisfied",
        ),
    ],
)
async def test_a_compound_part_that_fails_after_the_others_says_which_and_why(
    resreq: str, reason: str, detail: str
) -> None:
    # 3 slots and 1 mem in all: the earlier parts take what the failing part
    # needed, which the committed capacity alone would not show; parts that
    # want more slots than the cluster has say so first.
    workers = [up("a", 2, {"mem": 1.0}, type="a"), up("c", 1, type="c")]
    out = await process_events([*workers, submit("c", resreq), GO])
    pended = pends(out)["c"]
    assert (pended.reason, pended.detail) == (reason, detail)


async def test_compound_last_part_takes_remaining_tasks() -> None:
    out = await process_events(
        [
            up("a", 4, type="a"),
            up("b", 4, type="b"),
            submit("c", "1*{select[type==b]} + {select[type==a]}", 5),
            GO,
        ]
    )
    assert allocations(out) == {"c": [("b", 1), ("a", 4)]}


async def test_alternative_first_full_success_wins() -> None:
    out = await process_events(
        [
            up("a", 2, type="a"),
            up("b", 4, type="b"),
            submit("alt", "{select[type==a]} || {select[type==b]}", 3),
            submit("alt2", "{select[type==a]} || {select[type==b]}", 1),
            GO,
        ]
    )
    assert allocations(out) == {"alt": [("b", 3)], "alt2": [("a", 1)]}


async def test_licence_exhausted_pends_with_shared_category() -> None:
    out = await process_events(
        [
            up("a", 8),
            SharedResource(name="lic", total=3),
            submit("j1", "rusage[lic=2]", 4),  # per job, not per task
            submit("j2", "rusage[lic=2]"),
            submit("j3", "rusage[lic=1]"),
            GO,
        ]
    )
    assert allocations(out) == {"j1": [("a", 4)], "j3": [("a", 1)]}
    p = pends(out)["j2"]
    assert p.reason == "shared_resource_unavailable"
    assert "lic" in p.detail


async def test_rusage_alternatives_try_in_order() -> None:
    out = await process_events(
        [up("a", 2, {"mem": 600}), submit("j", "rusage[mem=1000||mem=500]"), GO]
    )
    assert allocations(out) == {"j": [("a", 1)]}


async def test_min_max_tasks_takes_what_it_can_up_to_max() -> None:
    out = await process_events(
        [up("a", 2), up("b", 1), submit("r", tasks=8, min=2), submit("s", tasks=4, min=2), GO]
    )
    assert allocations(out) == {"r": [("a", 2), ("b", 1)]}
    assert pends(out)["s"].reason == "not_enough_slots"


@pytest.mark.parametrize("allocator", ["parjob", "parjob_pack"])
async def test_uneven_split_only_with_pack(allocator: str) -> None:
    out = await process_events(
        [up("a", 5), up("b", 2), submit("j", tasks=7), GO],
        SchedulerConfig(parallel_allocator=allocator),
    )
    if allocator == "parjob_pack":
        assert allocations(out) == {"j": [("a", 5), ("b", 2)]}
    else:
        assert allocations(out) == {}


async def test_pend_detail_is_a_per_host_breakdown() -> None:
    out = await process_events(
        [
            up("a", 1, {"mem": 10}),
            up("b", 1, {"mem": 10}),
            up("c", 2, {"mem": 900}, type="other"),
            submit("fill", "select[type==other]", 2),
            submit("j", "rusage[mem=100]", 2),
            GO,
        ]
    )
    p = pends(out)["j"]
    assert p.reason == "resource_unavailable"
    assert "2 hosts: mem" in p.detail
    assert "1 host: not enough slots" in p.detail
    assert ends(out)[0].pended == 1


async def test_rusage_reservation_methods_task_host_job() -> None:
    core = SchedulerCore()
    out = await process_events(
        [
            up("a", 2, {"mem": 100, "scratch": 50}),
            up("b", 2, {"mem": 100, "scratch": 50}),
            SharedResource(name="lic", total=10),
            # 4 tasks as (2, 2): mem per task (2 x 10 per host), scratch once per
            # host (30 each), lic once per task (4 in all), io once for the job.
            submit("j", "rusage[mem=10/task:scratch=30/host:lic=1/task:io=0]", 4),
            submit("k", "rusage[mem=50/job] span[hosts=1]", 2),
            GO,
        ],
        core=core,
    )
    assert allocations(out) == {"j": [("a", 2), ("b", 2)]}
    a, b = core.state.by_name["a"], core.state.by_name["b"]
    assert a.used == {"mem": 20.0, "scratch": 30.0}
    assert b.used == {"mem": 20.0, "scratch": 30.0}
    assert core.state.shared_used == {"lic": 4.0}
    assert pends(out)["k"].reason == "not_enough_slots"
    out = await process_events([JobFinished(job_id="j"), GO], core=core)
    assert allocations(out) == {"k": [("a", 2)]}
    assert core.state.by_name["a"].used == {"mem": 50.0}  # once for the job, not per task


async def test_rusage_per_job_goes_on_the_first_host_only() -> None:
    core = SchedulerCore()
    out = await process_events(
        [
            up("a", 1, {"mem": 100}),
            up("b", 1, {"mem": 10}),
            submit("j", "rusage[mem=60/job]", 2),
            GO,
        ],
        core=core,
    )
    assert allocations(out) == {"j": [("a", 1), ("b", 1)]}
    assert core.state.by_name["a"].used == {"mem": 60.0}
    assert core.state.by_name["b"].used == {}


async def test_job_larger_than_the_cluster_says_so() -> None:
    out = await process_events([up("a", 2), up("b", 2), submit("huge", tasks=9), GO])
    p = pends(out)["huge"]
    assert p.reason == "not_enough_slots"
    assert "more than the 4 slots of all usable hosts" in p.detail


async def test_exhausted_licence_is_named_even_on_a_full_cluster() -> None:
    out = await process_events(
        [
            up("a", 1),
            SharedResource(name="lic", total=1),
            submit("l1", "rusage[lic=1]"),
            submit("l2", "rusage[lic=1]"),
            submit("plain"),
            GO,
        ]
    )
    assert allocations(out) == {"l1": [("a", 1)]}
    assert pends(out)["l2"].reason == "shared_resource_unavailable"
    assert pends(out)["plain"].reason == "not_enough_slots"
    assert pends(out)["plain"].detail == "1 task wanted, 0 slots free in the cluster"


async def test_a_compound_with_no_worker_at_all_pends_for_no_workers() -> None:
    out = await process_events([submit("c", "1*{} + 1*{}"), GO])
    assert pends(out)["c"].reason == "no_workers"


async def test_too_many_compound_tasks_name_a_part_no_host_matches_first() -> None:
    out = await process_events([up("a", 1), submit("c", "1*{select[type==zz]} + 1*{}"), GO])
    pended = pends(out)["c"]
    assert pended.reason == "no_matching_host"
    assert pended.detail.startswith("compound part 1 of 2 (1 task): 1 host: select not satisfied")
