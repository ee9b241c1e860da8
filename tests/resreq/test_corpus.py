"""A corpus of LSF ``bsub -R`` strings: the tree each valid one parses to, and the
column and message of each invalid one.

Many entries are the examples of IBM Spectrum LSF's documentation (resource
requirement strings, rusage with duration/decay and ``||``, compound and
alternative requirements); the rest probe edges of xce's grammar.
"""

from __future__ import annotations

import pytest

from xce_core import ResReqSyntaxError, parse_resreq
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


def primary(
    select: str | None = None,
    *,
    order: str = "",
    rusage: tuple[tuple[RusageTerm, ...], ...] = (),
    span: Span | None = None,
    same: tuple[str, ...] = (),
    affinity: str | None = None,
    count: int | None = None,
    gtile: str | None = None,
) -> Primary:
    """A Primary; ``select`` is the expected *canonical* select text and ``order``
    is written as in order[] (``"-mem:ut"``)."""
    keys = tuple(OrderKey(key.lstrip("-"), key.startswith("-")) for key in order.split(":") if key)
    return Primary(
        select=None if select is None else compile_select(select),
        order=keys,
        rusage=rusage,
        span=span,
        same=same,
        affinity=affinity,
        count=count,
        gtile=gtile,
    )


def usage(*alternatives: list[RusageTerm]) -> tuple[tuple[RusageTerm, ...], ...]:
    return tuple(tuple(terms) for terms in alternatives)


T = RusageTerm

