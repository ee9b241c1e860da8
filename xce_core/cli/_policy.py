"""``--policy FILE``: a TOML policy file for ``xce run`` and ``xce simulate``.

It holds the cluster's resource allocation limits, one ``[[limits]]`` table
each, with the fields of the ``limits_config`` event's ``Limit``::

    [[limits]]
    name = "user_slots"
    per_user = ["all"]
    slots = 64

An unknown key is an error (a misspelt consumer must not become a limit that
limits nothing), as is anything the core refuses in a ``limits_config``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
import msgspec

from events import Limit, LimitsConfig
from xce_core import BACKFILL_MODES, SchedulerConfig, SchedulerCore

__all__ = ["policy_options", "read_policy"]

F = TypeVar("F", bound=Callable[..., object])


def policy_options(command: F) -> F:
    """The policy options ``xce run`` and ``xce simulate`` share: ``--backfill``,
    ``--backfill-depth`` and ``--policy``."""
    options = [
        click.option(
            "--backfill",
            type=click.Choice(BACKFILL_MODES),
            default="none",
            show_default=True,
            help="easy: the first job that cannot start gets a reservation from the running "
            "jobs' run limits, and later jobs start only if they cannot delay it; "
            "conservative: every blocked job gets one (job_reserved says when and where).",
        ),
        click.option(
            "--backfill-depth",
            type=click.IntRange(min=1),
            default=SchedulerConfig().backfill_depth,
            show_default=True,
            help="conservative: how many blocked jobs get a reservation per session.",
        ),
        click.option(
            "--policy",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="TOML policy file: resource allocation limits ([[limits]] tables), "
            "set before the first event.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class _Policy(msgspec.Struct, forbid_unknown_fields=True):
    limits: list[Limit] = []


def read_policy(path: Path) -> LimitsConfig:
    """The ``limits_config`` event of the policy file at ``path``; a
    :class:`click.BadParameter` naming the file and what is wrong otherwise."""
    try:
        policy = msgspec.toml.decode(path.read_bytes(), type=_Policy)
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror or exc}", param_hint="--policy") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--policy") from None
    event = LimitsConfig(limits=policy.limits)
    # What the core itself refuses (a limit without a cap, say), found now on a
    # scratch core rather than when the replay or the stream has begun.
    check = SchedulerCore()
    check.apply(event)
    for decision in check.take_decisions():
        error = getattr(decision, "error", decision)
        raise click.BadParameter(f"{path}: {error}", param_hint="--policy")
    return event
