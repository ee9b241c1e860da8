"""The lease that makes one ``xce run --nats`` process active.

The lease is one key (the durable name) in a JetStream key-value bucket whose
``max_age`` is the lease TTL. Acquiring it is ``create`` (stored only if the
key holds nothing: the server checks the subject's last sequence); holding it
is ``update`` with the last revision, every third of the TTL; an entry nobody
refreshes expires after the TTL and a standby's next ``create`` succeeds.
Before publishing, a holder whose last refresh is older than 90% of the TTL
refreshes first (:meth:`Lease.ensure`): a process busy for longer than the TTL
(a long session) takes the key back if no one else took it, and stops if
someone did.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from typing import Final, final

import anyio
import nats.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from xce_core import XceError

__all__ = ["Lease", "LeaseLost"]

# A standby polls the key this often (a fraction of the TTL, at most this).
_POLL_S: Final = 0.25
_log = logging.getLogger("xce.run")


class LeaseLost(XceError):
    """The lease was taken over or could not be refreshed in time."""


@final
class Lease:
    """One process's claim on the lease ``key`` of ``bucket``."""

    __slots__ = ("_bucket", "_js", "_key", "_kv", "_renewed", "_revision", "holder", "ttl")

    def __init__(self, js: JetStreamContext, bucket: str, key: str, ttl: float) -> None:
        self._js = js
        self._bucket = bucket
        self._key = key
        self.ttl = ttl
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._kv: KeyValue | None = None
        self._revision = 0
        self._renewed = -float("inf")

    @property
    def held(self) -> bool:
        return self._revision != 0

    async def open(self) -> None:
        """Bind the bucket, creating it (``max_age`` = TTL) when missing; an
        existing bucket's TTL replaces the one given (all holders share it)."""
        try:
            self._kv = await self._js.key_value(self._bucket)
            status = await self._kv.status()
            ttl = status.ttl
            if ttl and abs(ttl - self.ttl) > 1e-3:
                # The bucket's max_age is the TTL every holder's refreshes must beat.
                _log.warning(
                    "lease bucket %r has a TTL of %g s: using it, not %g s",
                    *(self._bucket, ttl, self.ttl),
                )
                self.ttl = ttl
        except BucketNotFoundError:
            self._kv = await self._js.create_key_value(
                KeyValueConfig(
                    bucket=self._bucket, history=1, ttl=self.ttl, storage=StorageType.FILE
                )
            )

    async def acquire(self) -> None:
        """Wait until this process holds the lease (a standby waits here)."""
        kv = self._kv
        assert kv is not None, "open() first"
        poll = min(_POLL_S, self.ttl / 4)
        while True:
            started = time.monotonic()
            try:
                self._revision = await kv.create(self._key, self.holder.encode())
            except KeyWrongLastSequenceError:
                await anyio.sleep(poll)
                continue
            except (nats.errors.Error, TimeoutError) as exc:
                _log.warning("lease: %s; retrying", exc)
                await anyio.sleep(poll)
                continue
            self._renewed = started
            return

    async def keep(self) -> None:
        """Refresh the lease until cancelled; raises :class:`LeaseLost` when
        another process holds it or it could not be refreshed in time."""
        kv = self._kv
        assert kv is not None, "open() first"
        assert self.held, "acquire() first"
        while True:
            await anyio.sleep(self.ttl / 3)
            started = time.monotonic()
            try:
                self._revision = await kv.update(
                    self._key, self.holder.encode(), last=self._revision
                )
            except KeyWrongLastSequenceError:
                await self._take_back(started)
                continue
            except (nats.errors.Error, TimeoutError) as exc:
                _log.warning("lease refresh failed: %s", exc)
                self.check()
                continue
            self._renewed = started

    async def _take_back(self, started: float) -> None:
        """The key changed since our last refresh: it expired while this process
        was too busy to refresh it (a long session), or another process has it.
        Take it back if it is free; raise :class:`LeaseLost` otherwise. Safe
        either way: decisions are chained by stream sequence, so a process that
        went on alone cannot publish out of turn."""
        assert self._kv is not None
        try:
            self._revision = await self._kv.create(self._key, self.holder.encode())
        except KeyWrongLastSequenceError:
            self._revision = 0
            raise LeaseLost("the lease is held by another process") from None
        _log.warning("the lease expired while this process was busy; taken back")
        self._renewed = started

    async def ensure(self) -> None:
        """The fence before publishing: return at once if the lease was
        refreshed recently enough that no one else can hold it yet, else
        refresh it now; raises :class:`LeaseLost` if another process holds it."""
        if time.monotonic() - self._renewed <= 0.9 * self.ttl:
            return
        kv = self._kv
        assert kv is not None, "open() first"
        started = time.monotonic()
        try:
            self._revision = await kv.update(self._key, self.holder.encode(), last=self._revision)
        except KeyWrongLastSequenceError:
            await self._take_back(started)
            return
        self._renewed = started

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the lease was refreshed recently
        enough that no one else can hold it yet (a fence, checked before
        publishing)."""
        if time.monotonic() - self._renewed > 0.9 * self.ttl:
            self._revision = 0
            raise LeaseLost(f"the lease was not refreshed for {0.9 * self.ttl:.1f} s")

    async def release(self) -> None:
        """Give the lease up (a clean stop: a standby takes over at once)."""
        kv = self._kv
        if kv is None or not self.held:
            return
        self._revision = 0
        try:
            # The revision is read again: a refresh cancelled in flight may have
            # been stored without this process learning its revision.
            entry = await kv.get(self._key)
            if entry.value == self.holder.encode() and entry.revision is not None:
                await kv.delete(self._key, last=entry.revision)
        except (nats.errors.Error, TimeoutError) as exc:
            _log.warning("lease release failed: %s", exc)