VALID: list[tuple[str, ResReq]] = [
    # -- empty and simple ---------------------------------------------------------------------
    ("", primary()),
    ("   \t", primary()),
    # LSF docs: the basic example string.
    (
        "select[type==any] order[ut] rusage[mem=1024]",
        primary("type==any", order="ut", rusage=usage([T("mem", 1024)])),
    ),
    ("rusage[mem=20000:duration=20]", primary(rusage=usage([T("mem", 20000, 20)]))),
    ("span[ptile=2]", primary(span=Span(ptile=2))),
    # LSF docs: LINUX2.4 is a dotted word, hence a string constant.
    (
        "select[(type==LINUX2.4 && r1m < 2) || (type==SUNSOL && r1m < 1)]",
        primary("type=='LINUX2.4' && r1m<2 || type==SUNSOL && r1m<1"),
    ),
    # LSF docs: the select keyword may be omitted when the select comes first.
    ("type==X86_64 order[mem]", primary("type==X86_64", order="mem")),
    ("swp > 15 && hpux order[ut]", primary("swp>15 && hpux", order="ut")),
    (
        "type==any order[ut] same[model] rusage[mem=1]",
        primary("type==any", order="ut", same=("model",), rusage=usage([T("mem", 1)])),
    ),
    (
        "select[type==any] order[ut] same[model] rusage[mem=1]",
        primary("type==any", order="ut", same=("model",), rusage=usage([T("mem", 1)])),
    ),
    ("select[hname!='host06-x12']", primary("hname!='host06-x12'")),
    ("rhel6 || rhel7", primary("rhel6 || rhel7")),
    # -- rusage: LSF docs examples ------------------------------------------------------------
    (
        "rusage[mem=20, license=1:duration=2]",
        primary(rusage=usage([T("mem", 20), T("license", 1, 2)])),
    ),
    (
        "rusage[mem=20:swp=50:duration=1h, license=1:duration=2]",
        primary(rusage=usage([T("mem", 20, 60), T("swp", 50, 60), T("license", 1, 2)])),
    ),
    (
        "rusage[swp=20:duration=2h:decay=1, license=1:duration=2]",
        primary(rusage=usage([T("swp", 20, 120, 1), T("license", 1, 2)])),
    ),
    (
        "rusage[mem=20:duration=30:decay=1, lic=1:duration=30]",
        primary(rusage=usage([T("mem", 20, 30, 1), T("lic", 1, 30)])),
    ),
    (
        "rusage[app_lic_v201=1||app_lic_v15=1]",
        primary(rusage=usage([T("app_lic_v201", 1)], [T("app_lic_v15", 1)])),
    ),
    (
        "rusage[mem=20:app_lic_v201=1||mem=20:swp=50:app_lic_v15=1]",
        primary(
            rusage=usage(
                [T("mem", 20), T("app_lic_v201", 1)],
                [T("mem", 20), T("swp", 50), T("app_lic_v15", 1)],
            )
        ),
    ),
    ("rusage[mem=50:duration=100:decay=1]", primary(rusage=usage([T("mem", 50, 100, 1)]))),
    (
        "rusage[r1m=0.5:mem=20:swp=40]",
        primary(rusage=usage([T("r1m", 0.5), T("mem", 20), T("swp", 40)])),
    ),
    ("rusage[mem=4000:duration=3600s]", primary(rusage=usage([T("mem", 4000, 60)]))),
    ("rusage[lic=1:duration=30m:decay=0]", primary(rusage=usage([T("lic", 1, 30, 0)]))),
    # -- rusage reservation methods (LSF 9.1.3+), compute units ------------------------------
    (
        "rusage[mem=100/task:lic=1/job] span[hosts=1]",
        primary(
            rusage=usage([RusageTerm("mem", 100, per="task"), RusageTerm("lic", 1, per="job")]),
            span=Span(hosts=1),
        ),
    ),
    ("rusage[mem=2048/host]", primary(rusage=usage([RusageTerm("mem", 2048, per="host")]))),
    # -- order[!...]: LSF re-sorts before each job; carried -----------------------------------
    ("order[!ut]", Primary(order=(OrderKey("ut"),), order_resort=True)),
    (
        "order[! -mem:ut]",
        Primary(order=(OrderKey("mem", True), OrderKey("ut")), order_resort=True),
    ),
    # -- multi-phase rusage (LSF 9.1+): the job holds the first phase ------------------------
    (
        "rusage[mem=(500 300 200):duration=(20 30):decay=(1 0)]",
        primary(
            rusage=usage(
                [
                    RusageTerm(
                        "mem",
                        500,
                        phases=(500, 300, 200),
                        durations=(20, 30),
                        decays=(1, 0),
                    )
                ]
            )
        ),
    ),
    (
        "rusage[mem=(2G 1G):duration=(1h), lic=1]",
        primary(
            rusage=usage(
                [
                    RusageTerm("mem", 2048, phases=(2048, 1024), durations=(60,)),
                    T("lic", 1),
                ]
            )
        ),
    ),
    # -- size units (LSF 10.1.0.2+): KB/K ... ZB/Z, in MB --------------------------------------
    ("rusage[mem=4GB]", primary(rusage=usage([T("mem", 4096)]))),
    ("rusage[mem=4G]", primary(rusage=usage([T("mem", 4096)]))),
    ("rusage[mem=512MB:swp=1G]", primary(rusage=usage([T("mem", 512), T("swp", 1024)]))),
    ("rusage[mem=2g/task]", primary(rusage=usage([RusageTerm("mem", 2048, per="task")]))),
    ("select[mem > 4G]", primary("mem>4096")),
    ("select[mem>=1.5GB && swp>512KB]", primary("mem>=1536 && swp>0.5")),
    ("mem>1T", primary("mem>1048576")),
    (
        "select[type==any] cu[type=enclosure:maxcus=2]",
        Primary(select=compile_select("type==any"), cu="type=enclosure:maxcus=2"),
    ),
    # -- rusage: separators and alternatives --------------------------------------------------
    ("rusage[mem=100,tmp=20]", primary(rusage=usage([T("mem", 100), T("tmp", 20)]))),
    ("rusage[mem=100:tmp=20]", primary(rusage=usage([T("mem", 100), T("tmp", 20)]))),
    ("rusage[mem=1000||mem=500]", primary(rusage=usage([T("mem", 1000)], [T("mem", 500)]))),
    (
        "rusage[mem=20000 || mem=10000:duration=20]",
        primary(rusage=usage([T("mem", 20000)], [T("mem", 10000, 20)])),
    ),
    (
        "rusage[a=1:duration=5:b=2:c=3:duration=6]",
        primary(rusage=usage([T("a", 1, 5), T("b", 2, 6), T("c", 3, 6)])),
    ),
    ("rusage[ mem = 1e3 ]", primary(rusage=usage([T("mem", 1000)]))),
    # -- order, span, same, affinity ----------------------------------------------------------
    ("order[r15s:pg]", primary(order="r15s:pg")),
    ("order[swp:r1m:tmp:r15s]", primary(order="swp:r1m:tmp:r15s")),
    ("order[-mem]", primary(order="-mem")),
    ("order[mem:-slots]", primary(order="mem:-slots")),
    ("order[ - mem : ut ]", primary(order="-mem:ut")),
    ("span[hosts=1]", primary(span=Span(hosts=1))),
    ("span[hosts=-1]", primary(span=Span(hosts=-1))),
    ("span[ ptile = 8 ]", primary(span=Span(ptile=8))),
    # LSF's predefined ptile ('!': the host's MXJ) and per type/model values.
    ("span[ptile='!']", primary(span=Span(ptile_max=True))),
    (
        "span[ptile='!',HP:8,SGI:8,LINUX:2] same[type]",
        primary(
            span=Span(ptile_max=True, ptile_by=(("HP", 8), ("SGI", 8), ("LINUX", 2))),
            same=("type",),
        ),
    ),
    (
        "span[ptile='!',PC1133:4,PC233:2] same[model]",
        primary(
            span=Span(ptile_max=True, ptile_by=(("PC1133", 4), ("PC233", 2))), same=("model",)
        ),
    ),
    (
        "same[type:model] span[ptile=LINUX:2,SGI:4]",
        primary(span=Span(ptile_by=(("LINUX", 2), ("SGI", 4))), same=("type", "model")),
    ),
    # LSF 10.1: blocks of tasks, and tasks striped over hosts.
    ("span[block=4]", primary(span=Span(block=4))),
    ("span[stripe]", primary(span=Span(stripe=True))),
    ("span[ stripe = 2 ]", primary(span=Span(stripe=True, stripe_max=2))),
    (
        "span[ptile=4, X86_64:2] same[type]",
        primary(span=Span(ptile=4, ptile_by=(("X86_64", 2),)), same=("type",)),
    ),
    ("same[type]", primary(same=("type",))),
    ("same[type:model]", primary(same=("type", "model"))),
    ("affinity[core(1)]", primary(affinity="core(1)")),
    (
        "affinity[ core(1,same=socket,exclusive=(socket,injob)):cpubind=core ]",
        primary(affinity="core(1,same=socket,exclusive=(socket,injob)):cpubind=core"),
    ),
    ("affinity[thread(2)*[4]]", primary(affinity="thread(2)*[4]")),
    # -- section order and spacing ------------------------------------------------------------
    (
        "rusage[mem=100] select[ncpus>1]",
        primary("ncpus>1", rusage=usage([T("mem", 100)])),
    ),
    (
        "same[model] span[ptile=4] order[-ut] rusage[tmp=5] select[a] affinity[core(1)]",
        primary(
            "a",
            order="-ut",
            rusage=usage([T("tmp", 5)]),
            span=Span(ptile=4),
            same=("model",),
            affinity="core(1)",
        ),
    ),
    ("  select [ type == any ]\n order[ ut ]  ", primary("type==any", order="ut")),
    # -- select spellings ---------------------------------------------------------------------
    (
        "select[mem>4000 and (ncpus>=2 OR bigmem)]",
        primary("mem>4000 && (ncpus>=2 || bigmem)"),
    ),
    ("select[not defined(gpu)]", primary("!defined(gpu)")),
    ("select[defined(gpu) && !(gpu>0)]", primary("defined(gpu) && !(gpu>0)")),
    ("select[type=X86_64]", primary("type==X86_64")),
    ("select[mem>=1e3 && ut<.5]", primary("mem>=1000 && ut<0.5")),
    ("select[((a))]", primary("a")),
    ("select[name=='a]b']", primary("name=='a]b'")),
    # -- compound (LSF docs shapes) -----------------------------------------------------------
    (
        "2*{select[type==any] rusage[mem=100]} + 4*{select[gpu>0]}",
        Compound(
            (
                primary("type==any", rusage=usage([T("mem", 100)]), count=2),
                primary("gpu>0", count=4),
            )
        ),
    ),
    (
        "1*{select[type==any] order[r15s] rusage[mem=200]}"
        " + {select[type==LINUX2.6] rusage[mem=100]}",
        Compound(
            (
                primary("type==any", order="r15s", rusage=usage([T("mem", 200)]), count=1),
                primary("type=='LINUX2.6'", rusage=usage([T("mem", 100)])),
            )
        ),
    ),
    ("4*{select[type==any]}", Compound((primary("type==any", count=4),))),
    ("2 * { } + { select[a] }", Compound((primary(count=2), primary("a")))),
    # -- alternative --------------------------------------------------------------------------
    (
        "{select[type==any] rusage[mem=100]} || {select[type==X86_64] rusage[mem=200]}",
        Alternative(
            (
                primary("type==any", rusage=usage([T("mem", 100)])),
                primary("type==X86_64", rusage=usage([T("mem", 200)])),
            )
        ),
    ),
    (
        "{2*{select[type==any]} + {select[gpu>0]}} || {span[hosts=1]}",
        Alternative(
            (
                Compound((primary("type==any", count=2), primary("gpu>0"))),
                primary(span=Span(hosts=1)),
            )
        ),
    ),
    ("{select[a]}", Alternative((primary("a"),))),
    ("{ }", Alternative((primary(),))),
    ("{type==any order[ut]}||{ }", Alternative((primary("type==any", order="ut"), primary()))),
    # -- load-index aliases (issue #9). IBM LSF 10.1 "Selection string"
    # (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/select_string.html): "The
    # resource names swap, idle, login, and cpu are accepted as aliases for swp,
    # it, ls, and r1m respectively." LSF resolves them in order[] and rusage[] too.
    ("avail_scratch > 200 && swap > 50", primary("avail_scratch>200 && swp>50")),  # the docs'
    (
        "defined(avail_scratch) && avail_scratch > 100 && swap > 100",  # examples, verbatim
        primary("defined(avail_scratch) && avail_scratch>100 && swp>100"),
    ),
    ("select[cpu < 0.5 && idle > 10 && login <= 2]", primary("r1m<0.5 && it>10 && ls<=2")),
    ("order[cpu:-swap]", primary(order="r1m:-swp")),
    ("rusage[swap=100:cpu=0.5]", primary(rusage=usage([T("swp", 100), T("r1m", 0.5)]))),
    ("select[type==cpu]", primary("type==cpu")),  # a bare word is a value, not an alias
    # -- the legacy syntax (issue #9): ':'-separated terms. IBM keeps examples in the
    # lsf.task file (Platform LSF Reference 6.2 "lsf.task"; lsrtasks,
    # https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/lsrtasks.1.html):
    # "make/cpu", "nroff/-", "compress/-:cpu:mem". The rules follow LSF's parser.
    ("-", primary("type==any")),
    ("-:cpu:mem", primary("type==any && r1m && mem")),
    ("select[r1m=0.5:swp=20]", primary("r1m<=0.5 && swp>=20")),  # grows with load: <=
    ("select[mem=100 : tmp=4G : it=10]", primary("mem>=100 && tmp>=4096 && it>=10")),
    ("select[-fs:hpux]", primary("!fs && hpux")),
    ("type=SUNSOL:swp=50 order[ut]", primary("type==SUNSOL && swp>=50", order="ut")),
    (
        "select[type=LINUX2.4:model=any:gpus=2]",
        primary("type=='LINUX2.4' && model==any && gpus>=2"),
    ),
    ("select[hname=host06-x12:cpu=1]", primary("hname=='host06-x12' && r1m<=1")),
    ("select[name=='a:b']", primary("name=='a:b'")),  # a quoted ':' is not legacy
    ("select[mem=100]", primary("mem==100")),  # without ':' the current syntax: '=' is '=='
    # -- LSF 10.1 GPU options in -R (LSB_GPU_NEW_SYNTAX=extend): gtile in span[],
    # gmodel/gmem/nvlink in rusage[] as constraints on ngpus_physical. Carried.
    (
        "span[gtile=!] rusage[ngpus_physical=2:gmodel=TeslaP100:gmem=1G:nvlink=yes]",
        primary(
            rusage=usage(
                [
                    T(
                        "ngpus_physical",
                        2,
                        gpu=(("gmodel", "TeslaP100"), ("gmem", "1024"), ("nvlink", "yes")),
                    )
                ]
            ),
            gtile="!",
        ),
    ),
    ("span[gtile='!']", primary(gtile="!")),
    ("span[ptile=2:gtile=1]", primary(span=Span(ptile=2), gtile="1")),
    ("span[gtile=2, hosts=1]", primary(span=Span(hosts=1), gtile="2")),
    (
        # The options go with the GPU term; duration with every term before it.
        "rusage[mem=100:ngpus_physical=4:gmodel=TeslaV100-SXM2-32GB:duration=10]",
        primary(
            rusage=usage(
                [
                    T("mem", 100, 10),
                    T("ngpus_physical", 4, 10, gpu=(("gmodel", "TeslaV100-SXM2-32GB"),)),
                ]
            )
        ),
    ),
    (
        "rusage[ngpus_physical=1:nvlink=yes:gmodel=A100 || ngpus_physical=2]",
        primary(
            rusage=usage(
                [T("ngpus_physical", 1, gpu=(("gmodel", "A100"), ("nvlink", "yes")))],
                [T("ngpus_physical", 2)],
            )
        ),
    ),
    (
        "1*{span[gtile=1] rusage[ngpus_physical=2:gmodel=TeslaP100]} + {rusage[mem=10]}",
        Compound(
            (
                primary(
                    rusage=usage([T("ngpus_physical", 2, gpu=(("gmodel", "TeslaP100"),))]),
                    gtile="1",
                    count=1,
                ),
                primary(rusage=usage([T("mem", 10)])),
            )
        ),
    ),
    # -- ptile values per type or model with same[] (issue #9): see INVALID below.
    (
        "same[model:type] span[ptile=LINUX:2,SGI:4]",
        primary(span=Span(ptile_by=(("LINUX", 2), ("SGI", 4))), same=("model", "type")),
    ),
]

