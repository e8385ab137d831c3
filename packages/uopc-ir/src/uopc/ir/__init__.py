"""uopc.ir: the graph IR of uopc, with no dependency beyond the standard library.

Build graphs from `UOp` constructors or `.uir` text, rewrite them with `PatternMatcher` tables, simplify
integer index arithmetic, bound it with `vmin`/`vmax`, evaluate closed programs with `run`, and draw them
(as Graphviz or Mermaid text, or as an SVG picture laid out here: `draw`).
"""

from uopc.ir.dtype import AddrSpace, DType, PtrDType, dtypes, promote
from uopc.ir.rewrite import PatternMatcher, RewriteError, UPat, graph_rewrite
from uopc.ir.svg import Picture, draw
from uopc.ir.symbolic import (
    RunError,
    bounds,
    exec_alu,
    inline_call,
    run,
    simplify,
    to_python,
    vmax,
    vmin,
)
from uopc.ir.uir import UIRSyntaxError, fmt, parse, to_uir, uir_lines
from uopc.ir.uop import (
    AxisType,
    BufferArg,
    Ops,
    RangeArg,
    UOp,
    UOpError,
    accumulator_dtype,
    call,
    cast,
    const,
    param,
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
    "DType",
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
    "accumulator_dtype",
    "bounds",
    "call",
    "cast",
    "const",
    "draw",
    "dtypes",
    "exec_alu",
    "fmt",
    "graph_rewrite",
    "inline_call",
    "param",
    "parse",
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
