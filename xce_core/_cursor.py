"""The host scan: a session's cursor over one candidate list for one bucket shape.

Every host the core considers for a bucket comes through :meth:`HostCursor.scan`
(:class:`HostIterator` steps through it; the one-bucket placement calls it
directly). The cursors live in the session's scratch and are dropped when the
next session begins.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Protocol, final

from xce_core._model import Worker, shortfall
from xce_core._results import Want

__all__ = ["HostCursor", "TentativeClaims"]


class TentativeClaims(Protocol):
    """What a host scan asks of an attempt (:class:`SchedContext` is one): the
    slots it has claimed per worker index, and whether a bucket fits on top of
    its claims."""

    slots: dict[int, int]

    def fits(self, worker: Worker, slots: int, want: Want) -> bool: ...


@final
class HostCursor:
    """The host scan for one bucket shape over one candidate set, and where it
    starts this session.

    Hosts before ``start`` are too full on committed state for a bucket of
    ``bucket`` tasks wanting ``want``. They stay so until the session ends
    (capacity only shrinks within a session), so no scan visits them again. One
    per (candidates, bucket, want) per session: :meth:`SessionScratch.host_cursor`.
    """

    __slots__ = ("bucket", "start", "want", "workers")

    def __init__(self, workers: list[Worker], bucket: int, want: Want) -> None:
        self.workers = workers
        self.bucket = bucket
        self.want = want
        self.start = 0

    def scan(
        self, claims: TentativeClaims, pos: int, claimed: Container[int] = ()
    ) -> tuple[Worker | None, int]:
        """The core's one host scan. From position ``pos`` (at least ``start``):
        the first host the bucket fits on, by :func:`shortfall` and then on top of
        the attempt's tentative ``claims``, whose index is not in ``claimed``;
        returns it (``None`` when there is none) and the position after it.
        Moves ``start`` past the committed-full hosts it meets while still at
        ``start``. Synchronous, never a cancellation point."""
        found, pos = self.scan_many(claims, pos, 1, claimed)
        return (found[0] if found else None), pos

    def scan_many(
        self, claims: TentativeClaims, pos: int, count: int, claimed: Container[int] = ()
    ) -> tuple[list[Worker], int]:
        """:meth:`scan` ``count`` times in a row, each from where the last one
        stopped: up to ``count`` distinct hosts in scan order (fewer when the
        candidates run out) and the position after the last one looked at. The
        hosts are found on the claims as they were at the call: for a bucket
        loop that claims each host found (the hosts are distinct and a claim
        only touches its own host, so the next scan's answer is the same).
        One call for a plan's hosts saves a call per host (the replays of
        benchmarks/bench_simulate.py place about 100 hosts a job)."""
        workers = self.workers
        bucket = self.bucket
        want = self.want
        end = len(workers)
        # A host absent from claims.slots carries no tentative claim: the
        # committed check is then the whole check.
        tentative = claims.slots
        found: list[Worker] = []
        while pos < end:
            w = workers[pos]
            # shortfall()'s slot clause inline first: it answers most hosts, and
            # saves a call per host visited (about 1% of benchmark B1,
            # benchmarks/bench_alloc.py).
            if w.slots - w.used_slots < bucket or (
                want and shortfall(w, bucket, want) is not None
            ):
                if pos == self.start:
                    self.start = pos + 1
                pos += 1
                continue
            pos += 1
            index = w.index
            if index in claimed:
                continue
            if index not in tentative or claims.fits(w, bucket, want):
                found.append(w)
                if len(found) == count:
                    break
        return found, pos
