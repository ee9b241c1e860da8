"""Strategies for SWF trace lines (used by tests/sim)."""

from __future__ import annotations

from hypothesis import strategies as st

from xce_core.sim import (
    MAX_INTEGER,
    MAX_MEMORY_KB,
    MAX_SECONDS,
    SWF_FIELDS,
)

SWF_TIME_FIELDS = frozenset({"submit", "wait", "run_time", "avg_cpu", "req_time", "think_time"})
SWF_MEMORY_FIELDS = frozenset({"used_mem", "req_mem"})
SWF_INTEGER_HEADERS = {  # key: (lowest, highest) besides -1, as documented
    "MaxProcs": (1, MAX_INTEGER),
    "MaxNodes": (1, MAX_INTEGER),
    "MaxJobs": (0, MAX_INTEGER),
    "MaxRecords": (0, MAX_INTEGER),
    "MaxQueues": (0, MAX_INTEGER),
    "MaxPartitions": (0, MAX_INTEGER),
    "MaxRuntime": (0, MAX_SECONDS),
    "UnixStartTime": (0, MAX_SECONDS),
    "MaxMemory": (0, MAX_MEMORY_KB),
    "TimeZone": (-86400, 86400),
}


def swf_limit(name: str) -> int:
    """The documented limit of one SWF field (independent of the reader's table)."""
    if name in SWF_TIME_FIELDS:
        return MAX_SECONDS
    if name in SWF_MEMORY_FIELDS:
        return MAX_MEMORY_KB
    return MAX_INTEGER


def _swf_token(name: str) -> st.SearchStrategy[str]:
    limit = swf_limit(name)
    if name in SWF_TIME_FIELDS | SWF_MEMORY_FIELDS:
        number = st.floats(min_value=-1, max_value=limit) | st.integers(-1, limit)
        if name == "run_time":  # a run time above 0 is at least a microsecond
            number = number.filter(lambda v: not 0 < v < 1e-6)
        return number.map(lambda v: repr(v) if isinstance(v, float) else str(v))
    integer = st.integers(-1, limit) | st.integers(-1, 1000)
    return st.one_of(
        integer.map(str),
        integer.filter(lambda n: abs(n) < 2**52).map(lambda n: f"{n}.0"),
        integer.filter(lambda n: 0 < n < 10**6).map(lambda n: f"{n}e0"),
    )


_SWF_SPACE = st.sampled_from([" ", "  ", "\t", " \t "])

swf_valid_lines = st.tuples(
    st.tuples(*(_swf_token(name) for name in SWF_FIELDS)),
    st.lists(_SWF_SPACE, min_size=len(SWF_FIELDS) + 1, max_size=len(SWF_FIELDS) + 1),
).map(lambda t: "".join(s + tok for s, tok in zip(t[1], (*t[0], ""), strict=True)))
"""Data lines within every documented limit."""

SWF_NASTY_TOKENS = [
    "inf", "-inf", "Infinity", "nan", "NaN", "-nan", "1e999", "-1e999", "1e308", "1e309",
    "9007199254740992", "18446744073709551616", "1e16", "10000000001", "1099511627777",
    "-2", "-1.5", "-0", "0x10", "1_0", "1e", ".", "+", "--1", "", "3.5", "2.000001",
    "\u0661\u0662", "\u00bd", "\x00", "\x1c", "1\u00a0", "\u2003", "\ufeff1", "1" * 400,
    # What float() reads and JSON does not, or JSON reads as something else (the
    # reader's fast path decodes the line as a JSON array).
    "+1", ".5", "5.", "01", "1E+05", "-0.0e-0", "1,2", "[1", "1]", "[]", "{}", "true",
    "null", '"1"', "[" * 3000, "1e-7", "5.0e0",
]  # fmt: skip


@st.composite
def swf_damaged_lines(draw: st.DrawFn) -> bytes:
    """A valid data line with one damage: a token replaced, dropped or doubled, a
    character inserted, invalid UTF-8 inserted, or the line cut short."""
    line = draw(swf_valid_lines)
    tokens = line.split()
    index = draw(st.integers(0, len(tokens) - 1))
    damage = draw(st.sampled_from(["replace", "drop", "double", "char", "bytes", "cut"]))
    if damage == "replace":
        tokens[index] = draw(st.sampled_from(SWF_NASTY_TOKENS) | st.text(max_size=6))
    elif damage == "drop":
        del tokens[index]
    elif damage == "double":
        tokens.insert(index, tokens[index])
    text = " ".join(tokens)
    at = draw(st.integers(0, len(text)))
    if damage == "char":
        text = text[:at] + draw(st.characters(exclude_characters="\r\n")) + text[at:]
    elif damage == "cut":
        text = text[:at]
    raw = text.encode("utf-8", "surrogatepass")
    if damage == "bytes":
        raw = (
            raw[:at]
            + draw(st.sampled_from([b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80"]))
            + raw[at:]
        )
    return raw


swf_junk_lines = st.binary(max_size=60) | st.text(max_size=60).map(
    lambda s: s.encode("utf-8", "surrogatepass")
)
"""Anything at all (newlines are removed by the tests that join lines)."""

swf_header_lines = st.tuples(
    st.sampled_from(sorted(SWF_INTEGER_HEADERS)),
    st.one_of(
        st.integers(-100_000, 100_000).map(str),
        st.integers(-1, MAX_INTEGER + 2).map(str),
        st.sampled_from(SWF_NASTY_TOKENS),
    ),
    st.sampled_from(["", " (a comment)", "\t2"]),
).map(lambda t: f"; {t[0]}: {t[1]}{t[2]}".encode("utf-8", "surrogatepass"))
"""``; Key: value`` lines of integer header keys, good and bad."""
