"""``xce run``'s command line: options, endpoints and signals around :func:`consume`.

The click command checks the options and builds the core; :func:`_serve` opens
stdin, ``--input`` or a listening socket (served by
:class:`~xce_core.cli._connections.ConnectionServer`) and the output, runs
:func:`~xce_core.cli._run.consume`, and turns SIGINT and SIGTERM into
cancellation and their exit statuses.

Exit statuses: 0 end of input, 1 I/O failure, 2 usage error or a malformed event
under ``--strict``, 130 after SIGINT, 143 after SIGTERM.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import textwrap
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, NoReturn, final

import anyio
import anyio.abc
import click
import msgspec
from click.core import ParameterSource

from events import DECISION_TYPES, DEFAULT_MAX_FRAME, INPUT_TYPES, EventFormat
from xce_core import (
    FairshareParams,
    Registry,
    SchedulerConfig,
    SchedulerCore,
    XceError,
    default_registry,
)
from xce_core.cli._connections import ConnectionServer
from xce_core.cli._endpoints import (
    FdReceiveStream,
    FdWriter,
    open_listener,
    parse_listen_address,
    stderr_line,
)
from xce_core.cli._logging import configure_logging, log_format_option, verbosity_options
from xce_core.cli._nats_options import NATS_ONLY, nats_options
from xce_core.cli._policy import Policy, policy_options, read_policy, unknown_plugin
from xce_core.cli._run import (
    EXIT_IO_ERROR,
    EXIT_OK,
    Observer,
    consume,
    log_internal_error,
)
from xce_core.cli._state_dir import SnapshotSchedule, StateDir
from xce_core.cli._types import FloatRange
from xce_core.runtime import run_async

__all__ = ["EpochClock", "run_command"]

_log = logging.getLogger("xce.run")


class EpochClock:
    """Seconds since the epoch (:func:`time.time`): ``xce run``'s clock, so that a
    ``job_reserved`` start is a time an operator can read, and run limits count
    from when the core started the job."""

    def now(self) -> float:
        return time.time()


# --------------------------------------------------------------------------- serving


@final
@dataclass(frozen=True, slots=True)
class _Listen:
    """The ``--listen`` options (see :class:`ConnectionServer`)."""

    address: str
    once: bool
    reply: bool
    idle_timeout: float | None
    max_connections: int


async def _serve(
    core: SchedulerCore,
    input_path: str | None,
    listen: _Listen | None,
    output_path: str | None,
    options: dict[str, Any],
) -> int:
    """Open the endpoints, consume, and map signals to their exit statuses."""
    signalled: list[int] = []
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with AsyncExitStack() as stack:
            if output_path is None:
                # fd 1, even when Python found it closed (sys.stdout is None).
                write = FdWriter(1, "stdout")
            else:
                fd = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
                stack.callback(os.close, fd)
                write = FdWriter(fd, output_path)
            source: anyio.abc.ByteReceiveStream | ConnectionServer
            if listen is not None:
                source = ConnectionServer(
                    await stack.enter_async_context(open_listener(listen.address)),
                    format=options["format"],
                    output_format=options["output_format"] or options["format"],
                    max_frame=options["max_frame"],
                    idle_timeout=listen.idle_timeout,
                    max_connections=listen.max_connections,
                    reply=listen.reply,
                    once=listen.once,
                )
            elif input_path is not None:
                fd = os.open(input_path, os.O_RDONLY)
                source = FdReceiveStream(fd, close_fd=True, name=input_path)
            else:
                source = FdReceiveStream(0, name="stdin")  # fd 0, as stdout
            status = EXIT_OK
            async with anyio.create_task_group() as tg:

                async def stop_on_signal() -> None:
                    async for signum in signals:
                        signalled.append(signum)
                        core.cancel_session()
                        tg.cancel_scope.cancel()

                tg.start_soon(stop_on_signal)
                status = await consume(source, core, write, **options)
                tg.cancel_scope.cancel()
    return 128 + signalled[0] if signalled else status


# --------------------------------------------------------------------------- command


def _field_summary(cls: type[msgspec.Struct]) -> str:
    parts = []
    for field in msgspec.structs.fields(cls):
        if field.required:
            parts.append(field.encode_name)
            continue
        default = field.default_factory() if field.default is msgspec.NODEFAULT else field.default
        if default is msgspec.UNSET:  # left out of the encoding unless set
            parts.append(f"[{field.encode_name}]")
            continue
        parts.append(f"{field.encode_name}={msgspec.json.encode(default).decode()}")
    return ", ".join(parts) or "(no fields)"


def _schema_help() -> str:
    lines = ["\b", 'Input events (one JSON object per line; "type" is the tag):']
    lines += [_help_line(cls) for cls in INPUT_TYPES]
    lines += ["\b", "Decisions:"]
    lines += [_help_line(cls) for cls in DECISION_TYPES]
    return "\n".join(lines)


def _help_line(cls: type[msgspec.Struct]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return textwrap.fill(
        _field_summary(cls), 76, initial_indent=f"  {tag:<16} ", subsequent_indent=" " * 19
    )


_HELP = f"""Consume input events, write scheduling decisions.

