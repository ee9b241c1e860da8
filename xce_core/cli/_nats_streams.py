"""The JetStream objects of ``xce run --nats``: options, streams, the consumer,
and the identity of every published decision.

Layout (every name is an option, see :class:`NatsOptions`):

- the **input stream** (``--stream``, subject ``--subject``): limits retention,
  file storage; the service never deletes from it, so a restart can replay
  from any snapshot;
- the **decisions stream** (``--decisions-stream``, subject
  ``--decisions-subject``): one message per decision, written only by the
  active service; its ``duplicate_window`` is ``--duplicate-window``;
- the **durable pull consumer** (``--durable``) on the input stream, explicit
  acks. The active service recreates it at every start, at the sequence after
  its snapshot, so delivery is always in stream order from there;
- a **key-value bucket** for the lease and an **object store** for snapshots
  (``<durable>`` is the key and the object name in both).
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from typing import Final, final

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import NotFoundError

from events import (
    Decision,
    EventFormat,
    EventRejected,
    JobAllocated,
    JobPended,
    JobRejected,
    JobReserved,
    SessionEnd,
)

__all__ = [
    "POSITION_HEADER",
    "NatsOptions",
    "decision_msg_id",
    "ensure_streams",
    "parse_ack_reply",
    "recreate_consumer",
]

POSITION_HEADER: Final = "Xce-Pos"
"""Header of every decision: ``<input stream sequence>.<ordinal>``, where the
ordinal counts the decisions that input message caused (from 0)."""
# Longest job id put into a msg id as it is; longer or unusual ones are hashed.
_MAX_PLAIN_ID: Final = 200


@final
@dataclass(frozen=True, slots=True)
class NatsOptions:
    """What ``xce run --nats`` connects to and how it paces itself."""

    url: str = "nats://127.0.0.1:4222"
    stream: str = "XCE_EVENTS"
    subject: str = "xce.events"
    decisions_stream: str = "XCE_DECISIONS"
    decisions_subject: str = "xce.decisions"
    durable: str = "xce"
    lease_bucket: str = "xce_leases"
    state_bucket: str = "xce_state"
    format: EventFormat = "ndjson"
    output_format: EventFormat = "ndjson"
    max_frame: int = 1 << 20
    batch: int = 1000
    # In-flight decisions (published, not yet acknowledged by the server).
    publish_window: int = 20_000
    snapshot_every: int = 100_000
    snapshot_interval: float = 60.0
    lease_ttl: float = 5.0
    duplicate_window: float = 300.0
    # Consumer ack wait: messages wait for their decisions' acks before theirs.
    ack_wait: float = 120.0


async def ensure_streams(js: JetStreamContext, options: NatsOptions) -> None:
    """Create the input and decisions streams when missing (existing ones are
    used as they are, whatever their configuration). Idempotent."""
    wanted = [
        StreamConfig(
            name=options.stream,
            subjects=[options.subject],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
        ),
        StreamConfig(
            name=options.decisions_stream,
            subjects=[options.decisions_subject],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            duplicate_window=options.duplicate_window,
        ),
    ]
    for config in wanted:
        assert config.name is not None
        try:
            await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)


async def recreate_consumer(js: JetStreamContext, options: NatsOptions, start_seq: int) -> None:
    """Delete the durable consumer if it exists and create it anew, delivering
    the input stream from ``start_seq`` with explicit, cumulative acks (an ack
    covers every message before it too: messages are applied in order).

    Recreating (rather than resuming) is what keeps delivery in stream order
    after a crash: messages the previous holder had been delivered but not
    acked would otherwise come back only after their ack wait, behind newer
    ones. Only the lease holder calls this."""
    with contextlib.suppress(NotFoundError):
        await js.delete_consumer(options.stream, options.durable)
    await js.add_consumer(
        options.stream,
        ConsumerConfig(
            durable_name=options.durable,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start_seq,
            ack_policy=AckPolicy.ALL,
            ack_wait=options.ack_wait,
            max_ack_pending=max(4 * options.publish_window, 10 * options.batch),
            max_waiting=16,
            filter_subject=options.subject,
        ),
    )


def parse_ack_reply(reply: str) -> tuple[int, int]:
    """``(stream sequence, timestamp in ns)`` from a JetStream message's reply
    subject (``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``,
    or the longer form with a domain and an account hash). Raises ``ValueError``
    for anything else."""
    tokens = reply.split(".")
    if len(tokens) == 9 and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[5]), int(tokens[7])
    if len(tokens) >= 11 and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[7]), int(tokens[9])
    raise ValueError(f"not a JetStream ack subject: {reply!r}")


def _job_key(job_id: str) -> str:
    # Header values cannot hold CR/LF, and clients strip spaces at their ends
    # (``j`` and ``j `` would share an id, and deduplication drop one of their
    # decisions); a hash keeps odd or long ids unique.
    if (
        len(job_id) <= _MAX_PLAIN_ID
        and job_id.isascii()
        and job_id.isprintable()
        and not job_id.startswith("#")
        and job_id == job_id.strip()
    ):
        return job_id
    return "#" + hashlib.blake2b(job_id.encode(), digest_size=16).hexdigest()


def decision_msg_id(decision: Decision, event_index: int) -> str:
    """The deterministic ``Nats-Msg-Id`` of ``decision``, caused by the event at
    ``event_index``.

    Session decisions are named by their session and job (``s12.alloc.j7``,
    ``s12.pend.j8``, ``s12.resv.j8``, ``s12.end``); a job's allocation, pend
    and reservation are each decided at most once per session. Rejections are
    named by the event that caused them (``e41.rejected``, ``e41.job.j9``): an
    event is rejected at most once, and a ``job_submitted`` names one job."""
    match decision:
        case JobAllocated(session=session, job_id=job_id):
            return f"s{session}.alloc.{_job_key(job_id)}"
        case JobPended(session=session, job_id=job_id):
            return f"s{session}.pend.{_job_key(job_id)}"
        case JobReserved(session=session, job_id=job_id):
            return f"s{session}.resv.{_job_key(job_id)}"
        case SessionEnd(session=session):
            return f"s{session}.end"
        case EventRejected(index=index):
            return f"e{index}.rejected"
        case JobRejected(job_id=job_id):
            return f"e{event_index}.job.{_job_key(job_id)}"
    raise TypeError(f"not a decision: {decision!r}")  # pragma: no cover
