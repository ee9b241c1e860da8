"""Executing a sweep's runs: serially, on a local pool of worker processes, or
on a Dask cluster; every finished run is cached at once."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xce_core import XceError
from xce_core.sim.sweep._cache import ResultCache
from xce_core.sim.sweep._runs import RunRecord, SweepRun
from xce_core.sim.sweep._worker import execute_run, ignore_sigint

__all__ = [
    "RunFinished",
    "SweepError",
    "SweepInterrupted",
    "SweepOutcome",
    "default_jobs",
    "run_sweep",
]


class SweepError(XceError):
    """The sweep cannot go on: the cache cannot be written, the Dask scheduler
    cannot be reached or ``distributed`` is missing, a worker process died."""


class SweepInterrupted(XceError):
    """Ctrl-C stopped the sweep; the runs finished before it are cached."""

    def __init__(self, finished: int, total: int) -> None:
        super().__init__(f"interrupted: {finished} of {total} runs done and cached")
        self.finished = finished
        self.total = total


@dataclass(frozen=True, slots=True)
class RunFinished:
    """A run done (``record``), failed (``error``) or found in the cache, and
    how many of the sweep's distinct runs are done so far, out of ``total``."""

    run: SweepRun
    record: RunRecord | None
    error: str | None
    cached: bool
    done: int
    total: int


@dataclass(slots=True)
class SweepOutcome:
    """Every run of the study (in its order) with its record, when it has one;
    the runs that failed with why; how many ran now and how many were cached;
    why the records that could not be cached were not (their runs are in
    ``rows`` all the same: a full disk loses no result of this sweep). Runs
    with the same key share one execution and one record."""

    rows: list[tuple[SweepRun, RunRecord]] = field(default_factory=list)
    failures: list[tuple[SweepRun, str]] = field(default_factory=list)
    ran: int = 0
    cached: int = 0
    not_cached: list[str] = field(default_factory=list)


OnFinished = Callable[[RunFinished], None]


def default_jobs() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_sweep(
    runs: Sequence[SweepRun],
    cache: ResultCache,
    *,
    jobs: int = 1,
    dask: str | None = None,
    dask_timeout: float = 10.0,
    on_finished: OnFinished | None = None,
) -> SweepOutcome:
    """Execute the ``runs`` whose key is not in ``cache`` and cache each as it
    finishes: in this process when ``jobs`` is 1, else on up to ``jobs``
    worker processes, or on the Dask scheduler at address ``dask`` (reached
    within ``dask_timeout`` seconds).

    A run that raises is a failure (kept in the outcome, not cached); the
    others go on. Raises :class:`SweepInterrupted` on ``KeyboardInterrupt``
    (the worker processes are stopped, finished runs stay cached), and
    :class:`SweepError` (see there)."""
    outcome = SweepOutcome()
    records: dict[str, RunRecord] = {}
    errors: dict[str, str] = {}
    todo: dict[str, SweepRun] = {}
    distinct = len({run.key for run in runs})

    def report(run: SweepRun, record: RunRecord | None, error: str | None, cached: bool) -> None:
        if on_finished is not None:
            done = len(records) + len(errors)
            on_finished(RunFinished(run, record, error, cached, done, distinct))

    for run in runs:
        key = run.key
        if key in records or key in todo:
            continue
        record = cache.get(key)
        if record is None:
            todo[key] = run
        else:
            records[key] = record
            outcome.cached += 1
            report(run, record, None, True)

    def finished(run: SweepRun, record: RunRecord) -> None:
        try:
            cache.put(record)
        except OSError as exc:
            where = cache.path(record.key)
            outcome.not_cached.append(f"cannot write {where}: {exc.strerror or exc}")
        records[run.key] = record
        outcome.ran += 1
        report(run, record, None, False)

    def failed(run: SweepRun, exc: BaseException) -> None:
        errors[run.key] = _describe(exc)
        report(run, None, errors[run.key], False)

    try:
        if dask is not None:
            _on_dask(dask, dask_timeout, todo.values(), finished, failed)
        elif jobs <= 1 or len(todo) <= 1:
            for run in todo.values():
                try:
                    record = execute_run(run)
                except Exception as exc:
                    failed(run, exc)
                else:
                    finished(run, record)
        else:
            _on_local_pool(min(jobs, len(todo)), todo.values(), finished, failed)
    except KeyboardInterrupt:
        raise SweepInterrupted(len(records) - outcome.cached, len(todo)) from None
    for run in runs:
        record = records.get(run.key)
        if record is not None:
            outcome.rows.append((run, record))
        else:
            outcome.failures.append((run, errors[run.key]))
    return outcome


def _describe(exc: BaseException) -> str:
    if isinstance(exc, XceError | OSError | ValueError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


Finished = Callable[[SweepRun, RunRecord], None]
Failed = Callable[[SweepRun, BaseException], None]


def _on_local_pool(
    workers: int, runs: Iterable[SweepRun], finished: Finished, failed: Failed
) -> None:
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        # Workers start at once with xce already imported. Only without
        # threads: a fork copies a lock another thread may hold.
        context: multiprocessing.context.BaseContext = multiprocessing.get_context("fork")
    elif "forkserver" in methods:
        # A fork server imports xce once and forks each worker from it.
        server = multiprocessing.get_context("forkserver")
        server.set_forkserver_preload([execute_run.__module__])
        context = server
    else:  # pragma: no cover - Windows
        context = multiprocessing.get_context("spawn")
    executor = ProcessPoolExecutor(workers, mp_context=context, initializer=ignore_sigint)
    try:
        futures: dict[Future[RunRecord], SweepRun] = {
            executor.submit(execute_run, run): run for run in runs
        }
        for future in as_completed(futures):
            run = futures[future]
            try:
                record = future.result()
            except BrokenProcessPool:
                raise SweepError(
                    f"a worker process died during {run.label} (out of memory?)"
                ) from None
            except Exception as exc:
                failed(run, exc)
            else:
                finished(run, record)
    except BaseException:
        _stop_workers(executor)
        raise
    executor.shutdown()


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    """Drop the queued runs and end the running ones now, rather than wait
    for replays that may take minutes."""
    # ProcessPoolExecutor has no public way to end its workers before 3.14
    # (terminate_workers); shutdown() forgets them, so they are taken first.
    table: dict[int, Any] = getattr(executor, "_processes", None) or {}
    processes = list(table.values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(5)


def dask_distributed() -> Any:
    """The ``distributed`` module; :class:`SweepError` saying how to install it
    when missing."""
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise SweepError(
            "--dask needs dask.distributed: pip install 'xce[dask]'"
            " (or pip install 'distributed>=2024.1')"
        ) from None


def _on_dask(
    address: str, timeout: float, runs: Iterable[SweepRun], finished: Finished, failed: Failed
) -> None:
    distributed = dask_distributed()
    try:
        client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise SweepError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    with client, client.as_current():
        # Dask workers need not see this machine's files: each trace is sent
        # once, and every run of it gets it from there.
        traces: dict[str, Any] = {}
        futures: dict[Any, SweepRun] = {}
        try:
            for run in runs:
                sha = run.trace.sha256
                if sha not in traces:
                    traces[sha] = client.scatter(Path(run.trace.path).read_bytes())
                future = client.submit(
                    execute_run, run, traces[sha], key=f"xce-run-{run.key}", pure=False
                )
                futures[future] = run
            for future in distributed.as_completed(list(futures)):
                run = futures[future]
                try:
                    record = future.result()
                except Exception as exc:
                    failed(run, exc)
                else:
                    finished(run, record)
        except BaseException:
            client.cancel(list(futures))
            raise
