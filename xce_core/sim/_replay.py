"""Replay a workload trace through the scheduler core on virtual time.

:func:`simulate` drives a :class:`SchedulerCore` through the core's
:class:`SchedulerLoop`, with a :class:`VirtualClock`. At each distinct instant, in
time order, it applies the ``job_finished`` events due then, then the
``job_submitted`` events of that instant (in trace order), as one batch, then
runs ONE scheduling session and books that instant's decisions. Every
``job_allocated`` starts its job at that instant and schedules its finish at
start + run time. Nothing ever sleeps. One session per instant: a job with run
time 0 starts and finishes at the same instant, and its finish is applied after
that instant's session, so its slots serve the next session, at the next
instant something happens (a submit, of a job the replay rejects too unless it
has no size, or an end); when nothing else would ever
happen while jobs wait, that session is one second later. This is AccaSim's
rule (one dispatching pass per time point, jobs of length 0 released after it,
and time moving on by one second when no time point is left), and with it
strict FIFO gives AccaSim's FIFO schedule start time for start time
(``benchmarks/compare_accasim.py``).

A session is skipped when it provably cannot start a job, which never changes
the schedule (``every_instant=True`` / ``--every-instant`` turns this off): when
no job is pending; when no slot is free; or when nothing finished since the last
session and every job submitted since needs more slots than are free (jobs that
failed before fail again, as capacity has only shrunk since); when every
pending job needs more slots than are free (a task takes a slot); and under
strict FIFO in submit order (no backfill, limits, queues or share trees
configured) when the first pending job does (the session would stop there).
Under fairshare no session is skipped at an instant where usage history is due
to enter priorities (``SchedulerCore.recalculation_due``): skipping it would
move the recalculation to a later instant. The finishes of
an instant with no job pending are applied with the next batch (the core reads
the clock only when a session begins, so this changes nothing but the number
of calls into the loop), except under fairshare: a share account is charged
for its jobs up to the clock's time when their ends are applied, so ends are
applied at their own instant there.

The result keeps every job's outcome compactly (:class:`OutcomeTable`); with
``keep_hosts=False`` it leaves out where jobs ran, which is most of a replay's
memory when jobs are wide. With ``keep_series=True`` it also holds the time
series, recorded by the replay's own counters after each instant (equal to the
one computed from the outcomes; writing it then costs its rows only).

How SWF fields become jobs (the trace quirks):

- **run time** (field 4): ``-1`` (not recorded) -> rejected, reason
  ``no_runtime``; ``0`` -> the job runs for zero seconds (it still needs its
  processors free to start).
- **size**: requested processors (field 8) when > 0, else allocated processors
  (field 5); neither > 0 -> rejected, ``no_size``. More processors than the
  cluster's total slots -> rejected, ``too_big``. The job asks for exactly that
  many tasks (``min_tasks = max_tasks``).
- **submit time** (field 2) < 0 -> rejected, ``no_submit``. A job id seen before
  in the trace -> rejected, ``duplicate_id``. Jobs the core itself rejects
  (``job_rejected``/``event_rejected``, e.g. a bad ``--resreq``) -> ``core``.
- Identity: job id -> ``str(id)``, user -> ``u<user>``, group -> project
  ``g<group>``, queue -> ``q<queue>``; a ``-1`` there maps to the empty string
  (the core's default). All of them share one FCFS order: queues carry no
  priority in a replay.
- **memory** (field 10, KB per processor): when some host of the cluster has a
  ``mem`` resource (MB), a job with ``req_mem > 0`` gets
  ``rusage[mem=ceil(req_mem / 1024)]`` (per task); otherwise it is ignored.
- **partition** (field 16): when some host has a ``partition`` attribute, a job
  with partition >= 0 gets ``select[partition==<n>]``; otherwise ignored.
- ``--resreq``: used verbatim for every job, *instead of* the memory and
  partition parts.
- Wait time, status, CPU time, used memory, executable, preceding job and think
  time are ignored (the replay makes its own schedule; no job dependencies).
- When a session leaves jobs pending while no finish is due and no submission
  remains, those jobs can never start (too much memory for any host, a
  ``select`` nothing matches...): the replay stops and counts them as
  ``never_started``, each with the reason and detail of the last
  ``job_pended`` the core sent for it.
- The cluster's licences and queues (``[licences]``, ``[[queue]]`` of a cluster
  file) are ``shared_resource`` and ``queue_config`` events applied after the
  hosts, before the first job.

**Stopping early.** ``stop`` (a callable, checked before each instant) ends the
replay early when it returns true, as on Ctrl-C: the result then holds what was
decided so far. Its summary is marked ``partial`` with the instant reached
(``stopped_at``); jobs submitted and not started are ``pending`` (with their
last pend reason), jobs not submitted yet ``unreplayed``.
"""

