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


def parse_number(source: str, match: re.Match[str]) -> float:
    """The float of a ``NUMBER_RE`` match; raises ResReqSyntaxError if not finite."""
    value = float(match.group())
    if not math.isfinite(value):
        raise ResReqSyntaxError("number out of range", source, match.start())
    return value


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


def tokenize_select(source: str, start: int, end: int) -> list[Token]:
    """Tokens of ``source[start:end]``, ending with one EOF token at ``end``.

    Raises ResReqSyntaxError for an unknown character or an unterminated string
    (reported at its opening quote).
    """
    tokens: list[Token] = []
    append = tokens.append
    match_token = _TOKEN_RE.match
    pos = start
    while (match := match_token(source, pos, end)) is not None:
        kind = match.lastgroup
        assert kind is not None  # every alternative is a named group
        if kind == "unit":
            kind = "num"
        column = match.start(kind)
        text = match.group(kind)
        if kind == "op":
            append(Token(OP, "==" if text == "=" else text, None, column))
        elif kind == "word":
            lowered = text.lower()
            if "." in text:
                append(Token(DWORD, text, text, column))
            elif lowered in _WORD_OPERATORS:
                append(Token(OP, _WORD_OPERATORS[lowered], None, column))
            elif lowered == "defined":
                append(Token(KEYWORD, "defined", None, column))
            else:
                append(Token(NAME, text, text, column))
        elif kind == "num":
            value = float(text)
            unit = match.group("unit")
            if unit is not None:
                value *= unit_factor(unit)
            if not math.isfinite(value):
                raise ResReqSyntaxError("number out of range", source, column)
            append(Token(NUM, text, value, column))
        else:
            append(Token(STR, text, text[1:-1], column))
        pos = match.end()
    while pos < end and source[pos].isspace():
        pos += 1
    if pos >= end:
        append(Token(EOF, "", None, end))
        return tokens
    char = source[pos]
    if char in "'\"":
        raise ResReqSyntaxError(f"unterminated string: expected a closing {char}", source, pos)
    hint = f" (did you mean '{char * 2}'?)" if char in "&|" else ""
    raise ResReqSyntaxError(f"unexpected character {char!r}{hint}", source, pos)
