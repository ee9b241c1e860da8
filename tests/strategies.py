"""Hypothesis strategies shared by the test packages (one section per package)."""

# ============================================================================ events
# Strategies for the wire events of ``events._schema`` (used by tests/events).

import msgspec as _msgspec
from hypothesis import strategies as st

import events as _events

# Input events are drawn within the schema's limits (their edges included), so
# every one of them survives a round trip through a decoder.
_EV_I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_EV_SLOTS = st.integers(min_value=0, max_value=_events.MAX_SLOTS)
_EV_TASKS = st.integers(min_value=1, max_value=_events.MAX_TASKS)
_EV_PRIORITY = st.integers(min_value=_events.MIN_PRIORITY, max_value=_events.MAX_PRIORITY)
_EV_FLOAT = st.floats(allow_nan=False, allow_infinity=False)
_EV_AMOUNT = st.floats(min_value=0, max_value=_events.MAX_AMOUNT)
_EV_TEXT = st.text(max_size=20)
_EV_NAME = st.text(min_size=1, max_size=20)
_EV_ATTR_VALUE = st.one_of(_EV_TEXT, st.booleans(), _EV_I64, _EV_FLOAT)

worker_up_events = st.builds(
    _events.WorkerUp,
    name=_EV_NAME,
    slots=_EV_SLOTS,
    attrs=st.dictionaries(_EV_TEXT, _EV_ATTR_VALUE, max_size=4),
    resources=st.dictionaries(_EV_TEXT, _EV_AMOUNT, max_size=4),
)
worker_down_events = st.builds(_events.WorkerDown, name=_EV_NAME)
worker_removed_events = st.builds(_events.WorkerRemoved, name=_EV_NAME)
shared_resource_events = st.builds(_events.SharedResource, name=_EV_NAME, total=_EV_AMOUNT)
job_submitted_events = st.builds(
    _events.JobSubmitted,
    job_id=_EV_NAME,
    user=_EV_TEXT,
    queue=_EV_TEXT,
    project=_EV_TEXT,
    priority=_EV_PRIORITY,
    submit_time=_EV_FLOAT,
    min_tasks=_EV_TASKS,
    max_tasks=_EV_TASKS,
    resreq=_EV_TEXT,
)
job_finished_events = st.builds(_events.JobFinished, job_id=_EV_NAME)
job_cancelled_events = st.builds(_events.JobCancelled, job_id=_EV_NAME)
queue_config_events = st.builds(
    _events.QueueConfig, name=_EV_TEXT, priority=_EV_PRIORITY, picker=st.none() | _EV_TEXT
)
session_begin_events = st.builds(_events.SessionBegin)

input_events = st.one_of(
    worker_up_events,
    worker_down_events,
    worker_removed_events,
    shared_resource_events,
    job_submitted_events,
    job_finished_events,
    job_cancelled_events,
    queue_config_events,
    session_begin_events,
)

job_allocated_decisions = st.builds(
    _events.JobAllocated,
    session=_EV_I64,
    job_id=_EV_TEXT,
    hosts=st.lists(st.builds(_events.HostSlots, host=_EV_TEXT, slots=_EV_I64), max_size=4),
)
job_pended_decisions = st.builds(
    _events.JobPended,
    session=_EV_I64,
    job_id=_EV_TEXT,
    reason=_EV_TEXT,
    detail=_EV_TEXT,
    cached=st.booleans(),
)
job_rejected_decisions = st.builds(_events.JobRejected, job_id=_EV_TEXT, error=_EV_TEXT)
event_rejected_decisions = st.builds(
    _events.EventRejected, index=_EV_I64, error=_EV_TEXT, line=st.none() | _EV_I64
)
session_end_decisions = st.builds(
    _events.SessionEnd, session=_EV_I64, allocated=_EV_I64, pended=_EV_I64, elapsed_s=_EV_FLOAT
)

decisions = st.one_of(
    job_allocated_decisions,
    job_pended_decisions,
    job_rejected_decisions,
    event_rejected_decisions,
    session_end_decisions,
)
wire_events = st.one_of(input_events, decisions)

# Hostile input: streams built to make a batching decoder disagree with decoding
# each line (or frame) on its own. Each helper draws the items of one stream.

_EV_ENCODE_JSON = _msgspec.json.Encoder().encode
_EV_ENCODE_MSGPACK = _msgspec.msgpack.Encoder().encode
_HOSTILE_KINDS = st.sampled_from(
    ["event", "event", "event", "split", "two", "blank", "garbage", "deep", "long", "limit"]
)


