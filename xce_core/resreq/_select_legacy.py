"""LSF's legacy select syntax: ``-R "swp=50:mem=100:-fs"`` (terms joined by ``:``).

LSF still accepts the resource-requirement syntax of its first releases, in
which a select is a list of terms separated by colons, all of which must hold.
IBM's documentation keeps examples of it (the ``lsf.task`` file:
``make/cpu``, ``nroff/-``, ``compress/-:cpu:mem``; Platform LSF Reference 6.2,
"lsf.task"; https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/lsrtasks.1.html)
but no longer spells out its rules; these follow LSF's own parser for the old
syntax (as kept in the open-source openlava, ``resToClassOld``):

- ``-`` alone: any host type (``type==any``);
- ``-name``: a boolean that must be false (``!name``); negating a built-in
  number or string is an error;
- ``name``: the resource must be true or non-zero (``name``); a string built-in
  (``type``, ``model``) needs a value;
- ``name=value`` on a load index that grows with load (``r15s r1m r15m ut pg ls
  io``): at most that much (``r1m=0.5`` is ``r1m<=0.5``); on any other number
  (``mem swp tmp it``, static sizes, site resources): at least that much
  (``mem=100`` is ``mem>=100``); a non-numeric value is compared for equality
  (``type=LINUX`` is ``type==LINUX``). Values are non-negative; size units
  (``mem=4G``) are accepted as in the current syntax.

A select is read this way when it has a ``:`` outside quotes (the current
syntax has no use for one), or is a lone ``-`` (an error in the current
syntax). LSF also guesses the old syntax for some strings without either, such
as ``mem=100``; xce keeps reading those in the current syntax (``mem==100``),
as it always has. The result is the same tree the current syntax gives, so its
canonical text is current syntax: ``mem=100:-fs`` prints as ``mem>=100 && !fs``.
"""

from __future__ import annotations

import re
from typing import Final, NoReturn

from xce_core._errors import ResReqSyntaxError
from xce_core.resreq._lex import NAME_RE, NUMBER_RE, UNIT_RE, shown, unit_factor
from xce_core.resreq._limits import ResReqLimits, check_amount
from xce_core.resreq._names import INCREASING, NUMERIC_BUILTINS, STRING_BUILTINS, canonical_name
from xce_core.resreq._select_tree import And, Cmp, Name, Node, Not, Num, Str, Word

__all__ = ["is_legacy", "parse_legacy_select"]

# Up to the first ":" that is outside quotes; quoted text cannot hold one.
_UNQUOTED_COLON: Final = re.compile(r"""(?:[^:'"]|'[^']*'|"[^"]*")*:""")
_VALUE: Final = re.compile(r"""[^\s:='"\[\]{}()]+""")
_KEYWORDS: Final = frozenset({"and", "or", "not", "defined"})


def is_legacy(source: str, start: int, end: int) -> bool:
    """Whether ``source[start:end]`` is a legacy select: a ``:`` outside quotes,
    or a lone ``-``."""
    if source.find(":", start, end) >= 0:
        return _UNQUOTED_COLON.match(source, start, end) is not None
    return source.find("-", start, end) >= 0 and source[start:end].strip() == "-"


def parse_legacy_select(source: str, start: int, end: int, limits: ResReqLimits) -> Node:
    """The tree of the legacy select ``source[start:end]``; raises
    ResReqSyntaxError at an absolute column of ``source``."""
    items: list[Node] = []
    pos = start
    while True:
        colon = source.find(":", pos, end)
        stop = end if colon < 0 else colon
        items.append(_Term(source, limits).parse(pos, stop))
        limits.check_terms(len(items), "legacy select terms", source, pos)
        if colon < 0:
            break
        pos = colon + 1
    if len(items) == 1:
        return items[0]
    if limits.max_depth < 3:  # And, then a comparison, then its operands
        limits.exceeded("max_depth", "an expression nested too deep", source, start)
    return And(tuple(items))


class _Term:
    __slots__ = ("limits", "source")

    def __init__(self, source: str, limits: ResReqLimits) -> None:
        self.source = source
        self.limits = limits

    def fail(self, message: str, column: int) -> NoReturn:
        raise ResReqSyntaxError(message, self.source, column)

    def skip(self, pos: int, end: int) -> int:
        while pos < end and self.source[pos].isspace():
            pos += 1
        return pos

    def parse(self, pos: int, end: int) -> Node:
        source = self.source
        pos = self.skip(pos, end)
        negate = source.startswith("-", pos, end)
        dash = pos
        if negate:
            pos = self.skip(pos + 1, end)
            if pos == end:
                return Cmp("==", Name("type"), Word("any"))  # "-": any host type
        match = NAME_RE.match(source, pos, end)
        if match is None or match.group().lower() in _KEYWORDS:
            found = "the end of the term" if pos == end else repr(source[pos])
            self.fail(
                f"expected a resource name in a ':'-separated (legacy) select, found {found}",
                pos,
            )
        written = match.group()
        name = canonical_name(written)
        if self.limits.max_depth < 2:
            self.limits.exceeded("max_depth", "an expression nested too deep", source, pos)
        pos = self.skip(match.end(), end)
        if pos == end:
            return self.bare(name, written, dash if negate else None, pos)
        if source[pos] != "=":
            self.fail(
                f"expected ':' or '=' after {shown(written)}"
                " (legacy select terms are -, [-]name or name=value)",
                pos,
            )
        if negate:
            self.fail(f"a negated term takes no value: write -{written}", pos)
        return self.compare(name, written, self.skip(pos + 1, end), end)

    def bare(self, name: str, written: str, dash: int | None, pos: int) -> Node:
        if dash is not None:
            if name in NUMERIC_BUILTINS or name in STRING_BUILTINS:
                self.fail(f"'-' negates a boolean resource; {shown(written)} is not one", dash)
            return Not(Name(name))
        if name in STRING_BUILTINS:
            self.fail(f"expected '=' and a value after {shown(written)}", pos)
        return Name(name)

    def compare(self, name: str, written: str, pos: int, end: int) -> Node:
        source = self.source
        value = _VALUE.match(source, pos, end)
        if value is None:
            self.fail(f"expected a value for {shown(written)}", pos)
        if self.skip(value.end(), end) != end:
            self.fail("expected ':' or the end of the select", self.skip(value.end(), end))
        number = NUMBER_RE.match(source, pos, value.end())
        stop = -1
        if number is not None:
            unit = UNIT_RE.match(source, number.end(), value.end())
            stop = number.end() if unit is None else unit.end()
        if stop == value.end() and number is not None and name not in STRING_BUILTINS:
            self.limits.check_number(source, pos, number.end())
            amount = float(number.group())
            if stop != number.end():
                amount *= unit_factor(source[number.end() : stop])
            check_amount(amount, source, pos)
            return Cmp("<=" if name in INCREASING else ">=", Name(name), Num(amount))
        if name in NUMERIC_BUILTINS:
            self.fail(f"expected a non-negative number for {shown(written)}", pos)
        text = value.group()
        bare_word = NAME_RE.fullmatch(text) is not None and text.lower() not in _KEYWORDS
        return Cmp("==", Name(name), Word(text) if bare_word else Str(text))
