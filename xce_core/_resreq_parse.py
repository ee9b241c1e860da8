"""Parse and format LSF-style resource-requirement strings (``bsub -R``).

Grammar (whitespace is allowed between all pieces)::

    resreq      := "" | primary | compound | alternative
    primary     := [bare-select] section*        each section at most once
    section     := select[...] | order[...] | rusage[...] | span[...]
                 | same[...] | affinity[...]
    compound    := N*{primary} (+ N*{primary})* [+ {primary}]
    alternative := {option} (|| {option})*
    option      := primary | compound

* A leading bare select (``type==X86_64 order[mem]``) is the select section; it
  must come first, and ``select[...]`` after it is a duplicate.
* ``order[r15s:-pg]``: keys separated by ``:``, ``-`` reverses one. A leading
  ``!`` (LSF: re-sort before each job) is kept as ``order_resort``.
* ``rusage[mem=100:swp=50:duration=1h, lic=1||lic2=1]``: ``||`` separates
  alternatives; ``:`` and ``,`` both separate terms of one alternative.
  ``duration=`` and ``decay=`` are options, not resources: as in LSF they apply
  to every term written since the previous option in the same ``,``-group
  (``mem=20:swp=50:duration=1h`` reserves both for an hour). A duration is in
  minutes, or seconds/minutes/hours with an ``s``/``m``/``h`` suffix; it is
  stored in minutes. ``decay`` is 0 or 1. Amounts are non-negative numbers; a
  resource may appear once per alternative.
* Multi-phase rusage: ``mem=(500 300 200):duration=(20 30):decay=(1 0)``, amounts
  never increasing, a duration for every phase but (optionally) the last, at
  most one decay per phase; list-valued options need multi-phase terms.
* ``span[hosts=1]`` (``hosts`` is a positive integer, or -1 meaning no
  constraint, stored as given) or ``span[ptile=...]``, not both. A ptile is a
  positive integer, ``'!'`` (each host's slot count, LSF's MXJ), and/or values
  for host types or models: ``span[ptile='!',HP:8,LINUX:2]``. Also
  ``span[block=B]`` and ``span[stripe]`` / ``span[stripe=M]`` (LSF 10.1).
* ``same[type:model]``: resource names. ``affinity[...]`` and ``cu[...]``
  (LSF compute units): kept as the stripped raw text, carried, not acted on;
  brackets inside affinity must balance.
* An rusage amount may carry LSF's reservation method: ``mem=100/task``,
  ``mem=100/host``, ``lic=1/job``.
* Numbers in select and rusage amounts may carry LSF's size units, ``KB``/``K``
  to ``ZB``/``Z`` (any case): sizes are in MB, so ``mem=4GB`` is ``mem=4096``
  and ``mem>512K`` is ``mem>0.5``. The canonical form prints MB.
* Compound: every part but the last needs a positive count ``N*``; a compound
  of one part needs one too (``{...}`` alone is an alternative).
* Alternative: any top-level ``{...}`` starts one, so ``{select[a]}`` is an
  alternative of one option.
* Empty (or whitespace-only) text is ``Primary()``: no constraints. Every
  section that is present must be non-empty.

Errors are ResReqSyntaxError with the 0-based column in the whole string and a
message naming what was expected there. A bracket, brace or parenthesis that is
never closed is reported at the column of its *opening* character.

Canonical form (``format_resreq`` and ``str(tree)``): sections in the order
select, order, rusage, span, same, affinity, separated by one space, empty ones
omitted; ``N*{...} + {...}``; ``{...} || {...}``; inside rusage, ``||`` between
alternatives and ``,`` between runs of terms that share the same duration/decay
(``mem=20:swp=50:duration=60,lic=1``). ``parse_resreq(format_resreq(r)) == r``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import groupby
from typing import Final, NoReturn

from xce_core._errors import ResReqSyntaxError
from xce_core._resreq_lex import (
    NAME_RE,
    NUMBER_RE,
    UNIT_RE,
    format_number,
    parse_number,
    unit_factor,
)
from xce_core._resreq_types import (
    Alternative,
    Compound,
    OrderKey,
    Primary,
    ResReq,
    RusageTerm,
    SelectExpr,
    Span,
)
from xce_core._select import compile_select_span

__all__ = ["format_resreq", "parse_resreq"]

_CACHE_LIMIT: Final = 100_000
_CACHE: dict[str, ResReq] = {}

_SECTIONS: Final = ("select", "order", "rusage", "span", "same", "affinity", "cu")
_PER: Final = re.compile(r"/\s*(task|host|job)\b")
_SECTION_HEAD: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\[")
_COUNT: Final = re.compile(r"([0-9]+)\s*\*\s*\{")
_INTEGER: Final = re.compile(r"-?[0-9]+(?![\w.])")
_SPAN_OPTIONS: Final = ("hosts", "ptile", "block", "stripe")
_ITEM: Final = re.compile(r"[^\s)]+")  # one phase value inside ( )
_PTILE_MAX: Final = re.compile(r"'!'|\"!\"|!")
# One step of a bare select: a quoted string (possibly unterminated, so the select
# lexer reports it), a word (group 2 set if it opens a section), or one character
# that cannot end the select.
_BARE_STEP: Final = re.compile(
    r"""\s*(?:'[^']*'?|"[^"]*"?|([A-Za-z_][A-Za-z0-9_.]*)(\s*\[)?|[^\s\[\]{}'"A-Za-z_])"""
)
# A section body up to its "]": no brackets or braces (outside quotes, for select).
_PLAIN_BODY: Final = re.compile(r"[^\[\]{}]*\]")
_SELECT_BODY: Final = re.compile(r"""(?:[^\[\]{}'"]|'[^']*'|"[^"]*")*\]""")
_MINUTES_PER_UNIT: Final = {"s": 1 / 60, "m": 1.0, "h": 60.0}


