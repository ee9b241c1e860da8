"""Strategies for resource-requirement trees and select texts (used by tests/resreq)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from xce_core.resreq import (
    Alternative,
    Compound,
    OrderKey,
    Primary,
    ResReq,
    RusageTerm,
    Span,
    compile_select,
)

_RR_NAMES = st.sampled_from(["mem", "swp", "tmp", "gpu", "ncpus", "lic_a", "r15s", "ut", "_x1"])
# Extremes too: the largest finite float, subnormals, and counts at max_count.
_RR_AMOUNT = st.one_of(
    st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    st.sampled_from([1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 1e16, 2.0**53 + 2]),
)
_RR_MAX_COUNT = 2**31 - 1
_RR_COUNT = st.integers(min_value=1, max_value=10_000) | st.sampled_from([_RR_MAX_COUNT])
_RR_SPAN_VALUE = st.integers(min_value=1, max_value=64) | st.integers(1, _RR_MAX_COUNT)
_RR_SAME = st.sampled_from(["type", "model"])

# Select texts are generated fully parenthesised, so their meaning is unambiguous;
# the canonical form drops what precedence allows and must keep the meaning.
_SEL_NAMES = st.sampled_from(["a", "b", "mem", "type", "model", "gpu", "X86_64", "any", "local"])
# defined() takes configured resources only: built-ins such as mem or type are errors.
_SEL_DEFINABLE = st.sampled_from(["a", "b", "gpu", "X86_64", "any", "local"])
_SEL_SMALL = st.integers(min_value=0, max_value=9).map(str)  # comparisons go both ways
_SEL_NUMBERS = st.one_of(
    _SEL_SMALL,
    st.integers(min_value=0, max_value=40).map(lambda n: repr(n / 4)),
    st.sampled_from(["1e3", ".5", "2.", "1E-2", "1e+20", "123456789"]),
    # At the limits: 30 digits (max_digits), the largest and smallest finite floats,
    # and sizes that stay finite after their unit.
    st.sampled_from(
        [
            "9" * 30,
            "0." + "0" * 27 + "1",
            "1.7976931348623157e308",
            "5e-324",
            "1e305G",
            "0.0001234567890123456",
            "1Z",
        ]
    ),
)
_SEL_STRINGS = st.one_of(
    st.text(alphabet="abX_-. 1'", max_size=4).map(lambda s: '"' + s + '"'),
    st.text(alphabet='abX_-. 1"', max_size=4).map(lambda s: "'" + s + "'"),
    st.sampled_from(["LINUX2.4", "v1.2.3"]),
)


def _sel_binary(inner: st.SearchStrategy[str], ops: list[str]) -> st.SearchStrategy[str]:
    return st.tuples(inner, st.sampled_from(ops), inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})")


# Names and small numbers only, so arithmetic is mostly on numbers a host has;
# strings appear in comparisons.
_SEL_VALUES = st.recursive(
    st.one_of(_SEL_NAMES, _SEL_NAMES, _SEL_SMALL, _SEL_SMALL, _SEL_NUMBERS),
    lambda inner: st.one_of(
        _sel_binary(inner, ["+", "-", "*", "/"]),
        _sel_binary(inner, ["+", "-", "*", "/"]),
        inner.map(lambda v: f"-({v})"),
    ),
    max_leaves=5,
)
_SEL_COMPARISONS = st.one_of(
    st.tuples(
        _SEL_VALUES, st.sampled_from(["==", "!=", "<", ">", "<=", ">=", "="]), _SEL_VALUES
    ).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
    st.tuples(_SEL_VALUES, st.sampled_from(["<", ">"]), _SEL_SMALL).map(
        lambda t: f"({t[0]}{t[1]}{t[2]})"
    ),
    st.tuples(
        _SEL_NAMES | _SEL_STRINGS,
        st.sampled_from(["==", "!=", "<", ">="]),
        _SEL_NAMES | _SEL_STRINGS | _SEL_VALUES,
    ).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
)
select_texts = st.recursive(
    st.one_of(
        _SEL_COMPARISONS,
        _SEL_NAMES,  # bare names: true or false depending on the host
        _SEL_DEFINABLE.map(lambda n: f"defined({n})"),
        _SEL_SMALL,
    ),
    lambda inner: st.one_of(
        _sel_binary(inner, ["&&", "||", " and ", " OR "]),
        _sel_binary(inner, ["&&", "||"]),
        _sel_binary(inner, ["&&", "||"]),
        inner.map(lambda c: f"!({c})"),
        inner.map(lambda c: f" Not ({c})"),
    ),
    max_leaves=10,
)
"""Valid select source texts, fully parenthesised."""

select_exprs = select_texts.map(compile_select)

select_hosts = st.dictionaries(
    _SEL_NAMES,
    st.one_of(
        st.integers(min_value=-1, max_value=3),
        st.integers(min_value=-1, max_value=3),
        st.booleans(),
        st.floats(min_value=-5, max_value=5, allow_nan=False),
        st.sampled_from(["a", "X86_64", "LINUX2.4", "", "any"]),
    ),
    min_size=5,
    max_size=9,
)
"""Host values for select evaluation: a plain dict is a HostValues."""


@st.composite
def _multi_phase_terms(draw: st.DrawFn) -> RusageTerm:
    """``name=(a b c):duration=(d e):decay=(x y)``: amounts never increase, a
    duration for every phase but maybe the last, at most one decay per phase."""
    phases = tuple(sorted(draw(st.lists(_RR_AMOUNT, min_size=1, max_size=4)), reverse=True))
    durations = draw(st.lists(_RR_AMOUNT, min_size=len(phases) - 1, max_size=len(phases)))
    decays = draw(st.lists(st.sampled_from([0.0, 1.0]), max_size=len(phases)))
    return RusageTerm(
        draw(_RR_NAMES),
        phases[0],
        per=draw(st.sampled_from([None, "task", "host", "job"])),
        phases=phases,
        durations=tuple(durations),
        decays=tuple(decays),
    )


# LSF's GPU constraints on an ngpus_physical term, in canonical order.
_GPU_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "gmodel": st.sampled_from(["TeslaP100", "TeslaV100-SXM2-32GB", "A100", "Tesla"]),
        "gmem": st.sampled_from(["1024", "512.5", "0"]),
        "nvlink": st.just("yes"),
    },
).map(lambda d: tuple((k, d[k]) for k in ("gmodel", "gmem", "nvlink") if k in d))

rusage_alternatives = st.lists(
    st.builds(
        RusageTerm,
        name=_RR_NAMES,
        amount=_RR_AMOUNT,
        duration=st.none() | _RR_AMOUNT,
        decay=st.sampled_from([None, 0.0, 1.0]),
        per=st.sampled_from([None, "task", "host", "job"]),
    )
    | st.builds(
        RusageTerm,
        name=st.just("ngpus_physical"),
        amount=_RR_AMOUNT,
        duration=st.none() | _RR_AMOUNT,
        per=st.sampled_from([None, "task", "host"]),
        gpu=_GPU_OPTIONS,
    )
    | _multi_phase_terms(),
    min_size=1,
    max_size=4,
    unique_by=lambda term: term.name,
).map(tuple)

spans = st.one_of(
    st.builds(Span, hosts=st.sampled_from([1, -1])),  # LSF's only values
    st.builds(Span, ptile=_RR_SPAN_VALUE),
    st.builds(Span, block=_RR_SPAN_VALUE),
    st.builds(Span, stripe=st.just(True), stripe_max=st.none() | _RR_SPAN_VALUE),
    # LSF's '!' default and per type/model values (with an optional plain default).
    st.builds(
        Span,
        ptile=st.none() | st.integers(min_value=1, max_value=64),
        ptile_max=st.booleans(),
        ptile_by=st.dictionaries(
            st.sampled_from(["HP", "SGI", "LINUX", "X86_64", "PC1133"]),
            st.integers(min_value=1, max_value=16),
            max_size=3,
        ).map(lambda d: tuple(d.items())),
    ).filter(lambda s: (s.ptile is None or not s.ptile_max) and (s.varies or s.ptile)),
)


def _lsf_consistent(primary: Primary) -> Primary:
    """LSF's cross-section rules: per type/model ptile values need same[type] or
    same[model]; '!' excludes same[type:model]."""
    span, same = primary.span, primary.same
    if span is None:
        return primary
    if span.ptile_by and "type" not in same and "model" not in same:
        same = ("type", *same)
    if span.ptile_max and "type" in same and "model" in same:
        same = tuple(name for name in same if name != "model")
    return replace(primary, same=same)


def primaries(count: st.SearchStrategy[int] | None = None) -> st.SearchStrategy[Primary]:
    """Primaries with any subset of sections; ``count`` draws the compound count
    (none: ``count=None``, as for a top-level primary or a compound's last part)."""
    return st.builds(
        Primary,
        select=st.none() | select_exprs,
        order=st.lists(
            st.builds(OrderKey, name=_RR_NAMES, reverse=st.booleans()),
            max_size=3,
            unique_by=lambda key: key.name,
        ).map(tuple),
        rusage=st.lists(rusage_alternatives, max_size=3).map(tuple),
        span=st.none() | spans,
        same=st.lists(_RR_NAMES | _RR_SAME, max_size=3, unique=True).map(tuple),
        affinity=st.none()
        | st.from_regex(r"[a-z]+(\([a-z0-9=,]+\))?(:[a-z]+=[a-z0-9]+)*", fullmatch=True),
        count=st.none() if count is None else count,
        cu=st.none() | st.from_regex(r"[a-z]+=[a-z0-9]+(:[a-z]+=[a-z0-9]+)*", fullmatch=True),
        gtile=st.none() | st.sampled_from(["!", "1", "4"]),
    ).map(_lsf_consistent)


@st.composite
def compounds(draw: st.DrawFn) -> Compound:
    """Counted parts, optionally followed by one last part without a count."""
    parts = draw(st.lists(primaries(_RR_COUNT), min_size=1, max_size=3))
    if draw(st.booleans()):
        parts.append(draw(primaries()))
    return Compound(tuple(parts))


alternatives = st.lists(st.one_of(primaries(), compounds()), min_size=1, max_size=3).map(
    lambda options: Alternative(tuple(options))
)

resreqs: st.SearchStrategy[ResReq] = st.one_of(primaries(), compounds(), alternatives)
"""Any tree ``parse_resreq`` can produce."""


# Fuzzing: arbitrary text, and grammar-aware mutations of valid requirements (pieces
# of the language inserted, slices deleted, repeated hundreds of times or replaced).
_FUZZ_SEEDS = st.sampled_from(
    [
        "select[type==X86_64 && mem>4000] order[-mem:ut] rusage[mem=2000:duration=1h]",
        "2*{select[gpu>0] rusage[gpu=1]} + {select[type==any] span[ptile=8]}",
        "{select[bigmem] rusage[mem=4G]} || {span[ptile='!',HP:8] same[type]}",
        "rusage[mem=(500 300 200):duration=(20 30):decay=(1 0), lic=1||lic2=1]",
        "type==LINUX2.4 && (ncpus*2>=mem/1000 || !defined(gpu)) order[r15s:pg]",
        "mem=100:swp=20:-fs:- span[hosts=1] affinity[core(1)*[2]]",
        "select[-(a+b)*c/2<=-1e3 || name=='x:y'] cu[type=enclosure] span[block=4]",
        "1*{span[gtile='!'] rusage[ngpus_physical=2:gmodel=TeslaP100:gmem=1G]} + {span[ptile=2]}",
    ]
)
_FUZZ_PIECES = st.sampled_from(
    [
        "(", ")", "!", "-", "[", "]", "{", "}", "||", "&&", ":", "=", "==", "'", '"',
        ",", "*", "+", "/", " ", "9" * 40, "1e308", "1e308G", "G", "defined(", "defined(mem)",
        "select[", "rusage[", "span[ptile=", "same[type]", "order[", "2*{", "} + {",
        "} || {", "'!'", "duration=", "(1 2)", "mem", "type", "cpu", "swap", "a+", "!(",
        "-(", "\x00", "é", "\n",
    ]
)  # fmt: skip


@st.composite
def mutated_resreqs(draw: st.DrawFn) -> str:
    """A valid requirement (a seed or a generated tree's text), mutated 1-4 times."""
    text = draw(_FUZZ_SEEDS | resreqs.map(str))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        start = draw(st.integers(min_value=0, max_value=len(text)))
        stop = draw(st.integers(min_value=start, max_value=min(len(text), start + 24)))
        action = draw(st.sampled_from(["insert", "delete", "repeat", "replace"]))
        if action == "insert":
            text = text[:start] + draw(_FUZZ_PIECES) + text[start:]
        elif action == "delete":
            text = text[:start] + text[stop:]
        elif action == "repeat":
            count = draw(st.integers(min_value=2, max_value=400))
            text = text[:start] + text[start:stop] * count + text[stop:]
        else:
            text = text[:start] + draw(_FUZZ_PIECES) + text[stop:]
    return text


fuzz_texts = st.one_of(st.text(max_size=300), mutated_resreqs())
"""Anything a user could send as a resource requirement, biased towards the language."""
