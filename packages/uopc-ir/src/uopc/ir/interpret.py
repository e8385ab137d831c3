"""The interpreter: `run` evaluates a closed program by rewriting alone, with the reference semantics.

A shaped program becomes STACKs of constants, element by element: movement ops move elements, ALU ops
combine them with `exec_alu`, reductions fold their groups in order. Later stages are tested against it,
so it is kept simple rather than fast, and `check_size` refuses, before any work, a program too large
to evaluate this way.
"""

from __future__ import annotations

import os
from typing import Any

from uopc.ir.alu import exec_alu
from uopc.ir.dtype import DType
from uopc.ir.errors import RunError, UOpError
from uopc.ir.ops import Ops
from uopc.ir.rewrite import UPat, graph_rewrite
from uopc.ir.symbolic import ShapeKeepingMatcher, symbolic_rules
from uopc.ir.uop import UOp, accumulator_dtype, call_body_params, prod, round_to, substitute


def inline_call(c: UOp) -> UOp:
    """The body of CALL `c` with its parameters replaced by the call's arguments.

    The bodies of CALLs nested inside are left alone: their PARAMs belong to them, not to `c`.
    """
    if c.op is not Ops.CALL:
        raise UOpError(f"inline_call: expected a CALL, got {c.op.name}")
    body, args = c.src[0], c.src[1:]
    return substitute(body, {p: args[p.arg] for p in call_body_params(body)}, enter_calls=False)


def elements(x: UOp) -> list[UOp]:
    """The scalar elements of a STACK (or a scalar), in row-major order."""
    out: list[UOp] = []
    stack = [x]
    while stack:
        u = stack.pop()
        if u.op is Ops.STACK:
            stack.extend(reversed(u.src))
        else:
            out.append(u)
    return out


def from_elements(shape: tuple[int, ...], elems: list[UOp]) -> UOp:
    """The STACK of shape `shape` holding `elems` in row-major order."""
    level = elems
    for n in reversed(shape):
        level = [UOp(Ops.STACK, level[0].dtype, level[i : i + n]) for i in range(0, len(level), n)]
    return level[0]


def _unravel(i: int, shape: tuple[int, ...]) -> list[int]:
    idx = []
    for s in reversed(shape):
        i, r = divmod(i, s)
        idx.append(r)
    return idx[::-1]


