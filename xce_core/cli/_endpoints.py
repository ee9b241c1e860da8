"""Byte endpoints for ``xce run``: file descriptors and listening sockets.

:class:`FdReceiveStream` and :class:`FdWriter` move bytes through raw file
descriptors without blocking the event loop; :func:`open_listener` binds a TCP
or Unix socket. Nothing here knows about events: :mod:`xce_core.cli._connections`
serves the listener's connections and the consumer in :mod:`xce_core.cli._run`
applies what they send.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final, final

import anyio
import anyio.abc
from anyio.abc import SocketAttribute, SocketListener

__all__ = [
    "CHUNK_SIZE",
    "FdReceiveStream",
    "FdWriter",
    "format_address",
    "open_listener",
    "parse_listen_address",
    "stderr_line",
]

CHUNK_SIZE: Final = 65536
_LOOPBACK: Final = "127.0.0.1"


def stderr_line(message: str) -> None:
    """Write one line to stderr and flush it (progress and error reports)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def stdout_text(text: str) -> str | None:
    """Write ``text`` and a newline to stdout and flush it; ``None`` when done,
    else why it could not be (stdout closed when the command started, a full
    disk, a reader gone): the caller reports that and exits 1."""
    out = sys.stdout
    if out is None:  # Python leaves it None when descriptor 1 was closed
        return "stdout is closed"
    try:
        out.write(text + "\n")
        out.flush()
    except OSError as exc:
        with contextlib.suppress(OSError, ValueError):
            # What is still buffered goes nowhere: the interpreter's own flush
            # at exit must not fail again (with a traceback).
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, out.fileno())
            os.close(null)
        return f"stdout: {exc.strerror or exc}"
    return None


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
    closes the descriptor only if ``close_fd`` (idempotent). An ``OSError``
    names the input (``name``: a path, ``stdin``).
    """

    __slots__ = ("_close_fd", "_closed", "_fd", "_pollable", "name")

    def __init__(self, fd: int, *, close_fd: bool = False, name: str = "") -> None:
        self._fd = fd
        self._close_fd = close_fd
        self._closed = False
        self.name = name or f"fd {fd}"
        try:
            self._pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError as exc:
            raise _named(exc, self.name) from None

    async def receive(self, max_bytes: int = CHUNK_SIZE) -> bytes:
        try:
            return await self._receive(max_bytes)
        except OSError as exc:
            raise _named(exc, self.name) from None

    async def _receive(self, max_bytes: int) -> bytes:
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
    slow reader, so output is never torn. Not for concurrent use. An
    ``OSError`` names the output (``name``: a path, ``stdout``).
    """

    __slots__ = ("fd", "name")

    def __init__(self, fd: int, name: str = "") -> None:
        self.fd = fd
        self.name = name or f"fd {fd}"

    async def __call__(self, data: bytes) -> None:
        try:
            await anyio.to_thread.run_sync(self._write_all, data)
        except OSError as exc:
            raise _named(exc, self.name) from None

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]


def _named(exc: OSError, name: str) -> OSError:
    """``exc`` naming the file it is about (unless it names one already)."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror, name)


# --------------------------------------------------------------------------- sockets


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


def format_address(kind: str, address: Any) -> str:
    """A socket address as ``tcp://HOST:PORT`` (IPv6 hosts in brackets) or ``unix:PATH``."""
    if kind == "unix":
        return f"unix:{address}"
    host, port = address[0], address[1]
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


@asynccontextmanager
async def open_listener(address: str) -> AsyncIterator[SocketListener]:
    """Bind ``address`` (see :func:`parse_listen_address`), announce the bound
    address on stderr, and yield the listener; it (and a Unix socket file it
    made) goes at exit. Raises :class:`OSError` when binding fails."""
    kind, host, port = parse_listen_address(address)
    listener: SocketListener
    try:
        if kind == "unix":
            listener = await anyio.create_unix_listener(host)
        else:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            if not infos:
                raise OSError(f"cannot resolve {host!r}")
            # One address only (the first): one listener, one place to accept.
            multi = await anyio.create_tcp_listener(
                local_host=str(infos[0][4][0]), local_port=port
            )
            (first,) = multi.listeners
            assert isinstance(first, SocketListener)
            listener = first
    except OSError as exc:
        raise _named(exc, address) from None
    async with listener:
        bound = listener.extra(SocketAttribute.local_address)
        stderr_line(f"xce run: listening on {format_address(kind, bound)}")
        try:
            yield listener
        finally:
            if kind == "unix":
                with anyio.CancelScope(shield=True):
                    await anyio.Path(host).unlink(missing_ok=True)
