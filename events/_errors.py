"""Root of xce's error hierarchy (here so that ``events`` depends on nothing of ours)."""

from __future__ import annotations

__all__ = ["EventDecodeError", "XceError"]


class XceError(Exception):
    """Root of every error xce raises on purpose."""


class EventDecodeError(XceError, ValueError):
    """An input stream could not be decoded (used by ``--strict`` consumers)."""
