"""``xce run``: the standalone event consumer.

Input events arrive as bytes (stdin, a file, or socket connections), are decoded
in chunks and applied to one :class:`~xce_core.SchedulerCore`; decisions are
encoded and written out after every session and every input chunk, so a
controller talking to ``xce run`` through pipes sees each session's decisions at
once. :func:`consume` holds the whole loop and does no I/O of its own beyond the
given stream(s) and ``write``; the click command only opens the endpoints and
turns signals into cancellation.

Exit statuses: 0 end of input, 1 I/O failure, 2 usage error or a malformed event
under ``--strict``, 130 after SIGINT, 143 after SIGTERM.
"""

from __future__ import annotations

import enum
import functools
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterable, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Final, final

import anyio
import anyio.abc
import anyio.lowlevel
import click
import msgspec

from events import (
    DECISION_TYPES,
    DEFAULT_MAX_FRAME,
    INPUT_TYPES,
    BadEvent,
    EventDecoder,
    EventEncoder,
    EventFormat,
    InputEvent,
)
from xce_core import Registry, SchedulerConfig, SchedulerCore, XceError, default_registry
from xce_core.cli._endpoints import (
    CHUNK_SIZE,
    Connections,
    FdReceiveStream,
    FdWriter,
    open_listener,
    parse_listen_address,
    stderr_line,
)
from xce_core.runtime import run_async

__all__ = [
    "EXIT_BAD_EVENT",
    "EXIT_IO_ERROR",
    "EXIT_OK",
    "FdReceiveStream",
    "FdWriter",
    "consume",
    "parse_listen_address",
    "run_command",
    "unknown_plugin",
]

EXIT_OK: Final = 0
EXIT_IO_ERROR: Final = 1
EXIT_BAD_EVENT: Final = 2
# Decoded-but-unprocessed chunks the reader may run ahead of the core.
_QUEUE_DEPTH: Final = 4
# A final flush on cancellation must not hang forever on a reader that stopped.
_FLUSH_TIMEOUT_S: Final = 5.0


# --------------------------------------------------------------------------- loop


class _Mark(enum.Enum):
    END_OF_STREAM = enum.auto()  # flush the decoder: a stream ended
    DONE = enum.auto()  # no more streams
    TICK = enum.auto()  # --interval elapsed


_Message = bytes | _Mark


@final
@dataclass(slots=True)
class _Consumer:
    """Applies decoded items to the core in stream order and writes decisions.

    Every method runs to completion before the next message is looked at, so the
    core has exactly one owner and never sees two sessions at once.
    """

    core: SchedulerCore
    write: Callable[[bytes], Awaitable[None]]
    decoder: EventDecoder[InputEvent]
    encoder: EventEncoder
    strict: bool
    report: Callable[[str], None]

    async def handle(self, message: _Message) -> int | None:
        """Process one message; an exit status means stop (``--strict``)."""
        if isinstance(message, bytes):
            return await self._process(self.decoder.feed(message))
        if message is _Mark.END_OF_STREAM:
            return await self._process(self.decoder.close())
        if message is _Mark.TICK and self.core.changed:
            await self.core.run_session()
            await self.flush()
        return None

    async def _process(self, items: list[InputEvent | BadEvent]) -> int | None:
        core = self.core
        for item in items:
            if isinstance(item, BadEvent):
                rejected = item.to_decision()
                # The core numbers it, so indexes keep counting across connections.
                core.reject(rejected.error, line=rejected.line)
                if self.strict:
                    await self.flush()
                    self.report(f"xce run: {' '.join(rejected.error.split())} (--strict)")
                    return EXIT_BAD_EVENT
            elif core.apply(item):
                await core.run_session()
                await self.flush()
        await self.flush()
        return None

    async def flush(self) -> None:
        """Write every decision taken so far (nothing if there are none)."""
        decisions = self.core.take_decisions()
        if decisions:
            await self.write(self.encoder.encode_many(decisions))


