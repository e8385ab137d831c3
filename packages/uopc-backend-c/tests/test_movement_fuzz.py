"""A movement-chain fuzzer: random chains of permute, shrink, expand, reshape, pad and flip, applied in
lockstep to a graph and to a numpy array, then lowered, compiled, run and compared element for element.

The numpy array is the oracle, built step by step beside the graph, so there is no separate "expected
answer" logic to get wrong. Each (seed, dtype) is one test id that reruns the same chain. All chains are
compiled into one library (one gcc call), since a gcc call costs more than running every chain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import CExecutable
from uopc.ir import UOp, dtypes
from uopc.lower import Kernel, rangeify
from uopc.lower import Step as PlanStep

Build = Callable[[Sequence[Kernel], Sequence[PlanStep]], CExecutable]

Array = npt.NDArray[Any]
Rng = np.random.Generator
Step = Callable[[Rng, UOp, Array], tuple[UOp, Array]]

SEEDS = range(60)
DTYPES = {"f32": (dtypes.float32, np.float32), "i32": (dtypes.int32, np.int32)}
MAX_SIZE = 360  # growing steps (pad, expand) are skipped above this many elements


def random_shape(rng: Rng, n: int) -> tuple[int, ...]:
    """A random factorization of n, with size-1 axes sprinkled in: the cases broadcasting bugs live in."""
    factors, m, p = [], n, 2
    while m > 1:
        while m % p == 0:
            factors.append(p)
            m //= p
        p += 1
    rng.shuffle(factors)
    dims: list[int] = []
    for f in factors:
        if dims and rng.random() < 0.4:
            dims[-1] *= f
        else:
            dims.append(f)
    for _ in range(int(rng.integers(0, 2))):
        dims.insert(int(rng.integers(0, len(dims) + 1)), 1)
    return tuple(dims) or (1,)


def permute(rng: Rng, u: UOp, ref: Array) -> tuple[UOp, Array]:
    order = tuple(int(a) for a in rng.permutation(ref.ndim))
    return u.permute(order), ref.transpose(order)


def shrink(rng: Rng, u: UOp, ref: Array) -> tuple[UOp, Array]:
    # begin anywhere, end above it: length-1 results are frequent
    bounds = [(b, int(rng.integers(b + 1, s + 1))) for s in ref.shape for b in [int(rng.integers(0, s))]]
    return u.shrink(bounds), ref[tuple(slice(b, e) for b, e in bounds)]


def expand(rng: Rng, u: UOp, ref: Array) -> tuple[UOp, Array]:
    ones = [a for a, s in enumerate(ref.shape) if s == 1]
    if not ones or rng.random() < 0.5:  # a new size-1 axis, made by a reshape, then grown
        at = int(rng.integers(0, ref.ndim + 1))
        shape = (*ref.shape[:at], 1, *ref.shape[at:])
        u, ref = u.reshape(shape), ref.reshape(shape)
        ones = [at]
    grown = tuple(int(rng.integers(2, 4)) if a in ones else s for a, s in enumerate(ref.shape))
    return u.expand(grown), np.broadcast_to(ref, grown)


def reshape(rng: Rng, u: UOp, ref: Array) -> tuple[UOp, Array]:
    shape = (ref.size,) if rng.random() < 0.3 else random_shape(rng, ref.size)  # flatten, or refactor
    return u.reshape(shape), ref.reshape(shape)


def pad(rng: Rng, u: UOp, ref: Array) -> tuple[UOp, Array]:
    widths = [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in ref.shape]
    return u.pad(widths), np.pad(ref, widths)


def flip(rng: Rng, u: UOp, ref: Array) -> tuple[UOp, Array]:
    axes = [a for a in range(ref.ndim) if rng.random() < 0.5] or [int(rng.integers(0, ref.ndim))]
    return u.flip(axes), np.flip(ref, tuple(axes))


STEPS: list[Step] = [permute, shrink, expand, reshape, pad, flip]
SHRINKING: list[Step] = [permute, shrink, reshape, flip]


@dataclass
class Chain:
    name: str
    value: UOp  # the graph: reads BUFFER slot 1, and is written to slot 0
    x: Array  # the input
    want: Array  # the numpy result of the same chain
    steps: list[str]


def make_chain(seed: int, dtype_name: str) -> Chain:
    dtype, np_dtype = DTYPES[dtype_name]
    rng = np.random.default_rng([seed, list(DTYPES).index(dtype_name)])
    n = int(rng.integers(6, 49))
    x = rng.standard_normal(n).astype(np_dtype) if dtype.is_float else rng.integers(-99, 100, n).astype(np_dtype)
    shape = random_shape(rng, n)
    u, ref = UOp.buffer(1, n, dtype).reshape(shape), x.reshape(shape)
    names = []
    for _ in range(int(rng.integers(6, 9))):
        choices = STEPS if ref.size <= MAX_SIZE else SHRINKING
        step = choices[int(rng.integers(0, len(choices)))]
        u, ref = step(rng, u, ref)
        names.append(step.__name__)
        assert u.shape == ref.shape, names
    return Chain(f"chain_{dtype_name}_{seed}", u, x, np.ascontiguousarray(ref), names)


CASES = [(seed, d) for d in DTYPES for seed in SEEDS]


@pytest.fixture(scope="module")
def built(build_kernels: Build) -> tuple[dict[str, Chain], dict[str, Kernel | Exception], CExecutable]:
    """Every chain, lowered and compiled together. A chain that fails to lower is kept as its error, so
    that only its own test fails."""
    chains = {c.name: c for c in (make_chain(seed, d) for seed, d in CASES)}
    kernels: dict[str, Kernel | Exception] = {}
    for c in chains.values():
        try:
            kernels[c.name] = Kernel(c.name, rangeify([(UOp.buffer(0, c.want.size, c.value.scalar_dtype), c.value)]))
        except Exception as e:  # reported by the chain's own test
            kernels[c.name] = e
    return chains, kernels, build_kernels([k for k in kernels.values() if isinstance(k, Kernel)], [])


@pytest.mark.o0
@pytest.mark.parametrize(("seed", "dtype_name"), CASES)
def test_random_movement_chain(
    built: tuple[dict[str, Chain], dict[str, Kernel | Exception], CExecutable], seed: int, dtype_name: str
) -> None:
    chains, kernels, exe = built
    chain = chains[f"chain_{dtype_name}_{seed}"]
    kernel = kernels[chain.name]
    if isinstance(kernel, Exception):
        raise AssertionError(f"{chain.steps} failed to lower") from kernel
    out = np.full(chain.want.size, -7, chain.want.dtype)  # a sentinel no chain produces by chance
    arrays = {0: out, 1: chain.x}  # a chain that reads only padding has no input parameter
    exe.run_kernel([p.name for p in exe.programs].index(kernel.name), [arrays[p.slot] for p in kernel.params])
    np.testing.assert_array_equal(out.reshape(chain.want.shape), chain.want, err_msg=" -> ".join(chain.steps))


def test_fuzzer_covers_every_step() -> None:
    # a fuzzer that never pads (or never expands) would pass while testing nothing about padding
    counts: dict[str, int] = {}
    for seed, d in CASES:
        for name in make_chain(seed, d).steps:
            counts[name] = counts.get(name, 0) + 1
    assert set(counts) == {s.__name__ for s in STEPS}
    assert min(counts.values()) >= 60 and sum(counts.values()) >= 6 * len(CASES)
