"""Snapshots of ``xce run --nats``, stored in a JetStream object store.

A :class:`Checkpoint` is the core's snapshot (``SchedulerCore.snapshot()``)
with the input stream sequence it covers and the count of events applied up
to it. It is stored only once every decision caused by the events it covers
is stored too, so that restoring it and replaying the stream from ``seq + 1``
gives exactly the decisions not yet published. One object per durable name,
replaced at each snapshot: the newest is the only one kept.
"""

from __future__ import annotations

from typing import final

import msgspec
from nats.js import JetStreamContext
from nats.js.api import ObjectStoreConfig, StorageType
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.object_store import ObjectStore

__all__ = ["Checkpoint", "CheckpointStore"]


@final
class Checkpoint(msgspec.Struct, frozen=True):
    """The state after the input message ``seq``; ``events`` messages applied."""

    seq: int
    events: int
    state: bytes


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Checkpoint)


@final
class CheckpointStore:
    """The object ``name`` of object-store ``bucket`` (created when missing)."""

    __slots__ = ("_bucket", "_js", "_name", "_store")

    def __init__(self, js: JetStreamContext, bucket: str, name: str) -> None:
        self._js = js
        self._bucket = bucket
        self._name = name
        self._store: ObjectStore | None = None

    async def open(self) -> None:
        try:
            self._store = await self._js.object_store(self._bucket)
        except (BucketNotFoundError, NotFoundError):
            self._store = await self._js.create_object_store(
                self._bucket, ObjectStoreConfig(bucket=self._bucket, storage=StorageType.FILE)
            )

    async def load(self) -> Checkpoint | None:
        """The newest checkpoint, or ``None`` when there is none."""
        assert self._store is not None, "open() first"
        try:
            result = await self._store.get(self._name)
        except NotFoundError:
            return None
        if result.data is None:  # pragma: no cover - only with writeinto
            return None
        return _decoder.decode(result.data)

    async def save(self, checkpoint: Checkpoint) -> None:
        """Store ``checkpoint`` in place of the previous one."""
        assert self._store is not None, "open() first"
        await self._store.put(self._name, _encoder.encode(checkpoint))