async def consume(
    stream: anyio.abc.ByteReceiveStream | AsyncIterable[anyio.abc.ByteReceiveStream],
    core: SchedulerCore,
    write: Callable[[bytes], Awaitable[None]],
    *,
    format: EventFormat,
    output_format: EventFormat | None = None,
    strict: bool = False,
    interval: float | None = None,
    max_frame: int = DEFAULT_MAX_FRAME,
    report: Callable[[str], None] = stderr_line,
) -> int:
    """Feed ``stream`` (or each stream of an async iterable of them, one after
    the other) to ``core``; returns the exit status.

    Each stream is read to its end (a partial last item is decoded or rejected
    there, never joined to the next stream), then closed: ownership passes to
    this function. Items are applied in order; each ``session_begin`` runs a
    session. With ``interval``, a session also runs every ``interval`` seconds
    if something changed. Decisions are encoded in ``output_format`` (default:
    ``format``) and passed to ``write`` after every session and every chunk
    read; ``write`` is awaited before anything else happens.

    A malformed item becomes an ``event_rejected`` decision (``index`` counted
    by the core across all streams, ``line`` within its stream) and is skipped.
    With ``strict`` the first one ends consumption: its decision is written,
    ``report`` gets a one-line message and the result is ``EXIT_BAD_EVENT``.

    Returns ``EXIT_OK`` when ``streams`` is exhausted. Cancelled, it stops the
    running session (decisions already committed stand), writes what was
    decided (shielded, bounded by a timeout) and re-raises. Errors of the
    streams or of ``write`` propagate.
    """
    consumer = _Consumer(
        core,
        write,
        EventDecoder(format, max_frame=max_frame),
        EventEncoder(output_format or format),
        strict,
        report,
    )
    streams = _Single(stream) if isinstance(stream, anyio.abc.ByteReceiveStream) else stream
    send, receive = anyio.create_memory_object_stream[_Message](_QUEUE_DEPTH)
    status = EXIT_OK
    # receive closes after the task group: a reader blocked in send() is then
    # cancelled, never failed with BrokenResourceError.
    with receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_streams, streams, send)
            if interval is not None:
                tg.start_soon(_tick, interval, send.clone())
            try:
                async for message in receive:
                    if message is _Mark.DONE:
                        break
                    stop = await consumer.handle(message)
                    if stop is not None:
                        status = stop
                        break
            except anyio.get_cancelled_exc_class():
                core.cancel_session()
                with anyio.move_on_after(_FLUSH_TIMEOUT_S, shield=True):
                    await consumer.flush()
                raise
            tg.cancel_scope.cancel()
    return status


@final
class _Single:
    """An async iterable yielding one stream."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream: anyio.abc.ByteReceiveStream | None = stream

    def __aiter__(self) -> _Single:
        return self

    async def __anext__(self) -> anyio.abc.ByteReceiveStream:
        await anyio.lowlevel.checkpoint()
        stream, self._stream = self._stream, None
        if stream is None:
            raise StopAsyncIteration
        return stream


async def _read_streams(
    streams: AsyncIterable[anyio.abc.ByteReceiveStream],
    send: anyio.abc.ObjectSendStream[_Message],
) -> None:
    async with send:
        async for stream in streams:
            async with stream:
                while True:
                    try:
                        chunk = await stream.receive(CHUNK_SIZE)
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        break
                    except anyio.BrokenResourceError:  # a peer reset is its end, not ours
                        break
                    await send.send(chunk)
            await send.send(_Mark.END_OF_STREAM)
        await send.send(_Mark.DONE)


async def _tick(interval: float, send: anyio.abc.ObjectSendStream[_Message]) -> None:
    # A blocking send: ticks never pile up behind a busy core, nor starve.
    async with send:
        while True:
            await anyio.sleep(interval)
            await send.send(_Mark.TICK)


async def _serve(
    core: SchedulerCore,
    input_path: str | None,
    listen: str | None,
    once: bool,
    output_path: str | None,
    options: dict[str, Any],
) -> int:
    """Open the endpoints, consume, and map signals to their exit statuses."""
    signalled: list[int] = []
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with AsyncExitStack() as stack:
            if output_path is None:
                write = FdWriter(sys.stdout.fileno())
            else:
                fd = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
                stack.callback(os.close, fd)
                write = FdWriter(fd)
            source: anyio.abc.ByteReceiveStream | Connections
            if listen is not None:
                source = await stack.enter_async_context(open_listener(listen, once))
            elif input_path is not None:
                source = FdReceiveStream(os.open(input_path, os.O_RDONLY), close_fd=True)
            else:
                source = FdReceiveStream(sys.stdin.fileno())
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
tcp://HOST:PORT or unix:PATH; HOST defaults to 127.0.0.1, served one connection
at a time). A session runs at every session_begin and, with --interval S,
every S seconds when something changed. Decisions go to stdout (or --output
FILE), flushed after every session and every input chunk.

A malformed event becomes an event_rejected decision (index, line, error with
the field path) and is skipped; --strict stops there with status 2.

{_schema_help()}

\b
Example:  {{"type":"worker_up","name":"h1","slots":4}}
Every event type with an example line: README.md, section "Event reference".

\b
Exit status: 0 end of input; 1 I/O error; 2 usage error or --strict stop;
130 SIGINT; 143 SIGTERM (the running session is cancelled, decisions flushed).
"""

