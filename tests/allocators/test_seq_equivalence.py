"""Req 9.1: seqjob picks exactly the host a naive reference picks."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from events import WorkerDown
from tests.helpers import GO, allocations, submit, up
from xce_core import SchedulerCore, compile_select, process_events


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
        if need_mem and free_mem + 1e-9 < need_mem:
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
