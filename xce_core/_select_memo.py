"""Hosts matching each static select, kept across sessions (bounded)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xce_core._model import Worker

__all__ = ["StaticSelectMemo"]


class StaticSelectMemo:
    """Hosts matching each select that reads only static attributes, kept across
    sessions until the workers change (``version``).

    Bounded: it holds at most ``max_refs`` worker references in all (distinct
    selects × matching hosts would otherwise grow without limit under a stream
    of distinct requirements); past that, the least recently used selects go.
    """

    __slots__ = ("_entries", "_refs", "max_refs")

    def __init__(self, max_refs: int = 2_000_000) -> None:
        self.max_refs = max_refs
        # text -> [version, hosts in canonical order, the same as a set or None]
        self._entries: dict[str | None, list[Any]] = {}
        self._refs = 0

    def get(self, text: str | None, version: int) -> list[Worker] | None:
        """The hosts memoised for ``text`` at ``version``, or ``None``."""
        entry = self._entry(text, version)
        return None if entry is None else entry[1]

    def members(self, text: str | None, version: int) -> set[Worker] | None:
        """The hosts memoised for ``text`` at ``version`` as a set (made on
        first use), or ``None``."""
        entry = self._entry(text, version)
        if entry is None:
            return None
        members: set[Worker] | None = entry[2]
        if members is None:
            members = set(entry[1])
            # Counted as the entry's own, then the limit kept (this entry may
            # go too: the caller still gets its set).
            self._entries.pop(text)
            self._refs -= len(entry[1])
            self._shrink(len(members) + len(entry[1]))
            entry[2] = members
            self._entries[text] = entry
            self._refs += len(members) + len(entry[1])
        return members

    def _entry(self, text: str | None, version: int) -> list[Any] | None:
        entry = self._entries.pop(text, None)
        if entry is None:
            return None
        self._entries[text] = entry  # most recently used last
        return entry if entry[0] == version else None

    def put(self, text: str | None, version: int, workers: list[Worker]) -> None:
        """Memoise ``workers`` for ``text``, evicting the least recently used."""
        old = self._entries.pop(text, None)
        if old is not None:
            self._refs -= _entry_refs(old)
        self._shrink(len(workers))
        self._entries[text] = [version, workers, None]
        self._refs += len(workers)

    def _shrink(self, room: int) -> None:
        """Evict the least recently used entries until ``room`` more references fit."""
        entries = self._entries
        while entries and self._refs + room > self.max_refs:
            evicted = entries.pop(next(iter(entries)))
            self._refs -= _entry_refs(evicted)

    @property
    def refs(self) -> int:
        """Worker references held (the measure of its size)."""
        return self._refs

    def __len__(self) -> int:
        return len(self._entries)


def _entry_refs(entry: list[Any]) -> int:
    return len(entry[1]) + (len(entry[2]) if entry[2] is not None else 0)
