"""Fixtures of the CLI tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.xce_process import Consumer


@pytest.fixture
def consumer_factory() -> Iterator[list[Consumer]]:
    started: list[Consumer] = []
    yield started
    for consumer in started:
        consumer.close()
