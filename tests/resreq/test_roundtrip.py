"""Canonical text round-trips, and the parse caches hand out shared objects."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.resreq.test_corpus import VALID
from tests.strategies import resreqs, select_hosts, select_texts
from xce_core import format_resreq, parse_resreq
from xce_core.resreq import ResReq, compile_select
from xce_core.resreq._lex import format_number
from xce_core.resreq._limits import MIN_DIGITS
from xce_core.resreq._select import _compile_uncached
from xce_core.resreq._tree import Value

# Distinct values per name make a misplaced parenthesis change the arithmetic.
_PRIME_HOSTS: list[dict[str, Value]] = [
    {"a": 2, "b": 3, "mem": 5, "gpu": 7, "type": 11, "model": 13, "X86_64": 17, "any": 19},
    {"a": 0.5, "b": -3, "mem": 1, "gpu": 0, "type": "X86_64", "model": True, "X86_64": 4},
]


def _fresh_copy(text: str) -> str:
    """An equal string that is not the same object, so identity comes from the cache."""
    return "".join(list(text))


@settings(max_examples=150)  # each tree is large: ~30 ms per example
@given(resreqs)
def test_format_then_parse_gives_an_equal_tree(tree: ResReq) -> None:
    text = format_resreq(tree)
    assert str(tree) == text
    assert parse_resreq(text) == tree


@settings(max_examples=300)
@given(select_texts, st.lists(select_hosts, min_size=1, max_size=4))
def test_canonical_select_text_keeps_the_meaning(text: str, hosts: list[dict[str, Value]]) -> None:
    # Both compiled without the cache: a cached object for the canonical text would
    # hide a printer that drops needed parentheses.
    original = _compile_uncached(text)
    reparsed = _compile_uncached(original.text)
    assert reparsed.text == original.text  # the canonical text is a fixed point
    assert reparsed.names == original.names
    for host in hosts + _PRIME_HOSTS:  # and fewer parentheses mean the same thing
        assert reparsed(host) == original(host)
    assert compile_select(original.text) is compile_select(text)


@pytest.mark.parametrize("text", [text for text, _ in VALID])
def test_corpus_strings_reparse_from_canonical_text(text: str) -> None:
    tree = parse_resreq(text)
    canonical = str(tree)
    assert parse_resreq(canonical) == tree
    assert str(parse_resreq(canonical)) == canonical


def test_same_text_gives_the_same_tree_object() -> None:
    text = "2*{select[type==X86_64 && mem>4000] rusage[mem=100]} + {order[ut]}"
    assert parse_resreq(_fresh_copy(text)) is parse_resreq(_fresh_copy(text))


def test_same_select_text_gives_the_same_select_object() -> None:
    assert compile_select(_fresh_copy("mem>4000")) is compile_select(_fresh_copy("mem>4000"))


def test_texts_with_one_canonical_form_share_one_select_object() -> None:
    expr = compile_select("type == X86_64 and (mem > 4000)")
    assert compile_select("type=X86_64 && mem>4000") is expr
    assert compile_select(expr.text) is expr
    assert parse_resreq("select[type==X86_64&&mem>4000.0] order[ut]").select is expr
    assert parse_resreq("type==X86_64 AND mem>4e3").select is expr


def test_parse_errors_are_not_cached() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="unknown section 'foo'"):
            parse_resreq("foo[1]")


# -- extreme values (issue #10): canonical text never holds inf, and fits the limits --


@settings(max_examples=300)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_canonical_numbers_are_exact_and_fit_the_digit_limit(value: float) -> None:
    text = format_number(value)
    assert float(text) == value
    assert sum(char.isdigit() for char in text) <= 21 < MIN_DIGITS


@settings(max_examples=300)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_extreme_select_constants_keep_their_value(value: float) -> None:
    expr = compile_select(f"x>={format_number(value)} && x<={format_number(value)}")
    assert compile_select(expr.text) is expr
    assert expr({"x": value})
    assert not expr({"x": math.nextafter(value, math.inf)})


@pytest.mark.parametrize(
    "text",
    [
        "select[mem>1.7976931348623157e308] rusage[mem=1.7976931348623157e308:duration=5e-324]",
        "select[mem>=" + "9" * 30 + "] rusage[mem=" + "9" * 30 + "]",
        "2147483647*{span[ptile=2147483647]} + {span[block=2147483647]}",
        "span[ptile='!',HP:2147483647] same[type]",
        "select[mem>1e305G && swp>1e-320K] rusage[mem=(1e305G 1e305M)]",
        "select[" + "(" * 63 + "a" + ")" * 63 + "]",
        "select[" + " && ".join(f"a{i}" for i in range(1_000)) + "]",
    ],
)
def test_values_at_the_limits_round_trip(text: str) -> None:
    tree = parse_resreq(text)
    canonical = format_resreq(tree)
    assert "inf" not in canonical
    assert parse_resreq(canonical) == tree
    assert format_resreq(parse_resreq(canonical)) == canonical
