"""Three independent paths through the compiler agree on random closed programs.

A closed program is built from UOp constructors only: STACK constants, elementwise ALU ops, movement ops
and REDUCE_AXIS; it reads no buffer, so each path can evaluate it on its own:

1. the rewrite interpreter (uopc.ir.run, then to_python): no loops, no memory, no C;
2. rangeify into one destination buffer, rendered as C and run with Program: loops, no kernelize, no opts;
3. Tensor(uop).numpy(): kernelize, opts, the plan cache, the backend registry.

When they disagree, the first path that differs from the others localizes the bug (Appendix B, debugging).
The programs are generated from a seeded random.Random, so every failure is a test id that reruns.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import Program, render_c
from uopc.ir import DType, Ops, UOp, dtypes, run, stack, to_python
from uopc.lower import Kernel, linearize, rangeify
from uopc.tensor import Tensor

Array = npt.NDArray[Any]


def constant(values: Array, dtype: DType) -> UOp:
    """A STACK (nested along every axis) holding `values`; a 0-d array is a CONST."""
    level = [UOp.const(float(v) if dtype.is_float else int(v), dtype) for v in values.reshape(-1)]
    for n in reversed(values.shape):
        level = [stack(*level[i : i + n]) for i in range(0, len(level), n)]
    return level[0]


@dataclass
class Builder:
    """Grows a random program: a pool of nodes, each step adds one built from the pool."""

    rng: random.Random
    pool: list[UOp] = field(default_factory=list)

    def values(self, shape: tuple[int, ...], dtype: DType) -> UOp:
        if dtype.is_float:
            data = np.array([self.rng.choice([-2.0, -1.5, -0.5, 0.0, 0.25, 1.0, 3.0]) for _ in range(math.prod(shape))])
        else:
            data = np.array([self.rng.randint(-5, 5) for _ in range(math.prod(shape))])
        return constant(data.reshape(shape), dtype)

    def partner(self, x: UOp) -> UOp:
        """A second operand of x's shape and dtype: an earlier node, a new constant array, or a scalar."""
        same = [u for u in self.pool if u.shape == x.shape and u.dtype is x.scalar_dtype]
        pick = self.rng.random()
        if pick < 0.4 and same:
            return self.rng.choice(same)
        if pick < 0.8:
            return self.values(x.shape, x.scalar_dtype)
        return self.values((), x.scalar_dtype)

    def alu(self, x: UOp) -> UOp:
        y = self.partner(x)
        ops = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.MIN, Ops.NEG, "where"]
        ops += [Ops.SIN, Ops.COS, Ops.EXP] if x.scalar_dtype.is_float else [Ops.IDIV, Ops.MOD, "cast"]
        op = self.rng.choice(ops)
        if op == "where":
            return (x < y).where(x, self.partner(x))
        if op == "cast":
            return x.cast(dtypes.float32)
        if op in (Ops.IDIV, Ops.MOD):  # by a nonzero constant of either sign: floor semantics
            return x.alu(op, self.rng.choice([-3, -2, 2, 3, 4]))
        if op is Ops.EXP:
            return x.sin().exp()  # bounded, so no overflow hides a difference
        if op in (Ops.NEG, Ops.SIN, Ops.COS):
            return x.alu(op)
        assert isinstance(op, Ops)
        return x.alu(op, y)

    def movement(self, x: UOp) -> UOp:
        shape, n = x.shape, len(x.shape)
        kind = self.rng.choice(["reshape", "permute", "expand", "shrink", "pad", "flip"])
        if kind == "reshape" or n == 0:
            sizes = [s for s in shape if s > 1]
            self.rng.shuffle(sizes)
            new = list(sizes) if self.rng.random() < 0.5 else [math.prod(shape)]
            new.insert(self.rng.randint(0, len(new)), 1)
            return x.reshape(tuple(new))
        if kind == "permute":
            order = list(range(n))
            self.rng.shuffle(order)
            return x.permute(order)
        if kind == "expand":
            if 1 not in shape:
                x = x.reshape((1, *shape))
            return x.expand(tuple(self.rng.randint(2, 3) if s == 1 else s for s in x.shape))
        if kind == "shrink":
            bounds = []
            for s in shape:
                b = self.rng.randint(0, s - 1)
                bounds.append((b, self.rng.randint(b + 1, s)))
            return x.shrink(bounds)
        if kind == "pad":
            return x.pad([(self.rng.randint(0, 2), self.rng.randint(0, 1)) for _ in shape])
        return x.flip(sorted(self.rng.sample(range(n), self.rng.randint(1, n))))

    def reduce(self, x: UOp) -> UOp:
        if not x.shape:
            return x
        axes = sorted(self.rng.sample(range(len(x.shape)), 1 if self.rng.random() < 0.7 else len(x.shape)))
        return x.reduce(self.rng.choice([Ops.ADD, Ops.MAX, Ops.MIN]), axes)


