"""Hostile input (issue #10): one bad string must never crash, stall or bloat.

Every case here failed on the parser before ``ResReqLimits``: RecursionError
(deep nesting, long ``+`` chains, many ``!``/``-``), ValueError from ``int()``
(5,000-digit counts), ``inf`` in canonical text (``1e308GB``), or seconds to
minutes of quadratic parsing (20,000 rusage terms, a 1 MB requirement).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from events import JobAllocated, JobRejected, JobSubmitted, SessionBegin, WorkerUp
from xce_core import ResReqSyntaxError, run_events
from xce_core.resreq import (
    DEFAULT_LIMITS,
    ResReqLimits,
    compile_select,
    format_resreq,
    parse_resreq,
)

_DIGITS = "9" * 5_000
_RUSAGE_20K = "rusage[" + ":".join(f"r{i}=1" for i in range(20_000)) + "]"  # 169 KB
_ONE_MB = "select[" + "a" * (1 << 20) + "]"

# (what, text, limit named in the message, column of the error)
HOSTILE: list[tuple[str, str, str, int]] = [
    ("300 nested parentheses", "select[" + "(" * 300 + "a" + ")" * 300 + "]", "max_depth", 71),
    ("500 '!'", "select[" + "!" * 500 + "a]", "max_depth", 71),
    ("500 unary '-'", "select[" + "-" * 500 + "a>0]", "max_depth", 71),
    ("2,000-term '+' chain", "select[" + "+".join(["a"] * 2_000) + ">0]", "max_terms", 2_007),
    ("2,000-term '&&' chain", "select[" + "&&".join(["a"] * 2_000) + "]", "max_terms", 3_007),
    ("5,000-digit N*{}", _DIGITS + "*{select[a]}", "max_digits", 0),
    ("5,000-digit span hosts", f"span[hosts={_DIGITS}]", "max_digits", 11),
    ("5,000-digit ptile", f"span[ptile={_DIGITS}]", "max_digits", 11),
    ("5,000-digit block", f"span[block={_DIGITS}]", "max_digits", 11),
    ("5,000-digit stripe", f"span[stripe={_DIGITS}]", "max_digits", 12),
    ("5,000-digit ptile per type", f"span[ptile=HP:{_DIGITS}] same[type]", "max_digits", 14),
    ("5,000-digit select number", f"select[mem>{_DIGITS}]", "max_digits", 11),
    ("5,000-digit rusage amount", f"rusage[mem={_DIGITS}]", "max_digits", 11),
    ("count above 2**31-1", "2147483648*{select[a]}", "max_count", 0),
    ("20,000 rusage terms", _RUSAGE_20K, "max_length", 65_536),
    ("1 MB requirement", _ONE_MB, "max_length", 65_536),
    ("1,001 alternatives", "||".join(["{}"] * 1_001), "max_terms", 4_000),
    (
        "1,001 rusage terms",
        "rusage[" + ":".join(f"r{i}=1" for i in range(1_001)) + "]",
        "max_terms",
        len("rusage[" + ":".join(f"r{i}=1" for i in range(1_000)) + ":"),
    ),
]


@contextmanager
def _stack_budget(frames: int) -> Iterator[None]:
    """Run with only ``frames`` more Python frames than the caller has."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize(("what", "text", "limit", "column"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_input_is_rejected_naming_the_limit(
    what: str, text: str, limit: str, column: int
) -> None:
    start = time.perf_counter()
    with pytest.raises(ResReqSyntaxError) as caught:
        parse_resreq(text)
    assert time.perf_counter() - start < 0.5, what
    assert f"(limit {limit}={getattr(DEFAULT_LIMITS, limit)})" in caught.value.message
    assert caught.value.column == column
    assert caught.value.text is text
    assert len(str(caught.value)) < 400  # the rejection does not carry a megabyte


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("select[mem>1e308GB]", 11),
        ("rusage[mem=1e308GB]", 11),
        ("rusage[mem=(1e308T 1)]", 12),
        ("rusage[mem=1:duration=1e308h]", 22),
        ("select[mem=1e308G:swp=1]", 11),  # the legacy syntax too
        ("select[mem>1e999]", 11),
    ],
)
def test_amounts_that_overflow_are_errors_not_inf(text: str, column: int) -> None:
    with pytest.raises(ResReqSyntaxError, match="number out of range") as caught:
        parse_resreq(text)
    assert caught.value.column == column


def test_the_largest_finite_amounts_print_and_parse_back() -> None:
    tree = parse_resreq("select[mem>1e305GB] rusage[mem=1e305G:duration=1e300h]")
    text = format_resreq(tree)
    assert "inf" not in text
    assert parse_resreq(text) == tree


@pytest.mark.parametrize(
    ("accepted", "rejected"),
    [
        ("(" * 64 + "a" + ")" * 64, "(" * 65 + "a" + ")" * 65),
        ("!" * 63 + "a", "!" * 64 + "a"),  # 64 negations and the name: 65 deep
        ("+".join(["a"] * 1_000) + ">0", "+".join(["a"] * 1_001) + ">0"),
        (" || ".join(["a"] * 1_000), " || ".join(["a"] * 1_001)),
        ("mem>" + "9" * 30, "mem>" + "9" * 31),
        ("mem>" + "1" * 15 + "." + "1" * 15, "mem>" + "1" * 15 + "." + "1" * 16),
    ],
)
def test_select_limits_are_inclusive(accepted: str, rejected: str) -> None:
    assert compile_select(accepted).text
    with pytest.raises(ResReqSyntaxError, match="limit max_"):
        compile_select(rejected)


