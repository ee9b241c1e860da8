"""Lexical pieces shared by the select compiler and the requirement parser.

Columns are always absolute: every function takes the whole requirement string
(``source``) plus a ``[start, end)`` span inside it, so an error deep inside
``select[...]`` reports its column in the string the user typed.

Tokens of a select expression:

* numbers: ``4000``, ``1.5``, ``.5``, ``1e3``, ``2.5E-3`` (unsigned; a leading
  ``-`` is the unary minus operator). Non-finite values (``1e999``) are errors.
* names: ``[A-Za-z_][A-Za-z0-9_]*``; case-sensitive.
* dotted words: a name followed by ``.part`` pieces, e.g. ``LINUX2.4``. A dotted
  word can never be a resource name, so it is always a string constant (LSF type
  names contain dots). Hyphens are not part of words: ``a-b`` is ``a`` minus
  ``b``; quote such values, as LSF requires (``hname=='host06-x12'``).
* strings: ``'x'`` or ``"x"``, no escapes.
* keywords, case-insensitive: ``and`` ``or`` ``not`` (same as ``&&`` ``||``
  ``!``) and ``defined``.
* operators: ``== != < > <= >= =`` (a single ``=`` is equality, as in LSF),
  ``&& || !``, ``+ - * /``, ``( )``.
"""

from __future__ import annotations

import math
import re
from typing import Final, NamedTuple

from xce_core._errors import ResReqSyntaxError
from xce_core.resreq._limits import ResReqLimits

__all__ = [
    "DWORD",
    "EOF",
    "KEYWORD",
    "NAME",
    "NAME_RE",
    "NUM",
    "NUMBER_RE",
    "UNIT_RE",
    "OP",
    "STR",
    "Token",
    "format_number",
    "parse_number",
    "shown",
    "tokenize_select",
    "unit_factor",
]

# ASCII digits only: \d would also accept the digits of other scripts.
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
NUMBER_RE: Final = re.compile(_NUMBER)
# LSF's size units (KB or K, MB or M, ... ZB or Z) right after a number, as in
# rusage[mem=4GB] or select[mem>512M]; sizes are in MB, so 4GB is 4096.
_UNIT = r"(?:[KMGTPEZkmgtpez][Bb]?)(?![A-Za-z0-9_.])"
UNIT_RE: Final = re.compile(_UNIT)
_MB_PER_UNIT: Final = {
    "k": 1 / 1024,
    "m": 1.0,
    "g": 1024.0,
    "t": 1024.0**2,
    "p": 1024.0**3,
    "e": 1024.0**4,
    "z": 1024.0**5,
}
NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# One token after optional whitespace; operators longest first, so "<=" beats "<".
_TOKEN_RE: Final = re.compile(
    rf"""\s*(?:
        (?P<num>{_NUMBER})(?P<unit>{_UNIT})?
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
      | (?P<str>'[^']*'|"[^"]*")
      | (?P<op>==|!=|<=|>=|&&|\|\||[<>=!+\-*/()])
    )""",
    re.VERBOSE,
)

# Token kinds.
NUM: Final = "number"
NAME: Final = "name"
DWORD: Final = "dotted word"
STR: Final = "string"
OP: Final = "operator"
KEYWORD: Final = "keyword"
EOF: Final = "end"

_WORD_OPERATORS: Final = {"and": "&&", "or": "||", "not": "!"}


class Token(NamedTuple):
    """One select token. ``text`` is the normalised spelling (``and`` → ``&&``,
    ``=`` → ``==``); ``value`` is the float of a number or the text of a
    string/dotted word; ``column`` is absolute in the whole source."""

    kind: str
    text: str
    value: float | str | None
    column: int


def parse_number(source: str, match: re.Match[str], limits: ResReqLimits) -> float:
    """The float of a ``NUMBER_RE`` match; raises ResReqSyntaxError if it has
    too many digits or is not finite."""
    if match.end() - match.start() > limits.max_digits:
        limits.check_number(source, match.start(), match.end())
    value = float(match.group())
    if not math.isfinite(value):
        raise ResReqSyntaxError("number out of range", source, match.start())
    return value


