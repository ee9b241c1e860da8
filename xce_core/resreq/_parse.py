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
* ``span[hosts=1]`` (every task on one host; ``hosts=-1`` means no
  constraint, stored as given; LSF documents no other value, so any other is
  an error) or ``span[ptile=...]``, not both. A ptile is a
  positive integer, ``'!'`` (each host's slot count, LSF's MXJ), and/or values
  for host types or models: ``span[ptile='!',HP:8,LINUX:2]``. Also
  ``span[block=B]`` and ``span[stripe]`` / ``span[stripe=M]`` (LSF 10.1).
* LSF 10.1's GPU options (``LSB_GPU_NEW_SYNTAX=extend``): ``gtile=N`` or
  ``gtile='!'`` in span[], alone or beside one other option
  (``span[ptile=2:gtile=1]``); ``gmodel=NAME``, ``gmem=SIZE`` (stored in MB)
  and ``nvlink=yes`` in rusage[] as options of the ``ngpus_physical`` term
  written before them in the same ``,``-group. Carried, not acted on.
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
* LSF's rules across sections: per type/model ptile values (``HP:8``) need
  ``same[type]`` or ``same[model]``, and ``'!'`` cannot be combined with
  ``same[type:model]`` (both names).
* The load-index aliases ``swap idle login cpu`` (``swp it ls r1m``) are resolved
  in select, order and rusage.
* Alternative: any top-level ``{...}`` starts one, so ``{select[a]}`` is an
  alternative of one option.
* Empty (or whitespace-only) text is ``Primary()``: no constraints. Every
  section that is present must be non-empty.

Errors are ResReqSyntaxError with the 0-based column in the whole string and a
message naming what was expected there. A bracket, brace or parenthesis that is
never closed is reported at the column of its *opening* character. Text beyond
:class:`~xce_core.resreq.ResReqLimits` (length, nesting, list sizes, digits,
counts) is rejected the same way, the message naming the limit.

Canonical form (``format_resreq`` and ``str(tree)``): sections in the order
select, order, rusage, span, same, affinity, separated by one space, empty ones
omitted; ``N*{...} + {...}``; ``{...} || {...}``; inside rusage, ``||`` between
alternatives and ``,`` between runs of terms that share the same duration/decay
(``mem=20:swp=50:duration=60,lic=1``). ``parse_resreq(format_resreq(r)) == r``.
"""

from __future__ import annotations

import re
from typing import Final

from xce_core.resreq._lex import shown
from xce_core.resreq._limits import DEFAULT_LIMITS, ResReqLimits
from xce_core.resreq._sections import NO_MARKS, SectionParser, SpanMarks
from xce_core.resreq._select import compile_select_span
from xce_core.resreq._tree import (
    Alternative,
    Compound,
    OrderKey,
    Primary,
    ResReq,
    RusageTerm,
    SelectExpr,
    Span,
    format_resreq,
)

__all__ = ["parse_resreq"]

_CACHE_LIMIT: Final = 100_000
_CACHE: dict[str, ResReq] = {}  # for DEFAULT_LIMITS, the common case
_OTHER_CACHES: dict[ResReqLimits, dict[str, ResReq]] = {}
_OTHER_CACHES_LIMIT: Final = 16
# Canonical text is at most this many times longer than the text it came from
# (the worst is a short number with a unit: "9Z" prints in 22 characters), so
# shorter texts need not be printed to know theirs fits max_length.
_MAX_GROWTH: Final = 32
_SECTIONS: Final = ("select", "order", "rusage", "span", "same", "affinity", "cu")
_SECTION_HEAD: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\[")
_COUNT: Final = re.compile(r"([0-9]+)\s*\*\s*\{")
# One step of a bare select: a quoted string (possibly unterminated, so the select
# lexer reports it), a word (group 2 set if it opens a section), or one character
# that cannot end the select.
_BARE_STEP: Final = re.compile(
    r"""\s*(?:'[^']*'?|"[^"]*"?|([A-Za-z_][A-Za-z0-9_.]*)(\s*\[)?|[^\s\[\]{}'"A-Za-z_])"""
)
# A section body up to its "]": no brackets or braces (outside quotes, for select).
_PLAIN_BODY: Final = re.compile(r"[^\[\]{}]*\]")
_SELECT_BODY: Final = re.compile(r"""(?:[^\[\]{}'"]|'[^']*'|"[^"]*")*\]""")