@pytest.mark.parametrize(
    "template",
    ["{}*{{select[a]}}", "span[ptile={}]", "span[block={}]", "span[stripe={}]"],
)
def test_counts_up_to_max_count(template: str) -> None:
    tree = parse_resreq(template.format(2**31 - 1))
    assert parse_resreq(format_resreq(tree)) == tree
    with pytest.raises(ResReqSyntaxError, match=r"limit max_count=2147483647"):
        parse_resreq(template.format(2**31))


def test_a_long_rusage_parses_in_linear_time_under_larger_limits() -> None:
    limits = ResReqLimits(max_length=1 << 20, max_terms=50_000)
    start = time.perf_counter()
    tree = parse_resreq(_RUSAGE_20K, limits)
    assert time.perf_counter() - start < 1.0  # it took about 10 s when quadratic
    assert len(tree.rusage[0]) == 20_000  # type: ignore[union-attr]
    assert parse_resreq(format_resreq(tree), limits) == tree


def test_long_chains_compile_flat_and_run_on_a_small_stack() -> None:
    limits = ResReqLimits(max_length=1 << 20, max_terms=20_000)
    chain = compile_select("+".join(f"a{i}" for i in range(10_000)) + ">0", limits=limits)
    conditions = compile_select(" && ".join(f"a{i}>0" for i in range(10_000)), limits=limits)
    host = {f"a{i}": 1 for i in range(10_000)}
    with _stack_budget(40):
        assert chain(host)
        assert conditions(host)
        assert not conditions({})


def test_the_deepest_accepted_expression_runs_on_a_bounded_stack() -> None:
    deepest = "!(" * 30 + "-(-a+1)>0" + ")" * 30  # 64 nested operators and parentheses
    with _stack_budget(400):  # the printer, compiler and closures: a few frames per level
        expr = compile_select(deepest)
        assert compile_select(expr.text) is expr
        assert expr({"a": 5}) is True  # an even number of negations of -(-5+1)>0
        assert expr.names == frozenset({"a"})


def test_compile_select_has_the_length_limit_too() -> None:
    with pytest.raises(ResReqSyntaxError, match=r"limit max_length=65536") as caught:
        compile_select("a" * (1 << 20))
    assert caught.value.column == 65_536
    assert compile_select("a" * 100, limits=ResReqLimits(max_length=100)).text == "a" * 100


def test_limits_are_checked_per_limits_not_let_through_by_the_cache() -> None:
    text = "select[" + " && ".join(f"x{i}>1" for i in range(1_500)) + "]"
    loose = ResReqLimits(max_terms=2_000)
    assert parse_resreq(text, loose).select is not None  # type: ignore[union-attr]
    with pytest.raises(ResReqSyntaxError, match="limit max_terms=1000"):
        parse_resreq(text)
    with pytest.raises(ResReqSyntaxError, match="limit max_terms=1000"):
        compile_select(text[7:-1])
    assert parse_resreq(text, loose) is parse_resreq(text, ResReqLimits(max_terms=2_000))


def test_default_limits() -> None:
    expected = ResReqLimits(
        max_length=65_536, max_depth=64, max_terms=1_000, max_digits=30, max_count=2**31 - 1
    )
    assert expected == DEFAULT_LIMITS
    assert parse_resreq("mem>1", DEFAULT_LIMITS) is parse_resreq("mem>1")


@pytest.mark.parametrize(
    "arguments",
    [
        {"max_depth": 0},
        {"max_depth": 101},
        {"max_digits": 20},
        {"max_terms": -1},
        {"max_count": 1.5},
    ],
)
def test_limits_out_of_range_are_refused(arguments: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="ResReqLimits"):
        ResReqLimits(**arguments)  # type: ignore[arg-type]


def test_canonical_text_longer_than_the_limit_is_refused() -> None:
    # "9Z" prints as "1.0133099161583616e+16": the source fits, its canonical form not.
    limits = ResReqLimits(max_length=200)
    text = "select[" + "||".join(["x>9Z"] * 20) + "]"
    assert len(text) <= 200
    with pytest.raises(ResReqSyntaxError, match=r"canonical form of \d+ characters"):
        parse_resreq(text, limits)


def test_the_scheduler_rejects_a_hostile_job_and_goes_on() -> None:
    events = [
        WorkerUp(name="h1", slots=2),
        JobSubmitted(job_id="bad", resreq="select[" + "(" * 5_000 + "a" + ")" * 5_000 + "]"),
        JobSubmitted(job_id="huge", resreq=_ONE_MB),
        JobSubmitted(job_id="good", resreq="select[slots>0]"),
        SessionBegin(),
    ]
    decisions = run_events(events)
    rejected = {d.job_id: d.error for d in decisions if isinstance(d, JobRejected)}
    assert set(rejected) == {"bad", "huge"}
    assert "limit max_depth=64" in rejected["bad"]
    assert len(rejected["huge"]) < 400
    assert [d.job_id for d in decisions if isinstance(d, JobAllocated)] == ["good"]
