"""``xce run --nats``: the scheduler as a durable JetStream service.

One process at a time is **active**: it holds the lease (:mod:`._lease`); the
others wait as standbys. The active process:

1. loads the newest checkpoint (:mod:`._checkpoint`) into a new core, or starts
   a fresh core when there is none, and recreates the durable consumer at the
   sequence after it (:mod:`._nats_streams`);
2. reads the decisions stream's tail (:mod:`._nats_publish`): decisions up to
   that position were published before, and are computed again but not sent;
3. applies the input messages in stream order, one event each, through the
   core's :class:`~xce_core.SchedulerLoop`, on a clock that reads each
   message's server timestamp, so replaying gives the same decisions;
4. publishes the decisions; acks an input message once every decision caused
   by it and by the messages before it is stored; every ``snapshot_every``
   events or ``snapshot_interval`` seconds takes a snapshot, stored once the
   decisions it covers are.

**Durability rule:** an input message is acked only when its effects are
safe: the decisions it caused are stored (and a snapshot, when one is stored,
covers only events whose decisions are stored). Whatever dies, the newest
snapshot plus the input stream after it rebuild the same core and the same
decisions, and the decisions stream's tail says which of them to skip.

Test hook: ``XCE_NATS_CRASH_AT=POINT:N`` kills the process (SIGKILL) the N-th
time it reaches ``POINT`` (see :data:`CRASH_POINTS`).
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Final, Protocol, final

import anyio
import anyio.abc
import nats
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from events import BadEvent, Decision, InputEvent, JobSubmitted
from xce_core import SchedulerCore, SchedulerLoop, XceError
from xce_core.cli._checkpoint import Checkpoint, CheckpointStore
from xce_core.cli._endpoints import stderr_line
from xce_core.cli._lease import Lease, LeaseLost
from xce_core.cli._nats_input import InputFetcher, InputMessage, PayloadDecoder
from xce_core.cli._nats_publish import DecisionPublisher
from xce_core.cli._nats_streams import NatsOptions, decision_msg_id, ensure_streams

__all__ = ["CRASH_POINTS", "CoreFactory", "MessageClock", "ServiceMetrics", "serve_nats"]

CRASH_POINTS: Final = (
    "fetched",  # a batch arrived, nothing of it applied
    "applied",  # an input message applied, its decisions queued
    "mid_publish",  # half of a hand-over sent
    "published",  # a hand-over sent, not yet acked
    "acked",  # an input message's decisions acked, the message not
    "input_acked",  # input acks sent
    "snapshot_taken",  # a snapshot encoded, not stored
    "snapshot_stored",  # a snapshot stored
    "leased",  # the lease acquired, nothing restored
)
_log = logging.getLogger("xce.run")
_SHUTDOWN_TIMEOUT_S: Final = 5.0
_STREAM_FROM: Final = 1000  # decisions of a running session per early hand-over


def _crash_plan() -> tuple[str, int] | None:
    spec = os.environ.get("XCE_NATS_CRASH_AT")
    if not spec:
        return None
    point, _, count = spec.partition(":")
    if point not in CRASH_POINTS:
        raise XceError(f"XCE_NATS_CRASH_AT: unknown point {point!r} ({', '.join(CRASH_POINTS)})")
    return point, int(count or 1)


_crash = _crash_plan()
_passes: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Kill this process if the crash plan names this pass of ``name``."""
    if _crash is None or _crash[0] != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] == _crash[1]:
        os.kill(os.getpid(), signal.SIGKILL)


@final
class MessageClock:
    """The core's clock under ``--nats``: the server timestamp of the input
    message being applied, so a replay sees the times the first run saw."""

    __slots__ = ("time",)

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time