def parse_resreq(text: str, limits: ResReqLimits | None = None) -> ResReq:
    """Parse a resource-requirement string into a tree (grammar: module docstring).

    ``limits`` bound what the text may cost (default
    :data:`~xce_core.resreq.DEFAULT_LIMITS`); the canonical text of the result
    parses back to an equal tree under the same limits. Cached per limits: the
    same text returns the very same object, and limits are checked once per
    distinct text (a cache holds at most 100,000 texts and is emptied when
    full). Raises ResReqSyntaxError, and nothing else, for bad text or text
    beyond the limits; parsing takes time linear in the text.
    """
    if limits is None:  # the hot path: a scheduler re-reading pending jobs
        cached = _CACHE.get(text)
        if cached is not None:
            return cached
        limits, cache = DEFAULT_LIMITS, _CACHE
    else:
        cache = _CACHE if limits == DEFAULT_LIMITS else _cache_for(limits)
        cached = cache.get(text)
        if cached is not None:
            return cached
    result = _Parser(text, limits).parse()
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[text] = result
    return result


def _cache_for(limits: ResReqLimits) -> dict[str, ResReq]:
    cache = _OTHER_CACHES.get(limits)
    if cache is None:
        if len(_OTHER_CACHES) >= _OTHER_CACHES_LIMIT:
            _OTHER_CACHES.clear()
        cache = _OTHER_CACHES[limits] = {}
    return cache


class _Parser(SectionParser):
    """One pass over ``text``: the structure (alternatives, compounds, primaries
    and their sections); section bodies are parsed by :class:`SectionParser`."""

    __slots__ = ()

    def parse(self) -> ResReq:
        text = self.text
        limits = self.limits
        if self.end > limits.max_length:
            limits.exceeded(
                "max_length", f"a requirement of {self.end} characters", text, limits.max_length
            )
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
            hint = ""
            if text[pos] == "|":
                hint = " (brace each alternative: {...} || {...})"
            elif text[pos] == "@" and isinstance(result, Alternative):
                # LSF's {...} || {...}@D: an alternative tried only after the job
                # pended D minutes. Refused by name rather than run early.
                hint = " (an alternative's delay, {...}@D, is not supported)"
            self.fail(f"expected the end of the requirement, found {text[pos]!r}{hint}", pos)
        if self.end * _MAX_GROWTH > limits.max_length:
            # Guarantees that the canonical text parses back under the same limits.
            printed = len(format_resreq(result))
            if printed > limits.max_length:
                limits.exceeded("max_length", f"a canonical form of {printed} characters", text, 0)
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
            if len(options) > self.limits.max_terms:
                self.limits.check_terms(len(options), "alternatives", self.text, brace)
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
                self.limits.check_number(self.text, pos, match.end(1))
                count = int(match.group(1))
                self.limits.check_count(count, "task count", self.text, pos)
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
            if len(parts) > self.limits.max_terms:
                self.limits.check_terms(len(parts), "compound parts", self.text, brace)
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
        gtile: str | None = None
        marks = NO_MARKS
        pos = self.skip(pos)
        if pos < self.end and text[pos] != closer and not _SECTION_HEAD.match(text, pos):
            stop = self.bare_select_end(pos)
            last = stop
            while last > pos and text[last - 1].isspace():
                last -= 1
            if last > pos:
                select = compile_select_span(text, pos, last, self.limits)
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
                self.fail(f"unknown section {shown(name)}", pos)
            if name in seen:
                self.fail(f"duplicate section {shown(name)}", pos)
            seen.add(name)
            start = head.end()
            close = self.closing_bracket(name, start - 1)
            if name == "select":
                select = compile_select_span(text, start, close, self.limits)
            elif name == "order":
                bang = self.skip(start, close)
                resort = text.startswith("!", bang, close)
                order = self.order(bang + 1 if resort else start, close)
            elif name == "rusage":
                rusage = self.rusage(start, close)
            elif name == "span":
                span, marks, gtile = self.span(start, close)
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
        if marks is not NO_MARKS:
            self.check_ptile_same(marks, same)
        return Primary(select, order, rusage, span, same, affinity, count, cu, resort, gtile), pos

    def check_ptile_same(self, marks: SpanMarks, same: tuple[str, ...]) -> None:
        """LSF: per type/model ptile values need same[type] or same[model], and
        '!' cannot be combined with same[type:model] ("Span string",
        https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/span_string.html;
        Platform LSF 6.2 "Specifying multiple ptile values")."""
        by_kind = "type" in same or "model" in same
        if marks.by is not None and not by_kind:
            self.fail(
                "ptile values per host type or model need same[type] or same[model]", marks.by
            )
        if marks.bang is not None and {"type", "model"} <= set(same):
            self.fail("ptile='!' cannot be combined with same[type:model]", marks.bang)

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
                if depth > self.limits.max_depth:
                    self.limits.exceeded("max_depth", "brackets nested too deep", text, pos)
            elif char in "[{}":
                break
            pos += 1
        self.fail(f"expected ']' to close {name}[", opening)
