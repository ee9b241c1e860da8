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

import contextlib
import enum
import functools
import os
import signal
import socket
import stat
import sys
import textwrap
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, final

import anyio
import anyio.abc
import click
import msgspec
from anyio.abc import SocketAttribute, SocketListener

from events import (
    DECISION_TYPES,
    INPUT_TYPES,
    BadEvent,
    EventDecoder,
    EventEncoder,
    EventFormat,
    InputEvent,
)
from events._codecs import DEFAULT_MAX_FRAME
from xce_core._config import SchedulerConfig
from xce_core._core import SchedulerCore
from xce_core._errors import XceError

__all__ = [
    "EXIT_BAD_EVENT",
    "EXIT_IO_ERROR",
    "EXIT_OK",
    "FdReceiveStream",
    "FdWriter",
    "consume",
    "parse_listen_address",
    "run_command",
]

EXIT_OK: Final = 0
EXIT_IO_ERROR: Final = 1
EXIT_BAD_EVENT: Final = 2
CHUNK_SIZE: Final = 65536
# Decoded-but-unprocessed chunks the reader may run ahead of the core.
_QUEUE_DEPTH: Final = 4
# A final flush on cancellation must not hang forever on a reader that stopped.
_FLUSH_TIMEOUT_S: Final = 5.0
_LOOPBACK: Final = "127.0.0.1"


def _stderr_line(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- fds


@final
class FdReceiveStream(anyio.abc.ByteReceiveStream):
    """Bytes read from a file descriptor without blocking the event loop.

    Pipes, sockets and terminals are polled (``anyio.wait_readable``), so a
    ``receive`` blocked on an idle pipe is cancelled at once and loses nothing.
    Descriptors that cannot be polled (regular files, ``/dev/null``) are read in
    a worker thread; such reads finish promptly. A thread is never left blocked
    on an open pipe, which would keep the process alive after a signal.
    ``receive`` raises :class:`anyio.EndOfStream` at end of file. ``aclose``
    closes the descriptor only if ``close_fd`` (idempotent).
    """

    __slots__ = ("_close_fd", "_closed", "_fd", "_pollable")

    def __init__(self, fd: int, *, close_fd: bool = False) -> None:
        self._fd = fd
        self._close_fd = close_fd
        self._closed = False
        self._pollable = not stat.S_ISREG(os.fstat(fd).st_mode)

    async def receive(self, max_bytes: int = CHUNK_SIZE) -> bytes:
        if self._closed:
            raise anyio.ClosedResourceError
        data: bytes | None = None
        while self._pollable and data is None:
            try:
                await anyio.wait_readable(self._fd)
            except PermissionError:  # epoll refuses /dev/null and the like
                self._pollable = False
            else:
                with contextlib.suppress(BlockingIOError):  # another reader was faster
                    data = os.read(self._fd, max_bytes)
        if data is None:
            data = await anyio.to_thread.run_sync(os.read, self._fd, max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if self._close_fd:
                os.close(self._fd)


@final
class FdWriter:
    """``await writer(data)`` writes all of ``data`` to a file descriptor.

    The write happens in a worker thread and returns once the OS has every byte
    (no user-space buffering: written is flushed). It waits, uncancellably, for a
    slow reader, so output is never torn. Not for concurrent use.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def __call__(self, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write_all, data)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]


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
    report: Callable[[str], None] = _stderr_line,
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


# --------------------------------------------------------------------------- endpoints


@final
class _Connections:
    """Connections accepted one at a time, in arrival order; just one with ``once``."""

    def __init__(self, listener: SocketListener, once: bool) -> None:
        self._listener = listener
        self._once = once
        self._accepted = 0

    def __aiter__(self) -> _Connections:
        return self

    async def __anext__(self) -> anyio.abc.SocketStream:
        if self._once and self._accepted:
            await anyio.lowlevel.checkpoint()
            raise StopAsyncIteration
        connection = await self._listener.accept()
        self._accepted += 1
        return connection


def parse_listen_address(address: str) -> tuple[str, str, int]:
    """``tcp://HOST:PORT`` or ``unix:PATH`` as ``("tcp", host, port)`` or
    ``("unix", path, 0)``. An empty host means loopback (127.0.0.1); IPv6 hosts
    go in brackets. Raises :class:`ValueError` saying what is wrong."""
    if address.startswith("unix:"):
        path = address.removeprefix("unix:")
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ValueError(f"no socket path in {address!r} (expected unix:PATH)")
        return "unix", path, 0
    if not address.startswith("tcp://"):
        raise ValueError(
            f"unsupported address {address!r} (expected tcp://HOST:PORT or unix:PATH)"
        )
    host, sep, port_text = address.removeprefix("tcp://").rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"bad port in {address!r} (expected tcp://HOST:PORT, PORT 0-65535)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return "tcp", host or _LOOPBACK, int(port_text)


def _format_address(kind: str, address: Any) -> str:
    if kind == "unix":
        return f"unix:{address}"
    host, port = address[0], address[1]
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


@asynccontextmanager
async def _listen(address: str, once: bool) -> AsyncIterator[_Connections]:
    """Bind ``address``, announce the bound address on stderr, and yield its
    connections; the listener (and a Unix socket file it made) goes at exit."""
    kind, host, port = parse_listen_address(address)
    listener: SocketListener
    if kind == "unix":
        listener = await anyio.create_unix_listener(host)
    else:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        if not infos:
            raise OSError(f"cannot resolve {host!r}")
        # One address only (the first), so one listener serves in arrival order.
        multi = await anyio.create_tcp_listener(local_host=str(infos[0][4][0]), local_port=port)
        (first,) = multi.listeners
        assert isinstance(first, SocketListener)
        listener = first
    async with listener:
        bound = listener.extra(SocketAttribute.local_address)
        _stderr_line(f"xce run: listening on {_format_address(kind, bound)}")
        try:
            yield _Connections(listener, once)
        finally:
            if kind == "unix":
                with anyio.CancelScope(shield=True):
                    await anyio.Path(host).unlink(missing_ok=True)


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
            source: anyio.abc.ByteReceiveStream | _Connections
            if listen is not None:
                source = await stack.enter_async_context(_listen(listen, once))
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
        strict_fifo=strict_fifo,
        unsatisfiable_cache=not no_cache,
        session_interval=interval,
    )
    try:
        core = SchedulerCore(config)
    except XceError as exc:
        raise click.BadParameter(str(exc), param_hint="--picker") from None
    options = dict(
        format=input_format,
        output_format=output_format,
        strict=strict,
        interval=interval,
        max_frame=max_frame,
    )
    main = functools.partial(_serve, core, input_path, listen, once, output_path, options)
    backend_options: dict[str, Any] = {}
    try:
        import uvloop  # noqa: F401
    except ImportError:  # pragma: no cover - platforms without uvloop
        pass
    else:
        backend_options["use_uvloop"] = True
    status = EXIT_IO_ERROR
    try:
        status = anyio.run(main, backend="asyncio", backend_options=backend_options)
    except* OSError as group:
        _stderr_line(f"xce run: {_first_leaf(group)}")
    sys.exit(status)


def _first_leaf(group: BaseExceptionGroup[OSError]) -> BaseException:
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
