"""The one error hierarchy of xce. Not fitting is a result, never an exception."""

from __future__ import annotations

from events import XceError

__all__ = ["PluginError", "ResReqSyntaxError", "XceError"]


class ResReqSyntaxError(XceError, ValueError):
    """A resource-requirement string does not parse.

    ``column`` is the 0-based offset in ``text`` where parsing failed and
    ``message`` names what was expected there.
    """

    def __init__(self, message: str, text: str, column: int) -> None:
        self.message = message
        self.text = text
        self.column = column
        super().__init__(f"{message} at column {column} of {text!r}")


class PluginError(XceError):
    """A plugin could not be registered or found (duplicate or unknown name)."""
