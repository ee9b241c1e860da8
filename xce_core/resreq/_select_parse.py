"""The select-expression parser: operator precedence with explicit stacks.

No Python recursion: however deep the text nests, the parser's own frames stay
constant, and the nesting it accepts is bounded by ``ResReqLimits.max_depth``
(open parentheses and prefix operators at any point, and the depth of the tree
it builds), so the recursive printer and the compiled closures stay shallow too.
Chains of one operator level become one flat node (``a+b+c`` is one
:class:`Arith`, ``a && b && c`` one :class:`And`), built in time linear in the
chain. The grammar and its precedence are described in ``_select``.
"""

from __future__ import annotations

from typing import Final, NoReturn, TypeAlias, cast

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
    shown,
    tokenize_select,
)
from xce_core.resreq._limits import ResReqLimits
from xce_core.resreq._names import ALIASES, NOT_DEFINABLE, canonical_name
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
)

__all__ = ["parse_select"]

_alias = ALIASES.get  # a name as written -> the load index it is an alias of
# Binding levels, loosest first. The prefix operators bind tightest, "!" as "-"
# (LSF's operator table: "!a" is 1 if a is 0, else 0, so "!a==b" is "(!a)==b").
_OR, _AND, _CMP, _ADD, _MUL, _NEG = 1, 2, 4, 5, 6, 7
_NOT = _NEG
_BINARY: Final = {
    "||": _OR,
    "&&": _AND,
    **dict.fromkeys(COMPARISONS, _CMP),
    "+": _ADD,
    "-": _ADD,
    "*": _MUL,
    "/": _MUL,
}


# A finished operand: its node, tree depth, first column, and the name as
# written when it is one bare name (``cpu`` stays a word right of ``==``).
_Operand: TypeAlias = tuple[Node, int, int, str | None]


class _Chain:
    """Operands of one level waiting for the last: ``&&``, ``||``, ``+ -``, ``* /``."""

    __slots__ = ("depth", "first", "items", "level", "ops")

    def __init__(self, level: int, first: _Operand) -> None:
        self.level = level
        self.first = first  # kept for the string-constant check at the end
        self.depth = 0  # the deepest operand so far
        self.items: list[Node] = []
        self.ops: list[str] = []
        node = first[0]
        if level <= _AND:
            self.add(first)
        elif isinstance(node, Arith) and _arith_level(node) == level:
            # "(a+b)+c" is "a+b+c": one chain, evaluated in the same order.
            self.items.append(node.first)
            self.items += (item for _, item in node.rest)
            self.ops += (op for op, _ in node.rest)
            self.depth = first[1] - 1
        else:
            self.items.append(node)
            self.depth = first[1]

    def add(self, operand: _Operand) -> None:
        node, depth = operand[0], operand[1]
        if self.level <= _AND and isinstance(node, Or if self.level == _OR else And):
            self.items += node.items  # parenthesised: (a || b) || c
            depth -= 1
        else:
            self.items.append(node)
        if depth > self.depth:
            self.depth = depth

    def node(self) -> Node:
        if self.level == _OR:
            return Or(tuple(self.items))
        if self.level == _AND:
            return And(tuple(self.items))
        return Arith(self.items[0], tuple(zip(self.ops, self.items[1:], strict=True)))


# What waits on the stack, binding level first:
#   (0, "(", column, None)                    an open parenthesis
#   (_NOT or _NEG, "!" or "-", column, None)  a prefix operator
#   (level, op, column, left operand)         a binary operator waiting for its right
#                                             side (most chains have two operands)
#   (level, "", column, _Chain)               a longer chain waiting for its last operand
_Entry: TypeAlias = tuple[int, str, int, _Operand | _Chain | None]


def _arith_level(node: Arith) -> int:
    return _ADD if node.rest[0][0] in "+-" else _MUL


def _describe(token: Token) -> str:
    return "the end of the expression" if token.kind == EOF else shown(token.text)


def parse_select(source: str, start: int, end: int, limits: ResReqLimits) -> Node:
    """The tree of the select text ``source[start:end]`` (not empty).

    Raises ResReqSyntaxError, at an absolute column of ``source``, for bad text
    or text beyond ``limits``.
    """
    return _Parser(source, tokenize_select(source, start, end, limits), limits).parse()


