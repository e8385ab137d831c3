"""Reductions (sum, max, min) over every subset of axes of 3-D and 4-D inputs, against numpy.

Axis sizes are distinct (2, 3, 5 and 2, 3, 4, 5) so a swapped axis cannot hide behind a square shape.
Each case runs twice: on the plain input, and on the input flipped and padded with widths that may be
negative (a negative width is a shrink), which puts gated loads and reversed indices inside the reduce
loops. Integers compare exactly; float sums within a bound scaled to the reduction length, since the
default CFLAGS let gcc reorder float additions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import CExecutable
from uopc.ir import DType, Ops, UOp, dtypes
from uopc.lower import Kernel, Step, rangeify

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]

Array = npt.NDArray[Any]

SHAPES = [(2, 3, 5), (2, 3, 4, 5)]
OPS: dict[str, tuple[Ops, Callable[..., Array]]] = {
    "sum": (Ops.ADD, np.sum),
    "max": (Ops.MAX, np.max),
    "min": (Ops.MIN, np.min),
}
DTYPES: dict[str, tuple[DType, type[np.generic]]] = {
    "i32": (dtypes.int32, np.int32),
    "f32": (dtypes.float32, np.float32),
}
VARIANTS = ["plain", "flip-pad"]


def pad_any(u: UOp, ref: Array, widths: list[tuple[int, int]]) -> tuple[UOp, Array]:
    """Pad with (before, after) widths that may be negative: the negative part is a shrink first."""
    keep = [(max(0, -b), s - max(0, -a)) for (b, a), s in zip(widths, ref.shape, strict=True)]
    grow = [(max(0, b), max(0, a)) for b, a in widths]
    return u.shrink(keep).pad(grow), np.pad(ref[tuple(slice(b, e) for b, e in keep)], grow)


@dataclass
class Case:
    name: str
    axes: tuple[int, ...]
    op: str
    kernel: Kernel
    x: Array  # the input buffer
    source: Array  # the array being reduced (the input after the variant's flip and pad)


def make_case(shape: tuple[int, ...], op: str, dtype_name: str, variant: str, axes: tuple[int, ...]) -> Case:
    dtype, np_dtype = DTYPES[dtype_name]
    name = f"r_{len(shape)}d_{op}_{dtype_name}_{variant.replace('-', '_')}_{''.join(map(str, axes)) or 'none'}"
    rng = np.random.default_rng([len(shape), list(OPS).index(op), list(DTYPES).index(dtype_name), len(axes)])
    n = int(np.prod(shape))
    x = rng.standard_normal(n).astype(np_dtype) if dtype.is_float else rng.integers(-999, 1000, n).astype(np_dtype)
    u, ref = UOp.buffer(1, n, dtype).reshape(shape), x.reshape(shape)
    if variant == "flip-pad":
        flips = [a for a in range(len(shape)) if rng.random() < 0.5]
        u, ref = u.flip(flips), np.flip(ref, tuple(flips))
        widths = [(int(rng.integers(-1, 3)), int(rng.integers(-1, 3))) for _ in shape]
        widths = [(b, a) if b + a > -s else (0, a) for (b, a), s in zip(widths, shape, strict=True)]
        u, ref = pad_any(u, ref, widths)
    value = u.reduce(OPS[op][0], axes)
    kernel = Kernel(name, rangeify([(UOp.buffer(0, value.size, dtype), value)]))
    return Case(name, axes, op, kernel, x, np.ascontiguousarray(ref))


GROUPS = [(s, op, d, v) for s in SHAPES for op in OPS for d in DTYPES for v in VARIANTS]
GROUP_IDS = [f"{len(s)}d-{op}-{d}-{v}" for s, op, d, v in GROUPS]


def subsets(ndim: int) -> list[tuple[int, ...]]:
    return [c for r in range(ndim + 1) for c in itertools.combinations(range(ndim), r)]


@pytest.fixture(scope="module")
def built(build_kernels: Build) -> tuple[dict[tuple[Any, ...], list[Case]], CExecutable]:
    """Every case of every group, compiled into one library."""
    cases = {g: [make_case(*g, axes) for axes in subsets(len(g[0]))] for g in GROUPS}
    return cases, build_kernels([c.kernel for group in cases.values() for c in group], [])


def check(case: Case, got: Array) -> None:
    want = OPS[case.op][1](case.source.astype(np.float64), axis=case.axes, keepdims=True)
    if case.source.dtype.kind == "i" or case.op != "sum":  # integers, max and min are exact
        np.testing.assert_array_equal(got.reshape(want.shape), want.astype(case.source.dtype), err_msg=case.name)
        return
    # a float sum of n terms in any order is within n * eps * sum(|x|) of the exact sum
    n = max(1, int(np.prod([case.source.shape[a] for a in case.axes])))
    bound = n * np.finfo(np.float32).eps * np.abs(case.source.astype(np.float64)).sum(case.axes, keepdims=True)
    err = np.abs(got.reshape(want.shape) - want)
    assert np.all(err <= bound + 1e-30), f"{case.name}: error {err.max()} above bound"


@pytest.mark.o0
@pytest.mark.parametrize(("shape", "op", "dtype_name", "variant"), GROUPS, ids=GROUP_IDS)
def test_reduce_every_axis_subset(
    built: tuple[dict[tuple[Any, ...], list[Case]], CExecutable],
    shape: tuple[int, ...],
    op: str,
    dtype_name: str,
    variant: str,
) -> None:
    cases, exe = built
    group = cases[(shape, op, dtype_name, variant)]
    assert len(group) == 2 ** len(shape)
    for case in group:
        out = np.zeros(case.kernel.params[0].size, case.x.dtype)
        exe.run_kernel([p.name for p in exe.kernels].index(case.kernel.name), [out, case.x][: len(case.kernel.params)])
        check(case, out)


@pytest.mark.o0
def test_float_max_and_min_propagate_nan(build_kernels: Build) -> None:
    # numpy's max and min return nan for a row holding one: the C helpers must not drop it
    x = np.array([1.0, np.nan, 3.0, 4.0, 5.0, 6.0], np.float32)
    u = UOp.buffer(1, 6).reshape((2, 3))
    kernels = [
        Kernel(f"nan_{op.name}", rangeify([(UOp.buffer(0, 2), u.reduce(op, [1]).reshape((2,)))]))
        for op in (Ops.MAX, Ops.MIN)
    ]
    exe = build_kernels(kernels, [])
    for i, f in enumerate((np.max, np.min)):
        out = np.zeros(2, np.float32)
        exe.run_kernel(i, [out, x])
        np.testing.assert_array_equal(out, f(x.reshape(2, 3), axis=1))
