"""Provenance of a replay's figures: the xce version, the trace (name, SHA-256),
every option and the cluster, so that a summary or a results table says what
produced it."""

from __future__ import annotations

import datetime
import functools
import hashlib
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from xce_core.sim._cluster import ClusterSpec

__all__ = ["Provenance", "TraceInfo", "file_sha256", "provenance", "xce_version"]

_CHUNK = 1 << 20


class TraceInfo(msgspec.Struct, kw_only=True):
    """A trace file: its name (without the directory), SHA-256 and size."""

    name: str
    sha256: str
    bytes: int


class Provenance(msgspec.Struct, kw_only=True):
    """What produced a replay's figures. ``options`` are the command's options
    by name (paths as strings); ``created`` is when, in UTC (ISO 8601)."""

    xce_version: str
    python: str
    created: str
    trace: TraceInfo | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    cluster: ClusterSpec | None = None


@functools.cache
def xce_version() -> str:
    """The installed xce's version (``unknown`` when run from a bare source tree).
    Read once per process: parsing the installed metadata takes about 2 ms, and
    ``xce simulate`` builds its provenance twice (the trace's hash before the
    replay, the rest after it)."""
    import importlib.metadata  # here, not at the top: about 8 ms of `xce simulate --help`

    try:
        return importlib.metadata.version("xce")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "unknown"


def file_sha256(path: Path) -> tuple[str, int]:
    """The SHA-256 (hex) of the bytes of ``path`` and their number. Raises
    ``OSError``."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def provenance(
    *, trace: Path | None, options: Mapping[str, Any], cluster: ClusterSpec | None
) -> Provenance:
    """The provenance of a replay of ``trace`` (hashed now: raises ``OSError``)
    with ``options`` on ``cluster``. Paths among the options become strings; a
    file name's bytes that are not UTF-8 read as ``\\xff`` escapes (the JSON
    summary is UTF-8)."""
    info = None
    if trace is not None:
        sha, size = file_sha256(trace)
        info = TraceInfo(name=_printable(trace.name), sha256=sha, bytes=size)
    return Provenance(
        xce_version=xce_version(),
        python=platform.python_version(),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        trace=info,
        options={
            k: _printable(str(v)) if isinstance(v, Path | str) else v for k, v in options.items()
        },
        cluster=cluster,
    )


def _printable(name: str) -> str:
    """``name`` as UTF-8 text: bytes of a file name that were not UTF-8 (which
    Python keeps as lone surrogates) become ``\\xNN`` escapes."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