from __future__ import annotations

import bisect
import math
import time
from array import array
from collections.abc import Callable, Sequence
from heapq import heappop, heappush
from typing import NamedTuple

from events import (
    Decision,
    EventRejected,
    InputEvent,
    JobAllocated,
    JobFinished,
    JobPended,
    JobRejected,
    JobSubmitted,
    Limit,
    LimitsConfig,
    SessionBegin,
)
from xce_core import (
    SchedulerConfig,
    SchedulerCore,
    SchedulerLoop,
    VirtualClock,
    internal_error_text,
)
from xce_core.sim._cluster import ClusterSpec, SimulationError
from xce_core.sim._outcomes import OutcomeTable, SeriesRecorder
from xce_core.sim._report import SimResult, consumer_figures, summarize
from xce_core.sim._swf import SwfJob

__all__ = ["Progress", "job_request", "run_limit", "simulate"]

Progress = Callable[[int, int], None]
_PROGRESS_EVERY = 512
_SESSION = SessionBegin()


def job_request(
    job: SwfJob, cluster: ClusterSpec, resreq: str | None = None
) -> tuple[int, str] | str:
    """``(tasks, resreq)`` for a job the replay submits, or the rejection reason
    (``no_runtime``, ``no_size``, ``no_submit``, ``too_big: ...``). Pure."""
    return _request(job, _Rules.of(cluster, resreq))


class _Rules(NamedTuple):
    """What :func:`job_request` reads of the cluster, read once per replay."""

    total_slots: int
    partition: bool
    mem: bool
    resreq: str | None

    @classmethod
    def of(cls, cluster: ClusterSpec, resreq: str | None) -> _Rules:
        return cls(
            cluster.total_slots, cluster.has_attr("partition"), cluster.has_resource("mem"), resreq
        )


def _request(job: SwfJob, rules: _Rules) -> tuple[int, str] | str:
    if job.run_time < 0:
        return "no_runtime"
    if job.submit < 0:
        return "no_submit"
    size = job.size
    if size <= 0:
        return "no_size"
    if size > rules.total_slots:
        return f"too_big: {size} processors, the cluster has {rules.total_slots} slots"
    if rules.resreq is not None:
        return size, rules.resreq
    parts: list[str] = []
    if job.partition >= 0 and rules.partition:
        parts.append(f"select[partition=={job.partition}]")
    if job.req_mem > 0 and rules.mem:
        parts.append(f"rusage[mem={math.ceil(job.req_mem / 1024)}]")
    return size, " ".join(parts)


def run_limit(job: SwfJob) -> float | None:
    """The run limit a replayed job is submitted with: its requested time (SWF
    field 9) when given (> 0), raised to its run time when it ran longer (as
    most simulators do; LSF would have killed it at the limit), else none."""
    if job.req_time <= 0:
        return None
    return max(job.req_time, job.run_time)


def _raised(job: SwfJob) -> bool:
    return 0 < job.req_time < job.run_time


