"""The ``--nats`` options of ``xce run`` and how they build the service.

The NATS client is an optional extra (``pip install 'xce[nats]'``): it is
imported only when ``--nats`` is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from xce_core.cli._types import FloatRange

__all__ = ["NATS_ONLY", "nats_options"]

F = TypeVar("F", bound=Callable[..., object])

NATS_ONLY = (
    "stream",
    "subject",
    "decisions_stream",
    "decisions_subject",
    "durable",
    "lease_ttl",
    "duplicate_window",
    "batch",
)
"""Parameters that mean something with ``--nats`` only."""


def nats_options(command: F) -> F:
    """``--nats URL`` and the names and pacing of the JetStream service."""
    seconds = FloatRange(min=0, min_open=True)
    options: list[Callable[[Any], Any]] = [
        click.option(
            "--nats",
            "nats_url",
            metavar="URL",
            help="Serve through NATS JetStream (nats://HOST:PORT): input from a durable "
            "consumer, decisions to a stream, snapshots, lease for standbys. Needs the "
            "'nats' extra.",
        ),
        click.option("--stream", default="XCE_EVENTS", show_default=True, help="Input stream."),
        click.option("--subject", default="xce.events", show_default=True, help="Input subject."),
        click.option(
            "--decisions-stream",
            default="XCE_DECISIONS",
            show_default=True,
            help="Decisions stream (written by xce only).",
        ),
        click.option(
            "--decisions-subject",
            default="xce.decisions",
            show_default=True,
            help="Decisions subject.",
        ),
        click.option(
            "--durable",
            default="xce",
            show_default=True,
            metavar="NAME",
            help="Durable consumer; also the lease key and the snapshot's name.",
        ),
        click.option(
            "--lease-ttl",
            type=seconds,
            default=5.0,
            show_default=True,
            metavar="S",
            help="The lease expires S seconds after its holder's last refresh.",
        ),
        click.option(
            "--duplicate-window",
            type=seconds,
            default=300.0,
            show_default=True,
            metavar="S",
            help="Deduplication window of a decisions stream xce creates.",
        ),
        click.option(
            "--fetch-batch",
            "batch",
            type=click.IntRange(min=1, max=100_000),
            default=1000,
            show_default=True,
            metavar="N",
            help="Input messages asked for per pull request.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command
