"""Session-scoped cache of requirements proven unsatisfiable (Req 7).

Sound because within a session capacity only shrinks: events are applied
between sessions, never during one, so what failed once in a session fails
again for the same fingerprint until the session ends.
"""

from __future__ import annotations

from xce_core._context import PendReason

__all__ = ["UnsatisfiableCache"]


class UnsatisfiableCache:
    """Fingerprint → the original miss's pend reason. O(1) lookup.

    ``enabled=False`` turns every lookup into a miss and every insert into a no-op
    (for benchmarks and for checking that caching never changes a decision).
    """

    __slots__ = ("_entries", "enabled", "hits", "misses")

    def __init__(self, *, enabled: bool = True) -> None:
        self._entries: dict[int, PendReason] = {}
        self.enabled = enabled
        self.hits = 0
        self.misses = 0

    def lookup(self, fingerprint: int) -> PendReason | None:
        """The reason cached for ``fingerprint`` this session, or ``None``."""
        reason = self._entries.get(fingerprint)
        if reason is None:
            self.misses += 1
        else:
            self.hits += 1
        return reason

    def insert(self, fingerprint: int, reason: PendReason) -> None:
        """Record that ``fingerprint`` cannot be satisfied for the rest of the session."""
        if self.enabled:
            self._entries.setdefault(fingerprint, reason)

    def clear(self) -> None:
        """Forget everything (called at session begin, before any task starts)."""
        self._entries.clear()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, fingerprint: int) -> bool:
        return fingerprint in self._entries