def _ident(prefix: str, value: int) -> str:
    return "" if value == -1 else f"{prefix}{value}"


async def simulate(
    jobs: Sequence[SwfJob],
    cluster: ClusterSpec,
    *,
    config: SchedulerConfig | None = None,
    resreq: str | None = None,
    progress: Progress | None = None,
    every_instant: bool = False,
    keep_hosts: bool = True,
    keep_series: bool = False,
    limits: Sequence[Limit] = (),
    setup: Sequence[InputEvent] = (),
    stop: Callable[[], bool] | None = None,
) -> SimResult:
    """Replay ``jobs`` on ``cluster`` (see the module docstring for the rules).

    ``progress(done, total)`` is called now and then with the number of jobs
    submitted so far, and once at the end. ``every_instant`` runs a session at
    every instant with pending jobs, even one that cannot start any. Without
    ``keep_hosts`` the result does not keep where jobs ran (their ``hosts`` read
    as ``[]``; everything else is the same), which saves most of the memory of a
    replay of many wide jobs. ``keep_series`` records the time series
    (:func:`~xce_core.sim.timeseries_columns`) as the replay goes, in the
    result's table: writing it then costs its rows, not a pass over every job.
    ``limits`` are resource allocation limits set before the first job (a
    ``limits_config`` event); ``setup`` are other configuration events applied
    before them, after the cluster's (a policy file's share tree and queues).
    ``stop()``, when given, is called before each instant; once it returns true
    the replay ends there and returns a partial result (see the module
    docstring). Never sleeps; each session is a checkpoint. Raises
    :class:`SimulationError` if the core contradicts the replay's bookkeeping or
    reports a fault (a bug, or a plugin that raised), :class:`PluginError` for an
    unknown picker or allocator in ``config``.
    """
    config = config or SchedulerConfig()
    clock = VirtualClock()
    faults: list[Exception] = []
    core = SchedulerCore(config, clock=clock, on_internal_error=lambda exc, _: faults.append(exc))
    # What the loop hands over (after the instant's session, and at the end of
    # its batch) is booked once per instant, after both.
    taken: list[Decision] = []

    async def take(decisions: list[Decision]) -> None:
        taken.extend(decisions)

    loop = SchedulerLoop(core, take)
    workers = cluster.workers()
    await loop.apply(workers)
    for decision in taken:
        raise SimulationError(f"the core refused a host: {decision}")
    index = len(workers)  # events are numbered after the setup
    for events, what in (
        (cluster.setup_events(), "the cluster's licences or queues"),
        (list(setup), "the policy's share tree or queues"),
    ):
        if events:
            await loop.apply(events, start=index)
            for decision in taken:
                raise SimulationError(f"the core refused {what}: {decision}")
            index += len(events)
    if limits:
        await loop.apply([LimitsConfig(limits=list(limits))], start=index)
        for decision in taken:
            raise SimulationError(f"the core refused the limits: {decision}")
        index += 1

    outcomes = OutcomeTable([w.name for w in workers] if keep_hosts else None)
    # The jobs to submit, by trace index, in submit order (ties in trace order:
    # the sort is stable), with what each asks for.
    order, tasks, resreqs, refused = _requests(jobs, cluster, resreq, outcomes)
    projects: dict[int, str] = {}
    live: dict[str, int] = {}  # job id -> trace index, from submit to start (or rejection)
    pends: dict[str, JobPended] = {}  # job id -> its last job_pended, until it starts
    submitted: dict[int, int] = {}  # event index -> trace index, of this instant's batch
    finishes: list[tuple[float, int, str, int]] = []  # end, start order, job id, slots
    pending = 0
    # Submit-order positions of jobs submitted and not yet started (stale
    # entries of started ones are dropped when they surface), for ``backfilled``.
    waiting: list[tuple[int, int]] = []
    position: dict[int, int] = {}
    starting: list[int] = []
    backfilled = 0
    gone = bytearray(len(jobs))  # 1: the job started or was rejected
    # Task counts of the jobs submitted and not yet started, smallest first
    # (stale entries dropped as they surface), for _may_start.
    sizes: list[tuple[int, int]] = []
    by_head = _in_submit_order(config, cluster, setup, limits)
    sessions = 0
    skipped = 0
    total_slots = free = cluster.total_slots
    freed = True  # a finish since the last session
    smallest_new = math.inf  # fewest tasks among jobs submitted since the last session
    started_n = 0
    # For the time series: jobs running, slots the pending jobs ask for, and the
    # jobs the core rejected (the series counts only jobs it accepted).
    running = demand = core_rejected = 0
    series = SeriesRecorder() if keep_series else None
    total = len(order)
    next_job = 0
    instants = 0
    batch: list[InputEvent] = []
    wall_start = time.perf_counter()
    stopped_at: float | None = None
    t = 0.0
    # Jobs that ran 0 s, ended after this instant's session: their slots are
    # free for the next one.
    ended_now: list[tuple[str, int]] = []
    retry = False  # slots freed after the last session (by jobs that ran 0 s)
    while next_job < total or finishes or (pending and retry):
        if stop is not None and stop():
            stopped_at = t
            break
        later = jobs[order[next_job]].submit if next_job < total else math.inf
        if finishes and finishes[0][0] < later:
            later = finishes[0][0]
        if retry:
            # Slots were freed after the last session while jobs wait: the next
            # session is at the next arrival, a job the replay rejects included
            # (but for one with no size), or end, else a second later (AccaSim's
            # time points, and its step).
            at = bisect.bisect_right(refused, t)
            if at < len(refused) and refused[at] < later:
                later = refused[at]
            if later == math.inf:
                later = t + 1
        t = later
        retry = False
        clock.advance_to(t)
        while finishes and finishes[0][0] <= t:
            _, _, done_id, done_slots = heappop(finishes)
            batch.append(JobFinished(job_id=done_id))
            free += done_slots
            running -= 1
            freed = True
        while next_job < total:
            number = order[next_job]
            job = jobs[number]
            if job.submit > t:
                break
            job_id = outcomes.job_id(number)
            live[job_id] = number
            position[number] = next_job
            submitted[index + len(batch)] = number
            job_tasks = tasks[number]
            user, queue = outcomes.submitter(number)  # named once, by _requests
            project = projects.get(job.group)
            if project is None:
                project = projects[job.group] = _ident("g", job.group)
            batch.append(
                JobSubmitted(
                    job_id=job_id,
                    user=user,
                    queue=queue,
                    project=project,
                    submit_time=job.submit,
                    min_tasks=job_tasks,
                    max_tasks=job_tasks,
                    resreq=resreqs[number],
                    run_limit=run_limit(job),
                )
            )
            heappush(waiting, (next_job, number))
            heappush(sizes, (job_tasks, number))
            pending += 1
            demand += job_tasks
            next_job += 1
            if job_tasks < smallest_new:
                smallest_new = job_tasks
        if pending:
            if (
                every_instant
                or (
                    free > 0
                    and (freed or smallest_new <= free)
                    and _may_start(sizes, waiting, tasks, gone, free, by_head)
                )
                or core.recalculation_due(t)
            ):
                batch.append(_SESSION)
                sessions += 1
                freed = False
                smallest_new = math.inf
            else:
                skipped += 1
        elif not core.charges_by_time and (next_job < total or finishes):
            # Nothing to decide: the finishes go with the next batch that runs a
            # session or ends the replay (the core reads the clock then only;
            # under fairshare it charges each end at its own time, so ends are
            # applied now).
            if series is not None and next_job > core_rejected:
                series.instant(t, (total_slots - free, running, pending, demand))
            instants += 1
            if progress is not None and instants % _PROGRESS_EVERY == 0:
                progress(next_job, total)
            continue
        await loop.apply(batch, start=index)
        index += len(batch)
        batch = []
        if faults:
            fault = faults[0]
            raise SimulationError(
                f"the replay stopped at t={t:g}: {internal_error_text(fault)}"
            ) from fault
        for decision in taken:
            if isinstance(decision, JobPended):
                pends[decision.job_id] = decision
            elif isinstance(decision, JobAllocated):
                job_id = decision.job_id
                pends.pop(job_id, None)
                number = live.pop(job_id)
                # Exactly the tasks asked for (min_tasks = max_tasks), one a slot.
                slots = tasks[number]
                outcomes.started(number, t, slots, decision.hosts)
                starting.append(number)
                run_time = jobs[number].run_time
                if run_time > 0:
                    heappush(finishes, (t + run_time, started_n, job_id, slots))
                else:
                    ended_now.append((job_id, slots))
                free -= slots
                gone[number] = 1
                started_n += 1
                running += 1
                pending -= 1
                demand -= slots
            elif isinstance(decision, JobRejected):
                number = live.pop(decision.job_id)
                outcomes.rejected(number, f"core: {decision.error}")
                gone[number] = 1
                pending -= 1
                demand -= tasks[number]
                core_rejected += 1
            elif isinstance(decision, EventRejected):
                rejected = submitted.get(decision.index)
                if rejected is None:
                    raise SimulationError(f"the core rejected a replay event: {decision.error}")
                live.pop(outcomes.job_id(rejected), None)
                outcomes.rejected(rejected, f"core: {decision.error}")
                gone[rejected] = 1
                pending -= 1
                demand -= tasks[rejected]
                core_rejected += 1
        if starting:
            # A job that started while one ahead of it in submit order stays
            # pending was backfilled (or, without backfill, overtook it).
            _drop_gone(waiting, gone)
            first = waiting[0][0] if waiting else math.inf
            backfilled += sum(1 for number in starting if position[number] > first)
            for number in starting:
                del position[number]
            starting.clear()
        taken.clear()
        submitted.clear()
        if ended_now:
            # Jobs that ran 0 s end at this instant, after its one session.
            await loop.apply([JobFinished(job_id=job_id) for job_id, _ in ended_now], start=index)
            index += len(ended_now)
            for decision in taken:
                raise SimulationError(f"the core refused a job's end: {decision}")
            free += sum(slots for _, slots in ended_now)
            running -= len(ended_now)
            freed = retry = True
            ended_now.clear()
        if series is not None and next_job > core_rejected:
            # Only once a job was accepted (the series starts at its first
            # change): then a row wherever a total moved.
            series.instant(t, (total_slots - free, running, pending, demand))
        instants += 1
        if progress is not None and instants % _PROGRESS_EVERY == 0:
            progress(next_job, total)
        if pending and not finishes and next_job >= total and not retry:
            break  # nothing left that could ever free resources: never_started
    wall = time.perf_counter() - wall_start
    if progress is not None:
        progress(next_job, total)
    outcomes.set_never_started_reason("still pending when nothing could change any more")
    for job_id, number in live.items():
        pended = pends.get(job_id)
        if pended is not None:
            outcomes.pended(number, pended.reason, pended.detail)
        if stopped_at is not None:
            outcomes.pending(number)
    if stopped_at is not None:
        for rest in range(next_job, total):
            outcomes.unreplayed(order[rest])
    if series is not None:
        outcomes.keep_series(series)  # after the last outcome changed
    if config.backfill != "none":
        policy = f"{config.picker} {config.backfill}-backfill"
    else:
        policy = f"{config.picker}{' strict-fifo' if config.strict_fifo else ''}"
    summary = summarize(
        outcomes,
        policy=policy,
        hosts=cluster.hosts,
        total_slots=cluster.total_slots,
        sessions=sessions,
        sessions_skipped=skipped,
        wall_time_s=wall,
        backfilled=backfilled,
        limits_raised=sum(1 for number in order if _raised(jobs[number])),
    )
    if stopped_at is not None:
        summary.partial = True
        summary.stopped_at = stopped_at
    summary.by_user = consumer_figures([_ident("u", j.user) for j in jobs], order, outcomes)
    summary.by_queue = consumer_figures([_ident("q", j.queue) for j in jobs], order, outcomes)
    return SimResult(summary=summary, jobs=outcomes)


