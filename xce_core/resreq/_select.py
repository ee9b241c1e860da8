"""Select expressions: parse once, print canonically, evaluate through closures.

``compile_select(text)`` turns LSF-style select text (``type==X86_64 && mem>4000``)
into a :class:`SelectExpr`. Each distinct text is parsed once: compiled objects
are cached by source text *and* by canonical text, so equal texts, and texts with
the same canonical form, give the very same object. The cache holds at most
``_CACHE_LIMIT`` entries and is emptied when full (identity then holds again from
the next compile on). User text is never passed to eval/exec/compile: evaluation
is a small tree of closures, with comparisons of a name against a constant fused
into one closure.

Semantics (they follow LSF; "missing" means ``host.get(name)`` is ``None``):

* **Missing names.** A comparison with a missing operand is false for every
  operator, ``!=`` included. Arithmetic on a missing value is missing, and so is
  the whole arithmetic expression. A missing name used as a condition is false.
  ``defined(name)`` is true iff the host has the name. ``!`` simply negates, so
  ``!(gpu>0)`` is *true* on a host without ``gpu``; write
  ``defined(gpu) && !(gpu>0)`` to require the resource.
* **Booleans.** A name used as a condition is true when the host's value is
  truthy (``True``, a non-zero number, a non-empty string). In comparisons and
  arithmetic ``True``/``False`` are 1/0.
* **Strings.** ``==``/``!=`` compare by value; ``< > <= >=`` lexicographically.
  A string compared with a number (or bool) is false for every operator, ``!=``
  included; arithmetic on a string is missing. Nothing ever raises.
* **Bare words.** In ``name OP word``, where both sides are bare names (after
  removing parentheses), the right-hand ``word`` reads the host's value of
  ``word`` if it has one and is otherwise the string ``'word'``. So
  ``type==X86_64`` compares ``type`` to the string ``X86_64`` (unless a host
  defines a resource literally named ``X86_64``) while ``mem>maxmem`` compares two
  resources. Anywhere else a bare name is a resource. Dotted words such as
  ``LINUX2.4`` are always string constants. Quote a value to force a string.
* **any/local.** ``type==any``, ``model==any``, ``type==local`` and
  ``model==local`` (bare, lower-case words) are true on every host, even one
  without ``type``/``model``; with ``!=`` they are false everywhere. ``local``
  would mean "the submission host's type" in LSF; xce has no submission host, so
  it means ``any``. Quoted, ``type=='any'`` compares with the string ``any``.
* **Arithmetic.** ``+ - * /`` on numbers; division by zero or overflow is
  missing.
* **Precedence**, loosest first: ``||``, ``&&``, ``!``, comparisons (which do not
  chain: ``a<b<c`` is an error), ``+ -``, ``* /``, unary ``-``. Note that ``!``
  binds looser than comparisons: ``!a==b`` means ``!(a==b)``.
* A string constant is not a condition: ``select['x']`` and ``'x' && a`` are
  errors (``('x')=='x'`` is fine).

Canonical text: operators ``&& || ! ==`` (keywords and ``=`` are normalised),
`` && `` and `` || `` with one space on each side and no other spaces, the
fewest parentheses precedence allows except that ``!`` puts parentheses around
anything but a name, constant, ``defined(...)`` or another ``!``, numbers as
:func:`~xce_core.resreq._lex.format_number` prints them, string constants in
single quotes (double quotes if the value contains ``'``). Nested ``&&``/``||``
chains are flattened. ``compile_select(e.text) is e``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NoReturn

from xce_core._errors import ResReqSyntaxError
from xce_core.resreq._lex import (
    DWORD,
    EOF,
    KEYWORD,
    NAME,
    NUM,
    OP,
    STR,
    Token,
    tokenize_select,
)
from xce_core.resreq._select_eval import compile_test
from xce_core.resreq._select_tree import (
    COMPARISONS,
    And,
    Arith,
    Cmp,
    Defined,
    Name,
    Neg,
    Node,
    Not,
    Num,
    Or,
    Str,
    Word,
    format_node,
    node_names,
)
from xce_core.resreq._tree import SelectExpr

__all__ = ["compile_select", "compile_select_span"]

_CACHE_LIMIT: Final = 100_000
_CACHE: dict[str, SelectExpr] = {}


# -- parser --------------------------------------------------------------------


class _Parser:
    """Recursive descent over the tokens of ``source[start:end]``."""

    __slots__ = ("index", "source", "tokens")

    def __init__(self, source: str, start: int, end: int) -> None:
        self.source = source
        self.tokens = tokenize_select(source, start, end)
        self.index = 0

    def fail(self, message: str, column: int) -> NoReturn:
        raise ResReqSyntaxError(message, self.source, column)

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take_op(self, *ops: str) -> Token | None:
        token = self.tokens[self.index]
        if token.kind == OP and token.text in ops:
            self.index += 1
            return token
        return None

    def parse(self) -> Node:
        if self.peek().kind == EOF:
            self.fail("expected a select expression", self.peek().column)
        node = self.condition(self.or_expr)
        token = self.peek()
        if token.kind != EOF:
            if token.text == ")":
                self.fail("unexpected ')' without a matching '('", token.column)
            self.fail(
                f"expected an operator or the end of the expression, found {_describe(token)}",
                token.column,
            )
        return node

    def condition(self, parse: Callable[[], Node]) -> Node:
        """Parse an operand of ``&& || !`` or the whole expression. A string
        constant is a value, not a condition; ``('x')`` is fine inside arithmetic
        or a comparison, so only these callers check."""
        first = self.peek()
        node = parse()
        if isinstance(node, Str):
            self.fail("expected a comparison, found a string constant", first.column)
        return node

    def or_expr(self) -> Node:
        first = self.peek()
        items = [self.and_expr()]
        while self.take_op("||"):
            items.append(self.condition(self.and_expr))
        if len(items) == 1:
            return items[0]
        if isinstance(items[0], Str):
            self.fail("expected a comparison, found a string constant", first.column)
        return Or(_flatten(items, Or))

    def and_expr(self) -> Node:
        first = self.peek()
        items = [self.not_expr()]
        while self.take_op("&&"):
            items.append(self.condition(self.not_expr))
        if len(items) == 1:
            return items[0]
        if isinstance(items[0], Str):
            self.fail("expected a comparison, found a string constant", first.column)
        return And(_flatten(items, And))

    def not_expr(self) -> Node:
        if self.take_op("!"):
            return Not(self.condition(self.not_expr))
        return self.comparison()

    def comparison(self) -> Node:
        left = self.additive()
        token = self.peek()
        if token.kind != OP or token.text not in COMPARISONS:
            return left
        self.index += 1
        right = self.additive()
        after = self.peek()
        if after.kind == OP and after.text in COMPARISONS:
            self.fail("comparisons do not chain; combine them with &&", after.column)
        if isinstance(left, Name) and isinstance(right, Name):
            right = Word(right.name)
        return Cmp(token.text, left, right)

    def additive(self) -> Node:
        node = self.multiplicative()
        while (token := self.take_op("+", "-")) is not None:
            node = Arith(token.text, node, self.multiplicative())
        return node

    def multiplicative(self) -> Node:
        node = self.unary()
        while (token := self.take_op("*", "/")) is not None:
            node = Arith(token.text, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.take_op("-"):
            operand = self.unary()
            # Folding keeps "-5" one constant, so it prints and re-parses the same.
            return Num(-operand.value) if isinstance(operand, Num) else Neg(operand)
        return self.atom()

    def atom(self) -> Node:
        token = self.peek()
        self.index += 1
        if token.kind == NUM:
            assert isinstance(token.value, float)
            return Num(token.value)
        if token.kind in (STR, DWORD):
            assert isinstance(token.value, str)
            return Str(token.value)
        if token.kind == NAME:
            return Name(token.text)
        if token.kind == KEYWORD:  # defined(name)
            if not self.take_op("("):
                self.fail("expected '(' after defined", self.peek().column)
            name = self.peek()
            if name.kind != NAME:
                self.fail("expected a resource name in defined(...)", name.column)
            self.index += 1
            if not self.take_op(")"):
                self.fail("expected ')' to close defined(", self.peek().column)
            return Defined(name.text)
        if token.kind == OP and token.text == "(":
            node = self.or_expr()
            if not self.take_op(")"):
                closer = self.peek()
                if closer.kind == EOF:
                    self.fail("expected ')' to close '('", token.column)
                self.fail(f"expected ')' to close '(', found {_describe(closer)}", closer.column)
            return node
        self.index -= 1
        self.fail(f"expected a value, a name or '(', found {_describe(token)}", token.column)


def _describe(token: Token) -> str:
    return "the end of the expression" if token.kind == EOF else repr(token.text)


def _flatten(items: list[Node], kind: type[And] | type[Or]) -> tuple[Node, ...]:
    flat: list[Node] = []
    for item in items:
        if isinstance(item, kind):
            flat.extend(item.items)
        else:
            flat.append(item)
    return tuple(flat)


# -- public entry points -----------------------------------------------------------


def _compile_node(node: Node, text: str) -> SelectExpr:
    return SelectExpr(
        text=text, names=frozenset(node_names(node, set())), evaluate=compile_test(node)
    )


def _compile_uncached(text: str) -> SelectExpr:
    """Parse and compile without touching the cache (tests compare against it)."""
    node = _Parser(text, 0, len(text)).parse()
    return _compile_node(node, format_node(node))


def compile_select_span(source: str, start: int, end: int) -> SelectExpr:
    """Compile ``source[start:end]``; errors carry ``source`` and absolute columns.

    This is what the requirement parser uses for ``select[...]``, so a mistake
    inside the brackets is reported at its column in the whole requirement.
    Cached like :func:`compile_select`. Raises only ResReqSyntaxError.
    """
    key = source[start:end]
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    node = _Parser(source, start, end).parse()
    text = format_node(node)
    expr = _CACHE.get(text)
    if expr is None:
        expr = _compile_node(node, text)
    if len(_CACHE) >= _CACHE_LIMIT - 1:
        _CACHE.clear()
    _CACHE[text] = expr
    _CACHE[key] = expr
    return expr


def compile_select(text: str, *, offset: int = 0) -> SelectExpr:
    """Compile select text (the inside of ``select[...]``) into a :class:`SelectExpr`.

    Idempotent and cached: the same text, or any text with the same canonical
    form, returns the very same object, and ``compile_select(e.text) is e``.
    Raises ResReqSyntaxError (never anything else) for bad text; its ``text`` is
    ``text`` and its ``column`` is ``offset`` plus the 0-based column in ``text``,
    for callers that embed ``text`` at ``offset`` in a larger string (to report
    the larger string itself, use :func:`compile_select_span`). See the module
    docstring for the grammar and the meaning of missing names and bare words.
    """
    try:
        return compile_select_span(text, 0, len(text))
    except ResReqSyntaxError as error:
        if not offset:
            raise
        raise ResReqSyntaxError(error.message, error.text, error.column + offset) from None
