"""Input limits of the resource-requirement language (what one string may cost).

A requirement string is user input that reaches the scheduler's event loop, so
the parser bounds everything a string can make it do: its length, how deep it
nests, how long any one list is, how many digits a number has and how large a
count is. Each limit is checked once per distinct text (the parse caches hold
what passed), never per job. Exceeding one raises ResReqSyntaxError naming the
limit (``limit max_depth=64``) at the column where it was exceeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, NoReturn

from xce_core._errors import ResReqSyntaxError

__all__ = ["DEFAULT_LIMITS", "DEPTH_CEILING", "MIN_DIGITS", "ResReqLimits", "check_amount"]

# The compiled select, its printer and the closures it evaluates through recurse
# once per level of the tree; this ceiling keeps them far from Python's default
# recursion limit (1000 frames) whatever a deployment configures.
DEPTH_CEILING: Final = 100
# Canonical text prints numbers with up to 21 digits (``0.00012345678901234567``);
# a smaller digit limit would reject the canonical text of an accepted string.
MIN_DIGITS: Final = 24


@dataclass(frozen=True, slots=True)
class ResReqLimits:
    """Limits on one requirement string; the defaults suit any real workload.

    - ``max_length``: characters in the requirement, and in its canonical text
      (which may be longer, e.g. ``mem>1T`` prints as ``mem>1048576``).
    - ``max_depth``: nesting in a select expression: open parentheses and
      ``!``/unary ``-`` operators at any point, and the depth of the expression
      tree (``(a+b)*c>1`` is 4 deep). At most :data:`DEPTH_CEILING`.
    - ``max_terms``: items in any one list: operands of an ``&&``/``||`` chain
      or of an arithmetic chain (``a+b+c``), legacy select terms, rusage terms
      of one alternative, rusage alternatives, multi-phase values, order keys,
      same names, ptile values, compound parts and alternative options.
    - ``max_digits``: digits in one number, exponent included. At least
      :data:`MIN_DIGITS`.
    - ``max_count``: the largest task count (``N*{...}``) and span value
      (``hosts=``, ``ptile=``, ``block=``, ``stripe=``).

    Amounts must also be finite after size units (``mem=1e308GB`` overflows and
    is an error); that is not configurable. Raises ValueError for a limit out
    of range.
    """

    max_length: int = 64 * 1024
    max_depth: int = 64
    max_terms: int = 1_000
    max_digits: int = 30
    max_count: int = 2**31 - 1

    def __post_init__(self) -> None:
        for name in ("max_length", "max_depth", "max_terms", "max_digits", "max_count"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ResReqLimits.{name} must be a positive integer, not {value!r}")
        if self.max_depth > DEPTH_CEILING:
            raise ValueError(f"ResReqLimits.max_depth must be at most {DEPTH_CEILING}")
        if self.max_digits < MIN_DIGITS:
            raise ValueError(f"ResReqLimits.max_digits must be at least {MIN_DIGITS}")

    def exceeded(self, name: str, what: str, text: str, column: int) -> NoReturn:
        """Raise the ResReqSyntaxError for limit ``name`` (``what`` says what
        was too large) at ``column`` of ``text``."""
        raise ResReqSyntaxError(f"{what} (limit {name}={getattr(self, name)})", text, column)

    def check_number(self, text: str, start: int, end: int) -> None:
        """Reject the number ``text[start:end]`` if it has more than
        ``max_digits`` digits. Cheap for the common short number."""
        if end - start > self.max_digits:
            digits = sum(char.isdigit() for char in text[start:end])
            if digits > self.max_digits:
                self.exceeded("max_digits", f"a number with {digits} digits", text, start)

    def check_count(self, value: int, what: str, text: str, column: int) -> None:
        """Reject a task count or span value above ``max_count``."""
        if value > self.max_count:
            self.exceeded("max_count", f"{what} {value} is too large", text, column)

    def check_terms(self, count: int, what: str, text: str, column: int) -> None:
        """Reject a list that has grown past ``max_terms`` items."""
        if count > self.max_terms:
            self.exceeded("max_terms", f"more than {self.max_terms} {what}", text, column)


DEFAULT_LIMITS: Final = ResReqLimits()
"""The limits :func:`~xce_core.resreq.parse_resreq` applies unless told otherwise."""


def check_amount(value: float, text: str, column: int) -> float:
    """``value`` if finite; an amount that overflowed (``1e308GB``) is an error."""
    if not math.isfinite(value):
        raise ResReqSyntaxError("number out of range", text, column)
    return value
