"""GEMM under every combination of opts, against numpy; and the shape of the C each opt produces."""

from __future__ import annotations

import platform
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import CExecutable, render_c
from uopc.backend.c.compiler import cflags, compiler
from uopc.ir import UOp
from uopc.lower import Kernel, Opts, Step, linearize, rangeify

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]

Array = npt.NDArray[Any]


def gemm_graph(m: int, k: int, n: int) -> UOp:
    """C = A @ B for row-major A (slot 0, m x k) and B (slot 1, k x n): reshape, expand, multiply, sum."""
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


def gemm_kernel(m: int, k: int, n: int, opts: Opts, name: str = "gemm") -> Kernel:
    return Kernel(name, rangeify([(UOp.buffer(2, m * n), gemm_graph(m, k, n))]), opts)


def operands(m: int, k: int, n: int, seed: int = 0) -> tuple[Array, Array]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def check_gemm(out: Array, a: Array, b: Array) -> None:
    # float32 dot products of length k, summed in any order: error grows like k * eps * |a| |b|
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = a.shape[1] * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(out.reshape(want.shape) - want) <= bound)


OPTS = {
    "none": Opts(),
    "upcast": Opts(upcast={0: 4, 1: 4}),
    "unroll": Opts(unroll={2: 4}),
    "upcast+unroll": Opts(upcast={0: 2, 1: 4}, unroll={2: 4}),
    "upcast+thread": Opts(upcast={0: 4, 1: 2}, thread=1),
    "thread": Opts(thread=0),
    "thread+upcast-same-axis": Opts(upcast={0: 2}, thread=0),
    "all": Opts(upcast={0: 2, 1: 2}, unroll={2: 8}, thread=0),
    "vector": Opts(vector=(1, 8)),
    "vector-whole-axis": Opts(vector=(1, 16), upcast={0: 3}),
    "vector+tile+thread": Opts(vector=(1, 4), upcast={0: 4, 1: 2}, thread=0),
    "vector+unroll+thread-over-vectors": Opts(vector=(1, 4), unroll={2: 4}, thread=1),
}
M, K, N = 24, 40, 16  # distinct sizes: a swapped axis changes the answer


@pytest.fixture(scope="module")
def gemm_exe(build_kernels: Build) -> CExecutable:
    return build_kernels([gemm_kernel(M, K, N, o, f"gemm_{i}") for i, o in enumerate(OPTS.values())], [])


@pytest.mark.o0
@pytest.mark.parametrize("name", list(OPTS))
def test_gemm_with_opts_matches_numpy(gemm_exe: CExecutable, name: str) -> None:
    a, b = operands(M, K, N)
    out = np.full(M * N, np.nan, np.float32)  # every output element must be written
    gemm_exe.run_kernel(list(OPTS).index(name), [a.reshape(-1), b.reshape(-1), out])
    check_gemm(out, a, b)


@pytest.mark.o0
def test_threaded_gemm_is_race_free(build_kernels: Build) -> None:
    # At -O0 every access to a variable goes to memory, so an accumulator shared between OpenMP threads
    # (declared outside the parallel loop) gives wrong sums: this test is the reason for the -O0 run.
    m = k = n = 128
    exe = build_kernels(
        [
            gemm_kernel(m, k, n, Opts(thread=0), "tgemm"),
            gemm_kernel(m, k, n, Opts(upcast={1: 4}, thread=0), "tgemm_up"),
        ],
        [],
    )
    a, b = operands(m, k, n, seed=1)
    for index in range(2):
        for _ in range(3):
            out = np.zeros(m * n, np.float32)
            exe.run_kernel(index, [a.reshape(-1), b.reshape(-1), out])
            check_gemm(out, a, b)


def test_upcast_gemm_has_one_shared_reduce_loop_and_four_accumulators() -> None:
    source = render_c(linearize(gemm_kernel(8, 8, 8, Opts(upcast={0: 2, 1: 2}))))
    assert source.count("for (") == 3, source  # 2 output loops + ONE reduce loop for the 2x2 tile
    accumulators = [line for line in source.splitlines() if line.strip().startswith("float acc")]
    assert len(accumulators) == 4, source
    assert render_c(linearize(gemm_kernel(8, 8, 8, Opts()))).count("float acc") == 1


def test_threaded_accumulators_are_declared_inside_the_parallel_loop() -> None:
    source = render_c(linearize(gemm_kernel(8, 8, 8, Opts(upcast={1: 2}, thread=0))))
    lines = source.splitlines()
    (pragma,) = [n for n, line in enumerate(lines) if "#pragma omp parallel for" in line]
    assert lines[pragma + 1].strip().startswith("for (long long tidx0")  # the pragma applies to the threaded loop
    loop_indent = len(lines[pragma + 1]) - len(lines[pragma + 1].lstrip())
    declarations = [n for n, line in enumerate(lines) if line.strip().startswith("float acc")]
    assert len(declarations) == 2
    for n in declarations:  # after the pragma, and deeper than the loop it applies to: private per thread
        assert n > pragma and len(lines[n]) - len(lines[n].lstrip()) > loop_indent


