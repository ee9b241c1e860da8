"""``--policy FILE`` on ``xce run`` and ``xce simulate``: limits from TOML."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.cli.xce_process import run
from xce_core.cli import main as cli_main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "synthetic.swf"

POLICY = """
[[limits]]
name = "one_each"
per_user = ["all"]
jobs = 1
"""


def test_xce_run_applies_the_limits_before_the_first_event(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    stream = "\n".join(
        json.dumps(e)
        for e in [
            {"type": "worker_up", "name": "h", "slots": 4},
            {"type": "job_submitted", "job_id": "a1", "user": "ann"},
            {"type": "job_submitted", "job_id": "a2", "user": "ann"},
            {"type": "job_submitted", "job_id": "b1", "user": "bob"},
            {"type": "session_begin"},
            {"type": "worker_down", "name": "nope"},
        ]
    )
    out = run("--policy", str(policy), input=(stream + "\n").encode())
    assert out.returncode == 0, out.stderr
    decisions = [json.loads(line) for line in out.stdout.splitlines()]
    assert [d["job_id"] for d in decisions if d["type"] == "job_allocated"] == ["a1", "b1"]
    (held,) = [d for d in decisions if d["type"] == "job_pended"]
    assert (held["job_id"], held["reason"]) == ("a2", "limit_reached")
    assert held["detail"] == "limit one_each: JOBS (PER_USER ann): 1/1 in use"
    # The policy is not one of the input's events: their indexes stand.
    (rejected,) = [d for d in decisions if d["type"] == "event_rejected"]
    assert rejected["index"] == 5


def refused(tmp_path: Path, text: str, error: str) -> None:
    """``xce run`` and ``xce simulate`` both refuse the policy ``text`` with a
    usage error naming the file and ``error``."""
    policy = tmp_path / "p.toml"
    policy.write_text(text)
    failed = run("--policy", str(policy))
    assert failed.returncode == 2, failed.stderr
    assert str(policy) in failed.stderr.decode()
    assert error in failed.stderr.decode(), failed.stderr
    out = CliRunner().invoke(cli_main, ["simulate", str(EXAMPLE), "--policy", str(policy)])
    assert out.exit_code == 2, out.output
    assert str(policy) in out.output
    assert error in out.output


def test_a_bad_policy_file_is_a_usage_error_naming_file_and_fault(tmp_path: Path) -> None:
    cases = {
        'limits = [{ name = "x", per_hosts = ["all"], slots = 1 }]': "unknown field `per_hosts`",
        'limits = [{ name = "x", users = ["a"] }]': "limit 'x': no slots, jobs or resources",
        "limits = [": "",
    }
    for text, error in cases.items():
        refused(tmp_path, text, error)


def test_xce_simulate_replays_under_the_limits(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[limits]]\nname = "s"\nper_user = ["all"]\nslots = 64\n')
    plain = CliRunner().invoke(cli_main, ["simulate", str(EXAMPLE), "--json"])
    limited = CliRunner().invoke(
        cli_main, ["simulate", str(EXAMPLE), "--json", "--policy", str(policy)]
    )
    assert plain.exit_code == limited.exit_code == 0, limited.output
    # 64 slots per user on a 64-slot cluster: a cap no job or user reaches, so
    # every job still starts.
    assert json.loads(limited.output)["started"] == json.loads(plain.output)["started"]


FAIR_POLICY = """
[fairshare_params]
recalc_interval = 0

[[queues]]
name = "fs"
picker = "fairshare"
ujob_limit = 3

[fairshare]
shares = [["eng", 3], ["default", 1]]
[fairshare.groups.eng]
members = ["ann", "bob"]
"""


def test_xce_run_takes_queues_share_trees_and_factors_from_the_policy(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(FAIR_POLICY)
    jobs = [
        {"type": "job_submitted", "job_id": f"{user}{i}", "user": user, "queue": "fs"}
        for i in range(4)
        for user in ("zed", "ann")
    ]
    stream = "\n".join(
        json.dumps(e)
        for e in [
            {"type": "worker_up", "name": "h", "slots": 8},
            *jobs,
            {"type": "session_begin"},
        ]
    )
    out = run("--policy", str(policy), input=(stream + "\n").encode())
    assert out.returncode == 0, out.stderr
    decisions = [json.loads(line) for line in out.stdout.splitlines()]
    started = [d["job_id"] for d in decisions if d["type"] == "job_allocated"]
    # eng (3 shares) against zed (default 1): eng leads 3 to 1 at first; each
    # user's third job waits for UJOB_LIMIT 3 (slots per user in the queue).
    assert started[:4] == ["ann0", "ann1", "zed0", "ann2"]
    assert sorted(started) == ["ann0", "ann1", "ann2", "zed0", "zed1", "zed2"]
    held = {d["job_id"]: d["detail"] for d in decisions if d["type"] == "job_pended"}
    assert held["ann3"] == "limit fs:UJOB_LIMIT: SLOTS (PER_USER ann): 3/3 in use"


def test_a_bad_share_tree_or_factor_in_a_policy_is_a_usage_error(tmp_path: Path) -> None:
    cases = {
        '[fairshare]\nshares = [["eng@", 1]]': "'eng@' names no user group",
        "[fairshare_params]\nhist_hours = -1": "hist_hours must be a finite number >= 0",
        "[fairshare_params]\nhist_hour = 1": "fairshare_params: unknown field 'hist_hour'",
        '[[queues]]\nname = "q"\nujob_limit = -2': "ujob_limit",
        '[[queues]]\nname = "q"\nujobs = 2': "queues[0]: unknown field 'ujobs'",
        '[[queues]]\nname = "q"\npicker = "nope"': "nope",
    }
    for text, error in cases.items():
        refused(tmp_path, text, error)


def test_xce_simulate_replays_a_fairshare_policy(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[fairshare]\nshares = [["default", 1]]\n')
    out = CliRunner().invoke(
        cli_main,
        ["simulate", str(EXAMPLE), "--json", "--picker", "fairshare", "--policy", str(policy)],
    )
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    assert summary["started"] > 0
    assert summary["by_user"]


def test_the_readme_policy_examples_are_valid_policies(tmp_path: Path) -> None:
    import re
    import textwrap

    from xce_core.cli._policy import read_policy

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = [
        textwrap.dedent(b)
        for b in re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
        if "[[limits]]" in b or "[[queues]]" in b
    ]
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        path = tmp_path / f"policy{i}.toml"
        path.write_text(block)
        assert read_policy(path).events


def test_policy_user_groups_reach_the_limits(tmp_path: Path) -> None:
    from xce_core.cli._policy import read_policy

    policy = tmp_path / "p.toml"
    policy.write_text(
        '[user_groups]\neng = ["ann", "bob"]\n\n'
        '[[limits]]\nname = "eng"\nusers = ["eng"]\nslots = 2\n'
    )
    (event,) = read_policy(policy).events
    assert event.user_groups == {"eng": ["ann", "bob"]}  # type: ignore[union-attr]