def parse_resreq(text: str) -> ResReq:
    """Parse a resource-requirement string into a tree (grammar: module docstring).

    Cached: the same text returns the very same object (the cache holds at most
    100,000 texts and is emptied when full). Raises ResReqSyntaxError, and
    nothing else, for bad text.
    """
    cached = _CACHE.get(text)
    if cached is not None:
        return cached
    result = _Parser(text).parse()
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[text] = result
    return result


class _Parser:
    """One pass over ``text``; every method takes and returns absolute positions."""

    __slots__ = ("end", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.end = len(text)

    def fail(self, message: str, column: int) -> NoReturn:
        raise ResReqSyntaxError(message, self.text, column)

    def skip(self, pos: int, end: int | None = None) -> int:
        end = self.end if end is None else end
        text = self.text
        while pos < end and text[pos].isspace():
            pos += 1
        return pos

    def parse(self) -> ResReq:
        text = self.text
        pos = self.skip(0)
        result: ResReq
        if pos == self.end:
            return Primary()
        if text[pos] == "{":
            result, pos = self.alternative(pos)
        elif _COUNT.match(text, pos):
            result, pos = self.compound(pos)
        else:
            result, pos = self.primary(pos, None)
        pos = self.skip(pos)
        if pos < self.end:
            hint = " (brace each alternative: {...} || {...})" if text[pos] == "|" else ""
            self.fail(f"expected the end of the requirement, found {text[pos]!r}{hint}", pos)
        return result

    # -- structure -------------------------------------------------------------

    def alternative(self, pos: int) -> tuple[Alternative, int]:
        options: list[Primary | Compound] = []
        while True:
            brace = pos
            inner = self.skip(pos + 1)
            option: Primary | Compound
            if inner < self.end and (self.text[inner] == "{" or _COUNT.match(self.text, inner)):
                option, pos = self.compound(inner)
                pos = self.skip(pos)
            else:
                option, pos = self.primary(inner, None, closer="}")
            if pos >= self.end or self.text[pos] != "}":
                self.fail("expected '}' to close '{'", brace)
            options.append(option)
            pos = self.skip(pos + 1)
            if self.text.startswith("+", pos):
                self.fail("only the last part of a compound may omit its count N*", brace)
            if not self.text.startswith("||", pos):
                return Alternative(tuple(options)), pos
            pos = self.skip(pos + 2)
            if pos >= self.end or self.text[pos] != "{":
                self.fail("expected '{' to start an alternative after '||'", pos)

    def compound(self, pos: int) -> tuple[Compound, int]:
        parts: list[Primary] = []
        while True:
            count: int | None = None
            match = _COUNT.match(self.text, pos)
            if match is not None:
                count = int(match.group(1))
                if count <= 0:
                    self.fail("expected a positive task count", pos)
                brace = match.end() - 1
            elif self.text.startswith("{", pos):
                brace = pos
            else:
                self.fail("expected N*{...} or {...} after '+'", pos)
            part, pos = self.primary(brace + 1, count, closer="}")
            if pos >= self.end or self.text[pos] != "}":
                self.fail("expected '}' to close '{'", brace)
            parts.append(part)
            after = self.skip(pos + 1)
            if not self.text.startswith("+", after):
                if count is None and len(parts) == 1:
                    self.fail("expected a task count N* before '{' of a one-part compound", brace)
                return Compound(tuple(parts)), after
            if count is None:
                self.fail("only the last part of a compound may omit its count N*", brace)
            pos = self.skip(after + 1)

    def primary(self, pos: int, count: int | None, closer: str = "") -> tuple[Primary, int]:
        """Sections from ``pos`` up to ``closer`` (``}``) or the end of the text;
        returns the primary and the position of the character that stopped it."""
        text = self.text
        seen: set[str] = set()
        select: SelectExpr | None = None
        order: tuple[OrderKey, ...] = ()
        resort = False
        rusage: tuple[tuple[RusageTerm, ...], ...] = ()
        span: Span | None = None
        same: tuple[str, ...] = ()
        affinity: str | None = None
        cu: str | None = None
        pos = self.skip(pos)
        if pos < self.end and text[pos] != closer and not _SECTION_HEAD.match(text, pos):
            stop = self.bare_select_end(pos)
            last = stop
            while last > pos and text[last - 1].isspace():
                last -= 1
            if last > pos:
                select = compile_select_span(text, pos, last)
                seen.add("select")
            pos = self.skip(stop)
        while pos < self.end and text[pos] != closer:
            head = _SECTION_HEAD.match(text, pos)
            if head is None:
                if text[pos] in "]}":
                    opener = "[" if text[pos] == "]" else "{"
                    self.fail(f"unexpected {text[pos]!r} without a matching {opener!r}", pos)
                if text[pos] == "|":
                    self.fail("expected a section; brace each alternative: {...} || {...}", pos)
                self.fail(f"expected a section such as order[...], found {text[pos]!r}", pos)
            name = head.group(1)
            if name not in _SECTIONS:
                self.fail(f"unknown section {name!r}", pos)
            if name in seen:
                self.fail(f"duplicate section {name!r}", pos)
            seen.add(name)
            start = head.end()
            close = self.closing_bracket(name, start - 1)
            if name == "select":
                select = compile_select_span(text, start, close)
            elif name == "order":
                bang = self.skip(start, close)
                resort = text.startswith("!", bang, close)
                order = self.order(bang + 1 if resort else start, close)
            elif name == "rusage":
                rusage = self.rusage(start, close)
            elif name == "span":
                span = self.span(start, close)
            elif name == "same":
                same = self.same(start, close)
            elif name == "cu":
                cu = text[start:close].strip()
                if not cu:
                    self.fail("expected a compute-unit description in cu[]", close)
            else:
                affinity = text[start:close].strip()
                if not affinity:
                    self.fail("expected an affinity description in affinity[]", close)
            pos = self.skip(close + 1)
        return Primary(select, order, rusage, span, same, affinity, count, cu, resort), pos

    def bare_select_end(self, pos: int) -> int:
        """Where a select written without ``select[`` ends: at the first section
        name, bracket, brace or the end of the text (outside quotes)."""
        while True:
            step = _BARE_STEP.match(self.text, pos)
            if step is None:
                return pos
            if step.group(2):
                return step.start(1)
            pos = step.end()

    def closing_bracket(self, name: str, opening: int) -> int:
        """The ``]`` matching the ``[`` at ``opening``. Only ``affinity[]`` may
        nest brackets; quotes are honoured inside ``select[]``."""
        text = self.text
        if name != "affinity":  # the common, valid case in one regex call
            body = (_SELECT_BODY if name == "select" else _PLAIN_BODY).match(text, opening + 1)
            if body is not None:
                return body.end() - 1
        depth = 0
        pos = opening + 1
        while pos < self.end:
            char = text[pos]
            if char in "'\"" and name == "select":
                close = text.find(char, pos + 1)
                if close < 0:
                    self.fail(f"unterminated string: expected a closing {char}", pos)
                pos = close + 1
                continue
            if char == "]":
                if depth == 0:
                    return pos
                depth -= 1
            elif char == "[" and name == "affinity":
                depth += 1
            elif char in "[{}":
                break
            pos += 1
        self.fail(f"expected ']' to close {name}[", opening)

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
        return parse_number(self.text, match), match.end()

    def expect_equals(self, pos: int, end: int, name: str, section: str) -> int:
        pos = self.skip(pos, end)
        if pos >= end or self.text[pos] != "=":
            self.fail(f"expected '=' after {name!r} in {section}[]", pos)
        return self.skip(pos + 1, end)

    def names(self, pos: int, end: int, section: str, reversible: bool) -> list[OrderKey]:
        """``[-]name:[-]name...`` for order[] and same[]; duplicates are errors."""
        keys: list[OrderKey] = []
        seen: set[str] = set()
        while True:
            pos = self.skip(pos, end)
            reverse = reversible and self.text.startswith("-", pos, end)
            if reverse:
                pos = self.skip(pos + 1, end)
            column = pos
            name, pos = self.name(pos, end, f"a resource name in {section}[]")
            if name in seen:
                self.fail(f"duplicate {name!r} in {section}[]", column)
            seen.add(name)
            keys.append(OrderKey(name, reverse))
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
            terms, pos = self.rusage_alternative(pos, end)
            alternatives.append(terms)
            if pos >= end:
                return tuple(alternatives)
            pos += 2  # rusage_alternative stops only at "||" or the end

    def rusage_alternative(self, pos: int, end: int) -> tuple[tuple[RusageTerm, ...], int]:
        text = self.text
        terms: list[RusageTerm] = []
        run: list[int] = []  # indexes of the terms the next option applies to
        options: set[str] = set()  # options already given to ``run``
        while True:
            pos = self.skip(pos, end)
            column = pos
            name, pos = self.name(pos, end, "a resource name in rusage[]")
            pos = self.expect_equals(pos, end, name, "rusage")
            if name in ("duration", "decay"):
                if not run:
                    self.fail(f"expected a resource term before {name!r}", column)
                if name in options:
                    self.fail(f"duplicate {name!r} for the same terms", column)
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
            else:
                if any(term.name == name for term in terms):
                    self.fail(f"duplicate resource {name!r} in rusage[]", column)
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

    def amount(self, name: str, pos: int, end: int) -> tuple[float, int]:
        """A non-negative amount, with an optional size unit (``4GB``: in MB)."""
        amount, pos = self.number(pos, end, f"a non-negative amount for {name!r}")
        unit = UNIT_RE.match(self.text, pos, end)
        if unit is not None:
            amount *= unit_factor(unit.group())
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
                self.fail(f"multi-phase amounts for {name!r} cannot increase", column)
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
                return value * _MINUTES_PER_UNIT[self.text[after]], after + 1
            return value, after
        value, after = self.number(pos, end, "decay=0 or decay=1")
        if value not in (0, 1):
            self.fail("expected decay=0 or decay=1", pos)
        return value, after

    def span(self, start: int, end: int) -> Span:
        pos = self.skip(start, end)
        column = pos
        name, pos = self.name(pos, end, "hosts=, ptile=, block= or stripe in span[]")
        if name not in _SPAN_OPTIONS:
            self.fail(
                f"unknown span option {name!r}; expected hosts, ptile, block or stripe", column
            )
        pos = self.skip(pos, end)
        if name == "stripe" and (pos >= end or self.text[pos] != "="):
            span = Span(stripe=True)
        else:
            pos = self.expect_equals(pos, end, name, "span")
            if name == "ptile":
                span, pos = self.ptile(pos, end)
            else:
                match = _INTEGER.match(self.text, pos, end)
                value = int(match.group()) if match is not None else 0
                if match is None or value == 0 or value < -1 or (name != "hosts" and value < 0):
                    wanted = (
                        "a positive integer or -1" if name == "hosts" else "a positive integer"
                    )
                    self.fail(f"expected {wanted} for {name}", pos)
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
                        self.fail(f"duplicate span option {name!r}", again)
                    self.fail(
                        f"span[] takes one option, not both {name} and {other.group()}", again
                    )
            self.fail("expected ']' to end span[]", pos)
        return span

    def ptile(self, pos: int, end: int) -> tuple[Span, int]:
        """``ptile=`` values: ``P``, ``'!'``, and ``type_or_model:P`` items, comma
        separated (``ptile='!',HP:8,LINUX:2``); at most one default."""
        text = self.text
        default: int | None = None
        use_max = False
        by: list[tuple[str, int]] = []
        while True:
            column = pos
            bang = _PTILE_MAX.match(text, pos, end)
            if bang is not None:
                if default is not None or use_max:
                    self.fail("ptile takes one default value", column)
                use_max, pos = True, bang.end()
            elif (match := _INTEGER.match(text, pos, end)) is not None:
                if default is not None or use_max:
                    self.fail("ptile takes one default value", column)
                default = int(match.group())
                if default < 1:
                    self.fail("expected a positive integer for ptile", column)
                pos = match.end()
            else:
                name, pos = self.name(pos, end, "a positive integer, '!' or type:N for ptile")
                if any(name == seen for seen, _ in by):
                    self.fail(f"duplicate ptile value for {name!r}", column)
                pos = self.skip(pos, end)
                if not text.startswith(":", pos, end):
                    self.fail(f"expected ':' and a slot count after {name!r} in ptile", pos)
                pos = self.skip(pos + 1, end)
                match = _INTEGER.match(text, pos, end)
                if match is None or int(match.group()) < 1:
                    self.fail(f"expected a positive integer for {name!r} in ptile", pos)
                by.append((name, int(match.group())))
                pos = match.end()
            pos = self.skip(pos, end)
            span = Span(ptile=default, ptile_max=use_max, ptile_by=tuple(by))
            if pos >= end or text[pos] != ",":
                return span, pos
            after = self.skip(pos + 1, end)
            option = NAME_RE.match(text, after, end)
            if option is not None and option.group() in _SPAN_OPTIONS:
                return span, pos  # another span option: span() reports it
            pos = after


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
    if primary.span is not None:
        sections.append(f"span[{_format_span(primary.span)}]")
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
    for (duration, decay, durations, decays), run in groupby(
        terms, key=lambda term: (term.duration, term.decay, term.durations, term.decays)
    ):
        text = ":".join(map(_format_term, run))
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