class ServiceMetrics(Protocol):
    """What the service reports to ``--metrics`` (``xce_core.cli._metrics.RunMetrics``)."""

    def observe_events(self, items: Iterable[InputEvent | BadEvent]) -> None: ...
    def observe_decisions(self, decisions: Iterable[Decision], core: SchedulerCore) -> None: ...
    def refresh(self, core: SchedulerCore) -> None: ...
    def track_snapshots(self, last_written: Callable[[], float | None]) -> None: ...
    def set_lease_holder(self, held: bool) -> None: ...


CoreFactory = Callable[[Checkpoint | None, MessageClock], SchedulerCore]
"""Builds the core: restored from a checkpoint, or fresh (``None``)."""


@final
class _ActiveRun:
    """The active process's work from one checkpoint on, until cancelled."""

    def __init__(
        self,
        nc: Client,
        options: NatsOptions,
        core: SchedulerCore,
        clock: MessageClock,
        checkpoint: Checkpoint | None,
        fetcher: InputFetcher,
        publisher: DecisionPublisher,
        store: CheckpointStore,
        metrics: ServiceMetrics | None,
    ) -> None:
        self._nc = nc
        self._options = options
        self._metrics = metrics
        self.snapshot_time: float | None = time.time() if checkpoint else None
        self._core = core
        self._clock = clock
        self._fetcher = fetcher
        self._publisher = publisher
        self._store = store
        # A session's decisions go out while it runs: the server stores them
        # meanwhile (one session can decide for a whole cluster; B1 of
        # benchmarks/bench_nats.py decides 500,000 in one).
        self._loop = SchedulerLoop(core, self._hand_over, stream_from=_STREAM_FROM)
        self._decoder = PayloadDecoder(options)
        self._events = checkpoint.events if checkpoint else 0
        self._seq = checkpoint.seq if checkpoint else 0
        self._ordinal = 0  # decisions the current message caused so far
        # Input messages waiting for their decisions: (published count, ack subject).
        self._acks: deque[tuple[int, str]] = deque()
        self._kick = anyio.Event()
        self._snapshots = True  # False once the core refused one (fairshare)
        self._snapshot_events = self._events
        self._snapshot_at = time.monotonic()
        self._saving = False

    def progress(self) -> None:
        """Something may be ackable (the publisher's acks moved, or input came)."""
        self._kick.set()

    async def consume(self, tg: anyio.abc.TaskGroup) -> None:
        while True:
            messages = await self._fetcher.fetch()
            crash_point("fetched")
            items = self._decoder.decode([m.data for m in messages])
            if self._metrics is not None:
                self._metrics.observe_events(items)
            at = 0
            while at < len(items):
                if isinstance(items[at], JobSubmitted):
                    at = await self._apply_submissions(messages, items, at)
                else:
                    await self._apply(messages[at], items[at])
                    at += 1
            self.progress()
            if self._metrics is not None:
                self._metrics.refresh(self._core)
            self._maybe_snapshot(tg)

    async def _apply(self, message: InputMessage, item: InputEvent | BadEvent) -> None:
        if isinstance(item, BadEvent):
            item = BadEvent(
                self._events, None, f"message {message.seq}: {item.error}", item.job_id
            )
        self._seq = message.seq
        self._ordinal = 0
        self._clock.time = message.time
        await self._loop.apply((item,), start=self._events)
        self._applied(message, self._publisher.published)

    def _applied(self, message: InputMessage, published: int) -> None:
        """``message`` is applied and its decisions (up to ``published``) handed
        over: count it, and ack it once those are stored."""
        self._events += 1
        self._acks.append((published, message.reply))
        crash_point("applied")

    async def _apply_submissions(
        self, messages: list[InputMessage], items: list[InputEvent | BadEvent], at: int
    ) -> int:
        """Apply the ``job_submitted`` messages from ``at`` on as :meth:`_apply`
        would one by one, in one run of the core (``SchedulerCore.submit_run``:
        a busy stream is mostly submissions; benchmarks/bench_nats.py); the
        index of the first message not applied.

        The run stops after a message whose submission was rejected, so that
        its decisions are handed over as that message's, as one by one."""
        core = self._core
        published = self._publisher.published  # nothing is handed over mid-run
        end = at
        rejected: InputMessage | None = None

        def run() -> Iterator[InputEvent | BadEvent]:
            nonlocal end, rejected
            while end < len(items):
                item = items[end]
                if not isinstance(item, JobSubmitted):
                    return
                message = messages[end]
                self._seq = message.seq
                self._clock.time = message.time
                yield item  # taken back once the core applied it
                end += 1
                if core.decisions_waiting:
                    rejected = message
                    return
                self._applied(message, published)

        self._ordinal = 0
        await self._loop.apply(run(), start=self._events)
        if rejected is not None:  # its decisions are handed over: as in _apply
            self._applied(rejected, self._publisher.published)
        return end

    async def _hand_over(self, decisions: list[Decision]) -> None:
        seq, first, index = self._seq, self._ordinal, self._events
        if self._metrics is not None:
            self._metrics.observe_decisions(decisions, self._core)
        self._ordinal += len(decisions)
        # Made as they are published, so sending overlaps the making.
        items = (
            ((seq, first + i), decision_msg_id(decision, index), decision)
            for i, decision in enumerate(decisions)
        )
        if len(decisions) > 1 and _crash is not None and _crash[0] == "mid_publish":
            half = len(decisions) // 2
            await self._publisher.publish(itertools.islice(items, half))
            crash_point("mid_publish")
        await self._publisher.publish(items)
        crash_point("published")

    async def ack_loop(self) -> None:
        """Ack input messages whose decisions (and their predecessors') are stored."""
        acks = self._acks
        publish = self._nc.publish
        while True:
            await self._kick.wait()
            self._kick = anyio.Event()
            acked = self._publisher.acked
            if not acks or acks[0][0] > acked:
                continue
            crash_point("acked")
            # The consumer's acks are cumulative (AckPolicy.ALL): acking the
            # last message whose effects are stored acks every one before it,
            # which are stored too (they are applied in stream order). One
            # ack per batch, not one per message (benchmarks/bench_nats.py).
            last = ""
            while acks and acks[0][0] <= acked:
                last = acks.popleft()[1]
            await publish(last, b"+ACK")
            crash_point("input_acked")

    def _maybe_snapshot(self, tg: anyio.abc.TaskGroup) -> None:
        options = self._options
        if not self._snapshots or self._saving:
            return
        due = self._events - self._snapshot_events >= options.snapshot_every or (
            time.monotonic() - self._snapshot_at >= options.snapshot_interval
            and self._events > self._snapshot_events
        )
        if not due:
            return
        try:
            state = self._core.snapshot()
        except XceError as exc:
            _log.warning("no snapshots (%s): a restart replays the input stream", exc)
            self._snapshots = False
            return
        checkpoint = Checkpoint(seq=self._seq, events=self._events, state=state)
        crash_point("snapshot_taken")
        self._snapshot_events = self._events
        self._snapshot_at = time.monotonic()
        self._saving = True
        tg.start_soon(self._save, checkpoint, self._publisher.published)

    async def _save(self, checkpoint: Checkpoint, decisions: int) -> None:
        try:
            await self._publisher.wait_acked(decisions)
            await self._store.save(checkpoint)
            self.snapshot_time = time.time()
            crash_point("snapshot_stored")
        except (nats.errors.Error, TimeoutError) as exc:
            _log.warning("storing a snapshot failed (%s); the next one will retry", exc)
        finally:
            self._saving = False


