"""Feeding bytes to a decoder as reads would deliver them (shared by the codec,
hostile-input and fuzz tests)."""

from __future__ import annotations

import itertools
from typing import Any

from events import EventDecoder

__all__ = ["chunked", "decode_all", "frame"]


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` split at the given offsets (taken modulo its length, in order)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def decode_all(decoder: EventDecoder[Any], chunks: list[bytes]) -> list[Any]:
    """Everything ``decoder`` yields for ``chunks``, end of input included."""
    out: list[Any] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out + decoder.close()


def frame(payload: bytes) -> bytes:
    """One length-prefixed msgpack frame."""
    return len(payload).to_bytes(4, "big") + payload
