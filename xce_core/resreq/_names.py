"""LSF's built-in resource names: aliases, kinds, and what ``defined()`` takes.

Sources (IBM Spectrum LSF 10.1 documentation):

- "Selection string" (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/select_string.html):
  "The resource names swap, idle, login, and cpu are accepted as aliases for
  swp, it, ls, and r1m respectively."
- "Load indices" (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/load_indices.html):
  the built-in load indices and their direction: r15s, r1m, r15m, ut, pg, ls and
  io increase with load; it, swp, mem and tmp decrease with load.
- "Selection string", section "Supported resource names in the defined
  function" (Platform LSF 7.3 "Administering Platform LSF", p. 286, same text):
  defined() does not accept the built-in names r15s r1m r15m ut pg io ls it tmp
  swp mem ncpus ndisks maxmem maxswp maxtmp cpuf type model status rexpri
  server and hname.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ALIASES",
    "INCREASING",
    "LOAD_INDICES",
    "NOT_DEFINABLE",
    "NUMERIC_BUILTINS",
    "STRING_BUILTINS",
    "canonical_name",
]

ALIASES: Final = {"swap": "swp", "idle": "it", "login": "ls", "cpu": "r1m"}

# Load indices where a larger value means a busier host (LSF "Direction:
# increasing"): a legacy term ``r1m=0.5`` means r1m<=0.5.
INCREASING: Final = frozenset({"r15s", "r1m", "r15m", "ut", "pg", "ls", "io"})
# Every other built-in number is "more is better" (a legacy ``mem=100`` means
# mem>=100): the decreasing load indices, the static sizes, and xce's slots.
NUMERIC_BUILTINS: Final = INCREASING | frozenset(
    {
        "it",
        "swp",
        "mem",
        "tmp",
        "ncpus",
        "nprocs",
        "ncores",
        "nthreads",
        "ndisks",
        "maxmem",
        "maxswp",
        "maxtmp",
        "cpuf",
        "rexpri",
        "slots",
        "maxslots",
    }
)
STRING_BUILTINS: Final = frozenset({"type", "model", "status", "hname", "host"})
# LSF's built-in load indices that xce does not hold as consumables (mem, swp and
# tmp are consumables here). An rusage on one is LSF's load reservation, which
# xce does not model (it sees no load): the amount is carried and reserves nothing.
LOAD_INDICES: Final = INCREASING | {"it"}

# A built-in is always defined, so defined() of one is a mistake LSF rejects.
# xce adds its own built-ins (slots, maxslots and host, its alias of hname).
NOT_DEFINABLE: Final = NUMERIC_BUILTINS | STRING_BUILTINS | {"server"}


def canonical_name(name: str) -> str:
    """The load index an alias names (``cpu`` → ``r1m``); other names unchanged."""
    return ALIASES.get(name, name)
