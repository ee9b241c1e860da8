"""Throughput of the event codecs on ~200k mixed, realistic input events.

Decoding is measured as a consumer sees it: the encoded stream is fed to an
:class:`~events.EventDecoder` in 64 KiB chunks (what a socket read returns).
The "one per decode call" row is the baseline the batch decoder exists to beat:
one ``msgspec.json.Decoder.decode`` call per line. The "1-byte reads" rows feed
one 1 MiB item a byte at a time: bytes per second there stay within a small
factor of a Python call per byte only if buffering a partial item is linear.
Each figure is the best of three runs, with the garbage collector left on, as
in production.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from events import (
    EventDecoder,
    EventEncoder,
    InputEvent,
    JobCancelled,
    JobFinished,
    JobSubmitted,
    SessionBegin,
    WorkerUp,
)

__all__ = ["bench_events"]

N_EVENTS = 200_000
CHUNK = 64 * 1024
RESREQS = (
    "select[type==LINUX64 && mem>4000] rusage[mem=4000:duration=10] span[hosts=1]",
    "select[bigmem] order[-slots] rusage[mem=64000, tmp=200]",
    "span[ptile=8] same[model] rusage[gpu=1]",
    "",
)


def realistic_events(n: int = N_EVENTS) -> list[Any]:
    """A stream shaped like a busy cluster: mostly submissions and completions."""
    events: list[Any] = []
    for i in range(n):
        kind = i % 10
        if kind == 0:
            events.append(
                WorkerUp(
                    name=f"host{i:07d}",
                    slots=32,
                    attrs={"type": "LINUX64", "model": "XeonE5", "bigmem": i % 3 == 0},
                    resources={"mem": 256_000.0, "tmp": 900.0, "gpu": float(i % 2)},
                )
            )
        elif kind < 6:
            events.append(
                JobSubmitted(
                    job_id=f"{i}",
                    user=f"user{i % 50}",
                    queue="normal",
                    project="proj",
                    priority=i % 7,
                    submit_time=1.7e9 + i,
                    min_tasks=1,
                    max_tasks=1 + i % 8,
                    resreq=RESREQS[i % len(RESREQS)],
                )
            )
        elif kind < 9:
            events.append(JobFinished(job_id=f"{i - 5}"))
        elif i % 20 == 9:
            events.append(JobCancelled(job_id=f"{i - 3}"))
        else:
            events.append(SessionBegin())
    return events


def _best_of(runs: int, work: Callable[[], int]) -> float:
    """Events per second of the fastest of ``runs`` calls (``work`` returns a count)."""
    best = float("inf")
    count = 0
    for _ in range(runs):
        start = time.perf_counter()
        count = work()
        best = min(best, time.perf_counter() - start)
    return count / best


def _decode_in_chunks(fmt: Any, data: bytes) -> int:
    decoder = EventDecoder(fmt)
    count = 0
    for offset in range(0, len(data), CHUNK):
        count += len(decoder.feed(data[offset : offset + CHUNK]))
    return count + len(decoder.close())


def _one_byte_reads(fmt: Any, data: bytes) -> int:
    decoder = EventDecoder(fmt, max_frame=len(data))
    feed = decoder.feed
    got = 0
    for offset in range(len(data)):
        got += len(feed(data[offset : offset + 1]))
    assert got == 1
    return len(data)


def _megabyte_item(fmt: Any) -> bytes:
    """A job_finished of about 1 MiB: an ignored field holds the bulk."""
    blob = {"type": "job_finished", "job_id": "big", "note": "n" * (1 << 20)}
    if fmt == "ndjson":
        return msgspec.json.encode(blob) + b"\n"
    payload = msgspec.msgpack.encode(blob)
    return len(payload).to_bytes(4, "big") + payload


def bench_events() -> list[tuple[str, float]]:
    """Rows of (what was measured, events per second)."""
    events = realistic_events()
    ndjson = EventEncoder("ndjson").encode_many(events)
    msgpack = EventEncoder("msgpack").encode_many(events)
    lines = ndjson.splitlines()
    big_line, big_frame = _megabyte_item("ndjson"), _megabyte_item("msgpack")
    decode_one = msgspec.json.Decoder(InputEvent).decode

    def one_per_call() -> int:
        return len([decode_one(line) for line in lines])

    def encode_all(fmt: Any) -> int:
        EventEncoder(fmt).encode_many(events)
        return len(events)

    return [
        (
            "ndjson events/s decoded in batches",
            _best_of(3, lambda: _decode_in_chunks("ndjson", ndjson)),
        ),
        (
            "msgpack events/s decoded in batches",
            _best_of(3, lambda: _decode_in_chunks("msgpack", msgpack)),
        ),
        ("ndjson events/s one per decode call", _best_of(3, one_per_call)),
        ("ndjson events/s encoded", _best_of(3, lambda: encode_all("ndjson"))),
        ("msgpack events/s encoded", _best_of(3, lambda: encode_all("msgpack"))),
        (
            "ndjson bytes/s, a 1 MiB line in 1-byte reads",
            _best_of(3, lambda: _one_byte_reads("ndjson", big_line)),
        ),
        (
            "msgpack bytes/s, a 1 MiB frame in 1-byte reads",
            _best_of(3, lambda: _one_byte_reads("msgpack", big_frame)),
        ),
    ]


if __name__ == "__main__":
    for label, rate in bench_events():
        print(f"{label:<48} {rate:>14,.0f}")
