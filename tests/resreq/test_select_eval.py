"""Select expressions evaluated against hosts (plain dicts are HostValues).

Each row is (expression, host values, expected result); the rules are the ones
documented in ``xce_core.resreq._select``.
"""

from __future__ import annotations

import pytest

from xce_core import ResReqSyntaxError
from xce_core.resreq import compile_select
from xce_core.resreq._tree import Value

LINUX = {"type": "X86_64", "model": "Intel_EM64T", "mem": 8000, "ncpus": 8, "bigmem": True}

CASES: list[tuple[str, dict[str, Value], bool]] = [
    # -- the common shapes ---------------------------------------------------------
    ("type==X86_64 && mem>4000", LINUX, True),
    ("type==X86_64 && mem>9000", LINUX, False),
    ("type==PPC64 || ncpus>=8", LINUX, True),
    ("model==Intel_EM64T", LINUX, True),
    ("mem>=8000 && mem<=8000 && mem!=7999", LINUX, True),
    # -- missing names: every comparison is false, even != -------------------------
    ("gpu>0", LINUX, False),
    ("gpu==0", LINUX, False),
    ("gpu!=0", LINUX, False),
    ("gpu<=0", LINUX, False),
    ("!(gpu>0)", LINUX, True),
    ("gpu", LINUX, False),
    ("!gpu", LINUX, True),
    ("gpu+1>0", LINUX, False),
    ("-gpu<0", LINUX, False),
    ("gpu*0==0", LINUX, False),
    ("gpu>0 || mem>0", LINUX, True),
    ("defined(gpu)", LINUX, False),
    ("defined(bigmem)", LINUX, True),
    ("DEFINED(bigmem) AND NOT defined(gpu)", LINUX, True),
    ("defined(gpu) && !(gpu>0)", LINUX, False),
    # -- booleans -----------------------------------------------------------------------
    ("bigmem", LINUX, True),
    ("bigmem", {"bigmem": False}, False),
    ("bigmem", {"bigmem": 0}, False),
    ("bigmem", {"bigmem": 2.5}, True),
    ("bigmem", {"bigmem": ""}, False),
    ("bigmem", {"bigmem": "yes"}, True),
    ("bigmem==1", LINUX, True),
    ("bigmem>0.5", LINUX, True),
    ("bigmem+bigmem==2", LINUX, True),
    ("bigmem!=0", {"bigmem": False}, False),
    # -- strings and bare words ---------------------------------------------------------
    ("type=='X86_64'", LINUX, True),
    ('type=="X86_64"', LINUX, True),
    ("type!=X86_64", LINUX, False),
    ("type!=PPC64", LINUX, True),
    ("type!=PPC64", {}, False),
    ("type<Y", LINUX, True),
    ("type>='X86'", LINUX, True),
    ("type>mem", LINUX, False),
    ("type==8000", LINUX, False),
    ("type!=8000", LINUX, False),
    ("type<8000", LINUX, False),
    ("type=='8000'", {"type": 8000}, False),
    # a bare word on the right reads the host's value when it has one
    ("mem>maxmem", {"mem": 8, "maxmem": 4}, True),
    ("mem>maxmem", {"mem": 8}, False),
    ("type==X86_64", {"type": "X86_64", "X86_64": "other"}, False),
    ("type==other", {"type": "other", "other": "other"}, True),
    # ... but only right of a name: on the left, or in arithmetic, it is a name
    ("X86_64==type", LINUX, False),
    ("mem==X86_64+0", LINUX, False),
    # dotted words are always strings
    ("type==LINUX2.4", {"type": "LINUX2.4"}, True),
    ("type!=LINUX2.4", {"type": "LINUX2.6"}, True),
    ("hname=='host06-x12'", {"hname": "host06-x12"}, True),
    # -- any / local ------------------------------------------------------------------------
    ("type==any", LINUX, True),
    ("type==any", {}, True),
    ("model==any && mem>1", LINUX, True),
    ("type==local", {}, True),
    ("type!=any", LINUX, False),
    ("type=='any'", LINUX, False),
    ("type=='any'", {"type": "any"}, True),
    ("arch==any", {"arch": "x"}, False),
    # -- arithmetic and precedence ------------------------------------------------------------
    ("mem/2>3999", LINUX, True),
    ("mem/0>0", LINUX, False),
    ("mem/0<0", LINUX, False),
    ("!(mem/0>0)", LINUX, True),
    ("mem/(ncpus-8)==0", LINUX, False),
    ("1+2*3==7", {}, True),
    ("(1+2)*3==9", {}, True),
    ("10-4-3==3", {}, True),
    ("12/2/3==2", {}, True),
    ("-ncpus==-8", LINUX, True),
    ("--ncpus==8", LINUX, True),
    ("2*-3==-6", {}, True),
    ("1.5e3==1500", {}, True),
    ("a || b && c", {"a": True}, True),
    ("(a || b) && c", {"a": True}, False),
    ("!a == b", {"a": 1, "b": 2}, False),  # (!a)==b, as LSF: 0 == 2
    ("!a == b", {"a": 0, "b": 1}, True),  # 1 == 1
    ("!(a == b)", {"a": 1, "b": 2}, True),
    ("!swp > 100", {"swp": 500}, False),  # (!swp)>100: never, as in LSF
    ("a == !b", {"a": 1, "b": 0}, True),
    ("!a && b", {"b": 1}, True),
    ("a=1", {"a": 1}, True),
    ("type+1>0", LINUX, False),
    ("mem", {"mem": 0}, False),
    ("mem-8000", LINUX, False),
    ("mem-7999", LINUX, True),
    ("(mem>1)+(ncpus>1)==2", LINUX, True),
    ("0", {}, False),
    ("1", {}, True),
    # -- LSF's load-index aliases read the index (swap is swp, cpu is r1m, ...) ----------
    ("swap>50", {"swp": 60}, True),
    ("swap>50", {"swap": 60}, False),
    ("cpu<0.5 && idle>10 && login<2", {"r1m": 0.2, "it": 30, "ls": 1}, True),
    ("type==cpu", {"type": "cpu", "r1m": 0.2}, True),  # a bare word stays a word
    # -- the legacy syntax: ':' joins terms; '=' is a bound that depends on the index --
    ("r1m=0.5:swp=20", {"r1m": 0.5, "swp": 20}, True),
    ("r1m=0.5:swp=20", {"r1m": 0.6, "swp": 20}, False),
    ("r1m=0.5:swp=20", {"r1m": 0.5, "swp": 19}, False),
    ("cpu=0.5:swap=20", {"r1m": 0.1, "swp": 500}, True),
    ("-fs:hpux", {"hpux": True}, True),
    ("-fs:hpux", {"hpux": True, "fs": True}, False),
    ("-:mem", {"mem": 1}, True),
    ("-", {}, True),
    ("type=X86_64:gpus=2", {"type": "X86_64", "gpus": 4}, True),
    ("type=X86_64:gpus=2", {"type": "X86_64", "gpus": 1}, False),
]


