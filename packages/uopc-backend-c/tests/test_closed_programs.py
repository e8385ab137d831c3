"""Differential check: random closed programs, evaluated by `uopc.ir.run` (the rewrite interpreter) and by
rangeify + C, must agree. They share no code past the graph: run rewrites STACKs element by element
with the reference semantics (exec_alu); rangeify turns the same graph into loops over a destination
buffer, with each STACK a WHERE-select chain on the loop index, and gcc compiles it. Each program is also
compiled with random opts (upcast, unroll, thread), which must not change a value.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import CExecutable, numpy_dtype
from uopc.ir import AxisType, DType, Ops, UOp, dtypes, run, stack, to_python
from uopc.lower import Kernel, Opts, Step, rangeify

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]

Array = npt.NDArray[Any]
Shape = tuple[int, ...]

SEEDS = range(80)
PROGRAM_DTYPES = [dtypes.int32, dtypes.float32, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.float64]
PROGRAM_DTYPES += [dtypes.float16, dtypes.bfloat16]


def factor(n: int, rng: random.Random) -> Shape:
    """A random shape holding n elements."""
    dims: list[int] = []
    p = 2
    while n > 1:
        while n % p == 0:
            if dims and rng.random() < 0.4:
                dims[-1] *= p
            else:
                dims.append(p)
            n //= p
        p += 1
    rng.shuffle(dims)
    return tuple(dims) or (1,)


class Generator:
    """Builds a random closed program of a requested shape, top-down: each node is a STACK leaf, an ALU
    op of nodes of the same shape, or a movement op or reduction of a node of another shape."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.dtype = PROGRAM_DTYPES[seed % len(PROGRAM_DTYPES)]

    def scalar(self) -> UOp:
        if self.dtype.is_float:
            return UOp.const(round(self.rng.uniform(-2, 2), 3), self.dtype)
        lo, hi = (0, 40) if self.dtype.kind == "uint" else (-40, 40)
        return UOp.const(self.rng.randint(lo, hi), self.dtype)

    def leaf(self, shape: Shape) -> UOp:
        level = [self.scalar() for _ in range(math.prod(shape))]
        for n in reversed(shape):
            level = [stack(*level[k : k + n]) for k in range(0, len(level), n)]
        return level[0]

    def make(self, shape: Shape, depth: int) -> UOp:
        if depth == 0 or math.prod(shape) > 60:
            return self.leaf(shape)
        builders = [self.alu, self.alu, self.alu, self.movement, self.movement, self.reduce]
        return self.rng.choice(builders)(shape, depth - 1)

    def alu(self, shape: Shape, depth: int) -> UOp:
        a, b = self.make(shape, depth), self.make(shape, depth)
        ops = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.NEG]
        ops += [Ops.EXP, Ops.SIN, Ops.SQRT] if self.dtype.is_float else [Ops.IDIV, Ops.MOD]
        op = self.rng.choice(ops)
        if op is Ops.CMPLT:
            return (a < b).where(a, b)
        if op in (Ops.IDIV, Ops.MOD):  # by a non-zero constant of either sign: floor semantics in C
            c = self.rng.choice([2, 3, 5, -3] if self.dtype.kind == "int" else [2, 3, 5])
            return a.alu(op, c)
        if op is Ops.NEG:
            return -a
        if op is Ops.EXP:
            return a.minimum(3.0).exp()
        if op is Ops.SQRT:
            return a.maximum(-a).sqrt()  # sqrt(|a|)
        if op is Ops.SIN:
            return a.sin()
        return a.alu(op, b)

    def movement(self, shape: Shape, depth: int) -> UOp:
        rng, n = self.rng, len(shape)
        kind = rng.choice(["permute", "reshape", "expand", "shrink", "pad", "flip"])
        if kind == "permute":
            order = list(range(n))
            rng.shuffle(order)
            return self.make(tuple(shape[order.index(k)] for k in range(n)), depth).permute(order)
        if kind == "reshape":
            return self.make(factor(math.prod(shape), rng), depth).reshape(shape)
        if kind == "expand":
            return self.make(tuple(1 if rng.random() < 0.5 else s for s in shape), depth).expand(shape)
        if kind == "shrink":
            before = [rng.randint(0, 2) for _ in shape]
            big = tuple(s + b + rng.randint(0, 1) for s, b in zip(shape, before, strict=True))
            return self.make(big, depth).shrink([(b, b + s) for b, s in zip(before, shape, strict=True)])
        if kind == "pad":
            widths = [(b, rng.randint(0, s - 1 - b)) for s in shape for b in [rng.randint(0, (s - 1) // 2)]]
            small = tuple(s - b - a for s, (b, a) in zip(shape, widths, strict=True))
            return self.make(small, depth).pad(widths)
        return self.make(shape, depth).flip([a for a in range(n) if rng.random() < 0.5])

    def reduce(self, shape: Shape, depth: int) -> UOp:
        axis = self.rng.randrange(len(shape) + 1)
        op = self.rng.choice([Ops.ADD, Ops.MAX, Ops.MIN])
        wide = (*shape[:axis], self.rng.randint(2, 4), *shape[axis:])
        return self.make(wide, depth).reduce(op, [axis]).reshape(shape)


def program(seed: int) -> UOp:
    gen = Generator(seed)
    return gen.make(factor(gen.rng.choice([2, 3, 4, 6, 8, 12]), gen.rng), depth=gen.rng.randint(2, 4))


def random_opts(kernel: UOp, rng: random.Random) -> Opts:
    """Upcast or unroll each loop by a random divisor of its size, and thread one output loop that is left."""
    upcast: dict[int, int] = {}
    unroll: dict[int, int] = {}
    outputs = []
    for r in (u for u in kernel.toposort() if u.op is Ops.RANGE):
        size, axis = r.src[0].arg, r.arg.axis
        factor = rng.choice([d for d in range(1, size + 1) if size % d == 0])
        if r.arg.kind is AxisType.REDUCE and factor > 1:
            unroll[axis] = factor
        elif r.arg.kind is AxisType.LOOP:
            upcast.update({axis: factor} if factor > 1 else {})
            outputs += [axis] if factor < size else []
    return Opts(upcast=upcast, unroll=unroll, thread=rng.choice([None, *outputs]))


@dataclass
class Case:
    program: UOp
    want: Array
    kernel: Kernel  # rangeify only
    opted: Kernel  # with random opts applied


@pytest.fixture(scope="module")
def built(build_kernels: Build) -> tuple[list[Case], CExecutable]:
    cases = []
    for seed in SEEDS:
        p = program(seed)
        np_dtype = np.float32 if p.scalar_dtype is dtypes.bfloat16 else p.scalar_dtype.np_name
        want = np.array(to_python(run(p)), dtype=np_dtype).reshape(-1)
        ast = rangeify([(UOp.buffer(0, p.size, p.scalar_dtype), p)])
        opted = Kernel(f"closed_opt_{seed}", ast, random_opts(ast, random.Random(seed)))
        cases.append(Case(p, want, Kernel(f"closed_{seed}", ast), opted))
    kernels = [k for c in cases for k in (c.kernel, c.opted)]
    return cases, build_kernels(kernels, [])


@pytest.mark.o0
@pytest.mark.parametrize("seed", SEEDS)
def test_closed_program_c_matches_rewrite_interpreter(built: tuple[list[Case], CExecutable], seed: int) -> None:
    cases, exe = built
    case = cases[seed]
    dtype: DType = case.program.scalar_dtype
    for kernel in (case.kernel, case.opted):
        assert [p.slot for p in kernel.params] == [0]  # closed: the destination is the only buffer
        out = np.zeros(case.want.size, numpy_dtype(dtype))
        exe.run_kernel([k.name for k in exe.kernels].index(kernel.name), [out])
        if dtype is dtypes.bfloat16:  # the bit patterns, as float32
            out = (out.astype(np.uint32) << 16).view(np.float32)
        if dtype.is_float:  # sums may be reordered, and libm's exp and sin differ from Python's in the last bit
            rtol = {dtypes.float32: 1e-4, dtypes.float64: 1e-9, dtypes.float16: 2**-10}.get(dtype, 2**-7)  # bf16
            np.testing.assert_allclose(out, case.want, rtol=rtol, atol=rtol, err_msg=kernel.name)
        else:
            np.testing.assert_array_equal(out, case.want, err_msg=f"{kernel.name} ({dtype.name})")


def test_generator_covers_dtypes_and_ops() -> None:
    # the differential test is only as strong as the programs: every dtype, and the ops that differ
    # most between C and Python (floor division, narrow wrap-around, movement, reductions) must appear
    seen_ops: set[Ops] = set()
    seen_dtypes: set[DType] = set()
    for seed in SEEDS:
        p = program(seed)
        seen_ops |= {u.op for u in p.toposort()}
        seen_dtypes.add(p.scalar_dtype)
    assert seen_dtypes == set(PROGRAM_DTYPES)
    assert {Ops.IDIV, Ops.MOD, Ops.REDUCE_AXIS, Ops.PAD, Ops.FLIP, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK} <= seen_ops
