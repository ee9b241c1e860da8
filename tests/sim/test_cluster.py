"""Cluster descriptions: every TOML value checked with its group and field named,
and no cluster larger than the host limit is ever built."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from xce_core.sim import (
    DEFAULT_MAX_HOSTS,
    ClusterSpec,
    HostGroup,
    SimulationError,
    default_cluster,
    load_cluster,
    parse_swf_line,
)

GOOD = "[[group]]\ncount = 2\nslots = 4\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD + "resources = { mem = inf }\n",
            "resources.mem must be a non-negative finite number up to 9007199254740992,"
            " got inf - at `$.group[0]`",
        ),
        (GOOD + "resources = { mem = nan }\n", "resources.mem must be a non-negative"),
        (GOOD + "resources = { mem = 1e300 }\n", "resources.mem must be a non-negative finite"),
        (
            GOOD + 'resources = { mem = "4G" }\n',
            "Expected `float`, got `str` - at `$.group[0].resources[...]`",
        ),
        (GOOD + "resources = 3\n", "Expected `object`, got `int` - at `$.group[0].resources`"),
        (
            GOOD + "attrs = { speed = nan }\n",
            "attrs.speed must be a finite number, got nan - at `$.group[0]`",
        ),
        (GOOD + "attrs = { speed = -inf }\n", "attrs.speed must be a finite number"),
        (GOOD + 'attrs = { partition = "1" }\n', "attrs.partition must be an integer"),
        (
            GOOD + "attrs = { x = [1, 2] }\n",
            "Expected `bool | int | float | str`, got `array` - at `$.group[0].attrs[...]`",
        ),
        (
            GOOD + 'name = "a b"\n',
            "Expected `str` matching regex '^\\\\S+$' - at `$.group[0].name`",
        ),
        (GOOD + 'name = ""\n', "Expected `str` of length >= 1 - at `$.group[0].name`"),
        (GOOD + "name = 3\n", "Expected `str`, got `int` - at `$.group[0].name`"),
        (
            "[[group]]\ncount = 2\nslots = 10000000000000000000\n",
            "Expected `int` <= 1000000 - at `$.group[0].slots`",
        ),
        ("[[group]]\ncount = 2\nslots = 0\n", "Expected `int` >= 1 - at `$.group[0].slots`"),
        (
            "[[group]]\ncount = 1.5\nslots = 1\n",
            "Expected `int`, got `float` - at `$.group[0].count`",
        ),
        (
            "[[group]]\ncount = true\nslots = 1\n",
            "Expected `int`, got `bool` - at `$.group[0].count`",
        ),
        ("[[group]]\ncount = 2\n", "Object missing required field `slots` - at `$.group[0]`"),
        (
            GOOD + '[[group]]\nname = "gpu"\ncount = 1\nslots = -4\n',
            "Expected `int` >= 1 - at `$.group[1].slots`",
        ),
        (GOOD + "hosts = 3\n", "Object contains unknown field `hosts` - at `$.group[0]`"),
        ("hosts = 3\n" + GOOD, "Object contains unknown field `hosts`"),
        ("group = 3\n", "Expected `array`, got `int` - at `$.group`"),
        (GOOD + '[[group]]\ncount = 1\nslots = 1\nname = "h1"\n', "prefixes 'h' and 'h1'"),
        ("[[group]]\ncount = 1000001\nslots = 1\n", "1000001 hosts in all, more than the limit"),
    ],
)
def test_every_cluster_value_is_checked_where_it_is(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(SimulationError) as info:
        load_cluster(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_host_limit_can_be_raised_or_lowered(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[[group]]\ncount = 6\nslots = 1\n[[group]]\ncount = 5\nslots = 2\n")
    assert load_cluster(path, max_hosts=11).hosts == 11
    with pytest.raises(SimulationError, match="11 hosts in all, more than the limit of 10"):
        load_cluster(path, max_hosts=10)


def test_host_groups_check_themselves() -> None:
    for bad in [
        {"count": 0, "slots": 1},
        {"count": 1, "slots": 1, "resources": {"mem": math.inf}},
        {"count": 1, "slots": 1, "attrs": {"x": math.nan}},
        {"count": 1, "slots": 1, "name": "tab\there"},
    ]:
        with pytest.raises(ValueError, match="must be"):
            HostGroup(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="could make the same host names"):
        ClusterSpec((HostGroup(count=1, slots=1, name="n"), HostGroup(1, 1, name="n007")))
    sharing = ClusterSpec((HostGroup(count=1, slots=1, name="n"), HostGroup(2, 1, name="n")))
    assert [w.name for w in sharing.workers()] == ["n0001", "n0002", "n0003"]


JOB = parse_swf_line("1 0 -1 10 4 -1 -1 -1 -1 -1 1 1 1 -1 1 -1 -1 -1")


def test_an_absurd_default_cluster_is_refused_before_it_is_built() -> None:
    header = {"MaxProcs": "100000000000"}
    with pytest.raises(SimulationError) as info:
        default_cluster(header, [JOB])
    message = str(info.value)
    assert "MaxProcs (100000000000 processors) would make 100000000000 hosts" in message
    assert f"limit of {DEFAULT_MAX_HOSTS} (--max-hosts)" in message
    assert "--hosts and --slots, or --cluster" in message
    assert default_cluster(header, [JOB], slots=1_000_000).hosts == 100_000
    assert default_cluster(header, [JOB], hosts=4).total_slots == 4
    assert default_cluster({"MaxNodes": "50"}, [JOB], max_hosts=50).hosts == 50
    with pytest.raises(SimulationError, match="MaxNodes"):
        default_cluster({"MaxNodes": "51"}, [JOB], max_hosts=50)
    with pytest.raises(SimulationError, match="--hosts must be from 1 to 50"):
        default_cluster({}, [JOB], hosts=51, max_hosts=50)
    with pytest.raises(SimulationError, match="header MaxProcs: expected"):
        default_cluster({"MaxProcs": "inf"}, [JOB])
