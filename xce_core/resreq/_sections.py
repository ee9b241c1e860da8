"""Section bodies of a resource requirement: ``order[]``, ``same[]``, ``rusage[]``
and ``span[]``. :class:`SectionParser` is the base of the requirement parser
in ``_parse`` (the grammar is documented there).

Every loop here is linear in the text it reads (duplicates are found through
sets), and every list, number and count is checked against the parser's
:class:`~xce_core.resreq.ResReqLimits` before it is converted, so ``int()``
never sees more digits than ``max_digits``."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Final, NamedTuple, NoReturn

from xce_core._errors import ResReqSyntaxError
from xce_core.resreq._lex import (
    NAME_RE,
    NUMBER_RE,
    UNIT_RE,
    format_number,
    parse_number,
    shown,
    unit_factor,
)
from xce_core.resreq._limits import ResReqLimits, check_amount
from xce_core.resreq._names import ALIASES, STRING_BUILTINS
from xce_core.resreq._tree import OrderKey, RusageTerm, Span

__all__ = ["NO_MARKS", "SectionParser", "SpanMarks"]

_PER: Final = re.compile(r"/\s*(task|host|job)\b")
_INTEGER: Final = re.compile(r"-?[0-9]+(?![\w.])")
_SPAN_OPTIONS: Final = ("hosts", "ptile", "block", "stripe")
# LSF 10.1's GPU options (LSB_GPU_NEW_SYNTAX=extend): gtile in span[], the
# others in rusage[] as constraints on ngpus_physical.
_GTILE_AT: Final = re.compile(r"(?<![\w'\"])gtile\b")
_GTILE: Final = re.compile(r"gtile\s*=\s*(?:'!'|\"!\"|!|([0-9]+)(?![\w.]))")
_GPU_OPTIONS: Final = ("gmodel", "gmem", "nvlink")
_GPU_TERM: Final = "ngpus_physical"
_GMODEL: Final = re.compile(r"[A-Za-z0-9_][\w.#+-]*")
_ITEM: Final = re.compile(r"[^\s)]+")  # one phase value inside ( )
_PTILE_MAX: Final = re.compile(r"'!'|\"!\"|!")
_MINUTES_PER_UNIT: Final = {"s": 1 / 60, "m": 1.0, "h": 60.0}


class SpanMarks(NamedTuple):
    """Where a span's ptile named ``'!'`` and its first per type/model value,
    for the checks that need the ``same[]`` section too."""

    bang: int | None = None
    by: int | None = None


NO_MARKS: Final = SpanMarks()


class SectionParser:
    """Positions in, positions out: every method takes and returns absolute
    positions in ``text`` and reports errors at a column of it."""

    __slots__ = ("end", "limits", "text")

    def __init__(self, text: str, limits: ResReqLimits) -> None:
        self.text = text
        self.end = len(text)
        self.limits = limits

    def fail(self, message: str, column: int) -> NoReturn:
        raise ResReqSyntaxError(message, self.text, column)

    def skip(self, pos: int, end: int | None = None) -> int:
        end = self.end if end is None else end
        text = self.text
        while pos < end and text[pos].isspace():
            pos += 1
        return pos

    # -- section bodies ----------------------------------------------------------

    def name(self, pos: int, end: int, expected: str) -> tuple[str, int]:
        match = NAME_RE.match(self.text, pos, end)
        if match is None:
            self.fail(f"expected {expected}", pos)
        return match.group(), match.end()

    def number(self, pos: int, end: int, expected: str) -> tuple[float, int]:
        match = NUMBER_RE.match(self.text, pos, end)
        if match is None:
            self.fail(f"expected {expected}", pos)
        return parse_number(self.text, match, self.limits), match.end()

    def integer(self, match: re.Match[str], what: str) -> int:
        """The value of an ``_INTEGER`` match, within ``max_digits``/``max_count``."""
        limits = self.limits
        limits.check_number(self.text, match.start(), match.end())
        value = int(match.group())
        if value > limits.max_count:
            limits.check_count(value, what, self.text, match.start())
        return value

    def expect_equals(self, pos: int, end: int, name: str, section: str) -> int:
        pos = self.skip(pos, end)
        if pos >= end or self.text[pos] != "=":
            self.fail(f"expected '=' after {shown(name)} in {section}[]", pos)
        return self.skip(pos + 1, end)

    def names(self, pos: int, end: int, section: str, reversible: bool) -> list[OrderKey]:
        """``[-]name:[-]name...`` for order[] (load-index aliases resolved:
        ``order[cpu]`` is ``order[r1m]``) and same[]; duplicates are errors."""
        keys: list[OrderKey] = []
        seen: set[str] = set()
        while True:
            pos = self.skip(pos, end)
            reverse = reversible and self.text.startswith("-", pos, end)
            if reverse:
                pos = self.skip(pos + 1, end)
            column = pos
            name, pos = self.name(pos, end, f"a resource name in {section}[]")
            if reversible:
                name = ALIASES.get(name, name)
            if name in seen:
                self.fail(f"duplicate {shown(name)} in {section}[]", column)
            seen.add(name)
            keys.append(OrderKey(name, reverse))
            if len(keys) > self.limits.max_terms:
                self.limits.check_terms(len(keys), f"names in {section}[]", self.text, column)
            pos = self.skip(pos, end)
            if pos == end:
                return keys
            if self.text[pos] != ":":
                self.fail(f"expected ':' or ']' in {section}[]", pos)
            pos += 1

    def order(self, start: int, end: int) -> tuple[OrderKey, ...]:
        return tuple(self.names(start, end, "order", reversible=True))

    def same(self, start: int, end: int) -> tuple[str, ...]:
        return tuple(key.name for key in self.names(start, end, "same", reversible=False))

    def rusage(self, start: int, end: int) -> tuple[tuple[RusageTerm, ...], ...]:
        alternatives: list[tuple[RusageTerm, ...]] = []
        pos = start
        while True:
            column = pos
            terms, pos = self.rusage_alternative(pos, end)
            alternatives.append(terms)
            self.limits.check_terms(
                len(alternatives), "alternatives in rusage[]", self.text, column
            )
            if pos >= end:
                return tuple(alternatives)
            pos += 2  # rusage_alternative stops only at "||" or the end

    def rusage_alternative(self, pos: int, end: int) -> tuple[tuple[RusageTerm, ...], int]:
        text = self.text
        terms: list[RusageTerm] = []
        names: set[str] = set()
        run: list[int] = []  # indexes of the terms the next option applies to
        options: set[str] = set()  # options already given to ``run``
        while True:
            pos = self.skip(pos, end)
            column = pos
            name, pos = self.name(pos, end, "a resource name in rusage[]")
            pos = self.expect_equals(pos, end, name, "rusage")
            if name in ("duration", "decay"):
                if not run:
                    self.fail(f"expected a resource term before {shown(name)}", column)
                if name in options:
                    self.fail(f"duplicate {shown(name)} for the same terms", column)
                options.add(name)
                if text.startswith("(", pos, end):  # per phase: duration=(20 30)
                    values, pos = self.phase_options(name, pos, end, [terms[i] for i in run])
                    for index in run:
                        if name == "duration":
                            terms[index] = replace(terms[index], durations=values)
                        else:
                            terms[index] = replace(terms[index], decays=values)
                else:
                    value, pos = self.rusage_option(name, pos, end)
                    for index in run:
                        term = terms[index]
                        if name == "duration":
                            terms[index] = replace(term, duration=value)
                        else:
                            terms[index] = replace(term, decay=value)
            elif name in _GPU_OPTIONS:
                # LSF's constraints on the GPUs of the run's ngpus_physical term.
                gpu = next((i for i in run if terms[i].name == _GPU_TERM), None)
                if gpu is None:
                    self.fail(
                        f"{shown(name)} constrains {_GPU_TERM}: write it after"
                        f" {_GPU_TERM}=N in the same terms",
                        column,
                    )
                if name in options:
                    self.fail(f"duplicate {shown(name)} for the same terms", column)
                options.add(name)
                option, pos = self.gpu_option(name, pos, end)
                given = dict(terms[gpu].gpu)
                given[name] = option
                ordered = tuple((key, given[key]) for key in _GPU_OPTIONS if key in given)
                terms[gpu] = replace(terms[gpu], gpu=ordered)
            else:
                name = ALIASES.get(name, name)  # rusage[swap=100] reserves swp
                if name in STRING_BUILTINS:
                    # Never an amount (LSF rejects a non-consumable in rusage).
                    self.fail(
                        f"{shown(name)} is a host's string attribute, not a resource"
                        " rusage[] can reserve",
                        column,
                    )
                if name in names:
                    self.fail(f"duplicate resource {shown(name)} in rusage[]", column)
                names.add(name)
                if len(names) > self.limits.max_terms:
                    self.limits.check_terms(len(names), "terms in rusage[]", self.text, column)
                phases: tuple[float, ...] = ()
                if text.startswith("(", pos, end):  # multi-phase: mem=(500 300 200)
                    phases, pos = self.phase_amounts(name, pos, end)
                    amount = phases[0]
                else:
                    amount, pos = self.amount(name, pos, end)
                per = None
                suffix = _PER.match(text, pos, end)
                if suffix is not None:
                    per, pos = suffix.group(1), suffix.end()
                elif pos < end and text[pos] == "/":
                    self.fail("expected /task, /host or /job after the amount", pos)
                if options:  # a resource after options starts a new run
                    run, options = [], set()
                run.append(len(terms))
                terms.append(RusageTerm(name, amount, per=per, phases=phases))
            pos = self.skip(pos, end)
            if pos >= end or text.startswith("||", pos, end):
                return tuple(terms), pos
            if text[pos] == ",":
                run, options = [], set()  # options never reach back across a comma
            elif text[pos] != ":":
                self.fail("expected ':', ',', '||' or ']' in rusage[]", pos)
            pos += 1

    def gpu_option(self, name: str, pos: int, end: int) -> tuple[str, int]:
        """The value of ``gmodel=`` (a model or brand name, as written: LSF's
        ``TeslaV100-SXM2-32GB``), ``gmem=`` (a size, canonical in MB) or
        ``nvlink=`` (``yes``)."""
        if name == "gmem":
            amount, after = self.amount(name, pos, end)
            return format_number(amount), after
        match = _GMODEL.match(self.text, pos, end)
        if name == "nvlink":
            if match is None or match.group() != "yes":
                self.fail("expected nvlink=yes", pos)
        elif match is None:
            self.fail("expected a GPU model or brand name for gmodel", pos)
        return match.group(), match.end()

    def amount(self, name: str, pos: int, end: int) -> tuple[float, int]:
        """A non-negative amount, with an optional size unit (``4GB``: in MB)."""
        column = pos
        amount, pos = self.number(pos, end, f"a non-negative amount for {shown(name)}")
        unit = UNIT_RE.match(self.text, pos, end)
        if unit is not None:
            amount = check_amount(amount * unit_factor(unit.group()), self.text, column)
            pos = unit.end()
        return amount, pos

    def phase_list(self, pos: int, end: int, what: str) -> tuple[list[int], int]:
        """Columns of the whitespace-separated items of ``( ... )`` at ``pos``;
        returns them and the position after ``)``."""
        close = self.text.find(")", pos, end)
        if close < 0:
            self.fail(f"expected ')' to close the {what} phases", pos)
        columns = [m.start() for m in _ITEM.finditer(self.text, pos + 1, close)]
        if not columns:
            self.fail(f"expected at least one {what} in ( )", pos + 1)
        if len(columns) > self.limits.max_terms:
            self.limits.check_terms(
                len(columns), f"{what} phases", self.text, columns[self.limits.max_terms]
            )
        return columns, close + 1

    def phase_amounts(self, name: str, pos: int, end: int) -> tuple[tuple[float, ...], int]:
        """``(500 300 200)``: one amount per phase, never increasing (LSF)."""
        columns, after = self.phase_list(pos, end, "amount")
        amounts: list[float] = []
        for column in columns:
            amount, stop = self.amount(name, column, after - 1)
            if stop < after - 1 and not self.text[stop].isspace():
                self.fail("expected a space between phase amounts", stop)
            if amounts and amount > amounts[-1]:
                self.fail(f"multi-phase amounts for {shown(name)} cannot increase", column)
            amounts.append(amount)
        return tuple(amounts), after

    def phase_options(
        self, name: str, pos: int, end: int, run: list[RusageTerm]
    ) -> tuple[tuple[float, ...], int]:
        """``duration=(20 30)`` / ``decay=(1 0)`` for multi-phase terms: at most one
        per phase (a duration may leave the last phase open)."""
        if not run or any(not term.phases for term in run):
            self.fail(f"a {name} per phase needs multi-phase amounts, like mem=(500 300)", pos)
        columns, after = self.phase_list(pos, end, name)
        values: list[float] = []
        for column in columns:
            value, stop = self.rusage_option(name, column, after - 1)
            if stop < after - 1 and not self.text[stop].isspace():
                self.fail(f"expected a space between {name} values", stop)
            values.append(value)
        fewest = min(len(term.phases) for term in run)
        most = max(len(term.phases) for term in run)
        if len(values) > fewest:
            self.fail(f"{len(values)} {name} values for {fewest} phases", pos)
        if name == "duration" and len(values) < most - 1:
            self.fail(f"every phase but the last needs a duration ({most - 1} wanted)", pos)
        return tuple(values), after

    def rusage_option(self, name: str, pos: int, end: int) -> tuple[float, int]:
        """The value of ``duration=`` (in minutes) or ``decay=`` starting at ``pos``."""
        if name == "duration":
            value, after = self.number(pos, end, "a non-negative duration")
            if after < end and self.text[after] in _MINUTES_PER_UNIT:
                minutes = value * _MINUTES_PER_UNIT[self.text[after]]
                return check_amount(minutes, self.text, pos), after + 1
            return value, after
        value, after = self.number(pos, end, "decay=0 or decay=1")
        if value not in (0, 1):
            self.fail("expected decay=0 or decay=1", pos)
        return value, after

    def span(self, start: int, end: int) -> tuple[Span | None, SpanMarks, str | None]:
        """The span (``None`` for ``span[gtile=...]`` alone), for a ptile where
        ``'!'`` and type/model values are, and the gtile (``"!"``, a number as
        text, or ``None``)."""
        gtile, start, end = self.gtile(start, end)
        if gtile is not None and self.skip(start, end) == end:
            return None, NO_MARKS, gtile
        marks = NO_MARKS
        pos = self.skip(start, end)
        column = pos
        name, pos = self.name(pos, end, "hosts=, ptile=, block=, stripe or gtile= in span[]")
        if name not in _SPAN_OPTIONS:
            self.fail(
                f"unknown span option {shown(name)}; expected hosts, ptile, block, stripe"
                " or gtile",
                column,
            )
        pos = self.skip(pos, end)
        if name == "stripe" and (pos >= end or self.text[pos] != "="):
            span = Span(stripe=True)
        else:
            pos = self.expect_equals(pos, end, name, "span")
            if name == "ptile":
                span, marks, pos = self.ptile(pos, end)
            else:
                match = _INTEGER.match(self.text, pos, end)
                value = self.integer(match, name) if match is not None else 0
                if match is None or value == 0 or value < -1 or (name != "hosts" and value < 0):
                    wanted = (
                        "a positive integer or -1" if name == "hosts" else "a positive integer"
                    )
                    self.fail(f"expected {wanted} for {name}", pos)
                if name == "hosts" and value != 1 and value != -1:
                    # LSF documents these two only; any other count was once
                    # accepted and then ignored, placing tasks on any hosts.
                    self.fail(
                        f"span[hosts={value}] is not supported: hosts takes 1 (every task"
                        " on one host) or -1 (no constraint); span[ptile=N] sets tasks per host",
                        pos,
                    )
                if name == "hosts":
                    span = Span(hosts=value)
                elif name == "block":
                    span = Span(block=value)
                else:
                    span = Span(stripe=True, stripe_max=value)
                pos = self.skip(match.end(), end)
        if pos < end:
            if self.text[pos] in ":,":
                again = self.skip(pos + 1, end)
                other = NAME_RE.match(self.text, again, end)
                if other is not None and other.group() in _SPAN_OPTIONS:
                    if other.group() == name:
                        self.fail(f"duplicate span option {shown(name)}", again)
                    self.fail(
                        f"span[] takes one option, not both {name} and {other.group()}", again
                    )
            self.fail("expected ']' to end span[]", pos)
        return span, marks, gtile

    def gtile(self, start: int, end: int) -> tuple[str | None, int, int]:
        """LSF's ``gtile=N`` / ``gtile='!'`` (GPUs per socket) in span[], alone or
        beside one other option (``span[ptile=2:gtile=1]``, either order): its
        value (``"!"`` or the number) and the range left for the other option."""
        text = self.text
        found = _GTILE_AT.search(text, start, end)
        if found is None:
            return None, start, end
        at = found.start()
        match = _GTILE.match(text, at, end)
        if match is None:
            value_at = self.skip(found.end(), end)
            if text.startswith("=", value_at, end):
                value_at = self.skip(value_at + 1, end)
            self.fail("expected gtile=N (a positive integer) or gtile='!'", value_at)
        value = "!"
        number = _INTEGER.match(text, match.start(1), end) if match.group(1) else None
        if number is not None:
            count = self.integer(number, "gtile")
            if count < 1:
                self.fail("expected a positive integer for gtile", match.start(1))
            value = str(count)
        after = self.skip(match.end(), end)
        again = _GTILE_AT.search(text, after, end)
        if again is not None:
            self.fail("duplicate span option 'gtile'", again.start())
        before = at
        while before > start and text[before - 1].isspace():
            before -= 1
        if before > start:  # span[ptile=2:gtile=1]
            if text[before - 1] not in ":,":
                self.fail("expected ':' before gtile in span[]", at)
            if after < end:
                self.fail("expected ']' to end span[]", after)
            return value, start, before - 1
        if after == end:  # span[gtile=1]
            return value, end, end
        if text[after] not in ":,":
            self.fail("expected ':' or ']' after gtile in span[]", after)
        return value, after + 1, end

    def ptile(self, pos: int, end: int) -> tuple[Span, SpanMarks, int]:
        """``ptile=`` values: ``P``, ``'!'``, and ``type_or_model:P`` items, comma
        separated (``ptile='!',HP:8,LINUX:2``); at most one default."""
        text = self.text
        default: int | None = None
        bang: int | None = None
        by: list[tuple[str, int]] = []
        by_names: set[str] = set()
        first_by: int | None = None
        count = 0
        while True:
            column = pos
            count += 1
            if count > self.limits.max_terms:
                self.limits.check_terms(count, "ptile values", text, column)
            mark = _PTILE_MAX.match(text, pos, end)
            if mark is not None:
                if default is not None or bang is not None:
                    self.fail("ptile takes one default value", column)
                bang, pos = column, mark.end()
            elif (match := _INTEGER.match(text, pos, end)) is not None:
                if default is not None or bang is not None:
                    self.fail("ptile takes one default value", column)
                default = self.integer(match, "ptile")
                if default < 1:
                    self.fail("expected a positive integer for ptile", column)
                pos = match.end()
            else:
                name, pos = self.name(pos, end, "a positive integer, '!' or type:N for ptile")
                if name in by_names:
                    self.fail(f"duplicate ptile value for {shown(name)}", column)
                by_names.add(name)
                first_by = column if first_by is None else first_by
                pos = self.skip(pos, end)
                if not text.startswith(":", pos, end):
                    self.fail(f"expected ':' and a slot count after {shown(name)} in ptile", pos)
                pos = self.skip(pos + 1, end)
                match = _INTEGER.match(text, pos, end)
                if match is None or self.integer(match, f"ptile for {shown(name)}") < 1:
                    self.fail(f"expected a positive integer for {shown(name)} in ptile", pos)
                by.append((name, int(match.group())))
                pos = match.end()
            pos = self.skip(pos, end)
            if pos < end and text[pos] == ",":
                after = self.skip(pos + 1, end)
                option = NAME_RE.match(text, after, end)
                if option is None or option.group() not in _SPAN_OPTIONS:
                    pos = after
                    continue
                # Another span option follows: span() reports it.
            span = Span(ptile=default, ptile_max=bang is not None, ptile_by=tuple(by))
            marks = NO_MARKS if bang is None and first_by is None else SpanMarks(bang, first_by)
            return span, marks, pos
