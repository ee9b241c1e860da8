"""The one error hierarchy of xce. Not fitting is a result, never an exception."""

from __future__ import annotations

from events import XceError

__all__ = ["PluginError", "ResReqSyntaxError", "SnapshotError", "XceError"]


class ResReqSyntaxError(XceError, ValueError):
    """A resource-requirement string does not parse.

    ``column`` is the 0-based offset in ``text`` where parsing failed and
    ``message`` names what was expected there. The string form quotes ``text``
    whole only when it is short; a long one (rejected for its length, say) is
    quoted around the column, so one bad string cannot bloat a rejection.
    """

    def __init__(self, message: str, text: str, column: int) -> None:
        self.message = message
        self.text = text
        self.column = column
        super().__init__(f"{message} at column {column} of {_excerpt(text, column)}")


_EXCERPT = 80


def _excerpt(text: str, column: int) -> str:
    if len(text) <= 2 * _EXCERPT:
        return repr(text)
    start = max(0, min(column - _EXCERPT // 2, len(text) - _EXCERPT))
    stop = start + _EXCERPT
    return f"{text[start:stop]!r} (characters {start}-{stop} of {len(text)})"


class PluginError(XceError):
    """A plugin could not be registered or found (duplicate or unknown name)."""


class SnapshotError(XceError):
    """A snapshot that cannot be restored: not a snapshot, a format this xce
    does not read, corrupt, or inconsistent. The message says which."""