def _in_submit_order(
    config: SchedulerConfig,
    cluster: ClusterSpec,
    setup: Sequence[InputEvent],
    limits: Sequence[Limit],
) -> bool:
    """Whether sessions take jobs strictly in submit order and stop at the first
    that cannot start (for :func:`_may_start`): strict FIFO without backfill,
    the ``fcfs`` picker, no queues or share trees configured (no queue priority
    or picker reorders jobs) and no limits (a job held by a limit does not stop
    a strict-FIFO session)."""
    return (
        config.strict_fifo
        and config.backfill == "none"
        and config.picker == "fcfs"
        and not cluster.queues
        and not setup
        and not limits
    )


def _may_start(
    sizes: list[tuple[int, int]],
    waiting: list[tuple[int, int]],
    tasks: array[int],
    gone: bytearray,
    free: int,
    by_head: bool,
) -> bool:
    """Whether a session could start a job with ``free`` slots free (a task takes
    a slot): some pending job needs no more (``sizes``), and with ``by_head``
    (strict FIFO in submit order) the first pending job (``waiting``) needs no
    more. A session this rules out would start nothing, so skipping it changes
    no start. Drops the entries of jobs no longer pending from the top of both
    heaps."""
    _drop_gone(sizes, gone)
    if not sizes or sizes[0][0] > free:
        return False
    if by_head:
        _drop_gone(waiting, gone)
        if waiting and tasks[waiting[0][1]] > free:
            return False
    return True