class _Parser:
    __slots__ = (
        "index",
        "limits",
        "max_depth",
        "max_terms",
        "nesting",
        "source",
        "stack",
        "tokens",
    )

    def __init__(self, source: str, tokens: list[Token], limits: ResReqLimits) -> None:
        self.source = source
        self.tokens = tokens
        self.limits = limits
        self.max_depth = limits.max_depth
        self.max_terms = limits.max_terms
        self.index = 0
        self.stack: list[_Entry] = []
        self.nesting = 0  # "(" and prefix operators on the stack

    def fail(self, message: str, column: int) -> NoReturn:
        raise ResReqSyntaxError(message, self.source, column)

    def parse(self) -> Node:
        tokens = self.tokens
        stack = self.stack
        if tokens[0].kind == EOF:
            self.fail("expected a select expression", tokens[0].column)
        while True:
            current = self.operand()
            while True:  # after an operand: an operator, ")" or the end
                token = tokens[self.index]
                self.index += 1
                level = _BINARY.get(token.text, 0) if token.kind == OP else 0
                if level:
                    self.binary(token, level, current)
                    break
                while stack and stack[-1][0]:
                    current = self.apply(stack.pop(), current)
                if stack:  # an open parenthesis
                    if token.kind == OP and token.text == ")":
                        stack.pop()
                        self.nesting -= 1
                        continue  # the parenthesised expression is the operand
                    if token.kind == EOF:
                        self.fail("expected ')' to close '('", stack[-1][2])
                    self.fail(f"expected ')' to close '(', found {_describe(token)}", token.column)
                if token.kind == EOF:
                    if type(current[0]) is Str:
                        self.not_a_condition(current)
                    return current[0]
                if token.kind == OP and token.text == ")":
                    self.fail("unexpected ')' without a matching '('", token.column)
                self.fail(
                    "expected an operator or the end of the expression, found " + _describe(token),
                    token.column,
                )

    # -- operators -------------------------------------------------------------------

    def binary(self, token: Token, level: int, current: _Operand) -> None:
        stack = self.stack
        while stack and stack[-1][0] > level:
            current = self.apply(stack.pop(), current)
        top = stack[-1] if stack else None
        if top is None or top[0] != level:
            stack.append((level, token.text, current[2], current))
            return
        if level == _CMP:
            self.fail("comparisons do not chain; combine them with &&", token.column)
        if top[1]:  # a third operand: the pair becomes a chain
            chain = _Chain(level, cast(_Operand, top[3]))
            chain.ops.append(top[1])
            stack[-1] = (level, "", top[2], chain)
        else:
            chain = cast(_Chain, top[3])
        self.extend(chain, current)
        chain.ops.append(token.text)

    def apply(self, entry: _Entry, current: _Operand) -> _Operand:
        """``current`` as the last operand of the pending ``entry``."""
        level, op, column, payload = entry
        node, depth = current[0], current[1]
        if level in (_NOT, _NEG):
            self.nesting -= 1
            if op == "!":
                if type(node) is Str:
                    self.not_a_condition(current)
                node = Not(node)
                depth += 1
            elif type(node) is Num:
                # Folding keeps "-5" one constant, so it prints and re-parses the same.
                return (Num(-node.value), depth, column, None)
            else:
                node = Neg(node)
                depth += 1
        elif op:
            left = cast(_Operand, payload)
            column = left[2]
            if level == _CMP:
                if type(left[0]) is Name and type(node) is Name:
                    node = Word(current[3] or node.name)
                node = Cmp(op, left[0], node)
                depth = max(left[1], depth) + 1
            else:  # the common two-operand chain, built without a _Chain
                node, depth = self.pair(level, op, left, current)
        else:
            chain = cast(_Chain, payload)
            self.extend(chain, current)
            if level <= _AND and type(chain.first[0]) is Str:
                self.not_a_condition(chain.first)
            node, depth, column = chain.node(), chain.depth + 1, chain.first[2]
        if depth > self.max_depth:
            self.limits.exceeded("max_depth", "an expression nested too deep", self.source, column)
        return (node, depth, column, None)

    def pair(self, level: int, op: str, left: _Operand, right: _Operand) -> tuple[Node, int]:
        """``left op right`` as one flat node, and its depth (what a _Chain of
        two operands would build)."""
        first, second = left[0], right[0]
        if level <= _AND:
            if type(second) is Str:
                self.not_a_condition(right)
            if type(first) is Str:
                self.not_a_condition(left)
            kind = Or if level == _OR else And
            flat_first = type(first) is kind  # parenthesised: (a || b) || c
            flat_second = type(second) is kind
            items = (first.items if flat_first else (first,)) + (  # type: ignore[union-attr]
                second.items if flat_second else (second,)  # type: ignore[union-attr]
            )
            if len(items) > self.max_terms:
                self.limits.check_terms(
                    len(items), "conditions in one chain", self.source, right[2]
                )
            depth = max(left[1] - flat_first, right[1] - flat_second)
            return kind(items), depth + 1
        if type(first) is Arith and _arith_level(first) == level:
            # "(a+b)+c" is "a+b+c": one chain, evaluated in the same order.
            rest = (*first.rest, (op, second))
            if len(rest) >= self.max_terms:
                self.limits.check_terms(
                    len(rest) + 1, "operands in one chain", self.source, right[2]
                )
            return Arith(first.first, rest), max(left[1] - 1, right[1]) + 1
        return Arith(first, ((op, second),)), max(left[1], right[1]) + 1

    def extend(self, chain: _Chain, operand: _Operand) -> None:
        if chain.level <= _AND and type(operand[0]) is Str:
            self.not_a_condition(operand)
        chain.add(operand)
        if len(chain.items) > self.max_terms:
            what = "operands in one chain" if chain.level >= _ADD else "conditions in one chain"
            self.limits.check_terms(len(chain.items), what, self.source, operand[2])

    def not_a_condition(self, operand: _Operand) -> NoReturn:
        """An operand of ``&& || !``, or the whole expression, must be a
        condition; a string constant is a value (``('x')=='x'`` is fine)."""
        self.fail("expected a comparison, found a string constant", operand[2])

    # -- operands --------------------------------------------------------------------

    def operand(self) -> _Operand:
        """Push any "(" and prefix operators, then read the atom after them."""
        while True:
            token = self.tokens[self.index]
            self.index += 1
            if token.kind == NAME:  # the common case first
                return (Name(_alias(token.text, token.text)), 1, token.column, token.text)
            if token.kind != OP:
                return self.atom(token)
            if token.text == "(":
                self.push((0, "(", token.column, None))
            elif token.text == "-":
                self.push((_NEG, "-", token.column, None))
            elif token.text == "!":
                self.push((_NOT, "!", token.column, None))
            else:
                return self.atom(token)

    def push(self, entry: _Entry) -> None:
        self.nesting += 1
        if self.nesting > self.max_depth:
            self.limits.exceeded(
                "max_depth", "parentheses or operators nested too deep", self.source, entry[2]
            )
        self.stack.append(entry)

    def atom(self, token: Token) -> _Operand:
        column = token.column
        kind = token.kind
        if kind == NAME:
            return (Name(_alias(token.text, token.text)), 1, column, token.text)
        if kind == NUM:
            return (Num(cast(float, token.value)), 1, column, None)
        if kind in (STR, DWORD):
            return (Str(cast(str, token.value)), 1, column, None)
        if kind == KEYWORD:  # defined(name)
            return (Defined(self.defined_name()), 1, column, None)
        self.index -= 1
        self.fail(f"expected a value, a name or '(', found {_describe(token)}", column)

    def defined_name(self) -> str:
        tokens = self.tokens
        if tokens[self.index].text != "(" or tokens[self.index].kind != OP:
            self.fail("expected '(' after defined", tokens[self.index].column)
        name = tokens[self.index + 1]
        if name.kind != NAME:
            self.fail("expected a resource name in defined(...)", name.column)
        closer = tokens[self.index + 2]  # a name is never the last token (EOF is)
        if closer.kind != OP or closer.text != ")":
            self.fail("expected ')' to close defined(", closer.column)
        self.index += 3
        resolved = canonical_name(name.text)
        if resolved in NOT_DEFINABLE:
            self.fail(
                f"defined() takes a configured resource; {shown(name.text)} is built in"
                " and always defined",
                name.column,
            )
        return resolved
