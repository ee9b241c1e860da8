"""The results cache of sweeps: one file per run key in a directory."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Final

import msgspec

from xce_core.sim.sweep._runs import RunRecord

__all__ = ["ResultCache"]

_SUFFIX: Final = ".msgpack"


class ResultCache:
    """Run records by key, as ``<key>.msgpack`` files in ``directory`` (created
    on the first :meth:`put`). Several sweeps may share one directory: a key
    names everything that can change a result.

    A file is written whole or not at all (a temporary file renamed over it),
    so a sweep killed in the middle leaves no half record; a file that does
    not decode, or whose key or description differs, reads as missing and is
    computed again."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._decoder = msgspec.msgpack.Decoder(RunRecord)
        self._encoder = msgspec.msgpack.Encoder()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}{_SUFFIX}"

    def get(self, key: str, description: str | None = None) -> RunRecord | None:
        """The record of ``key``, or ``None`` when there is none (or it is
        unreadable, or was stored for another description). Never raises."""
        try:
            record = self._decoder.decode(self.path(key).read_bytes())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        if record.key != key or (description is not None and record.description != description):
            return None
        return record

    def put(self, record: RunRecord) -> None:
        """Store ``record`` under its key, atomically. Raises ``OSError`` when
        the directory cannot be created or written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(self._encoder.encode(record))
            os.replace(temporary, self.path(record.key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