Events come from stdin, --input FILE, or socket connections (--listen
tcp://HOST:PORT or unix:PATH; HOST defaults to 127.0.0.1). Connections are
served concurrently, their events applied in arrival order; idle ones are
closed after --idle-timeout S, and more than --max-connections N are refused.
A session runs at every session_begin and, with --interval S, every S seconds
when something changed. Decisions go to stdout (or --output FILE), flushed
after every session and every input chunk; with --reply, the decisions a
connection's events caused also go back to it.

A malformed event becomes an event_rejected decision (index, line, error with
the field path, and job_id when it is a job event whose job_id could be read)
and is skipped; --strict stops there with status 2.

With --state-dir DIR, snapshots of the whole scheduler state are written
there atomically (every --snapshot-every N events or --snapshot-interval S
seconds, whichever comes first, and at the end of the input; the newest two
are kept). On start the newest one is loaded, stderr says which event index
it resumes from, and that many input events are skipped: after a crash, send
the whole event log again. --metrics HOST:PORT serves Prometheus metrics at
/metrics (needs pip install 'xce[metrics]').

{_schema_help()}

\b
Example:  {{"type":"worker_up","name":"h1","slots":4}}
Every event type with an example line: README.md, section "Event reference".

Logs (faults the core survived, with -v what is served) go to stderr only,
as text, key=value pairs or JSON lines (--log-format); -q: errors only.

\b
Exit status: 0 end of input; 1 I/O error; 2 usage error or --strict stop;
130 SIGINT; 143 SIGTERM (the running session is cancelled, decisions flushed).
"""

_FORMATS = click.Choice(["ndjson", "msgpack"])


@click.command("run", help=_HELP)
@click.option("--input", "input_path", metavar="FILE", help="Read events from FILE.")
@click.option("--listen", metavar="ADDRESS", help="tcp://HOST:PORT or unix:PATH.")
@click.option("--once", is_flag=True, help="With --listen: exit after the first connection.")
@click.option(
    "--reply",
    is_flag=True,
    help="With --listen: also send each connection the decisions its events caused.",
)
@click.option(
    "--idle-timeout",
    type=FloatRange(min=0),
    default=300.0,
    metavar="S",
    show_default=True,
    help="With --listen: close a connection silent (or not reading) for S seconds; 0: never.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=64,
    metavar="N",
    show_default=True,
    help="With --listen: refuse connections beyond N open ones.",
)
@click.option("--output", "output_path", metavar="FILE", help="Write decisions to FILE.")
@click.option(
    "--format",
    "input_format",
    type=_FORMATS,
    default="ndjson",
    show_default=True,
    help="Input: JSON lines, or msgpack frames after a 4-byte big-endian length.",
)
@click.option("--output-format", type=_FORMATS, help="Default: the input format.")
@click.option(
    "--interval",
    type=FloatRange(min=0, min_open=True),
    metavar="S",
    help="Also run a session every S seconds when something changed.",
)
@click.option("--strict", is_flag=True, help="Stop at the first malformed event (status 2).")
@click.option(
    "--picker",
    default="fcfs",
    show_default=True,
    help="Default job order for queues without their own: fcfs (priority, then submit "
    "time), fairshare (LSF fairshare: users by dynamic priority from their share tree, "
    "see --policy), or an xce.pickers plugin.",
)
@click.option(
    "--sequential-allocator",
    default="seqjob",
    show_default=True,
    metavar="NAME",
    help="Allocator for one-task requirements (xce.allocators entry point).",
)
@click.option(
    "--parallel-allocator",
    default="parjob",
    show_default=True,
    metavar="NAME",
    help="Allocator for multi-task requirements (xce.allocators entry point).",
)
@click.option(
    "--strict-fifo",
    is_flag=True,
    help="A session stops at the first job that pends (with --backfill it adds nothing: "
    "later jobs may only backfill).",
)
@policy_options
@click.option("--no-cache", is_flag=True, help="Disable the unsatisfiable-requirement cache.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Keep state snapshots in DIR and resume from the newest on start.",
)
@click.option(
    "--snapshot-every",
    type=click.IntRange(min=1),
    default=100_000,
    metavar="N",
    show_default=True,
    help="With --state-dir: snapshot after N events.",
)
@click.option(
    "--snapshot-interval",
    type=FloatRange(min=0, min_open=True),
    default=60.0,
    metavar="S",
    show_default=True,
    help="With --state-dir: snapshot S seconds after the last one, if anything changed.",
)
@click.option(
    "--metrics",
    "metrics_address",
    metavar="HOST:PORT",
    help="Serve Prometheus metrics on HOST:PORT/metrics (needs xce[metrics]).",
)
@click.option(
    "--max-frame",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_FRAME,
    metavar="BYTES",
    show_default=True,
    help="Longest event line or frame.",
)
@verbosity_options
@log_format_option
@nats_options
def run_command(
    input_path: str | None,
    listen: str | None,
    once: bool,
    reply: bool,
    idle_timeout: float,
    max_connections: int,
    output_path: str | None,
    input_format: EventFormat,
    output_format: EventFormat | None,
    interval: float | None,
    strict: bool,
    picker: str,
    sequential_allocator: str,
    parallel_allocator: str,
    strict_fifo: bool,
    backfill: str,
    backfill_depth: int,
    policy: Path | None,
    no_cache: bool,
    state_dir: Path | None,
    snapshot_every: int,
    snapshot_interval: float,
    metrics_address: str | None,
    max_frame: int,
    verbose: int,
    quiet: bool,
    log_format: str,
    nats_url: str | None,
    **nats: Any,
) -> None:
    context = click.get_current_context()
    if nats_url is None:
        flags = {param.name: param.opts[0] for param in context.command.params}
        for name in NATS_ONLY:
            if context.get_parameter_source(name) is not ParameterSource.DEFAULT:
                raise click.UsageError(f"{flags[name]} needs --nats")
    else:
        for name, value in (
            ("input", input_path),
            ("listen", listen),
            ("output", output_path),
            ("interval", interval),
            ("strict", strict or None),
            ("state-dir", state_dir),
        ):
            if value is not None:
                # Sessions run at session_begin messages only, so a replay decides the same.
                raise click.UsageError(f"--nats and --{name} are mutually exclusive")
    if input_path is not None and listen is not None:
        raise click.UsageError("--input and --listen are mutually exclusive")
    listen_options = None
    if state_dir is None and nats_url is None:
        for name in ("snapshot_every", "snapshot_interval"):
            if context.get_parameter_source(name) is not ParameterSource.DEFAULT:
                raise click.UsageError(f"--{name.replace('_', '-')} needs --state-dir or --nats")
    if listen is None:
        for name in ("once", "reply", "idle_timeout", "max_connections"):
            if context.get_parameter_source(name) is not ParameterSource.DEFAULT:
                raise click.UsageError(f"--{name.replace('_', '-')} needs --listen")
    else:
        try:
            parse_listen_address(listen)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--listen") from None
        listen_options = _Listen(listen, once, reply, idle_timeout or None, max_connections)
    rules = read_policy(policy) if policy is not None else None
    config = SchedulerConfig(
        picker=picker,
        sequential_allocator=sequential_allocator,
        parallel_allocator=parallel_allocator,
        strict_fifo=strict_fifo,
        backfill=backfill,
        backfill_depth=backfill_depth,
        unsatisfiable_cache=not no_cache,
        session_interval=interval,
        fairshare=(rules and rules.fairshare_params) or FairshareParams(),
    )
    try:
        registry = default_registry()
    except XceError as exc:  # a broken or clashing installed plugin
        raise click.ClickException(str(exc)) from None
    unknown = unknown_plugin(registry, config)
    if unknown is not None:
        option, message = unknown
        raise click.BadParameter(message, param_hint=option)
    # Tracebacks of faults the core survived go to stderr; stdout carries decisions.
    configure_logging(verbose, quiet, log_format)  # type: ignore[arg-type]  # a click.Choice
    if nats_url is not None:
        formats = dict(format=input_format, output_format=output_format or input_format)
        nats["snapshot_every"] = snapshot_every
        nats["snapshot_interval"] = snapshot_interval
        metrics = _metrics(metrics_address, None, None)
        _serve_nats(config, registry, rules, nats_url, max_frame, formats | nats, metrics)
    source = listen or input_path or "stdin"
    _log.info("reading %s events from %s, writing decisions to %s", input_format, source,
              output_path or "stdout")  # fmt: skip
    core: SchedulerCore | None = None
    skip = 0
    snapshots = None
    if state_dir is not None:
        core, snapshots = _resume(state_dir, config, registry, snapshot_every, snapshot_interval)
        skip = core.events_received if core is not None else 0
        if core is not None and policy is not None:
            stderr_line("xce run: --policy not applied: the snapshot's queues and limits stand")
    if core is None:
        core = SchedulerCore(
            config, registry=registry, clock=EpochClock(), on_internal_error=log_internal_error
        )
        if rules is not None:
            # Checked already; not the input's events (their indexes stand).
            for event in rules.events:
                core.apply(event, index=-1, counted=False)
        if snapshots is not None:
            snapshots.start(core)
    metrics = _metrics(metrics_address, core, snapshots)
    options = dict(
        format=input_format,
        output_format=output_format,
        strict=strict,
        interval=interval,
        max_frame=max_frame,
        skip=skip,
        snapshots=snapshots,
        observer=metrics,
    )
    main = functools.partial(_serve, core, input_path, listen_options, output_path, options)
    status = EXIT_IO_ERROR
    try:
        status = run_async(main)
    except* OSError as group:
        stderr_line(f"xce run: {_first_leaf(group)}")
    finally:
        if metrics is not None:
            metrics.close()
    _log.info("exit status %d", status)
    sys.exit(status)


def _serve_nats(
    config: SchedulerConfig,
    registry: Registry,
    rules: Policy | None,
    url: str,
    max_frame: int,
    options: dict[str, Any],
    metrics: Any,
) -> NoReturn:
    """``xce run --nats``: exits with the service's status."""
    try:
        from xce_core.cli._checkpoint import Checkpoint
        from xce_core.cli._nats import MessageClock, serve_nats
        from xce_core.cli._nats_streams import NatsOptions
    except ImportError as exc:  # a usage error, as for --metrics without its extra
        raise click.UsageError(
            f"--nats needs the NATS client: pip install 'xce[nats]' ({exc})"
        ) from None

    def make_core(checkpoint: Checkpoint | None, clock: MessageClock) -> SchedulerCore:
        if checkpoint is not None:
            core = SchedulerCore.restore(
                checkpoint.state,
                registry=registry,
                clock=clock,
                on_internal_error=log_internal_error,
            )
            if core.config != config:
                stderr_line("xce run: the snapshot's scheduling options stand, not the given ones")
            return core  # the policy is in the snapshot, with any limits_config since
        core = SchedulerCore(
            config, registry=registry, clock=clock, on_internal_error=log_internal_error
        )
        if rules is not None:
            for event in rules.events:
                core.apply(event, index=-1, counted=False)
        return core

    nats_options = NatsOptions(url=url, max_frame=max_frame, **options)
    status = EXIT_IO_ERROR
    try:
        status = run_async(functools.partial(serve_nats, nats_options, make_core, metrics))
    except* (OSError, XceError) as group:
        stderr_line(f"xce run: {_first_leaf(group)}")
    finally:
        if metrics is not None:
            metrics.close()
    sys.exit(status)


def _resume(
    path: Path,
    config: SchedulerConfig,
    registry: Any,
    every: int,
    interval: float,
) -> tuple[SchedulerCore | None, SnapshotSchedule]:
    """``--state-dir``: the core of its newest snapshot (``None``: none yet), and
    the schedule of the next ones. Says on stderr where the input resumes."""
    try:
        state_dir = StateDir(path)
        resumed = state_dir.resume(
            registry=registry,
            clock=EpochClock(),
            on_internal_error=log_internal_error,
            report=stderr_line,
        )
    except OSError as exc:
        raise click.ClickException(f"--state-dir: {exc}") from None
    except XceError as exc:  # a snapshot naming a plugin not installed
        raise click.ClickException(f"--state-dir: {exc}") from None
    schedule = SnapshotSchedule(state_dir, every, interval)
    if resumed is None:
        stderr_line(f"xce run: no snapshot in {path}: starting at event index 0")
        return None, schedule
    saved = replace(resumed.core.config, session_interval=config.session_interval)
    if saved != config:
        differ = ", ".join(
            f"{f.name} {getattr(saved, f.name)!r} (given {getattr(config, f.name)!r})"
            for f in fields(config)
            if getattr(saved, f.name) != getattr(config, f.name)
        )
        raise click.UsageError(
            f"{resumed.path} was taken with other scheduling options: {differ}; "
            "give the same options, or another --state-dir"
        )
    stderr_line(
        f"xce run: resuming from {resumed.path} at event index {resumed.events} "
        f"(skipping the first {resumed.events} input events)"
    )
    schedule.start(resumed.core)
    return resumed.core, schedule


def _metrics(
    address: str | None, core: SchedulerCore | None, snapshots: SnapshotSchedule | None
) -> Any:
    """``--metrics``: a serving :class:`RunMetrics`, or ``None``."""
    if address is None:
        return None
    try:
        from xce_core.cli._metrics import RunMetrics, parse_metrics_address
    except ImportError:
        raise click.UsageError(
            "--metrics needs prometheus-client: pip install 'xce[metrics]'"
        ) from None
    try:
        host, port = parse_metrics_address(address)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metrics") from None
    metrics = RunMetrics()
    if snapshots is not None:
        state_dir = snapshots.state_dir
        metrics.track_snapshots(lambda: state_dir.last_written)
    if core is not None:
        metrics.refresh(core)
    try:
        bound = metrics.serve(host, port)
    except OSError as exc:
        raise click.ClickException(f"--metrics: cannot listen on {address}: {exc}") from None
    stderr_line(f"xce run: metrics on http://{host}:{bound}/metrics")
    observer: Observer = metrics
    return observer


def _first_leaf(group: BaseExceptionGroup[Exception]) -> BaseException:
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
