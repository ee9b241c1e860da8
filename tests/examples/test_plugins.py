"""``examples/plugins``: the ``spread`` allocator and the ``smallest_first`` picker.

Nothing is pip-installed: the subprocess tests make the package discoverable
with a hand-written ``.dist-info`` directory on ``PYTHONPATH`` (entry points are
read from there exactly as from an installed wheel); the in-process tests
register the plugin objects in a fresh :class:`~xce_core.Registry`.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from events import (
    Decision,
    EventDecoder,
    EventEncoder,
    InputEvent,
    JobAllocated,
    JobSubmitted,
    SessionBegin,
    WorkerUp,
)
from xce_core import Registry, SchedulerConfig, process_events
from xce_core.cli._run_command import run_command
from xce_core.resreq import Span

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "examples" / "plugins"
XCE = [sys.executable, "-c", "from xce_core.cli._main import main; main()"]
TIMEOUT = 5.0

# Three 4-slot hosts; jobs submitted widest first, so FCFS would start "wide" first.
EVENTS: list[InputEvent] = [
    WorkerUp(name="h1", slots=4),
    WorkerUp(name="h2", slots=4),
    WorkerUp(name="h3", slots=4),
    JobSubmitted(job_id="wide", min_tasks=6, max_tasks=6, submit_time=1.0),
    JobSubmitted(job_id="one", submit_time=2.0),
    JobSubmitted(job_id="three", min_tasks=3, max_tasks=3, submit_time=3.0),
    SessionBegin(),
]
# smallest_first: one, three, wide. spread: as many hosts as have room.
EXPECTED = [
    ("one", [("h1", 1)]),
    ("three", [("h1", 1), ("h2", 1), ("h3", 1)]),
    ("wide", [("h1", 2), ("h2", 2), ("h3", 2)]),
]


@pytest.fixture(scope="module")
def plugins() -> Iterator[ModuleType]:
    """The example package, imported from its source directory (not installed)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(PLUGINS))
        yield importlib.import_module("xce_example_plugins")


def allocations(decisions: Iterable[object]) -> list[tuple[str, list[tuple[str, int]]]]:
    return [
        (d.job_id, [(h.host, h.slots) for h in d.hosts])
        for d in decisions
        if isinstance(d, JobAllocated)
    ]


# --------------------------------------------------------------------------- plans


def test_spread_plans_go_from_most_hosts_to_one(plugins: ModuleType) -> None:
    spread_plans = plugins.spread_plans
    assert list(spread_plans(4)) == [(1, 1, 1, 1), (2, 1, 1), (2, 2), (4,)]
    assert list(spread_plans(7, max_hosts=3)) == [(3, 2, 2), (4, 3), (7,)]
    assert list(spread_plans(5, max_hosts=0)) == []


def test_spread_plans_follow_a_fixed_span(plugins: ModuleType) -> None:
    spread_plans = plugins.spread_plans
    assert list(spread_plans(6, Span(hosts=1))) == [(6,)]
    assert list(spread_plans(10, Span(ptile=4))) == [(4, 4, 2)]


# --------------------------------------------------------------------------- in process


async def test_registered_in_code(plugins: ModuleType) -> None:
    registry = Registry()
    registry.register_picker("smallest_first", plugins.SmallestFirstPicker())
    # One task is the one-bucket case of spread, so it can serve both roles here.
    registry.register_allocator("spread", plugins.SpreadAllocator())
    config = SchedulerConfig(
        picker="smallest_first", sequential_allocator="spread", parallel_allocator="spread"
    )

    decisions = await process_events(EVENTS, config, registry=registry)

    assert allocations(decisions) == EXPECTED


# --------------------------------------------------------------------------- entry points


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a subprocess that sees the plugins as an installed distribution."""
    project = tomllib.loads((PLUGINS / "pyproject.toml").read_text())["project"]
    dist_info = tmp_path / f"xce_example_plugins-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    # entry_points.txt is generated from pyproject.toml, so the test checks the
    # names and object paths the package really declares.
    sections = [
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in eps.items())
        for group, eps in project["entry-points"].items()
    ]
    (dist_info / "entry_points.txt").write_text("\n".join(sections))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PLUGINS)])}


def test_xce_run_finds_the_plugins(plugin_env: dict[str, str]) -> None:
    result = subprocess.run(
        [*XCE, "run", "--picker", "smallest_first", "--parallel-allocator", "spread"],
        input=EventEncoder("ndjson").encode_many(EVENTS),
        env=plugin_env,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )

    assert result.returncode == 0, result.stderr.decode()
    decisions = EventDecoder("ndjson", type=Decision).feed(result.stdout)
    assert allocations(decisions) == EXPECTED


def test_xce_simulate_accepts_the_allocator(plugin_env: dict[str, str]) -> None:
    trace = REPO / "examples" / "synthetic.swf"
    result = subprocess.run(
        [*XCE, "simulate", str(trace), "--limit", "40", "--parallel-allocator", "spread"],
        env=plugin_env,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()


def test_an_unknown_allocator_is_a_usage_error_listing_the_registered_ones() -> None:
    result = CliRunner().invoke(run_command, ["--parallel-allocator", "nope"])
    assert result.exit_code == 2
    assert "Invalid value for --parallel-allocator" in result.output
    assert "unknown allocator 'nope' (registered: parjob, parjob_pack, seqjob" in result.output
