"""The one loop that drives a scheduler core: apply events, run sessions, hand
decisions over.

Every driver of :class:`SchedulerCore` goes through :class:`SchedulerLoop`: the
embedding API (:func:`open_scheduler`, :func:`process_events`), ``xce run`` and
the simulator. Where the events come from, when a tick is due and where the
decisions go is the driver's business; the order of applying, sessions and
hand-overs is decided here, once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias, final

import anyio
import anyio.lowlevel

from events import BadEvent, Decision, InputEvent, JobSubmitted, SessionEnd
from xce_core._core import RUN_END, SchedulerCore

__all__ = ["DecisionSink", "SchedulerLoop"]

# How often a streamed session's hand-over task looks for decisions.
_STREAM_POLL_S = 0.002

DecisionSink: TypeAlias = Callable[[list[Decision]], Awaitable[None]]
"""Takes one hand-over of decisions, in order (the list is the sink's to keep)."""


@final
class SchedulerLoop:
    """Drives one :class:`SchedulerCore`: applies events in order, runs a session
    when one is due, and hands the decisions to ``sink``.

    A session runs:

    - at each ``session_begin`` of a batch, before the events after it are applied
      (:meth:`apply`);
    - at :meth:`tick` if something changed since the last session (a driver's
      interval timer calls it);
    - at :meth:`run_session`, on demand (the simulator decides for itself).

    Decisions are handed over after every session and at the end of every batch
    (never an empty hand-over). ``sink`` is awaited before anything else happens,
    so a slow sink is backpressure: what waits is the rest of the batch and the
    next session, never half a session. A session's decisions are produced whole
    by the core, then handed over in one piece; with ``stream_from``, a running
    session's decisions are handed over in pieces of at least that many while it
    runs (by a task of its own, so the sink works while the session goes on;
    backpressure then holds that task, not the session), and what is left when
    it ends. Hand-overs never overlap: each is awaited before the next begins.

    Faults (an exception that is not an ``XceError``, in an event, a plugin or the
    core) never escape: the core reports them as decisions whose error text
    starts with ``"internal error: "`` (see :class:`SchedulerCore`), in order
    with everything decided before them, and the loop goes on with the next
    event. Exceptions of ``sink`` propagate; so does cancellation, which stops a
    running session (committed allocations stand) and leaves undelivered
    decisions in the core for :meth:`flush`.

    One owner: the methods must not run concurrently with each other (the core
    runs one session at a time). Not thread-safe.
    """

    __slots__ = ("_sink", "_stream_from", "core")

    def __init__(
        self, core: SchedulerCore, sink: DecisionSink, *, stream_from: int | None = None
    ) -> None:
        if stream_from is not None and stream_from < 1:
            raise ValueError(f"stream_from must be at least 1, not {stream_from}")
        self.core = core
        self._sink = sink
        self._stream_from = stream_from

    async def apply(
        self,
        items: Iterable[InputEvent | BadEvent],
        *,
        start: int | None = None,
        strict: bool = False,
    ) -> BadEvent | None:
        """Apply ``items`` in order, running a session at each ``session_begin``,
        then hand over what was decided.

        Events are numbered from ``start`` (default: the core's count of events
        received, so numbering continues across batches). A :class:`BadEvent` (an
        item that could not be decoded) counts as an event and becomes an
        ``event_rejected`` decision in its place. With ``strict``, the first one
        ends the batch: the decisions so far, its rejection included, are handed
        over, the items after it are not applied, and it is returned. Otherwise
        returns ``None``.

        A cancellation point whenever it runs a session or hands decisions over.
        """
        core = self.core
        sink = self._sink
        index = start
        more = iter(items)
        item = next(more, RUN_END)
        while item is not RUN_END:
            if isinstance(item, JobSubmitted):
                # A run of submissions in one call (benchmark B5,
                # benchmarks/bench_ingest.py); it ends at the first item that
                # is not one, taken from ``more`` and not applied yet.
                item, count = core.submit_run(item, more, index)
                if index is not None:
                    index += count
                continue
            if isinstance(item, BadEvent):
                rejected = item.to_decision()
                core.reject(rejected.error, index, line=rejected.line, job_id=item.job_id)
                if strict:
                    await self.flush()
                    return item
            elif core.apply(item, index):
                if self._stream_from is None:
                    await core.run_session()
                else:
                    await self._streamed_session(self._stream_from)
                # flush() inlined: the simulator comes here once per instant.
                decisions = core.take_decisions()
                if decisions:
                    await sink(decisions)
            if index is not None:
                index += 1
            item = next(more, RUN_END)
        decisions = core.take_decisions()
        if decisions:
            await sink(decisions)
        return None

    async def tick(self) -> SessionEnd | None:
        """Run a session if something changed since the last one, and hand its
        decisions over; the ``session_end``, or ``None`` when nothing changed.
        Always a cancellation point."""
        if not self.core.changed:
            await anyio.lowlevel.checkpoint()
            return None
        return await self.run_session()

    async def run_session(self) -> SessionEnd:
        """Run a session now and hand its decisions over; its ``session_end``.
        Always a cancellation point. Raises ``XceError`` if a session is running."""
        if self._stream_from is None:
            end = await self.core.run_session()
        else:
            end = await self._streamed_session(self._stream_from)
        await self.flush()
        return end

    async def _streamed_session(self, least: int) -> SessionEnd:
        """Run a session while a task of its own hands its decisions over, in
        pieces of at least ``least``, as the core makes them; what is left
        stays in the core for the caller."""
        core = self.core
        sink = self._sink
        ended = anyio.Event()

        async def hand_over() -> None:
            while not ended.is_set():
                if core.decisions_waiting >= least:
                    await sink(core.take_decisions())
                else:
                    with anyio.move_on_after(_STREAM_POLL_S):
                        await ended.wait()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(hand_over)
                try:
                    end = await core.run_session()
                finally:
                    ended.set()
        except BaseExceptionGroup as group:
            if len(group.exceptions) == 1:  # the sink's, raised as without streaming
                raise group.exceptions[0] from None
            raise
        return end

    async def flush(self) -> None:
        """Hand every decision the core holds to the sink (nothing if it holds
        none). A cancellation point only through the sink."""
        decisions = self.core.take_decisions()
        if decisions:
            await self._sink(decisions)
