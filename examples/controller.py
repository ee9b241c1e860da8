"""A toy batch controller built on xce's embedding API.

Agents connect over TCP and send newline-delimited JSON events (``worker_up``,
``job_submitted``, ...; the schema is ``events``). The controller feeds them to a
scheduler core and acts on its decisions: a ``job_allocated`` is "dispatched"
(printed), and a toy execution agent reports the job finished after a short
simulated run time, which frees its slots for pending jobs.

Structure (structured concurrency: every task belongs to a task group, so a
failure anywhere cancels the rest and nothing outlives ``main``)::

    readers group                    act_on_decisions: Scheduler.decisions()
      open_scheduler(...)              -> prints, starts run_job in "senders"
        senders group                stop_on_signal, the TCP listener with one
                                     read_agent per connection, run_job tasks

Everything that *sends* events lives in ``senders``, which a shutdown (signal
or ``--max-jobs``) cancels. Leaving ``open_scheduler`` then applies what was
already sent and ends the decision stream, and only then does the decision
reader finish: the reader must outlive the scheduler, or decisions of that last
drain would have nowhere to go.

Sessions run every ``--interval`` seconds when something changed
(``SchedulerConfig(session_interval=...)``), so agents need not send
``session_begin`` (they may).

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
    sched: xce_core.Scheduler, senders: anyio.abc.TaskGroup, run_time: float, finished: Finished
) -> None:
    """Dispatch allocated jobs and report pending ones, until the scheduler closes."""
    last_reason: dict[str, str] = {}  # a pending job is reported again every session
    # The loop body never awaits, so a cancellation always lands inside the
    # iterator, which then cleans up itself; no aclosing() needed.
    async for decision in sched.decisions():
        match decision:
            case JobAllocated(job_id=job_id, hosts=hosts):
                placement = ",".join(f"{h.host}:{h.slots}" for h in hosts)
                if senders.cancel_scope.cancel_called:  # allocated while shutting down
                    say(f"not dispatched (stopping): {job_id} -> {placement}")
                else:
                    say(f"dispatch {job_id} -> {placement}")
                    senders.start_soon(run_job, sched, job_id, run_time, finished)
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
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
        say(f"listening on {listener.extra(SocketAttribute.local_port)}")
        # Exited from the bottom up: senders stop, the scheduler drains, and only
        # then does the decision reader see the end of the stream.
        async with (
            listener,
            anyio.create_task_group() as readers,
            xce_core.open_scheduler(config) as sched,
            anyio.create_task_group() as senders,
        ):
            readers.start_soon(act_on_decisions, sched, senders, run_time, finished)
            senders.start_soon(stop_on_signal, signals, senders.cancel_scope, received)
            senders.start_soon(listener.serve, functools.partial(read_agent, sched))
            await finished.done.wait()
            senders.cancel_scope.cancel()  # the listener, the agents and the jobs
    say(f"{finished.count} jobs finished")
    return 128 + received[0] if received else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int, help="TCP port on 127.0.0.1 (0: pick a free one)")
    parser.add_argument("--max-jobs", type=int, metavar="N", help="exit after N jobs finished")
    parser.add_argument(
        "--run-time", type=float, default=0.2, metavar="S", help="simulated run time of a job"
    )
    parser.add_argument(
        "--interval", type=float, default=0.05, metavar="S", help="seconds between sessions"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    status = anyio.run(main, args.port, args.max_jobs, args.run_time, args.interval)
    sys.exit(status)
