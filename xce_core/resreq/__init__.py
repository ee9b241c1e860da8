"""The LSF resource-requirement language (``bsub -R``): parse, print, compile.

- :func:`parse_resreq` turns a requirement string into an immutable tree
  (:class:`Primary`, :class:`Compound`, :class:`Alternative`); bad text raises
  :class:`ResReqSyntaxError` with the 0-based column.
- :func:`format_resreq` (also ``str(tree)``) prints the canonical form, which
  parses back to an equal tree.
- :func:`compile_select` compiles a select expression into a
  :class:`SelectExpr`, a callable test over a host's values.
"""

from xce_core._errors import ResReqSyntaxError
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
    "Alternative",
    "Compound",
    "HostValues",
    "OrderKey",
    "Primary",
    "ResReq",
    "ResReqSyntaxError",
    "RusageTerm",
    "SelectExpr",
    "Span",
    "Value",
    "compile_select",
    "format_resreq",
    "parse_resreq",
]
