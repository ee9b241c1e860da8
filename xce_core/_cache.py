"""Session-scoped cache of requirements proven unsatisfiable (Req 7).

Sound because within a session capacity only shrinks: events are applied
between sessions, never during one, so what failed once in a session fails
again for the same fingerprint until the session ends.
"""

from __future__ import annotations

from xce_core._results import PendReason

__all__ = ["UnsatisfiableCache"]


class UnsatisfiableCache:
    """Fingerprint → the original miss's pend reason. O(1) lookup.

    ``entries`` is that mapping itself (read it, do not change it); the core's
    hot loops read it directly. ``enabled=False`` turns every insert into a
    no-op, so every lookup misses (for benchmarks and for checking that caching
    never changes a decision). Hits are counted per session in
    :class:`SessionStats`.
    """

    __slots__ = ("enabled", "entries")

    def __init__(self, *, enabled: bool = True) -> None:
        self.entries: dict[int, PendReason] = {}
        self.enabled = enabled

    def lookup(self, fingerprint: int) -> PendReason | None:
        """The reason cached for ``fingerprint`` this session, or ``None``."""
        return self.entries.get(fingerprint)

    def insert(self, fingerprint: int, reason: PendReason) -> None:
        """Record that ``fingerprint`` cannot be satisfied for the rest of the session."""
        if self.enabled:
            self.entries.setdefault(fingerprint, reason)

    def clear(self) -> None:
        """Forget everything (called at session begin, before any task starts)."""
        self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, fingerprint: int) -> bool:
        return fingerprint in self.entries