@final
class _Service:
    """Connection, lease and the standby/active cycle."""

    def __init__(
        self, options: NatsOptions, make_core: CoreFactory, metrics: ServiceMetrics | None
    ) -> None:
        self._options = options
        self._make_core = make_core
        self._metrics = metrics
        self._run: _ActiveRun | None = None
        if metrics is not None:
            metrics.set_lease_holder(False)
            metrics.track_snapshots(lambda: self._run.snapshot_time if self._run else None)
        self._publisher: DecisionPublisher | None = None
        self._fetcher: InputFetcher | None = None

    async def _reconnected(self) -> None:
        _log.warning("reconnected to the NATS server")
        if self._publisher is not None:
            self._publisher.request_resync()
        if self._fetcher is not None:
            self._fetcher.request_reopen()

    async def serve(self) -> None:
        options = self._options
        nc = await nats.connect(
            options.url,
            reconnected_cb=self._reconnected,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.2,
            pending_size=64 << 20,
            connect_timeout=2,
        )
        try:
            js = nc.jetstream()
            await ensure_streams(js, options)
            lease = Lease(js, options.lease_bucket, options.durable, options.lease_ttl)
            await lease.open()
            store = CheckpointStore(js, options.state_bucket, options.durable)
            await store.open()
            try:
                await self._cycle(nc, js, lease, store)
            finally:
                with anyio.move_on_after(_SHUTDOWN_TIMEOUT_S, shield=True):
                    await lease.release()
        finally:
            with anyio.move_on_after(_SHUTDOWN_TIMEOUT_S, shield=True):
                await nc.close()

    async def _cycle(
        self, nc: Client, js: JetStreamContext, lease: Lease, store: CheckpointStore
    ) -> None:
        while True:
            stderr_line(f"xce run: {lease.holder} waiting for the lease")
            await lease.acquire()
            crash_point("leased")
            if self._metrics is not None:
                self._metrics.set_lease_holder(True)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(lease.keep)
                    await self._active(nc, js, lease, store, tg)
            except* LeaseLost as group:
                _log.error("lease lost (%s): back to standby", group.exceptions[0])
            finally:
                if self._metrics is not None:
                    self._metrics.set_lease_holder(False)

    async def _active(
        self,
        nc: Client,
        js: JetStreamContext,
        lease: Lease,
        store: CheckpointStore,
        tg: anyio.abc.TaskGroup,
    ) -> None:
        options = self._options
        checkpoint = await store.load()
        clock = MessageClock()
        core = self._make_core(checkpoint, clock)
        start = checkpoint.seq + 1 if checkpoint else 1
        if checkpoint is None:
            stderr_line("xce run: active; no snapshot: replaying the input stream from sequence 1")
        else:
            stderr_line(
                f"xce run: active; resuming from the snapshot at stream sequence "
                f"{checkpoint.seq} (event index {checkpoint.events})"
            )
        self._publisher = publisher = DecisionPublisher(nc, js, options, lease.ensure)
        await publisher.open()
        self._fetcher = fetcher = InputFetcher(nc, js, options, start)
        await fetcher.open()
        run = _ActiveRun(
            nc, options, core, clock, checkpoint, fetcher, publisher, store, self._metrics
        )
        self._run = run
        publisher.on_progress = run.progress
        try:
            tg.start_soon(publisher.run)
            tg.start_soon(run.ack_loop)
            await run.consume(tg)
        finally:
            self._publisher = self._fetcher = self._run = None
            with anyio.move_on_after(_SHUTDOWN_TIMEOUT_S, shield=True):
                await fetcher.close()
                await publisher.close()


async def serve_nats(
    options: NatsOptions, make_core: CoreFactory, metrics: ServiceMetrics | None = None
) -> int:
    """Serve until SIGINT or SIGTERM (exit status 130 or 143); a clean stop
    releases the lease, so a standby takes over at once. Errors of the first
    connection propagate."""
    signalled: list[int] = []
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:

            async def stop_on_signal() -> None:
                async for signum in signals:
                    signalled.append(signum)
                    tg.cancel_scope.cancel()

            tg.start_soon(stop_on_signal)
            await _Service(options, make_core, metrics).serve()
            tg.cancel_scope.cancel()
    return 128 + signalled[0] if signalled else 0
