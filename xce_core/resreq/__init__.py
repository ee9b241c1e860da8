"""The LSF resource-requirement language (``bsub -R``): parse, print, compile.

- :func:`parse_resreq` turns a requirement string into an immutable tree
  (:class:`Primary`, :class:`Compound`, :class:`Alternative`); bad text raises
  :class:`ResReqSyntaxError` with the 0-based column.
- :func:`format_resreq` (also ``str(tree)``) prints the canonical form, which
  parses back to an equal tree.
- :func:`compile_select` compiles a select expression into a
  :class:`SelectExpr`, a callable test over a host's values.
- :class:`ResReqLimits` bounds what one string may cost (length, nesting,
  list sizes, digits, counts); :data:`DEFAULT_LIMITS` applies unless a caller
  passes others (``parse_resreq(text, limits)``).
"""

from xce_core._errors import ResReqSyntaxError
from xce_core.resreq._limits import DEFAULT_LIMITS, ResReqLimits
from xce_core.resreq._names import LOAD_INDICES
from xce_core.resreq._parse import parse_resreq
from xce_core.resreq._select import compile_select
from xce_core.resreq._tree import (
    Alternative,
    Compound,
    HostValues,
    OrderKey,
    Primary,
    ResReq,
    RusageTerm,
    SelectExpr,
    Span,
    Value,
    format_resreq,
)

__all__ = [
    "DEFAULT_LIMITS",
    "LOAD_INDICES",
    "Alternative",
    "Compound",
    "HostValues",
    "OrderKey",
    "Primary",
    "ResReq",
    "ResReqLimits",
    "ResReqSyntaxError",
    "RusageTerm",
    "SelectExpr",
    "Span",
    "Value",
    "compile_select",
    "format_resreq",
    "parse_resreq",
]
