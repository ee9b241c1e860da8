"""``xce run --state-dir``: snapshots written while running, and a restart after
kill -9 that resumes from the newest one and decides as if never stopped."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.xce_process import TIMEOUT, Consumer, ndjson, parse, run, start

WORKERS = 6
SHAPES = ["", "select[type==a]", "rusage[mem=300]", "span[hosts=1]", "select[type==b]"]


def stream(seed: int, pieces: int = 12, per_piece: int = 14) -> list[list[str]]:
    """Pieces of a random event stream, each ending with a session."""
    rng = random.Random(seed)
    out: list[list[str]] = []
    first = [
        json.dumps(
            {
                "type": "worker_up",
                "name": f"h{i}",
                "slots": 4,
                "attrs": {"type": "ab"[i % 2]},
                "resources": {"mem": 1000.0},
            }
        )
        for i in range(WORKERS)
    ]
    n = 0
    for p in range(pieces):
        piece = first if p == 0 else []
        for _ in range(per_piece):
            r = rng.random()
            if r < 0.55:
                event = {
                    "type": "job_submitted",
                    "job_id": f"j{n}",
                    "user": f"u{n % 3}",
                    "max_tasks": rng.randint(1, 6),
                    "resreq": rng.choice(SHAPES),
                }
                n += 1
            elif r < 0.85:
                event = {"type": "job_finished", "job_id": f"j{rng.randrange(max(1, n))}"}
            elif r < 0.9:
                event = {"type": "worker_down", "name": f"h{rng.randrange(WORKERS)}"}
            elif r < 0.95:
                event = {"type": "worker_up", "name": f"h{rng.randrange(WORKERS)}", "slots": 3}
            else:
                event = {"type": "job_cancelled", "job_id": f"j{rng.randrange(max(1, n))}"}
            piece.append(json.dumps(event))
        piece.append('{"type":"session_begin"}')
        out.append(piece)
    return out


def timeless(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in d.items() if k != "elapsed_s"} for d in decisions]


def snapshots(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".xce"))


def wait_for_snapshot_after(directory: Path, before: list[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while snapshots(directory) == before:
        assert time.monotonic() < deadline, "no snapshot written"
        time.sleep(0.01)


@pytest.mark.parametrize(("seed", "kill_after"), [(1, 2), (3, 7)])
def test_after_kill_9_a_restart_resumes_and_decides_as_an_uninterrupted_run(
    tmp_path: Path, consumer_factory: list[Consumer], seed: int, kill_after: int
) -> None:
    pieces = stream(seed)
    everything = ndjson(*(line for piece in pieces for line in piece))
    whole = run("--state-dir", str(tmp_path / "whole"), input=everything)
    assert whole.returncode == 0, whole.stderr
    full = timeless(parse(whole.stdout))

    state = tmp_path / "state"
    consumer = start(consumer_factory, "--state-dir", str(state), "--snapshot-every", "10")
    assert "starting at event index 0" in consumer.stderr_line()
    before: list[dict[str, Any]] = []
    for piece in pieces[:kill_after]:
        names = snapshots(state) if state.exists() else []
        consumer.send(ndjson(*piece))
        before += consumer.read_until("session_end")
        wait_for_snapshot_after(state, names)
    # Half of the next piece arrives, and the consumer dies without a word.
    consumer.send(ndjson(*pieces[kill_after][:7]))
    time.sleep(0.2)
    consumer.proc.kill()
    consumer.proc.wait(timeout=TIMEOUT)
    before += consumer.rest()
    assert len(snapshots(state)) == 2  # the newest two are kept

    again = run("--state-dir", str(state), input=everything)
    assert again.returncode == 0, again.stderr
    note = again.stderr.decode()
    assert "resuming from" in note, note
    covered = int(note.split("at event index ")[1].split()[0])
    assert covered >= sum(len(p) for p in pieces[:kill_after])
    after = timeless(parse(again.stdout))

    # The restart repeats at most what was decided after its snapshot and
    # loses nothing: the decisions before the kill are a prefix of the
    # uninterrupted run's, those after the restart its suffix, and together
    # they cover it.
    before = timeless(before)
    assert before == full[: len(before)]
    assert after == full[len(full) - len(after) :]
    assert len(before) + len(after) >= len(full)

    # A further restart with the same input finds everything covered.
    last = run("--state-dir", str(state), input=everything)
    assert last.returncode == 0
    assert last.stdout == b""
    assert f"at event index {sum(len(p) for p in pieces)}" in last.stderr.decode()


def test_a_damaged_newest_snapshot_is_skipped_for_the_one_before(tmp_path: Path) -> None:
    events = [line for piece in stream(4, pieces=2) for line in piece]
    assert run("--state-dir", str(tmp_path), input=ndjson(*events)).returncode == 0
    (good,) = snapshots(tmp_path)
    assert good == f"snapshot-{len(events):020d}.xce"
    damaged = tmp_path / f"snapshot-{len(events) + 5:020d}.xce"
    damaged.write_bytes((tmp_path / good).read_bytes()[:100])
    result = run("--state-dir", str(tmp_path), input=b"")
    note = result.stderr.decode()
    assert result.returncode == 0
    assert f"skipping snapshot {damaged}: corrupt snapshot" in note, note
    assert f"at event index {len(events)} " in note, note


def test_entries_named_like_snapshots_that_are_no_files_are_ignored(tmp_path: Path) -> None:
    # A directory, a FIFO (reading it would block) and a link to a device,
    # each named as a newer snapshot: neither read nor kept in a snapshot's
    # place (pruning must not take the real ones for older).
    events = [line for piece in stream(4, pieces=2) for line in piece]
    assert run("--state-dir", str(tmp_path), input=ndjson(*events)).returncode == 0
    (good,) = snapshots(tmp_path)
    newer = [tmp_path / f"snapshot-{len(events) + k:020d}.xce" for k in (1, 2, 3)]
    newer[0].mkdir()
    os.mkfifo(newer[1])
    newer[2].symlink_to("/dev/zero")
    result = run("--state-dir", str(tmp_path), input=b"")
    assert result.returncode == 0, result.stderr
    assert f"at event index {len(events)} " in result.stderr.decode()
    assert (tmp_path / good).is_file()


def test_snapshot_options_need_a_state_dir() -> None:
    result = run("--snapshot-every", "5")
    assert result.returncode == 2
    assert b"--snapshot-every needs --state-dir" in result.stderr


def test_other_scheduling_options_than_the_snapshot_are_refused(tmp_path: Path) -> None:
    events = ndjson(*stream(5, pieces=1)[0])
    assert run("--state-dir", str(tmp_path), input=events).returncode == 0
    result = run("--state-dir", str(tmp_path), "--strict-fifo", input=events)
    assert result.returncode == 2
    assert b"strict_fifo False (given True)" in result.stderr


def test_a_fairshare_queue_restarts_where_it_stopped(tmp_path: Path) -> None:
    # Two users share one host through a fairshare queue; the second run
    # resends the log plus more, and decides as one run over everything would.
    tree = '{"shares":[["ann",3],["bob",1]]}'
    head = ['{"type":"worker_up","name":"h1","slots":2}']
    head += ['{"type":"queue_config","name":"fs","picker":"fairshare","fairshare":' + tree + "}"]
    head += [
        f'{{"type":"job_submitted","job_id":"{u}{i}","user":"{u}","queue":"fs"}}'
        for i in range(4)
        for u in ("ann", "bob")
    ]
    head += ['{"type":"session_begin"}']
    more = []
    for job in ("ann0", "bob0", "ann1", "ann2"):
        more += [f'{{"type":"job_finished","job_id":"{job}"}}', '{"type":"session_begin"}']
    whole = run("--state-dir", str(tmp_path / "whole"), input=ndjson(*head, *more))
    assert whole.returncode == 0, whole.stderr
    first = run("--state-dir", str(tmp_path / "cut"), input=ndjson(*head))
    assert first.returncode == 0, first.stderr
    assert snapshots(tmp_path / "cut")
    second = run("--state-dir", str(tmp_path / "cut"), input=ndjson(*head, *more))
    assert second.returncode == 0, second.stderr
    assert "resuming from" in second.stderr.decode()
    assert timeless(parse(first.stdout) + parse(second.stdout)) == timeless(parse(whole.stdout))
