"""Test configuration: every async test runs on uvloop by default.

Set ``XCE_TEST_LOOP=asyncio`` to run on the standard asyncio loop instead, or
``XCE_TEST_LOOP=both`` to run every async test on each loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

import pytest


def _factories() -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    choice = os.environ.get("XCE_TEST_LOOP", "uvloop")
    out: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {}
    if choice in ("uvloop", "both"):
        try:
            import uvloop
        except ImportError:  # Windows or a platform without uvloop wheels
            pass
        else:
            out["uvloop"] = uvloop.new_event_loop
    if choice in ("asyncio", "both") or not out:
        out["asyncio"] = asyncio.new_event_loop
    return out


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], Any]]:
    return _factories()