def _ravel(idx: list[int], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, s in zip(idx, shape, strict=True):
        flat = flat * s + i
    return flat


def _source_index(m: UOp, out: list[int]) -> list[int] | None:
    """For movement op `m`, the source index its output index `out` reads; None inside PAD's fill."""
    shape, arg = m.src[0].shape, m.arg
    if m.op is Ops.RESHAPE:
        return _unravel(_ravel(out, m.shape), shape)
    if m.op is Ops.PERMUTE:
        src = [0] * len(out)
        for o, a in zip(out, arg, strict=True):
            src[a] = o
        return src
    if m.op is Ops.EXPAND:
        return [0 if s == 1 else o for o, s in zip(out, shape, strict=True)]
    if m.op is Ops.SHRINK:
        return [o + b for o, (b, _) in zip(out, arg, strict=True)]
    if m.op is Ops.FLIP:
        return [s - 1 - o if a in arg else o for a, (o, s) in enumerate(zip(out, shape, strict=True))]
    src = [o - b for o, (b, _) in zip(out, arg, strict=True)]  # PAD
    return src if all(0 <= i < s for i, s in zip(src, shape, strict=True)) else None


def move_elements(m: UOp) -> UOp:
    """A movement op on a constant, done element by element."""
    src, zero = elements(m.src[0]), UOp.const(round_to(m.scalar_dtype, 0), m.scalar_dtype)
    out = []
    for i in range(prod(m.shape)):
        j = _source_index(m, _unravel(i, m.shape))
        out.append(zero if j is None else src[_ravel(j, m.src[0].shape)])
    return from_elements(m.shape, out)


def _element(op: Ops, dtype: DType, srcs: tuple[UOp, ...]) -> UOp:
    """One element of an elementwise op or a reduction: folded at once when its operands are constants.

    Building the node and letting `fold_constants` fold it gives the same value, but costs one rule
    application per element, and the rewrite's budget would stop a large program for that alone."""
    if all(s.op is Ops.CONST for s in srcs):
        value = exec_alu(op, dtype, [s.arg for s in srcs])
        if value is not None:
            return UOp.const(value, dtype)
    return UOp(op, dtype, srcs)  # no defined value: the node stays, and `run` says why


def alu_elements(x: UOp) -> UOp | None:
    """An ALU op or CAST on STACKs, done element by element; scalars broadcast."""
    if not any(s.op is Ops.STACK for s in x.src):
        return None
    per_src = [elements(s) if s.op is Ops.STACK else [s] * prod(x.shape) for s in x.src]
    elems = [_element(x.op, x.scalar_dtype, srcs) for srcs in zip(*per_src, strict=True)]
    return from_elements(x.shape, elems)


def reduce_elements(r: UOp) -> UOp:
    """REDUCE_AXIS on a constant: each output element combines its group, in order, with the reduce op."""
    op, axes = r.arg
    src = r.src[0]
    groups: dict[int, list[UOp]] = {}
    for i, e in enumerate(elements(src)):
        idx = [0 if a in axes else v for a, v in enumerate(_unravel(i, src.shape))]
        groups.setdefault(_ravel(idx, r.shape), []).append(e)
    dtype = accumulator_dtype(op, r.scalar_dtype)
    sums = [_combine(op, dtype, [_widen(e, dtype) for e in groups[k]]) for k in range(prod(r.shape))]
    return from_elements(r.shape, [s.cast(r.scalar_dtype) for s in sums])


def _widen(e: UOp, dtype: DType) -> UOp:
    """An element in the accumulator's dtype; a constant stays a constant (float16 and bfloat16 widen exactly)."""
    if e.dtype is dtype:
        return e
    return UOp.const(e.arg, dtype) if e.op is Ops.CONST else e.cast(dtype)


def _combine(op: Ops, dtype: DType, elems: list[UOp]) -> UOp:
    """`elems` combined in order with `op`: as values while all are constants, one node at the end."""
    if not all(e.op is Ops.CONST for e in elems):
        acc = elems[0]
        for e in elems[1:]:
            acc = UOp(op, dtype, (acc, e))
        return acc
    value = elems[0].arg
    for e in elems[1:]:
        folded = exec_alu(op, dtype, [value, e.arg])
        assert folded is not None  # ADD, MUL, MAX and MIN are defined everywhere; only a CAST is not
        value = folded
    return UOp.const(value, dtype)


# fmt: off
interpreter = ShapeKeepingMatcher([
    *symbolic_rules,
    (UPat(Ops.CALL, name="c"), inline_call),
    (UPat((Ops.CONTIGUOUS, Ops.DETACH), src=(UPat.var("x"),)), lambda x: x),
    (UPat(Ops.ALU | {Ops.CAST}, name="x"), alu_elements),
    (UPat(Ops.MOVEMENT, src=(UPat((Ops.STACK, Ops.CONST)),), name="m"), move_elements),
    (UPat(Ops.REDUCE_AXIS, src=(UPat((Ops.STACK, Ops.CONST)),), name="r"), reduce_elements),
])
# fmt: on


DEFAULT_MAX_ELEMENTS = 1_000_000  # seconds of work (scripts/bench_ir.py): a test is smaller, an accident larger


def element_limit() -> int:
    """How many elements `run` may create: UOPC_IR_MAX_ELEMENTS, or DEFAULT_MAX_ELEMENTS."""
    text = os.environ.get("UOPC_IR_MAX_ELEMENTS")
    if text is None:
        return DEFAULT_MAX_ELEMENTS
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise RunError(f"UOPC_IR_MAX_ELEMENTS={text!r} is not a positive integer")
    return int(text)


def check_size(program: UOp, limit: int) -> None:
    """Refuse, before any work, a program whose nodes hold more than `limit` elements together.

    The interpreter makes one node per element of every shaped node, so this is the work and the memory
    `run` needs; an expand to 10^10 elements would otherwise run until it is killed."""
    nodes = program.toposort()
    total = sum(prod(u.shape) for u in nodes)
    if total > limit:
        big = max(nodes, key=lambda u: prod(u.shape))
        raise RunError(
            f"the program has {total:,} elements (the largest node, {big.op.name} of shape {big.shape}, has "
            f"{prod(big.shape):,}); run evaluates at most {limit:,} element by element. "
            "Raise the limit with UOPC_IR_MAX_ELEMENTS or run's max_elements"
        )


def run(program: UOp, max_elements: int | None = None) -> UOp:
    """Evaluate a closed program (no buffers, parameters or loops) to a CONST or a STACK of CONSTs.

    `max_elements` bounds the work (see `check_size`); by default UOPC_IR_MAX_ELEMENTS or 1,000,000."""
    check_size(program, element_limit() if max_elements is None else max_elements)
    result = graph_rewrite(program, interpreter)
    stuck = next((u for u in result.toposort() if u.op not in (Ops.CONST, Ops.STACK)), None)
    if stuck is not None:
        what = {
            Ops.PARAM: "reads a parameter outside any CALL",
            Ops.BUFFER: "reads a buffer",
            Ops.RANGE: "depends on a loop index",
            Ops.CAST: "has no defined value (a cast of inf, nan or an out-of-range float to an integer)",
        }
        reason = what.get(stuck.op, "belongs to a lowered kernel, not to a closed program")
        raise RunError(f"cannot evaluate the program: one {stuck.op.name} node {reason}")
    return result


def to_python(u: UOp) -> Any:
    """A CONST as its value and a STACK as nested lists."""
    if u.op is Ops.CONST:
        return u.arg
    shape = u.shape
    flat = [e.arg for e in elements(u)]
    for n in reversed(shape[1:]):
        flat = [flat[i : i + n] for i in range(0, len(flat), n)]
    return flat
