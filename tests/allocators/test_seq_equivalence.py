"""Req 9.1: seqjob picks exactly the host a naive reference picks."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from allocators.seqjob import SeqJobAllocator
from events import WorkerDown
from tests.allocators.conftest import context_for
from tests.helpers import GO, allocations, submit, up
from xce_core import SchedulerCore, parse_resreq, process_events
from xce_core.plugin import AMOUNT_TOLERANCE, PrimaryRequest, Want, allocate_plans
from xce_core.resreq import Primary, compile_select


@dataclass
class HostSpec:
    slots: int
    used: int
    mem: float
    used_mem: float
    type: str
    down: bool


host_specs = st.builds(
    HostSpec,
    slots=st.integers(0, 4),
    used=st.integers(0, 4),
    mem=st.sampled_from([0.0, 50.0, 100.0, 400.0]),
    used_mem=st.sampled_from([0.0, 25.0, 100.0]),
    type=st.sampled_from(["a", "b", "c"]),
    down=st.booleans(),
)
selects = st.sampled_from(
    [
        "",
        "select[type==a]",
        "select[type!=b]",
        "select[mem>60]",
        "select[type==a || mem>=100]",
        "select[!(type==c) && slots>=1]",
        "select[defined(gpu)]",
    ]
)
rusages = st.sampled_from(["", "rusage[mem=10]", "rusage[mem=60]", "rusage[mem=200]"])


def reference(hosts: list[HostSpec], select: str, need_mem: float) -> str | None:
    """List all workers, return the first that passes select and availability."""
    expr = compile_select(select[len("select[") : -1]) if select else None
    for i, h in enumerate(hosts):
        free_slots = max(h.slots - h.used, 0)
        free_mem = max(h.mem - h.used_mem, 0.0)
        values = {"type": h.type, "mem": free_mem, "maxmem": h.mem, "slots": free_slots}
        if h.down or free_slots < 1:
            continue
        if expr is not None and not expr(values):
            continue
        if need_mem and free_mem + AMOUNT_TOLERANCE < need_mem:
            continue
        return f"h{i}"
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(host_specs, min_size=1, max_size=8), selects, rusages)
async def test_seqjob_matches_reference(hosts: list[HostSpec], select: str, rusage: str) -> None:
    core = SchedulerCore()
    events = [up(f"h{i}", h.slots, {"mem": h.mem}, type=h.type) for i, h in enumerate(hosts)]
    events += [WorkerDown(name=f"h{i}") for i, h in enumerate(hosts) if h.down]
    await process_events(events, core=core)
    for i, h in enumerate(hosts):  # occupy capacity as running work would
        w = core.state.by_name[f"h{i}"]
        w.used_slots = h.used
        if h.used_mem:
            w.used["mem"] = h.used_mem
    need = float(rusage[len("rusage[mem=") : -1]) if rusage else 0.0
    out = await process_events([submit("j", f"{select} {rusage}".strip()), GO], core=core)
    got = allocations(out).get("j")
    expected = reference(hosts, select, need)
    assert (got[0][0] if got else None) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(host_specs, min_size=1, max_size=8),
    selects,
    st.integers(1, 4),
    st.sampled_from([0.0, 10.0, 60.0]),
    st.lists(st.integers(0, 7), max_size=3),
)
async def test_seqjob_shortcut_is_the_bucket_loop_over_its_one_plan(
    hosts: list[HostSpec], select: str, tasks: int, mem: float, pre: list[int]
) -> None:
    """SeqJobAllocator.allocate (allocate_single) claims exactly what the generic
    bucket loop claims over SeqJobAllocator.plans, also on top of earlier
    tentative claims in the same attempt (a compound job's previous parts)."""
    core = SchedulerCore()
    events = [up(f"h{i}", h.slots, {"mem": h.mem}, type=h.type) for i, h in enumerate(hosts)]
    events += [WorkerDown(name=f"h{i}") for i, h in enumerate(hosts) if h.down]
    await process_events(events, core=core)
    for i, h in enumerate(hosts):
        w = core.state.by_name[f"h{i}"]
        w.used_slots = h.used
        if h.used_mem:
            w.used["mem"] = h.used_mem
    primary = parse_resreq(select)
    assert isinstance(primary, Primary)
    want: Want = (("mem", mem, 0.0),) if mem else ()
    seq = SeqJobAllocator()
    journals = []
    for shortcut in (True, False):
        ctx = context_for(core, "probe")
        for index in pre:  # earlier tentative claims of this attempt
            if index < len(hosts) and ctx.fits(core.state.workers[index], 1, want):  # type: ignore[arg-type]
                ctx.claim(core.state.workers[index], 1, want)  # type: ignore[arg-type]
        request = PrimaryRequest(primary, tasks, want, ctx.session.candidates(primary))
        if shortcut:
            ok = await seq.allocate(request, ctx)
        else:
            ok = await allocate_plans(ctx, request, seq.plans(request, ctx))
        journals.append((ok, [(w.name, n, need) for w, n, need in ctx.journal]))
    assert journals[0] == journals[1]