def test_unrolled_reduce_loop_runs_fewer_iterations() -> None:
    source = render_c(linearize(gemm_kernel(8, 16, 8, Opts(unroll={2: 4}))))
    assert "ridx2 < 4;" in source and source.count("= data0[") == 4


def test_register_tiles_over_strided_loads_ask_gcc_not_to_vectorize_loops() -> None:
    """The hint travels in the linear program (strided_axes): gcc vectorizes such a tile's straight-line code
    ten times better than a reduce loop built from scattered elements (notebook entry 31)."""
    attribute = '"no-tree-loop-vectorize"'
    strided = gemm_kernel(8, 8, 8, Opts(upcast={0: 2, 1: 2}))  # B is read down its columns: a stride of n
    assert attribute in render_c(linearize(strided))
    assert attribute not in render_c(linearize(gemm_kernel(8, 8, 8, Opts())))  # no tile: the loop is all there is
    a = UOp.buffer(0, 64).reshape((8, 1, 8)).expand((8, 8, 8))
    b_transposed = UOp.buffer(1, 64).reshape((1, 8, 8)).expand((8, 8, 8))  # A @ B.T: both read along k
    contiguous = rangeify([(UOp.buffer(2, 64), (a * b_transposed).sum([2]).reshape((8, 8)))])
    assert attribute not in render_c(linearize(Kernel("k", contiguous, Opts(upcast={0: 2, 1: 2}))))


@pytest.mark.o0
@pytest.mark.parametrize(
    ("m", "k", "n", "opts"),
    [
        (1, 37, 48, Opts(vector=(1, 16), upcast={1: 3})),  # one row
        (29, 1, 16, Opts(vector=(1, 16), upcast={0: 29})),  # k = 1: each output one product
        (7, 13, 24, Opts(vector=(1, 8), upcast={1: 3}, thread=0)),  # odd rows, a tile that covers the row
    ],
)
def test_vector_gemm_at_odd_shapes_matches_numpy(build_kernels: Build, m: int, k: int, n: int, opts: Opts) -> None:
    exe = build_kernels([gemm_kernel(m, k, n, opts, "vgemm")], [])
    a, b = operands(m, k, n, seed=3)
    out = np.full(m * n, np.nan, np.float32)
    exe.run_kernel(0, [a.reshape(-1), b.reshape(-1), out])
    check_gemm(out, a, b)


@pytest.mark.o0
def test_vector_gemm_propagates_inf_and_nan_as_numpy(build_kernels: Build) -> None:
    """Vector lanes add and multiply as scalars do: inf * 0 is nan, inf + -inf is nan, in the lanes they reach."""
    m, k, n = 4, 6, 16
    a, b = operands(m, k, n, seed=4)
    a[0, 2], b[2, 5], a[1, 3], a[2, 4], b[5, 9] = np.inf, 0.0, np.nan, -np.inf, np.inf
    exe = build_kernels([gemm_kernel(m, k, n, Opts(vector=(1, 16), upcast={0: 2}), "vgemm_inf")], [])
    out = np.zeros(m * n, np.float32)
    exe.run_kernel(0, [a.reshape(-1), b.reshape(-1), out])
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    got = out.reshape(m, n)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
    assert np.array_equal(np.sign(got[np.isinf(got)]), np.sign(want[np.isinf(want)]))


def test_vector_axis_renders_vector_loads_stores_and_accumulators() -> None:
    source = render_c(linearize(gemm_kernel(8, 8, 32, Opts(vector=(1, 16), upcast={0: 2, 1: 2}))))
    assert "typedef float f32x16 __attribute__((vector_size(64)));" in source
    assert source.count("f32x16 acc") == 4 and source.count("= *(const f32x16_u*)(data1 + ") == 2, source
    assert source.count("*(f32x16_u*)(data2 + ") == 4 and "float val" in source  # A's values stay scalars
    assert "omp simd" not in source and "fp-contract" not in source and source.count("= fma_f32x16(") == 4


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_a_scalar_spread_over_the_lanes_costs_no_arithmetic(tmp_path: Path) -> None:
    """A's value meets a vector of B's in each FMA, spread over the lanes. Written `(f32x16){} + a`, the
    spread is an add to +0.0, which IEEE rules do not let gcc drop (it turns -0.0 into +0.0): a scalar add
    and a register broadcast per row of the tile and step of k, on the ports the FMAs need (notes 124).
    `a - (f32x16){}` is exactly a, so gcc broadcasts A's float straight from memory."""
    source = render_c(linearize(gemm_kernel(8, 64, 32, Opts(vector=(1, 16), upcast={0: 8, 1: 2}))))
    c_file = tmp_path / "gemm.c"
    c_file.write_text(source)
    command = [compiler(), *shlex.split(cflags()), "-S", "-o", "-", str(c_file)]
    assembly = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "addss" not in assembly and "vbroadcastss\t(" in assembly
