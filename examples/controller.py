"""A toy batch controller built on xce's embedding API.

Agents connect over TCP and send newline-delimited JSON events (``worker_up``,
``job_submitted``, ...; the schema is ``events``). The controller feeds them to a
scheduler core and acts on its decisions: a ``job_allocated`` is "dispatched"
(printed), and a toy execution agent reports the job finished after a short
simulated run time, which frees its slots for pending jobs.

Structure: one anyio task group owns every task, so a failure or a shutdown
cancels all of them and nothing outlives ``main``:

- the listener, with one ``read_agent`` task per connection: bytes -> events
  -> ``Scheduler.send_batch`` (which waits while the core is busy);
- ``act_on_decisions``: reads ``Scheduler.decisions()`` and starts one
  ``run_job`` task per allocated job;
- ``stop_on_signal``: SIGINT/SIGTERM cancel the group.

Sessions run every ``--interval`` seconds when something changed
(``SchedulerConfig(session_interval=...)``), so agents need not send
``session_begin`` (they may). Leaving ``open_scheduler`` applies what was sent.

Run it, then feed it events::

    python examples/controller.py 0 --max-jobs 2      # prints "listening on PORT"
    printf '%s\\n' '{"type":"worker_up","name":"h1","slots":4}' \\
        '{"type":"job_submitted","job_id":"j1","max_tasks":2}' | nc 127.0.0.1 PORT

Exit status: 0 after ``--max-jobs`` jobs finished, 128+N after signal N.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from collections.abc import AsyncIterator

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

import xce_core
from events import (
    BadEvent,
    EventDecoder,
    InputEvent,
    JobAllocated,
    JobFinished,
    JobPended,
    JobRejected,
)
from xce_core import SchedulerConfig


def say(message: str) -> None:
    """Print a line at once (stdout is block-buffered when it is a pipe)."""
    print(message, flush=True)


async def read_agent(sched: xce_core.Scheduler, stream: anyio.abc.SocketStream) -> None:
    """Decode one agent's connection into events for the scheduler, until it closes."""
    # One decoder per connection: a half-received line belongs to its own agent.
    decoder = EventDecoder("ndjson")
    async with stream:
        try:
            async for chunk in stream:
                await submit(sched, decoder.feed(chunk))
        except anyio.BrokenResourceError:  # an agent that resets is gone, not an error of ours
            pass
        await submit(sched, decoder.close())  # a last line without its newline


async def submit(sched: xce_core.Scheduler, items: list[InputEvent | BadEvent]) -> None:
    """Send the good events as one batch; report the malformed ones and drop them."""
    for item in items:
        if isinstance(item, BadEvent):
            say(f"bad event on line {item.line}: {item.error}")
    await sched.send_batch(item for item in items if not isinstance(item, BadEvent))


async def act_on_decisions(
    sched: xce_core.Scheduler, tg: anyio.abc.TaskGroup, run_time: float, finished: Finished
) -> None:
    """Dispatch allocated jobs and report pending ones, for as long as decisions come."""
    last_reason: dict[str, str] = {}  # a pending job is reported again every session
    # The loop body never awaits, so a cancellation always lands inside the
    # iterator, which then cleans up itself; no aclosing() needed.
    async for decision in sched.decisions():
        match decision:
            case JobAllocated(job_id=job_id, hosts=hosts):
                placement = ",".join(f"{h.host}:{h.slots}" for h in hosts)
                say(f"dispatch {job_id} -> {placement}")
                tg.start_soon(run_job, sched, job_id, run_time, finished)
            case JobPended(job_id=job_id, reason=reason, detail=detail):
                if last_reason.get(job_id) != reason:
                    last_reason[job_id] = reason
                    say(f"pending {job_id}: {reason} {detail}".rstrip())
            case JobRejected(job_id=job_id, error=error):
                say(f"rejected {job_id}: {error}")


class Finished:
    """Counts finished jobs; ``done`` is set once ``limit`` of them finished."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.count = 0
        self.done = anyio.Event()

    def add(self) -> None:
        self.count += 1
        if self.limit is not None and self.count >= self.limit:
            self.done.set()


async def run_job(
    sched: xce_core.Scheduler, job_id: str, run_time: float, finished: Finished
) -> None:
    """The toy execution agent: 'run' the job, then report it finished."""
    await anyio.sleep(run_time)
    await sched.send(JobFinished(job_id=job_id))
    say(f"finished {job_id}")
    finished.add()


async def stop_on_signal(
    signals: AsyncIterator[int], scope: anyio.CancelScope, received: list[int]
) -> None:
    async for signum in signals:
        say(f"stopping on {signal.Signals(signum).name}")
        received.append(signum)
        scope.cancel()
        return


async def main(port: int, max_jobs: int | None, run_time: float, interval: float) -> int:
    """Serve until ``max_jobs`` jobs finished or a signal arrives; the exit status."""
    finished = Finished(max_jobs)
    received: list[int] = []
    config = SchedulerConfig(session_interval=interval)
    # Signals are caught from before the port is announced: a test (or an
    # operator) may stop the controller as soon as it is reachable.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with xce_core.open_scheduler(config) as sched, anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signal, signals, tg.cancel_scope, received)
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
            say(f"listening on {listener.extra(SocketAttribute.local_port)}")
            tg.start_soon(listener.serve, functools.partial(read_agent, sched))
            tg.start_soon(act_on_decisions, sched, tg, run_time, finished)
            await finished.done.wait()
            tg.cancel_scope.cancel()  # stops the listener, the agents and the readers
    say(f"{finished.count} jobs finished")
    return 128 + received[0] if received else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int, help="TCP port on 127.0.0.1 (0: pick a free one)")
    parser.add_argument("--max-jobs", type=int, metavar="N", help="exit after N jobs finished")
    parser.add_argument("--run-time", type=float, default=0.2, metavar="S", help="per job")
    parser.add_argument("--interval", type=float, default=0.05, metavar="S", help="sessions")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    status = anyio.run(main, args.port, args.max_jobs, args.run_time, args.interval)
    sys.exit(status)
