"""``--policy FILE``: a TOML policy file for ``xce run`` and ``xce simulate``.

It holds the cluster's resource allocation limits (``[[limits]]`` tables, the
fields of the ``limits_config`` event's ``Limit``), queues (``[[queues]]``, the
fields of ``queue_config``: priority, picker, their own share tree, the
``ujob_limit``/``qjob_limit``/``hjob_limit`` shorthands), the cluster-wide share tree
(``[fairshare]``, a ``fairshare_config``) and the fairshare factors
(``[fairshare_params]``, :class:`xce_core.FairshareParams`), and the user
groups limits may name (``[user_groups]``)::

    [[limits]]
    name = "user_slots"
    per_user = ["all"]
    slots = 64

    [[queues]]
    name = "normal"
    priority = 30
    picker = "fairshare"
    ujob_limit = 32

    [fairshare]
    shares = [["eng", 2], ["default", 1]]
    [fairshare.groups.eng]
    members = ["ann", "bob"]

An unknown key is an error (a misspelt consumer must not become a limit that
limits nothing), as is anything the core refuses in those events.

:func:`unknown_plugin` checks the plugin names a configuration asks for; it
lives here, not with ``xce run``, so that ``xce simulate`` and ``xce sweep``
do not import the service's modules for it (about 2.5 ms of their start-up).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from events import FairshareConfig, InputEvent, Limit, LimitsConfig, QueueConfig, ShareTree
from xce_core import BACKFILL_MODES, FairshareParams, Registry, SchedulerConfig, SchedulerCore

__all__ = ["Policy", "policy_options", "read_policy", "unknown_plugin"]

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
            help="TOML policy file: resource allocation limits ([[limits]]), queues "
            "([[queues]]: priority, picker, share tree, ujob_limit, qjob_limit, hjob_limit), the "
            "cluster's share tree ([fairshare]) and fairshare factors ([fairshare_params]), "
            "set before the first event.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class _Policy(msgspec.Struct, forbid_unknown_fields=True):
    limits: list[Limit] = []
    user_groups: dict[str, list[str]] = {}
    # Checked against QueueConfig and FairshareParams themselves (_strict), so
    # their fields and defaults are written once.
    queues: list[dict[str, Any]] = []
    fairshare: ShareTree | None = None
    fairshare_params: dict[str, float] | None = None


def _strict(table: dict[str, Any], fields: Iterable[str], where: str) -> None:
    """A misspelt key must not become a setting that sets nothing."""
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r}")


# A frozen Struct, not a dataclass: the same record, defined in a fraction
# of the start-up time (see _simulate._Options).
class Policy(msgspec.Struct, frozen=True):
    """A policy file's content: ``events`` to apply before the first input
    event (the share tree, the queues, then the limits), and the fairshare
    factors (``None``: the defaults)."""

    events: list[InputEvent]
    fairshare_params: FairshareParams | None

    @property
    def limits(self) -> list[Limit]:
        """The ``[[limits]]`` tables."""
        return [limit for e in self.events if isinstance(e, LimitsConfig) for limit in e.limits]

    @property
    def setup(self) -> list[InputEvent]:
        """The events but the limits (queues and the share tree)."""
        return [e for e in self.events if not isinstance(e, LimitsConfig)]


def read_policy(path: Path) -> Policy:
    """The policy file at ``path``; a :class:`click.BadParameter` naming the file
    and what is wrong otherwise."""
    try:
        policy = msgspec.toml.decode(path.read_bytes(), type=_Policy)
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror or exc}", param_hint="--policy") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--policy") from None
    events: list[InputEvent] = []
    if policy.fairshare is not None:
        events.append(FairshareConfig(tree=policy.fairshare))
    params = None
    try:
        for i, table in enumerate(policy.queues):
            _strict(table, QueueConfig.__struct_fields__, f"queues[{i}]")
            try:
                events.append(msgspec.convert(table, QueueConfig))
            except msgspec.ValidationError as exc:
                raise ValueError(f"queues[{i}]: {exc}") from None
        if policy.limits or policy.user_groups:
            events.append(LimitsConfig(limits=policy.limits, user_groups=policy.user_groups))
        if policy.fairshare_params is not None:
            table = policy.fairshare_params
            _strict(table, FairshareParams.__dataclass_fields__, "fairshare_params")
            params = FairshareParams(**table)
        # What the core itself refuses (a limit without a cap, a share tree
        # naming an unknown group, an out-of-range number, say), found now on
        # a scratch core rather than when the replay or the stream has begun.
        check = SchedulerCore()
        for event in events:
            # Through the codec, so field bounds are checked as on the wire.
            check.apply(_event_decoder().decode(_encoder.encode(event)))
    except (ValueError, msgspec.ValidationError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--policy") from None
    for decision in check.take_decisions():
        error = getattr(decision, "error", decision)
        raise click.BadParameter(f"{path}: {error}", param_hint="--policy")
    return Policy(events, params)


_encoder = msgspec.json.Encoder()


@functools.cache
def _event_decoder() -> msgspec.json.Decoder[InputEvent]:
    # Built for the first policy file, not at import: resolving the events'
    # annotations was about 2 ms of every `xce simulate`, with or without --policy.
    return msgspec.json.Decoder(InputEvent)


def unknown_plugin(registry: Registry, config: SchedulerConfig) -> tuple[str, str] | None:
    """The first plugin name in ``config`` that ``registry`` lacks, as ``(option,
    message)`` (``("--parallel-allocator", "unknown allocator 'x' (registered: ...)")``),
    or ``None`` when every name is registered. Shared by ``xce run`` and ``xce simulate``
    so both name the offending option and list what is installed."""
    checks = (
        ("--picker", "picker", config.picker, registry.picker_names),
        (
            "--sequential-allocator",
            "allocator",
            config.sequential_allocator,
            registry.allocator_names,
        ),
        ("--parallel-allocator", "allocator", config.parallel_allocator, registry.allocator_names),
    )
    for option, kind, name, known in checks:
        if name not in known:
            return option, f"unknown {kind} {name!r} (registered: {', '.join(known) or 'none'})"
    return None
