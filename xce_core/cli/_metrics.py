"""``xce run --metrics HOST:PORT``: Prometheus metrics (``pip install 'xce[metrics]'``).

:class:`RunMetrics` is fed by the consumer on the event loop (the events it
applies, the decisions it hands over, the core's counts after each hand-over)
and served by ``prometheus-client``'s HTTP server from a daemon thread. The
core knows nothing of it. No label names a user, a queue or a job: every
series is bounded by the event and decision types.

Metrics (``{type}``: an input event's or a decision's ``type`` tag):

- ``xce_sessions_total``, ``xce_session_duration_seconds`` (histogram of each
  session's ``elapsed_s``, buckets from 50 µs to 10 s);
- ``xce_decisions_total{type}``, ``xce_events_total{type}`` (input events
  applied; ``malformed``: not decodable), ``xce_events_rejected_total``
  (``event_rejected`` decisions);
- ``xce_pending_jobs``, ``xce_running_jobs`` (gauges);
- ``xce_cache_hits_total``: pends decided without an attempt (the
  unsatisfiable cache, sleeping groups);
- ``xce_snapshot_age_seconds``: since the last snapshot written or loaded
  (``--state-dir``; NaN: none yet);
- ``xce_lease_holder``: 1 while this process holds the active lease (set
  through :meth:`RunMetrics.set_lease_holder` by whoever manages the lease).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Final, final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from events import DECISION_TYPES, INPUT_TYPES, BadEvent, Decision, InputEvent, SessionEnd, tag_of
from xce_core import SchedulerCore

__all__ = ["SESSION_BUCKETS", "RunMetrics", "parse_metrics_address"]

# Sessions last from tens of microseconds (nothing to do) to seconds (B1).
SESSION_BUCKETS: Final = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
MALFORMED: Final = "malformed"


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1) as ``(host, port)``.
    Raises :class:`ValueError` saying what is wrong."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host = ""
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"expected HOST:PORT with a port from 0 to 65535, got {text!r}")
    return host, int(port_text)


def _tag(cls: type) -> str:
    tag = cls.__struct_config__.tag  # type: ignore[attr-defined]
    assert isinstance(tag, str)
    return tag


@final
class RunMetrics:
    """The metrics of one ``xce run`` (see the module docstring). Its methods
    run on the event loop; scrapes read the values from the server's thread."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.sessions = Counter("xce_sessions", "Scheduling sessions run.", registry=r)
        self.session_duration = Histogram(
            "xce_session_duration_seconds",
            "Wall time of each scheduling session.",
            buckets=SESSION_BUCKETS,
            registry=r,
        )
        self.decisions = Counter("xce_decisions", "Decisions made, by type.", ["type"], registry=r)
        self.events = Counter("xce_events", "Input events applied, by type.", ["type"], registry=r)
        self.rejected = Counter(
            "xce_events_rejected", "Input events rejected (event_rejected).", registry=r
        )
        self.pending = Gauge("xce_pending_jobs", "Jobs pending now.", registry=r)
        self.running = Gauge("xce_running_jobs", "Jobs running now.", registry=r)
        self.cache_hits = Counter(
            "xce_cache_hits",
            "Pends decided without an attempt (unsatisfiable cache, sleeping groups).",
            registry=r,
        )
        self.snapshot_age = Gauge(
            "xce_snapshot_age_seconds",
            "Seconds since the last state snapshot was written or loaded (NaN: none).",
            registry=r,
        )
        self.snapshot_age.set(math.nan)
        self.lease_holder = Gauge(
            "xce_lease_holder", "1 while this process holds the active lease.", registry=r
        )
        for cls in INPUT_TYPES:
            self.events.labels(_tag(cls))
        self.events.labels(MALFORMED)
        for cls in DECISION_TYPES:
            self.decisions.labels(_tag(cls))
        self._server_close: Callable[[], None] | None = None

    # ------------------------------------------------------------------ feeding

    def observe_events(self, items: Iterable[InputEvent | BadEvent]) -> None:
        """Count input items about to be applied."""
        counts: dict[str, int] = {}
        for item in items:
            tag = MALFORMED if isinstance(item, BadEvent) else tag_of(item)
            counts[tag] = counts.get(tag, 0) + 1
        for tag, n in counts.items():
            self.events.labels(tag).inc(n)

    def observe_decisions(self, decisions: Iterable[Decision], core: SchedulerCore) -> None:
        """Count a hand-over of decisions; read the core's job counts."""
        counts: dict[str, int] = {}
        for d in decisions:
            tag = tag_of(d)
            counts[tag] = counts.get(tag, 0) + 1
            if isinstance(d, SessionEnd):
                self.sessions.inc()
                self.session_duration.observe(d.elapsed_s)
                last = core.last_session
                if last is not None and last.number == d.session:
                    self.cache_hits.inc(last.cache_hits)
        for tag, n in counts.items():
            self.decisions.labels(tag).inc(n)
        rejected = counts.get("event_rejected")
        if rejected:
            self.rejected.inc(rejected)
        self.refresh(core)

    def refresh(self, core: SchedulerCore) -> None:
        """Read the core's job counts (between events)."""
        self.pending.set(core.state.pending_count)
        self.running.set(core.state.running_count)

    def track_snapshots(self, last_written: Callable[[], float | None]) -> None:
        """Report the age of the snapshot whose ``time.time()`` ``last_written``
        returns (``None``: none yet), read at each scrape."""

        def age() -> float:
            at = last_written()
            return math.nan if at is None else max(0.0, time.time() - at)

        self.snapshot_age.set_function(age)

    def set_lease_holder(self, held: bool) -> None:
        """Whether this process holds the active lease now (the standby logic
        calls it on every change)."""
        self.lease_holder.set(1 if held else 0)

    # ------------------------------------------------------------------ serving

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread; returns the
        port bound (``port`` 0: a free one). Raises :class:`OSError`."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)

        def close() -> None:
            server.shutdown()
            server.server_close()

        self._server_close = close
        return int(server.server_address[1])

    def close(self) -> None:
        """Stop serving (idempotent)."""
        close, self._server_close = self._server_close, None
        if close is not None:
            close()