def _ev_deep(depth: int, json: bool) -> bytes:
    """A job_finished whose ignored field ``x`` nests ``depth`` arrays (built as
    bytes: the encoders refuse to nest that deep)."""
    if json:
        return b'{"type":"job_finished","job_id":"deep","x":' + b"[" * depth + b"]" * depth + b"}"
    head = _EV_ENCODE_MSGPACK({"type": "job_finished", "job_id": "deep", "x": None})[:-1]
    return head + b"\x91" * (depth - 1) + b"\x90"


def _ev_hostile_item(draw: st.DrawFn, kind: str, json: bool) -> bytes:
    """One encoded value of the kinds that decode to one whole (good or bad) value."""
    if kind == "deep":
        return _ev_deep(draw(st.sampled_from([2, 100, 3000])), json)
    value: object
    if kind == "long":
        value = {"type": "job_finished", "job_id": "x" * draw(st.integers(100, 400))}
    elif kind == "limit":
        value = {"type": "worker_up", "name": "h", "slots": draw(st.sampled_from([-1, 2**64 - 1]))}
    else:
        value = draw(input_events)
    return _EV_ENCODE_JSON(value) if json else _EV_ENCODE_MSGPACK(value)


@st.composite
def hostile_ndjson_lines(draw: st.DrawFn) -> list[bytes]:
    """Lines (without newlines): good events, events split over two lines, two
    events on a line, blank and garbage lines, deep nesting, out-of-range fields,
    long lines, and a line split inside an array of objects (whose halves joined
    by a comma are one valid event)."""
    lines: list[bytes] = []
    for kind in draw(st.lists(_HOSTILE_KINDS | st.just("span"), max_size=40)):
        if kind == "split":
            text = _EV_ENCODE_JSON(draw(input_events))
            cut = draw(st.integers(1, len(text) - 1))
            lines += [text[:cut], text[cut:]]
        elif kind == "two":
            joint = draw(st.sampled_from([b",", b", ", b" ", b""]))
            first, second = draw(input_events), draw(input_events)
            lines.append(_EV_ENCODE_JSON(first) + joint + _EV_ENCODE_JSON(second))
        elif kind == "span":
            lines += [b'{"type":"job_finished","job_id":"s","x":[{}', b"{}]}"]
        elif kind == "blank":
            lines.append(draw(st.sampled_from([b"", b" ", b"\t", b"\r", b" \r "])))
        elif kind == "garbage":
            lines.append(draw(st.binary(max_size=30)).replace(b"\n", b""))
        else:
            lines.append(_ev_hostile_item(draw, kind, json=True))
    return lines


def _ev_frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@st.composite
def hostile_msgpack_stream(draw: st.DrawFn, max_frame: int) -> bytes:
    """Frames: good events, a payload split over two frames, two payloads in one
    frame, empty frames, garbage, deep nesting, out-of-range fields, frames over
    ``max_frame`` (their bytes present), and at the end maybe a truncated frame
    or a length prefix far beyond the limit with little behind it."""
    out = bytearray()
    for kind in draw(st.lists(_HOSTILE_KINDS | st.just("oversize"), max_size=40)):
        if kind == "split":
            payload = _EV_ENCODE_MSGPACK(draw(input_events))
            cut = draw(st.integers(0, len(payload)))
            out += _ev_frame(payload[:cut]) + _ev_frame(payload[cut:])
        elif kind == "two":
            first, second = draw(input_events), draw(input_events)
            out += _ev_frame(_EV_ENCODE_MSGPACK(first) + _EV_ENCODE_MSGPACK(second))
        elif kind == "blank":
            out += _ev_frame(b"")
        elif kind == "garbage":
            out += _ev_frame(draw(st.binary(max_size=30)))
        elif kind == "oversize":
            out += _ev_frame(b"\xc1" * draw(st.integers(max_frame + 1, max_frame + 64)))
        else:
            out += _ev_frame(_ev_hostile_item(draw, kind, json=False))
    ending = draw(st.sampled_from(["none", "none", "truncated", "lying"]))
    if ending == "truncated":
        last = _ev_frame(_EV_ENCODE_MSGPACK(draw(input_events)))
        out += last[: draw(st.integers(1, len(last) - 1))]
    elif ending == "lying":
        out += (2**32 - 1).to_bytes(4, "big") + draw(st.binary(max_size=50))
    return bytes(out)