def _drop_gone(heap: list[tuple[int, int]], gone: bytearray) -> None:
    """Pop the entries ``(_, job)`` of jobs no longer pending off the top of ``heap``."""
    while heap and gone[heap[0][1]]:
        heappop(heap)


def _requests(
    jobs: Sequence[SwfJob], cluster: ClusterSpec, resreq: str | None, outcomes: OutcomeTable
) -> tuple[array[int], array[int], list[str], list[float]]:
    """Add every job to ``outcomes`` (rejecting those the replay refuses); the
    trace indexes of the others in submit order, every job's task count and
    resource requirement (0 and ``""`` for a rejected one), and the submit
    times of the rejected ones that are instants (those that have a submit
    time and a size), in order."""
    tasks = array("q")
    resreqs: list[str] = []
    accepted = array("q")
    refused: list[float] = []
    seen: set[int] = set()
    rules = _Rules.of(cluster, resreq)
    users: dict[int, str] = {}
    queues: dict[int, str] = {}
    for number, job in enumerate(jobs):
        request = _request(job, rules)
        user = users.get(job.user)
        if user is None:
            user = users[job.user] = _ident("u", job.user)
        queue = queues.get(job.queue)
        if queue is None:
            queue = queues[job.queue] = _ident("q", job.queue)
        outcomes.append(str(job.job_id), job.submit, max(job.run_time, 0.0), job.size, user, queue)
        if job.job_id in seen:
            request = "duplicate_id"
        seen.add(job.job_id)
        if isinstance(request, str):
            outcomes.rejected(number, request)
            tasks.append(0)
            resreqs.append("")
            if job.submit >= 0 and request != "no_size":
                # An instant, as in AccaSim, which loads such a job; a line
                # with no size at all it never reads, so that is no instant.
                refused.append(job.submit)
        else:
            accepted.append(number)
            tasks.append(request[0])
            resreqs.append(request[1])
    order = array("q", sorted(accepted, key=lambda number: jobs[number].submit))
    return order, tasks, resreqs, sorted(refused)
