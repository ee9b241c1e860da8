"""``xce run --metrics``: Prometheus metrics scraped over HTTP while it runs."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.cli.xce_process import SESSION, TIMEOUT, WORKERS, Consumer, job, ndjson, run, start

parser = pytest.importorskip("prometheus_client.parser")


def scrape(port: int) -> dict[str, float]:
    """Every sample as ``name{label="value",...}`` -> value."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def metrics_port(consumer: Consumer) -> int:
    line = consumer.stderr_line()
    match = re.fullmatch(r"xce run: metrics on http://127\.0\.0\.1:(\d+)/metrics\n", line)
    assert match, line
    return int(match[1])


def test_metrics_count_sessions_decisions_events_and_jobs(
    consumer_factory: list[Consumer],
) -> None:
    consumer = start(consumer_factory, "--metrics", "127.0.0.1:0")
    port = metrics_port(consumer)
    before = scrape(port)
    assert before["xce_sessions_total"] == 0
    assert before["xce_pending_jobs"] == 0
    assert math.isnan(before["xce_snapshot_age_seconds"])
    assert before["xce_lease_holder"] == 0

    # 6 slots: a (4) and c (2) start, b (4) pends; a bad line and an unknown job.
    events = [*WORKERS, job("a", 4), job("b", 4), job("c", 2), "{nope"]
    events += ['{"type":"job_finished","job_id":"zz"}', SESSION]
    consumer.send(ndjson(*events))
    consumer.read_until("session_end")
    after = scrape(port)
    assert after["xce_sessions_total"] == 1
    assert after["xce_session_duration_seconds_count"] == 1
    assert after['xce_session_duration_seconds_bucket{le="10.0"}'] == 1
    assert after['xce_session_duration_seconds_bucket{le="5e-05"}'] in (0, 1)
    assert after['xce_decisions_total{type="job_allocated"}'] == 2
    assert after['xce_decisions_total{type="job_pended"}'] == 1
    assert after['xce_decisions_total{type="event_rejected"}'] == 2
    assert after['xce_decisions_total{type="session_end"}'] == 1
    assert after['xce_events_total{type="worker_up"}'] == 2
    assert after['xce_events_total{type="job_submitted"}'] == 3
    assert after['xce_events_total{type="job_finished"}'] == 1
    assert after['xce_events_total{type="session_begin"}'] == 1
    assert after['xce_events_total{type="malformed"}'] == 1
    assert after["xce_events_rejected_total"] == 2
    assert (after["xce_pending_jobs"], after["xce_running_jobs"]) == (1, 2)

    # Finishing a lets b start; d pends.
    consumer.send(ndjson('{"type":"job_finished","job_id":"a"}', job("d", 4), SESSION))
    consumer.read_until("session_end")
    later = scrape(port)
    assert later["xce_sessions_total"] == 2
    assert (later["xce_pending_jobs"], later["xce_running_jobs"]) == (1, 2)
    assert later["xce_cache_hits_total"] >= 0
    assert consumer.wait() == 0


def test_snapshot_age_is_reported_with_a_state_dir(
    tmp_path: Path, consumer_factory: list[Consumer]
) -> None:
    consumer = start(
        consumer_factory, "--state-dir", str(tmp_path), "--snapshot-every", "1", "--metrics", ":0"
    )
    assert "starting at event index 0" in consumer.stderr_line()
    port = metrics_port(consumer)
    consumer.send(ndjson(*WORKERS, job("a"), SESSION))
    consumer.read_until("session_end")
    # The snapshot is written after the decisions: wait for it.
    deadline = time.monotonic() + TIMEOUT
    while math.isnan(age := scrape(port)["xce_snapshot_age_seconds"]):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert 0 <= age < 60


def without(module: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``xce run ARGS`` in a process where ``module`` cannot be imported (an
    optional extra not installed), on empty input."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; from xce_core.cli._main import main; main()"
    )
    return subprocess.run(
        [sys.executable, "-c", code, "run", *args],
        input=b"",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_a_bad_metrics_address_or_a_missing_extra_is_a_usage_error() -> None:
    result = run("--metrics", "127.0.0.1:http")
    assert result.returncode == 2
    assert b"expected HOST:PORT" in result.stderr
    result = without("prometheus_client", "--metrics", ":0")
    assert result.returncode == 2
    assert b"--metrics needs prometheus-client: pip install 'xce[metrics]'" in result.stderr


def test_nats_without_its_extra_is_a_usage_error_as_metrics_is() -> None:
    result = without("nats", "--nats", "nats://127.0.0.1:1")
    assert result.returncode == 2
    assert b"--nats needs the NATS client: pip install 'xce[nats]'" in result.stderr