INVALID: list[tuple[str, int, str]] = [
    # -- sections -----------------------------------------------------------------------------
    ("select[a] select[b]", 10, "duplicate section 'select'"),
    ("type==any select[a]", 10, "duplicate section 'select'"),
    ("order[a] rusage[m=1] order[b]", 21, "duplicate section 'order'"),
    ("foo[x]", 0, "unknown section 'foo'"),
    ("select[a] cpu[x]", 10, "unknown section 'cpu'"),
    ("rusage[mem=10/slot]", 13, "expected /task, /host or /job"),
    ("cu[]", 3, "expected a compute-unit description"),
    ("order[ut] type==any", 10, "expected a section"),
    ("select[a] ]", 10, "unexpected ']' without a matching '['"),
    ("select[a]}", 9, "unexpected '}' without a matching '{'"),
    ("{select[a]}}", 11, "expected the end of the requirement"),
    # -- unclosed brackets: reported at the opening character ---------------------------------
    ("select[a", 6, "expected ']' to close select["),
    ("select[a>1 order[b]", 6, "expected ']' to close select["),
    ("affinity[core[1]", 8, "expected ']' to close affinity["),
    ("{select[a]", 0, "expected '}' to close '{'"),
    ("select[(a]", 7, "expected ')' to close '('"),
    ("select[a=='x]", 10, "unterminated string"),
    # -- empty sections -----------------------------------------------------------------------
    ("select[]", 7, "expected a select expression"),
    ("order[]", 6, "expected a resource name in order[]"),
    ("order[mem:]", 10, "expected a resource name in order[]"),
    ("same[]", 5, "expected a resource name in same[]"),
    ("affinity[ ]", 10, "expected an affinity description"),
    ("span[]", 5, "expected hosts=, ptile=, block=, stripe or gtile= in span[]"),
    ("span[block=0]", 11, "expected a positive integer for block"),
    ("span[stripe=0]", 12, "expected a positive integer for stripe"),
    ("span[block=4:ptile=2]", 13, "span[] takes one option, not both block and ptile"),
    ("span[block]", 10, "expected '=' after 'block' in span[]"),
    ("rusage[]", 7, "expected a resource name in rusage[]"),
    # -- rusage -------------------------------------------------------------------------------
    ("rusage[mem=-1]", 11, "non-negative amount for 'mem'"),
    ("rusage[mem=]", 11, "non-negative amount for 'mem'"),
    ("rusage[mem]", 10, "expected '=' after 'mem'"),
    ("rusage[mem=1;tmp=2]", 12, "expected ':', ',', '||' or ']'"),
    ("rusage[mem=1:mem=2]", 13, "duplicate resource 'mem'"),
    ("rusage[duration=5]", 7, "expected a resource term before 'duration'"),
    ("rusage[mem=1, decay=1]", 14, "expected a resource term before 'decay'"),
    ("rusage[mem=1:decay=2]", 19, "expected decay=0 or decay=1"),
    ("rusage[mem=1:duration=5:duration=6]", 24, "duplicate 'duration'"),
    ("rusage[mem=1||]", 14, "expected a resource name in rusage[]"),
    # -- span / same / order ------------------------------------------------------------------
    ("order[!]", 7, "expected a resource name in order[]"),
    ("rusage[mem=(100 200)]", 16, "multi-phase amounts for 'mem' cannot increase"),
    ("rusage[mem=(300 200 100):duration=(10)]", 34, "every phase but the last needs a duration"),
    ("rusage[mem=(200 100):duration=(10 5 3)]", 30, "3 duration values for 2 phases"),
    (
        "rusage[mem=(3 2):swp=(9 8 7 6):duration=(1 2)]",
        40,
        "every phase but the last needs a duration (3 wanted)",
    ),
    ("rusage[mem=200:duration=(10)]", 24, "a duration per phase needs multi-phase amounts"),
    ("rusage[mem=(200 100]", 11, "expected ')' to close the amount phases"),
    ("rusage[mem=(200,100)]", 15, "expected a space between phase amounts"),
    ("rusage[mem=4GiB]", 12, "expected ':', ',', '||' or ']' in rusage[]"),
    ("select[mem>4Gx]", 12, "found 'Gx'"),
    ("span[ptile=abc]", 14, "expected ':' and a slot count after 'abc' in ptile"),
    ("span[ptile=0]", 11, "expected a positive integer for ptile"),
    ("span[ptile=1.5]", 11, "expected a positive integer, '!' or type:N for ptile"),
    ("span[ptile='!',4]", 15, "ptile takes one default value"),
    ("span[ptile=HP:8,HP:2]", 16, "duplicate ptile value for 'HP'"),
    ("span[ptile=HP:0]", 14, "expected a positive integer for 'HP' in ptile"),
    ("span[ptile='!',]", 15, "expected a positive integer, '!' or type:N for ptile"),
    ("span[hosts=0]", 11, "expected a positive integer or -1 for hosts"),
    ("span[hosts=2]", 11, "span[hosts=2] is not supported: hosts takes 1"),
    ("rusage[type=1]", 7, "'type' is a host's string attribute, not a resource"),
    ("rusage[mem=1:hname=1]", 13, "'hname' is a host's string attribute"),
    ("span[hosts=64]", 11, "span[hosts=64] is not supported"),
    ("span[foo=1]", 5, "unknown span option 'foo'"),
    ("span[gtile=0]", 11, "expected a positive integer for gtile"),
    ("span[gtile=x]", 11, "expected gtile=N (a positive integer) or gtile='!'"),
    ("span[gtile=1:gtile=2]", 13, "duplicate span option 'gtile'"),
    ("span[ptile=2 gtile=1]", 13, "expected ':' before gtile"),
    ("span[gtile=1 ptile=2]", 13, "expected ':' or ']' after gtile"),
    ("span[gtile=1:ptile=2:hosts=1]", 21, "span[] takes one option, not both ptile and hosts"),
    ("rusage[mem=100:gmodel=X]", 15, "'gmodel' constrains ngpus_physical"),
    ("rusage[ngpus_physical=1,gmem=4]", 24, "'gmem' constrains ngpus_physical"),
    ("rusage[ngpus_physical=1:nvlink=no]", 31, "expected nvlink=yes"),
    ("rusage[ngpus_physical=1:gmodel=X:gmodel=Y]", 33, "duplicate 'gmodel' for the same terms"),
    ("rusage[ngpus_physical=1:gmodel=]", 31, "expected a GPU model or brand name"),
    ("span[hosts=1:ptile=2]", 13, "not both"),
    ("span[ptile=2:ptile=2]", 13, "duplicate span option 'ptile'"),
    ("same[type:type]", 10, "duplicate 'type' in same[]"),
    ("order[mem mem]", 10, "expected ':' or ']' in order[]"),
    # -- compound / alternative ---------------------------------------------------------------
    ("0*{select[a]}", 0, "expected a positive task count"),
    ("{ {select[a]} }", 2, "expected a task count N*"),
    ("{select[a]} + 2*{select[b]}", 0, "only the last part of a compound"),
    ("2*{a} + {b} + 3*{c}", 8, "only the last part of a compound"),
    ("2*{a} + 3", 8, "expected N*{...} or {...} after '+'"),
    ("select[a] || select[b]", 10, "brace each alternative"),
    ("2*{select[a]} || {select[b]}", 14, "brace each alternative"),
    ("{select[a]}||select[b]", 13, "expected '{' to start an alternative"),
    ("{select[a]} || {select[b]}@2", 26, "an alternative's delay, {...}@D, is not supported"),
    # -- select expressions (columns are in the whole string) ---------------------------------
    ("select[a &  b]", 9, "unexpected character '&'"),
    ("select[a@b]", 8, "unexpected character '@'"),
    ("select[a<b<c]", 10, "comparisons do not chain"),
    ("select[mem>]", 11, "expected a value, a name or '('"),
    ("select[mem>4000)]", 15, "unexpected ')'"),
    ("select[type==x86 mem>1]", 17, "expected an operator or the end of the expression"),
    ("select['abc']", 7, "expected a comparison, found a string constant"),
    ("select[defined gpu]", 15, "expected '(' after defined"),
    ("select[defined(1)]", 15, "expected a resource name in defined(...)"),
    ("select[mem>1e999]", 11, "number out of range"),
    ("order[ut] rusage[mem=1] type==any || x", 24, "expected a section"),
    ("2*{mem>}", 7, "expected a value, a name or '('"),
    ("select[a == !]", 13, "expected a value, a name or '(', found the end"),
    # -- aliases: duplicates are found after resolving them ------------------------------
    ("rusage[swap=1:swp=2]", 14, "duplicate resource 'swp'"),
    ("order[cpu:r1m]", 10, "duplicate 'r1m' in order[]"),
    # -- defined() takes configured resources. LSF 7.3 "Administering Platform LSF",
    # "Supported resource names in the defined function" (and LSF 10.1 "Selection
    # string"): "The following resource names are not accepted in the defined
    # (resource_name) function: ... r15s r1m r15m ut pg io ls it tmp swp mem ncpus
    # ndisks maxmem maxswp maxtmp cpuf type model status rexpri server and hname".
    ("select[defined(mem)]", 15, "defined() takes a configured resource; 'mem' is built in"),
    ("select[gpu>0 || defined(type)]", 24, "'type' is built in"),
    ("select[defined(model)]", 15, "'model' is built in"),
    ("select[defined(cpu)]", 15, "'cpu' is built in"),  # the alias of r1m
    ("select[!defined(server)]", 16, "'server' is built in"),
    # -- legacy terms ------------------------------------------------------------------
    ("select[mem:-mem]", 11, "'-' negates a boolean resource; 'mem' is not one"),
    ("select[hpux:type]", 16, "expected '=' and a value after 'type'"),
    ("select[mem=abc:swp=1]", 11, "expected a non-negative number for 'mem'"),
    ("select[mem>1:swp=1]", 10, "expected ':' or '=' after 'mem'"),
    ("select[mem=1::swp=1]", 13, "expected a resource name in a ':'-separated (legacy) select"),
    ("select[mem=1:]", 13, "expected a resource name in a ':'-separated (legacy) select"),
    ("select[-fs=1:a]", 10, "a negated term takes no value"),
    ("select[mem=1 2:a]", 13, "expected ':' or the end of the select"),
    ("select[mem=-1:a]", 11, "expected a non-negative number for 'mem'"),
    # -- span[ptile] per type/model needs same[]. IBM LSF "Span string"
    # (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/span_string.html) and Platform
    # LSF 6.2 "Specifying multiple ptile values": "For host type, you must specify
    # same[type] ... For host model, you must specify same[model]", and "If you
    # specify same[type:model], you cannot specify a predefined ptile value (!)".
    ("span[ptile='!',HP:8,SGI:8,LINUX:2]", 15, "need same[type] or same[model]"),
    ("span[ptile=4,X86_64:2] same[ncpus]", 13, "need same[type] or same[model]"),
    ("2*{span[ptile=HP:2]} + {same[type]}", 14, "need same[type] or same[model]"),
    ("same[type:model] span[ptile='!',LINUX:2]", 28, "ptile='!' cannot be combined"),
    ("span[ptile='!'] same[model:type]", 11, "ptile='!' cannot be combined"),
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[text for text, _ in VALID])
def test_valid_strings_parse_to_the_expected_tree(text: str, expected: ResReq) -> None:
    assert parse_resreq(text) == expected


@pytest.mark.parametrize(("text", "column", "fragment"), INVALID, ids=[t for t, _, _ in INVALID])
def test_invalid_strings_report_column_and_expectation(
    text: str, column: int, fragment: str
) -> None:
    with pytest.raises(ResReqSyntaxError) as caught:
        parse_resreq(text)
    assert (caught.value.column, caught.value.text) == (column, text)
    assert fragment in caught.value.message


def test_corpus_is_large_enough() -> None:
    assert len(VALID) + len(INVALID) >= 60
