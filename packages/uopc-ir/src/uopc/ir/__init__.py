"""uopc.ir: the graph IR of uopc, with no dependency beyond the standard library.

Build graphs from `UOp` constructors or `.uir` text, rewrite them with `PatternMatcher` tables, simplify
integer index arithmetic, bound it with `vmin`/`vmax`, evaluate closed programs with `run`, and draw them
(as Graphviz or Mermaid text, or as an SVG picture laid out here: `draw`).
The names below are the package's contract: other packages import from here, never from the modules inside.
"""

from uopc.ir.alu import exec_alu
from uopc.ir.bounds import Interval, bounds, never_wraps, vmax, vmin
from uopc.ir.dtype import AddrSpace, DType, PtrDType, dtypes, promote
from uopc.ir.errors import RewriteError, RunError, UIRSyntaxError, UopcError, UOpError
from uopc.ir.interpret import inline_call, run, to_python
from uopc.ir.operators import OpMixin
from uopc.ir.ops import Ops
from uopc.ir.rewrite import PatternMatcher, UPat, graph_rewrite
from uopc.ir.svg import Picture, draw
from uopc.ir.symbolic import build_sum, linear_terms, simplify
from uopc.ir.uir import fmt, parse, to_uir, uir_lines
from uopc.ir.uop import (
    AxisType,
    BufferArg,
    ConstValue,
    RangeArg,
    UOp,
    accumulator_dtype,
    call,
    cast,
    const,
    operand_kinds,
    param,
    prod,
    range_,
    round_to,
    sink,
    stack,
    substitute,
    toposort,
    where,
)
from uopc.ir.viz import to_dot, to_mermaid

__version__ = "0.1.0"

__all__ = [
    "AddrSpace",
    "AxisType",
    "BufferArg",
    "ConstValue",
    "DType",
    "Interval",
    "OpMixin",
    "Ops",
    "PatternMatcher",
    "Picture",
    "PtrDType",
    "RangeArg",
    "RewriteError",
    "RunError",
    "UIRSyntaxError",
    "UOp",
    "UOpError",
    "UPat",
    "UopcError",
    "accumulator_dtype",
    "bounds",
    "build_sum",
    "call",
    "cast",
    "const",
    "draw",
    "dtypes",
    "exec_alu",
    "fmt",
    "graph_rewrite",
    "inline_call",
    "linear_terms",
    "never_wraps",
    "operand_kinds",
    "param",
    "parse",
    "prod",
    "promote",
    "range_",
    "round_to",
    "run",
    "simplify",
    "sink",
    "stack",
    "substitute",
    "to_dot",
    "to_mermaid",
    "to_python",
    "to_uir",
    "toposort",
    "uir_lines",
    "vmax",
    "vmin",
    "where",
]
