"""Coverage-guided fuzzing of ``parse_resreq`` with atheris (optional, by hand).

    pip install atheris
    python tests/fuzz/fuzz_parse_resreq.py -max_total_time=600 [CORPUS_DIR]

The property is the one ``tests/resreq/test_fuzz.py`` checks with hypothesis:
any text gives a tree or ResReqSyntaxError (anything else is a crash atheris
reports), and an accepted text's canonical form parses back to the same tree,
under the default limits and under tight ones. Not collected by pytest.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from xce_core.resreq import ResReqLimits, ResReqSyntaxError, format_resreq, parse_resreq

_TIGHT = ResReqLimits(max_length=400, max_depth=6, max_terms=6, max_digits=24, max_count=999)


def test_one_input(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(len(data))
    for limits in (None, _TIGHT):
        try:
            tree = parse_resreq(text, limits)
        except ResReqSyntaxError:
            continue
        canonical = format_resreq(tree)
        if parse_resreq(canonical, limits) != tree:
            raise AssertionError(f"{text!r} prints as {canonical!r}, which parses differently")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