# ============================================================================ resreq
# Strategies for resource-requirement trees and select texts (used by tests/resreq).

from dataclasses import replace  # noqa: E402  (each section keeps its own imports)

from xce_core.resreq import (  # noqa: E402
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


rusage_alternatives = st.lists(
    st.builds(
        RusageTerm,
        name=_RR_NAMES,
        amount=_RR_AMOUNT,
        duration=st.none() | _RR_AMOUNT,
        decay=st.sampled_from([None, 0.0, 1.0]),
        per=st.sampled_from([None, "task", "host", "job"]),
    )
    | _multi_phase_terms(),
    min_size=1,
    max_size=4,
    unique_by=lambda term: term.name,
).map(tuple)

spans = st.one_of(
    st.builds(Span, hosts=st.sampled_from([1, -1]) | _RR_SPAN_VALUE),
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


# ============================================================================ sim
# Strategies for SWF trace lines (used by tests/sim): valid lines, valid lines
# with one damage each, arbitrary bytes, and integer header lines.

from xce_core.sim import (  # noqa: E402  (each section keeps its own imports)
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

# ============================================================================ core
# Hosts and wants for the fit rule (xce_core._model.shortfall / tasks_that_fit).

from xce_core.plugin import Want as _Want  # noqa: E402
from xce_core.plugin import Worker as _Worker  # noqa: E402

_FIT_NAMES = ["mem", "tmp", "gpu"]
# Decimal fractions (inexact in binary, so sums round), exact binary fractions,
# and arbitrary floats.
_FIT_AMOUNTS = st.one_of(
    st.sampled_from([0.0, 0.1, 0.2, 0.3, 1 / 3, 0.7, 1.0, 2.5, 100.0]),
    st.integers(0, 64).map(lambda n: n / 8),
    st.floats(0, 1e6, allow_nan=False),
)


@st.composite
def fit_workers(draw: st.DrawFn, amounts: st.SearchStrategy[float] = _FIT_AMOUNTS) -> _Worker:
    """A worker with 0–8 slots and some of ``_FIT_NAMES`` as consumables, part of
    them in use (use may exceed the total, as after a worker is redefined)."""
    names = draw(st.lists(st.sampled_from(_FIT_NAMES), unique=True))
    worker = _Worker("h", 0, draw(st.integers(0, 8)), {}, {n: draw(amounts) for n in names})
    worker.used_slots = draw(st.integers(0, 10))
    worker.used = {n: draw(amounts) for n in names if draw(st.booleans())}
    return worker


def fit_wants(amounts: st.SearchStrategy[float] = _FIT_AMOUNTS) -> st.SearchStrategy[_Want]:
    """A ``Want``: (name, per_task, per_host) triples, names unique, including
    names a worker may lack (``lic``)."""
    return st.lists(
        st.tuples(st.sampled_from([*_FIT_NAMES, "lic"]), amounts, amounts),
        max_size=3,
        unique_by=lambda t: t[0],
    ).map(tuple)


def fit_taken(
    amounts: st.SearchStrategy[float] = _FIT_AMOUNTS,
) -> st.SearchStrategy[dict[str, float]]:
    """Amounts an attempt has already claimed on a host, by name."""
    return st.dictionaries(st.sampled_from(_FIT_NAMES), amounts, max_size=3)


exact_amounts = st.integers(0, 512).map(lambda n: n / 8)
"""Amounts exactly representable in binary: float sums of these are exact."""


@st.composite
def fit_boundary_cases(draw: st.DrawFn) -> tuple[_Worker, _Want]:
    """A worker whose one consumable is within a few tolerances of exactly what
    some bucket of the want needs: where rounding decides."""
    from xce_core.plugin import AMOUNT_TOLERANCE

    per_task = draw(st.sampled_from([0.1, 0.2, 0.3, 0.6, 0.7, 1 / 3, 0.05, 1.1]))
    per_host = draw(st.sampled_from([0.0, 0.1, 0.2, 0.3]))
    tasks = draw(st.integers(1, 8))
    offset = draw(st.sampled_from([-2, -1, 0, 1, 2])) * AMOUNT_TOLERANCE
    worker = _Worker("h", 0, 8, {}, {"mem": per_task * tasks + per_host + offset})
    return worker, (("mem", per_task, per_host),)
