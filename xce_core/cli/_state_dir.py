"""``xce run --state-dir DIR``: core snapshots in a directory, and resuming from them.

A snapshot (:meth:`SchedulerCore.snapshot`) is written as
``snapshot-<events>.xce``, where ``<events>`` is the number of input events it
covers (zero-padded, so names sort as numbers), atomically: to a temporary
file in the same directory, flushed to disk (``fsync``), renamed into place,
and the directory entry flushed too. A crash at any point leaves either the
old snapshots or the new one, never half of one. The newest :data:`KEEP` are
kept; older ones and temporary files a crash left are removed.

On start the newest snapshot that restores is loaded (a damaged one is
reported and the next older tried), and the consumer skips the input events
it covers: a controller simply sends its whole log again.

:class:`SnapshotSchedule` decides when a snapshot is due (every N events or S
seconds, whichever comes first, and only when something changed).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, final

import anyio.to_thread

from xce_core import Clock, InternalErrorHook, Registry, SchedulerCore, SnapshotError, XceError
from xce_core.cli._endpoints import stderr_line

__all__ = ["KEEP", "Resumed", "SnapshotSchedule", "StateDir"]

KEEP: Final = 2
_NAME: Final = re.compile(r"snapshot-(\d{20})\.xce")
_TEMP_SUFFIX: Final = ".tmp"


@final
@dataclass(frozen=True, slots=True)
class Resumed:
    """A core restored from ``path``, covering the first ``events`` input events."""

    core: SchedulerCore
    path: Path
    events: int


@final
class StateDir:
    """The snapshots of one ``xce run`` (see the module docstring). Raises
    :class:`OSError` when the directory cannot be created or written."""

    __slots__ = ("last_written", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        # time.time() of the last snapshot written or loaded (None: none yet).
        self.last_written: float | None = None

    def snapshots(self) -> list[Path]:
        """The snapshot files, newest (most events covered) first: regular files
        only (a directory, FIFO or device of such a name is neither read nor
        counted among the snapshots kept)."""
        found = [p for p in self.path.iterdir() if _NAME.fullmatch(p.name) and p.is_file()]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def resume(
        self,
        *,
        registry: Registry,
        clock: Clock,
        on_internal_error: InternalErrorHook,
        report: Callable[[str], None],
    ) -> Resumed | None:
        """The core of the newest snapshot that restores, or ``None`` when there
        is none. A snapshot that does not restore is reported and skipped."""
        for stale in self.path.glob(f"*{_TEMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                stale.unlink()
        for path in self.snapshots():
            try:
                data = _read_regular(path)
                core = SchedulerCore.restore(
                    data,
                    registry=registry,
                    clock=clock,
                    on_internal_error=on_internal_error,
                )
            except (SnapshotError, OSError) as exc:
                report(f"xce run: skipping snapshot {path}: {exc}")
                continue
            self.last_written = path.stat().st_mtime
            return Resumed(core, path, core.events_received)
        return None

    def write(self, data: bytes, events: int) -> Path:
        """Store ``data``, the snapshot covering ``events`` events, atomically;
        keep the newest :data:`KEEP`. Blocking: run it in a worker thread."""
        final_path = self.path / f"snapshot-{events:020d}.xce"
        temp = self.path / f".{final_path.name}.{os.getpid()}{_TEMP_SUFFIX}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, final_path)
        _fsync_directory(self.path)
        self.last_written = time.time()
        for old in self.snapshots()[KEEP:]:
            with contextlib.suppress(OSError):
                old.unlink()
        return final_path


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (a directory, a FIFO or
    a device of that name raises ``OSError``: reading a FIFO would block)."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError("not a regular file")
        return file.read()


def _fsync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable (where the platform allows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


@final
@dataclass(slots=True)
class SnapshotSchedule:
    """When ``xce run`` writes a snapshot: after ``every`` events, or when
    ``interval`` seconds have passed since the last one and something changed
    (an event or a session), checked between input chunks and ticks; and once
    more at the end of the input."""

    state_dir: StateDir
    every: int
    interval: float
    _events: int = 0
    _sessions: int = 0
    _at: float = field(default_factory=time.monotonic)

    def start(self, core: SchedulerCore) -> None:
        """The core as loaded (or new) is covered already."""
        self._events = core.events_received
        self._sessions = core.session_count
        self._at = time.monotonic()

    async def maybe(self, core: SchedulerCore, *, force: bool = False) -> None:
        """Write a snapshot of ``core`` (between events) if one is due. A
        checkpoint only when it writes. Raises :class:`OSError` on failure."""
        events, sessions = core.events_received, core.session_count
        if (events, sessions) == (self._events, self._sessions) or core.in_session:
            return
        due = events - self._events >= self.every
        if not (force or due or time.monotonic() - self._at >= self.interval):
            return
        try:
            data = core.snapshot()  # between events, on the core's owner: synchronous
        except XceError as exc:  # a state snapshots cannot cover (none known today)
            stderr_line(f"xce run: no more snapshots: {exc}")
            self.every, self.interval = 2**62, math.inf
            self._events, self._sessions = events, sessions
            return
        await anyio.to_thread.run_sync(self.state_dir.write, data, events)
        self._events, self._sessions, self._at = events, sessions, time.monotonic()