@pytest.mark.parametrize(("text", "host", "expected"), CASES)
def test_evaluation(text: str, host: dict[str, Value], expected: bool) -> None:
    expr = compile_select(text)
    assert expr(host) is expected
    assert expr.evaluate(host) is expected


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("type==X86_64 && mem>4000", {"type", "X86_64", "mem"}),
        ("type==LINUX2.4", {"type"}),
        ("hname=='x' || defined(gpu)", {"hname", "gpu"}),
        ("type==any && model==local", {"type", "model"}),
        ("1+2>3", set()),
    ],
)
def test_names_lists_what_the_expression_reads(text: str, names: set[str]) -> None:
    assert compile_select(text).names == frozenset(names)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("type = X86_64 and mem > 4000", "type==X86_64 && mem>4000"),
        ("(a || b) && c", "(a || b) && c"),
        ("a || (b && c)", "a || b && c"),
        ("a && (b && c) && (d || e)", "a && b && c && (d || e)"),
        ("not a == b", "!a==b"),  # LSF's table: ! binds tighter than ==
        ("!(a == b)", "!(a==b)"),
        ("(!a) + 1 > 0", "!a+1>0"),
        ("a == !b", "a==!b"),
        ("!(!a)", "!!a"),
        ("a - (b - c)", "a-(b-c)"),
        ("(a - b) - c", "a-b-c"),
        ("a / (b * c)", "a/(b*c)"),
        ("-(2) * 3 > -x", "-2*3>-x"),
        ("-(a+b) < 1.50", "-(a+b)<1.5"),
        ('x == "it\'s"', 'x=="it\'s"'),
        ("x == 'LINUX2.4'", "x=='LINUX2.4'"),
        ("mem > 1e20", "mem>1e+20"),
        ("(a > 1) == (b > 1)", "(a>1)==(b>1)"),
    ],
)
def test_canonical_text(text: str, canonical: str) -> None:
    expr = compile_select(text)
    assert expr.text == canonical == str(expr)
    assert compile_select(canonical) is expr


def test_offset_shifts_error_columns() -> None:
    with pytest.raises(ResReqSyntaxError) as caught:
        compile_select("mem>", offset=7)
    assert (caught.value.column, caught.value.text) == (11, "mem>")


@pytest.mark.parametrize("value", [None, [1], object()])
def test_odd_host_values_never_raise(value: object) -> None:
    expr = compile_select("x>1 || x=='a' || x!=2 || x+1>0 || x")
    assert expr({"x": value}) in (True, False)  # type: ignore[dict-item]
