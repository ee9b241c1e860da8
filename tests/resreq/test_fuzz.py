"""Fuzzing ``parse_resreq`` (issue #10): any text gives a tree or ResReqSyntaxError.

Nothing else may come out (no RecursionError, ValueError, ...), every text is
answered in bounded time, and an accepted text's canonical form parses back to
the same tree under the same limits. The quick suite runs a few hundred
examples; the long run is opt-in: ``python -m pytest -m slow tests/resreq/test_fuzz.py``.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings

from tests.strategies import fuzz_texts, mutated_resreqs
from xce_core import ResReqSyntaxError
from xce_core.resreq import DEFAULT_LIMITS, ResReqLimits, format_resreq, parse_resreq

# Tight limits make the limits themselves (and canonical text at them) common.
_TIGHT = ResReqLimits(max_length=400, max_depth=6, max_terms=6, max_digits=24, max_count=999)
_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


def _answers(text: str, limits: ResReqLimits) -> None:
    start = time.process_time()  # CPU time: other processes do not count
    error: ResReqSyntaxError | None = None
    try:
        tree = parse_resreq(text, limits)
    except ResReqSyntaxError as caught:  # anything else fails the test
        error = caught
    if error is not None:
        assert error.text == text
        assert 0 <= error.column <= len(text)
        assert len(str(error)) < 600
    else:
        canonical = format_resreq(tree)
        assert parse_resreq(canonical, limits) == tree
        assert format_resreq(parse_resreq(canonical, limits)) == canonical
    assert time.process_time() - start < 2.0  # a 64 KiB text takes well under 0.5 s


@settings(max_examples=300, **_SETTINGS)  # type: ignore[arg-type]
@given(fuzz_texts)
def test_any_text_parses_or_is_a_syntax_error(text: str) -> None:
    _answers(text, DEFAULT_LIMITS)


@settings(max_examples=150, **_SETTINGS)  # type: ignore[arg-type]
@given(mutated_resreqs())
def test_any_text_parses_or_is_a_syntax_error_under_tight_limits(text: str) -> None:
    _answers(text, _TIGHT)


@pytest.mark.slow
@pytest.mark.timeout(1_800)  # 20,000 examples take a few minutes
@settings(max_examples=20_000, **_SETTINGS)  # type: ignore[arg-type]
@given(fuzz_texts)
def test_fuzz_long_run(text: str) -> None:
    _answers(text, DEFAULT_LIMITS)
    _answers(text, _TIGHT)
