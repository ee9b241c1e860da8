"""The syntax tree of a select expression, and its canonical text.

``format_node`` prints the canonical form described in ``_select``: re-parsing
it gives an equal tree. Nodes are immutable; ``Word`` is a bare name right of a
comparison with a name (the host's value if it has one, else the text itself).

Chains are flat: ``a+b-c`` is one :class:`Arith` with three operands and
``a && b && c`` one :class:`And`, so a long chain is a long tuple, never a deep
tree. Only parentheses and prefix operators nest, and the parser bounds that
(``ResReqLimits.max_depth``), so the recursive printer here stays shallow.

The nodes are frozen msgspec Structs, not frozen dataclasses: same fields,
equality, hash, repr and ``match`` patterns, but the eleven classes are built
in about 0.1 ms instead of 5 ms, which every ``xce`` command paid at start-up.
"""

from __future__ import annotations

from typing import Final, TypeAlias

import msgspec

from xce_core.resreq._lex import format_number

__all__ = [
    "ANY_WORDS",
    "COMPARISONS",
    "And",
    "Arith",
    "Cmp",
    "Defined",
    "Name",
    "Neg",
    "Node",
    "Not",
    "Num",
    "Or",
    "Str",
    "Word",
    "format_node",
    "is_any",
    "node_names",
]


class Num(msgspec.Struct, frozen=True):
    value: float


class Str(msgspec.Struct, frozen=True):
    value: str


class Name(msgspec.Struct, frozen=True):
    name: str


class Word(msgspec.Struct, frozen=True):
    """A bare name right of a comparison with a name: the host's value, else the text."""

    name: str


class Defined(msgspec.Struct, frozen=True):
    name: str


class Neg(msgspec.Struct, frozen=True):
    operand: Node


class Arith(msgspec.Struct, frozen=True):
    """``first op x op x ...`` evaluated left to right; every op is of one
    level: all ``+``/``-`` or all ``*``/``/``."""

    first: Node
    rest: tuple[tuple[str, Node], ...]


class Cmp(msgspec.Struct, frozen=True):
    op: str
    left: Node
    right: Node


class Not(msgspec.Struct, frozen=True):
    operand: Node


class And(msgspec.Struct, frozen=True):
    items: tuple[Node, ...]


class Or(msgspec.Struct, frozen=True):
    items: tuple[Node, ...]


Node: TypeAlias = Num | Str | Name | Word | Defined | Neg | Arith | Cmp | Not | And | Or

COMPARISONS: Final = frozenset({"==", "!=", "<", ">", "<=", ">="})
ANY_WORDS: Final = frozenset({"any", "local"})
ANY_NAMES: Final = frozenset({"type", "model"})


def is_any(name: str, word: str) -> bool:
    return name in ANY_NAMES and word in ANY_WORDS


# -- canonical printing ----------------------------------------------------------


def _precedence(node: Node) -> int:
    match node:
        case Or():
            return 1
        case And():
            return 2
        case Cmp():
            return 4
        case Arith(rest=rest):
            return 5 if rest[0][0] in "+-" else 6
        case Neg() | Not():
            return 7
        case Num(value=value) if value < 0:
            return 7
        case _:
            return 8


def _wrap(node: Node, minimum: int) -> str:
    text = format_node(node)
    return text if _precedence(node) >= minimum else f"({text})"


def _quote(value: str) -> str:
    return f'"{value}"' if "'" in value else f"'{value}'"


def format_node(node: Node) -> str:
    match node:
        case Num(value=value):
            return format_number(value)
        case Str(value=value):
            return _quote(value)
        case Name(name=name) | Word(name=name):
            return name
        case Defined(name=name):
            return f"defined({name})"
        case Neg(operand=operand):
            return "-" + _wrap(operand, 7)
        case Arith(first=first, rest=rest):
            level = _precedence(node)
            # Left-associative: only a right operand needs parentheses at equal level.
            if len(rest) == 1:
                return _wrap(first, level) + rest[0][0] + _wrap(rest[0][1], level + 1)
            right = level + 1
            return _wrap(first, level) + "".join(op + _wrap(item, right) for op, item in rest)
        case Cmp(op=op, left=left, right=right):
            return _wrap(left, 5) + op + _wrap(right, 5)
        case Not(operand=operand):
            # Parenthesised beyond atoms, so "!(a==b)" never reads as "(!a)==b".
            bare = _precedence(operand) >= 8 or isinstance(operand, Not)
            return "!" + (format_node(operand) if bare else f"({format_node(operand)})")
        case And(items=items):
            return " && ".join(_wrap(item, 3) for item in items)
        case Or(items=items):
            return " || ".join(_wrap(item, 2) for item in items)


def node_names(node: Node, out: set[str], words: set[str] | None = None) -> set[str]:
    """Add the names ``node`` reads to ``out`` (``defined(x)`` reads ``x``). With
    ``words``, the bare words right of a comparison (a host's value if it has
    one, else the text) go there instead of to ``out``. Recursive, but only as
    deep as the tree, which the parser bounds."""
    match node:
        case Name(name=name) | Defined(name=name):
            out.add(name)
        case Cmp(left=Name(name=name), right=Word(name=word)) if is_any(name, word):
            out.add(name)  # "type==any" reads nothing, but listing "type" is harmless
        case Word(name=name):
            (out if words is None else words).add(name)
        case Neg(operand=operand) | Not(operand=operand):
            node_names(operand, out, words)
        case Cmp(left=left, right=right):
            node_names(left, out, words)
            node_names(right, out, words)
        case Arith(first=first, rest=rest):
            node_names(first, out, words)
            for _, item in rest:
                node_names(item, out, words)
        case And(items=items) | Or(items=items):
            for item in items:
                node_names(item, out, words)
        case _:
            pass
    return out
