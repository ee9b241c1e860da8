"""Fixtures of the CLI tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.nats_server import NatsServer
from tests.cli.xce_process import Consumer


@pytest.fixture
def consumer_factory() -> Iterator[list[Consumer]]:
    started: list[Consumer] = []
    yield started
    for consumer in started:
        consumer.close()


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A real ``nats-server -js`` on 127.0.0.1 with a store in ``tmp_path``."""
    server = NatsServer(tmp_path / "nats")
    server.start()
    yield server
    server.stop()