def random_program(seed: int) -> UOp:
    rng = random.Random(seed)
    b = Builder(rng)
    shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3)))
    x = b.values(shape, rng.choice([dtypes.float32, dtypes.int32]))
    for _ in range(rng.randint(4, 10)):
        b.pool.append(x)
        step = rng.random()
        x = b.alu(x) if step < 0.45 else b.movement(x) if step < 0.85 or x.size < 6 else b.reduce(x)
        if x.size > 64:  # keep the interpreter quick: shrink back
            x = x.shrink([(0, min(s, 2)) for s in x.shape])
    return x if x.shape else x.reshape((1,))


def by_interpreter(program: UOp) -> Array:
    return np.array(to_python(run(program))).reshape(program.shape)


def by_rangeify_and_c(program: UOp) -> Array:
    out = UOp.buffer(0, program.size, program.scalar_dtype)
    source = render_c(linearize(Kernel("three_way", rangeify([(out, program)]))))
    result = np.zeros(program.size, program.scalar_dtype.np_name)
    Program(source, "three_way")(result)
    return result.reshape(program.shape)


def by_tensor(program: UOp) -> Array:
    return Tensor(program).numpy()


def agree(program: UOp, what: str) -> None:
    paths = {"interpreter": by_interpreter, "rangeify + C": by_rangeify_and_c, "Tensor": by_tensor}
    results = {name: path(program) for name, path in paths.items()}
    want = results["interpreter"]
    for name, got in results.items():
        assert got.shape == program.shape, f"{what}: {name} gave shape {got.shape}, not {program.shape}"
        if program.scalar_dtype.is_float:  # a sum may be split into vector lanes: close, not equal
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{what}: {name} vs interpreter")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{what}: {name} vs interpreter")


@pytest.mark.parametrize("seed", range(40))
def test_random_closed_programs_agree(seed: int) -> None:
    agree(random_program(seed), f"seed {seed}")


def test_the_book_example_agrees() -> None:
    """A permuted reduce of a STACK, squared, built from constructors."""
    row = stack(1.0, -2.0, 3.0)
    program = stack(row, row).permute((1, 0)).reduce(Ops.MAX, [1]).reshape((3,))
    program = program * program
    agree(program, "book example")
    np.testing.assert_array_equal(by_tensor(program), [1.0, 4.0, 9.0])


def test_integer_floor_division_and_wrap_agree() -> None:
    """Negative operands of // and %, and int32 overflow: C's / and % truncate, the IR floors and wraps."""
    a = constant(np.array([[-7, 7, -1], [2_000_000_000, -2_000_000_000, 5]]), dtypes.int32)
    d = constant(np.array([[2, -2, 3], [3, 3, -3]]), dtypes.int32)
    program = stack(*[(a // d), (a % d), a + a, a * 3]).reshape((4, 6))
    agree(program, "int semantics")
    np.testing.assert_array_equal(by_tensor(program)[0, :3], [-4, -4, -1])


def test_generator_makes_varied_programs() -> None:
    """The fuzzer is only as good as what it generates: every op kind shows up across the seeds."""
    seen: set[Ops] = set()
    for seed in range(40):
        seen |= {u.op for u in random_program(seed).toposort()}
    assert seen >= Ops.MOVEMENT
    assert {Ops.REDUCE_AXIS, Ops.STACK, Ops.WHERE, Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.CAST} <= seen
