"""Compile a select syntax tree into closures (no eval/exec of user text).

``compile_test(node)`` returns ``host -> bool`` implementing the semantics in
``_select``'s docstring. Comparisons of a name against a constant or a bare word
become one closure each, so ``type==X86_64 && mem>4000`` is three calls deep.
Chains (``&&``, ``||``, ``a+b+c``) are loops over a tuple, so a closure calls
others only as deep as the expression nests (``ResReqLimits.max_depth``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final, TypeAlias

from xce_core.resreq._select_tree import (
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
    is_any,
)
from xce_core.resreq._tree import HostValues, Value

__all__ = ["compile_test"]


_Test: TypeAlias = Callable[[HostValues], bool]
_Eval: TypeAlias = Callable[[HostValues], Value | None]
_Compare: TypeAlias = Callable[[Any, Any], bool]

_ORDERING: Final[dict[str, _Compare]] = {
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}
_ARITH: Final[dict[str, Callable[[Any, Any], Value]]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}


def _equal(a: object, b: object) -> bool:
    # str == number is already False in Python; only "both missing" needs a guard.
    return a is not None and a == b


def _not_equal(a: object, b: object) -> bool:
    return a is not None and b is not None and isinstance(a, str) is isinstance(b, str) and a != b


def _ordering(compare: _Compare) -> _Compare:
    def ordered(a: Any, b: Any) -> bool:
        try:
            return compare(a, b)
        except TypeError:  # None, or str against number
            return False

    return ordered


_TESTS: Final[dict[str, _Compare]] = {
    "==": _equal,
    "!=": _not_equal,
    **{op: _ordering(fn) for op, fn in _ORDERING.items()},
}


def _constant_test(result: bool) -> _Test:
    def constant(host: HostValues) -> bool:
        return result

    return constant


def _name_vs_constant(op: str, name: str, constant: float | str) -> _Test:
    # The hot path (mem>4000, type=='x'): one closure, one lookup.
    if op == "==":

        def equal(host: HostValues) -> bool:
            return host.get(name) == constant

        return equal
    if op == "!=" and isinstance(constant, str):

        def not_equal_string(host: HostValues) -> bool:
            value = host.get(name)
            return isinstance(value, str) and value != constant

        return not_equal_string
    if op == "!=":

        def not_equal_number(host: HostValues) -> bool:
            value = host.get(name)
            return isinstance(value, (int, float)) and value != constant

        return not_equal_number
    # One closure per operator: calling operator.gt from inside costs ~15% more.
    # TypeError means missing (None) or a string against a number: false.
    if op == ">":

        def greater(host: HostValues) -> bool:
            try:
                return host.get(name) > constant  # type: ignore[operator]
            except TypeError:
                return False

        return greater
    if op == ">=":

        def greater_equal(host: HostValues) -> bool:
            try:
                return host.get(name) >= constant  # type: ignore[operator]
            except TypeError:
                return False

        return greater_equal
    if op == "<":

        def less(host: HostValues) -> bool:
            try:
                return host.get(name) < constant  # type: ignore[operator]
            except TypeError:
                return False

        return less

    def less_equal(host: HostValues) -> bool:
        try:
            return host.get(name) <= constant  # type: ignore[operator]
        except TypeError:
            return False

    return less_equal


def _name_vs_word(op: str, name: str, word: str) -> _Test:
    if op == "==":

        def equal(host: HostValues) -> bool:
            get = host.get
            value = get(name)
            if value is None:
                return False
            other = get(word)
            return value == (word if other is None else other)

        return equal
    test = _TESTS[op]

    def compare(host: HostValues) -> bool:
        get = host.get
        other = get(word)
        return test(get(name), word if other is None else other)

    return compare


def _compile_comparison(node: Cmp) -> _Test:
    op, left, right = node.op, node.left, node.right
    if isinstance(left, Name):
        if isinstance(right, Word):
            if is_any(left.name, right.name) and op in ("==", "!="):
                return _constant_test(op == "==")
            return _name_vs_word(op, left.name, right.name)
        if isinstance(right, Num | Str):
            return _name_vs_constant(op, left.name, right.value)
    test = _TESTS[op]
    left_value, right_value = _compile_value(left), _compile_value(right)

    def compare(host: HostValues) -> bool:
        return test(left_value(host), right_value(host))

    return compare


def compile_test(node: Node) -> _Test:
    """A closure telling whether ``node`` holds as a condition on a host."""
    match node:
        case Cmp():
            return _compile_comparison(node)
        case And(items=items):
            tests = tuple(compile_test(item) for item in items)
            if len(tests) == 2:
                first, second = tests

                def both(host: HostValues) -> bool:
                    return first(host) and second(host)

                return both

            def every(host: HostValues) -> bool:
                return all(test(host) for test in tests)

            return every
        case Or(items=items):
            tests = tuple(compile_test(item) for item in items)
            if len(tests) == 2:
                first, second = tests

                def either(host: HostValues) -> bool:
                    return first(host) or second(host)

                return either

            def some(host: HostValues) -> bool:
                return any(test(host) for test in tests)

            return some
        case Not(operand=operand):
            inner = compile_test(operand)

            def negated(host: HostValues) -> bool:
                return not inner(host)

            return negated
        case Name(name=name):

            def truthy(host: HostValues) -> bool:
                return bool(host.get(name))

            return truthy
        case Defined(name=name):

            def defined(host: HostValues) -> bool:
                return host.get(name) is not None

            return defined
        case Num(value=number):
            return _constant_test(bool(number))
        case _:
            value = _compile_value(node)

            def nonzero(host: HostValues) -> bool:
                return bool(value(host))  # missing (None) is false

            return nonzero


def _binary(apply: Callable[[Any, Any], Value], left: _Eval, right: _Eval) -> _Eval:
    def arithmetic(host: HostValues) -> Value | None:
        a = left(host)
        b = right(host)
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return None
        try:
            return apply(a, b)
        except ArithmeticError:  # division by zero, overflow
            return None

    return arithmetic


def _compile_value(node: Node) -> _Eval:
    """A closure computing ``node``'s value on a host; ``None`` means missing."""
    match node:
        case Num(value=number):
            return lambda host: number
        case Str(value=text):
            return lambda host: text
        case Name(name=name):
            return lambda host: host.get(name)
        case Word(name=name):

            def word(host: HostValues) -> Value:
                value = host.get(name)
                return name if value is None else value

            return word
        case Neg(operand=operand):
            inner = _compile_value(operand)

            def negate(host: HostValues) -> Value | None:
                value = inner(host)
                return -value if isinstance(value, int | float) else None

            return negate
        case Arith(first=first, rest=rest):
            first_value = _compile_value(first)
            if len(rest) == 1:
                return _binary(_ARITH[rest[0][0]], first_value, _compile_value(rest[0][1]))
            steps = tuple((_ARITH[op], _compile_value(item)) for op, item in rest)

            def chain(host: HostValues) -> Value | None:
                # A loop over the operands: a long a+b+c+... never nests calls.
                a = first_value(host)
                for apply, value in steps:
                    b = value(host)
                    if not isinstance(a, int | float) or not isinstance(b, int | float):
                        return None
                    try:
                        a = apply(a, b)
                    except ArithmeticError:  # division by zero, overflow
                        return None
                return a

            return chain
        case _:
            return compile_test(node)  # a condition's value is True/False, i.e. 1/0