_FORMATS = click.Choice(["ndjson", "msgpack"])


@click.command("run", help=_HELP)
@click.option("--input", "input_path", metavar="FILE", help="Read events from FILE.")
@click.option("--listen", metavar="ADDRESS", help="tcp://HOST:PORT or unix:PATH.")
@click.option("--once", is_flag=True, help="With --listen: exit after the first connection.")
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
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Also run a session every S seconds when something changed.",
)
@click.option("--strict", is_flag=True, help="Stop at the first malformed event (status 2).")
@click.option("--picker", default="fcfs", show_default=True, help="Default job picker.")
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
@click.option("--strict-fifo", is_flag=True, help="A session stops at the first job that pends.")
@click.option("--no-cache", is_flag=True, help="Disable the unsatisfiable-requirement cache.")
@click.option(
    "--max-frame",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_FRAME,
    metavar="BYTES",
    show_default=True,
    help="Longest event line or frame.",
)
def run_command(
    input_path: str | None,
    listen: str | None,
    once: bool,
    output_path: str | None,
    input_format: EventFormat,
    output_format: EventFormat | None,
    interval: float | None,
    strict: bool,
    picker: str,
    sequential_allocator: str,
    parallel_allocator: str,
    strict_fifo: bool,
    no_cache: bool,
    max_frame: int,
) -> None:
    if input_path is not None and listen is not None:
        raise click.UsageError("--input and --listen are mutually exclusive")
    if once and listen is None:
        raise click.UsageError("--once needs --listen")
    if listen is not None:
        try:
            parse_listen_address(listen)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--listen") from None
    config = SchedulerConfig(
        picker=picker,
        sequential_allocator=sequential_allocator,
        parallel_allocator=parallel_allocator,
        strict_fifo=strict_fifo,
        unsatisfiable_cache=not no_cache,
        session_interval=interval,
    )
    try:
        registry = default_registry()
    except XceError as exc:  # a broken or clashing installed plugin
        raise click.ClickException(str(exc)) from None
    unknown = unknown_plugin(registry, config)
    if unknown is not None:
        option, message = unknown
        raise click.BadParameter(message, param_hint=option)
    core = SchedulerCore(config, registry=registry)
    options = dict(
        format=input_format,
        output_format=output_format,
        strict=strict,
        interval=interval,
        max_frame=max_frame,
    )
    main = functools.partial(_serve, core, input_path, listen, once, output_path, options)
    status = EXIT_IO_ERROR
    try:
        status = run_async(main)
    except* OSError as group:
        stderr_line(f"xce run: {_first_leaf(group)}")
    sys.exit(status)


def unknown_plugin(registry: Registry, config: SchedulerConfig) -> tuple[str, str] | None:
    """The first plugin name in ``config`` that ``registry`` lacks, as ``(option,
    message)`` (``("--parallel-allocator", "unknown allocator 'x' (registered: ...)")``),
    or ``None`` when every name is registered. Shared by ``xce run`` and ``xce simulate``
    so both name the offending option and list what is installed."""
    checks = (
        ("--picker", "picker", config.picker, registry.picker_names),
        (
            "--sequential-allocator",
            "allocator",
            config.sequential_allocator,
            registry.allocator_names,
        ),
        ("--parallel-allocator", "allocator", config.parallel_allocator, registry.allocator_names),
    )
    for option, kind, name, known in checks:
        if name not in known:
            return option, f"unknown {kind} {name!r} (registered: {', '.join(known) or 'none'})"
    return None


def _first_leaf(group: BaseExceptionGroup[OSError]) -> BaseException:
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