def shown(word: str) -> str:
    """``word`` quoted for an error message, cut short if long: a message never
    carries a 60,000-character name back to the user."""
    return repr(word if len(word) <= 40 else word[:32] + "...")


def unit_factor(unit: str) -> float:
    """MB per ``unit`` (a ``UNIT_RE`` match: ``G`` or ``GB`` → 1024)."""
    return _MB_PER_UNIT[unit[0].lower()]


def format_number(value: float) -> str:
    """The canonical spelling of a number: integral values without a fraction
    (``4000``, not ``4000.0``), others as Python's shortest round-tripping repr
    (``1.5``, ``1e+20``), which ``NUMBER_RE`` reads back to the same float."""
    if value == 0:
        return "0"  # also folds -0.0, which compares equal anyway
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(float(value))


def tokenize_select(source: str, start: int, end: int, limits: ResReqLimits) -> list[Token]:
    """Tokens of ``source[start:end]``, ending with one EOF token at ``end``.

    Raises ResReqSyntaxError for an unknown character, an unterminated string
    (reported at its opening quote), or a number beyond ``limits``.
    """
    tokens: list[Token] = []
    append = tokens.append
    match_token = _TOKEN_RE.match
    # tuple.__new__ skips the NamedTuple's Python-level __new__: this loop is
    # most of the cost of compiling a select.
    make = tuple.__new__
    max_digits = limits.max_digits
    max_depth = limits.max_depth
    depth = 0  # open parentheses, but for defined(
    pos = start
    while (match := match_token(source, pos, end)) is not None:
        kind = match.lastgroup
        if kind == "unit":
            kind = "num"
        assert kind is not None  # every alternative is a named group
        column, stop = match.span(kind)
        text = match.group(kind)
        if kind == "op":
            append(make(Token, (OP, "==" if text == "=" else text, None, column)))
            if text == "(" and (len(tokens) < 2 or tokens[-2].kind != KEYWORD):
                depth += 1
                if depth > max_depth:
                    # The parser rejects the nesting at or before this "(" (it
                    # counts prefix operators too), so the rest need not be read:
                    # deep text is rejected in time proportional to max_depth.
                    append(make(Token, (EOF, "", None, end)))
                    return tokens
            elif text == ")":
                depth -= 1
        elif kind == "word":
            lowered = text.lower()
            if "." in text:
                append(make(Token, (DWORD, text, text, column)))
            elif lowered in _WORD_OPERATORS:
                append(make(Token, (OP, _WORD_OPERATORS[lowered], None, column)))
            elif lowered == "defined":
                append(make(Token, (KEYWORD, "defined", None, column)))
            else:
                append(make(Token, (NAME, text, text, column)))
        elif kind == "num":
            if stop - column > max_digits:
                limits.check_number(source, column, stop)
            value = float(text)
            unit = match.group("unit")
            if unit is not None:
                value *= unit_factor(unit)
                if not math.isfinite(value):
                    raise ResReqSyntaxError("number out of range", source, column)
            elif value == math.inf:
                raise ResReqSyntaxError("number out of range", source, column)
            append(make(Token, (NUM, text, value, column)))
        else:
            append(make(Token, (STR, text, text[1:-1], column)))
        pos = match.end()
    while pos < end and source[pos].isspace():
        pos += 1
    if pos >= end:
        append(make(Token, (EOF, "", None, end)))
        return tokens
    char = source[pos]
    if char in "'\"":
        raise ResReqSyntaxError(f"unterminated string: expected a closing {char}", source, pos)
    hint = f" (did you mean '{char * 2}'?)" if char in "&|" else ""
    raise ResReqSyntaxError(f"unexpected character {char!r}{hint}", source, pos)
