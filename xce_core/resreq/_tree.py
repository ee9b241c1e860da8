"""The resource-requirement tree (PRIMARY, COMPOUND, ALTERNATIVE).

These are immutable value objects: equal text parses to equal trees, and
``str(tree)`` is a canonical form that parses back to an equal tree. The parser
lives in ``_parse``; select expressions are compiled in ``_select``. The
printer (:func:`format_resreq`) lives here, beside the types it prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import groupby
from typing import Protocol, TypeAlias

from xce_core.resreq._lex import format_number

__all__ = [
    "Alternative",
    "Compound",
    "HostValues",
    "OrderKey",
    "Primary",
    "ResReq",
    "RusageTerm",
    "SelectExpr",
    "Span",
    "Value",
    "format_resreq",
]

Value: TypeAlias = str | float | int | bool


class HostValues(Protocol):
    """What a select expression reads: ``get(name)`` is ``None`` when the host lacks it."""

    def get(self, name: str, /) -> Value | None: ...


@dataclass(frozen=True, eq=False, slots=True)
class SelectExpr:
    """A compiled select expression, shared by every requirement with the same text.

    ``text`` is the canonical form; equality and hashing use it. ``names`` are the
    identifiers the expression reads (``defined(x)`` counts as reading ``x``);
    ``resources`` those of them read as resources, not as bare words.
    Calling it on a host's values returns whether the host qualifies; it never
    raises for a host that lacks a name (see ``_select`` for the exact meaning).
    """

    text: str
    names: frozenset[str]
    evaluate: Callable[[HostValues], bool] = field(repr=False)
    # The names read as resources: ``names`` but the bare words right of a
    # comparison (``HP`` in ``type==HP``), which read as text when no host
    # defines them. For pend reasons (which names no host defines).
    resources: frozenset[str] = field(default=frozenset(), repr=False)

    def __call__(self, host: HostValues) -> bool:
        return self.evaluate(host)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SelectExpr) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class RusageTerm:
    """``name=amount[/task|/host|/job][:duration=D][:decay=X]``.

    Without a suffix a host consumable is taken per task and a shared resource
    per job. ``per`` records LSF's explicit reservation method: ``"task"``,
    ``"host"`` (once on every host of the allocation) or ``"job"`` (once for the
    whole job). ``duration`` (minutes) and ``decay`` are carried, not yet acted on.
    ``gpu`` holds LSF's GPU constraints on an ``ngpus_physical`` term
    (``ngpus_physical=2:gmodel=TeslaV100:gmem=4096:nvlink=yes``) as
    ``(option, value)`` pairs in the order ``gmodel``, ``gmem`` (MB), ``nvlink``:
    carried, not acted on.

    A multi-phase reservation (LSF: ``mem=(500 300 200):duration=(20 30):decay=(1 0)``)
    keeps every phase's amount in ``phases``, non-increasing, and the per-phase
    ``durations``/``decays`` as written; ``amount`` is the first phase, which is
    what the job holds (the later, smaller phases are carried like ``duration``).
    """

    name: str
    amount: float
    duration: float | None = None
    decay: float | None = None
    per: str | None = None
    phases: tuple[float, ...] = ()
    durations: tuple[float, ...] = ()
    decays: tuple[float, ...] = ()
    gpu: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class OrderKey:
    """One ``order[]`` key; ``reverse`` is set by a leading ``-``."""

    name: str
    reverse: bool = False


@dataclass(frozen=True, slots=True)
class Span:
    """``span[hosts=1]`` (all tasks on one host), ``span[ptile=...]`` (tasks per
    host), ``span[block=B]`` or ``span[stripe[=M]]``: one option per span.

    ``ptile`` is the plain value (``ptile=4``). LSF's other forms:
    ``ptile_max`` is ``ptile='!'`` (each host's own slot count, LSF's MXJ), and
    ``ptile_by`` the values for hosts of a type or model
    (``ptile='!',HP:8,LINUX:2``), tried before the default. :meth:`per_host`
    resolves them for one host.
    """

    hosts: int | None = None
    ptile: int | None = None
    ptile_max: bool = False
    ptile_by: tuple[tuple[str, int], ...] = ()
    # span[block=B]: tasks in blocks of B, as many blocks per host as fit, each
    # host considered once, in candidate order (the remainder of tasks not a
    # multiple of B goes on one more host).
    block: int | None = None
    # span[stripe] / span[stripe=M]: tasks spread as evenly as the hosts' free
    # capacity allows, at most M per host.
    stripe: bool = False
    stripe_max: int | None = None

    @property
    def varies(self) -> bool:
        """Whether the tasks per host depend on the host (``'!'`` or type/model values)."""
        return self.ptile_max or bool(self.ptile_by)

    def per_host(self, host: HostValues) -> int | None:
        """Tasks per host on ``host``: its type's or model's value, else the
        default (``'!'``: the host's ``maxslots``); ``None`` when nothing applies."""
        if self.ptile_by:
            kind = (host.get("type"), host.get("model"))
            for name, value in self.ptile_by:
                if name in kind:
                    return value
        if self.ptile_max:
            slots = host.get("maxslots")
            return int(slots) if isinstance(slots, int | float) and slots >= 1 else None
        return self.ptile


@dataclass(frozen=True, slots=True)
class Primary:
    """One simple requirement.

    ``rusage`` is a tuple of alternatives, each a tuple of terms (``a=1||b=1``
    gives two alternatives; plain ``rusage[mem=1:tmp=2]`` gives one). ``count`` is
    the task count of a compound part (``N*{...}``), ``None`` for a top-level
    primary (the job's ``min_tasks``/``max_tasks`` apply) or for a compound's last
    part written without a count (it takes the job's remaining tasks).
    """

    select: SelectExpr | None = None
    order: tuple[OrderKey, ...] = ()
    rusage: tuple[tuple[RusageTerm, ...], ...] = ()
    span: Span | None = None
    same: tuple[str, ...] = ()
    affinity: str | None = None
    count: int | None = None
    cu: str | None = None
    # order[!...]: LSF re-sorts the candidates before each job; carried (xce
    # sorts once per session, as LSF does without '!').
    order_resort: bool = False
    # span[gtile=N] / span[gtile='!'] (LSF 10.1 GPUs per socket, ``"!"`` or the
    # number as text): carried, not acted on (xce models no sockets).
    gtile: str | None = None

    def __str__(self) -> str:
        return format_resreq(self)


@dataclass(frozen=True, slots=True)
class Compound:
    """``N*{...} + M*{...}``: every part must allocate, or none does."""

    parts: tuple[Primary, ...]

    def __str__(self) -> str:
        return format_resreq(self)


@dataclass(frozen=True, slots=True)
class Alternative:
    """``{...} || {...}``: the first option that fully allocates wins."""

    options: tuple[Primary | Compound, ...]

    def __str__(self) -> str:
        return format_resreq(self)


ResReq: TypeAlias = Primary | Compound | Alternative


# -- formatting ---------------------------------------------------------------------


def format_resreq(requirement: ResReq) -> str:
    """The canonical text of a tree (see the module docstring); pure, never raises
    for a tree ``parse_resreq`` can produce. ``Primary.count`` is printed only
    for the parts of a compound."""
    if isinstance(requirement, Primary):
        return _format_primary(requirement)
    if isinstance(requirement, Compound):
        return " + ".join(_format_part(part) for part in requirement.parts)
    return " || ".join("{" + format_resreq(option) + "}" for option in requirement.options)


def _format_part(part: Primary) -> str:
    body = "{" + _format_primary(part) + "}"
    return body if part.count is None else f"{part.count}*{body}"


def _format_primary(primary: Primary) -> str:
    sections: list[str] = []
    if primary.select is not None:
        sections.append(f"select[{primary.select.text}]")
    if primary.order:
        keys = ":".join(("-" if key.reverse else "") + key.name for key in primary.order)
        sections.append(f"order[{'!' if primary.order_resort else ''}{keys}]")
    if primary.rusage:
        sections.append("rusage[" + "||".join(map(_format_rusage, primary.rusage)) + "]")
    if primary.span is not None or primary.gtile is not None:
        options = [] if primary.span is None else [_format_span(primary.span)]
        if primary.gtile is not None:
            options.append("gtile=" + ("'!'" if primary.gtile == "!" else primary.gtile))
        sections.append("span[" + ":".join(options) + "]")
    if primary.same:
        sections.append("same[" + ":".join(primary.same) + "]")
    if primary.affinity is not None:
        sections.append(f"affinity[{primary.affinity}]")
    if primary.cu is not None:
        sections.append(f"cu[{primary.cu}]")
    return " ".join(sections)


def _format_span(span: Span) -> str:
    if span.hosts is not None:
        return f"hosts={span.hosts}"
    if span.block is not None:
        return f"block={span.block}"
    if span.stripe:
        return "stripe" if span.stripe_max is None else f"stripe={span.stripe_max}"
    values = ["'!'"] if span.ptile_max else [] if span.ptile is None else [str(span.ptile)]
    values += [f"{name}:{value}" for name, value in span.ptile_by]
    return "ptile=" + ",".join(values)


def _format_rusage(terms: tuple[RusageTerm, ...]) -> str:
    runs = []
    for (duration, decay, durations, decays, gpu), run in groupby(
        terms,
        key=lambda term: (term.duration, term.decay, term.durations, term.decays, term.gpu),
    ):
        text = ":".join(map(_format_term, run))
        for option, value in gpu:
            text += f":{option}={value}"
        if duration is not None:
            text += f":duration={format_number(duration)}"
        if durations:
            text += ":duration=(" + " ".join(map(format_number, durations)) + ")"
        if decay is not None:
            text += f":decay={format_number(decay)}"
        if decays:
            text += ":decay=(" + " ".join(map(format_number, decays)) + ")"
        runs.append(text)
    return ",".join(runs)


def _format_term(term: RusageTerm) -> str:
    if term.phases:
        amount = "(" + " ".join(map(format_number, term.phases)) + ")"
    else:
        amount = format_number(term.amount)
    return f"{term.name}={amount}" + (f"/{term.per}" if term.per else "")
