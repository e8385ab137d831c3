"""Matmuls whose plan packs B into panels (uopc.lower.pack): every layout and odd shapes, against numpy."""

from __future__ import annotations

import ctypes
import dataclasses
import mmap
import os
import subprocess
import sys
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.ir import AxisType, Ops, UOp, linear_terms
from uopc.lower import Opts, Plan, compile_plan, get_backend, make_plan, normalize
from uopc.lower.pack import PREFETCH_STEPS, panel_width

Array = npt.NDArray[Any]


@pytest.fixture(autouse=True)
def pack_small_matmuls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack matmuls of any size, so that odd shapes are cheap to test (the default packs 128^3 and up)."""
    monkeypatch.setattr("uopc.lower.pack.PACK_MIN_WORK", 0)


def matmul(m: int, k: int, n: int, layout: str) -> UOp:
    """C (m x n) = A @ B with A stored (m, k), or (k, m) for "atb"; B stored (k, n), or (n, k) for "abt"."""
    a = UOp.buffer(0, m * k).reshape((k, m) if layout == "atb" else (m, k))
    b = UOp.buffer(1, k * n).reshape((n, k) if layout == "abt" else (k, n))
    a = a.permute((1, 0)) if layout == "atb" else a
    b = b.permute((1, 0)) if layout == "abt" else b
    products = a.reshape((m, 1, k)).expand((m, n, k)) * b.permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return products.sum([2]).reshape((m, n))


def run(plan: Plan, *inputs: Array) -> Array:
    buffers = [x.reshape(-1) for x in inputs] + [np.full(s.size, np.nan, np.float32) for s in plan.buffers[2:]]
    compile_plan(plan, get_backend("C")).executable.run(buffers)
    return buffers[plan.outputs[0]]


def check(m: int, k: int, n: int, layout: str, seed: int = 0, threads: int = 1) -> Plan:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if layout == "atb" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "abt" else (k, n)).astype(np.float32)
    x, y = (a.T if layout == "atb" else a), (b.T if layout == "abt" else b)
    plan = make_plan(normalize([matmul(m, k, n, layout)])[0], pack=threads)
    got = run(plan, a, b).reshape(m, n)
    want = x.astype(np.float64) @ y.astype(np.float64)
    bound = k * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(y))  # sums of k products, in any order
    assert np.all(np.abs(got - want) <= bound), np.abs(got - want).max()
    return plan


@pytest.mark.o0
@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
@pytest.mark.parametrize(
    ("m", "k", "n"),
    # 1 x N; rows off the tile; one panel and one group of rows, no loop left to thread (notebook entry 87)
    [(1, 37, 64), (5, 17, 192), (8, 9, 32), (64, 33, 64), (12, 300, 128), (7, 33, 96), (300, 7, 32)],
)
def test_packed_matmul_matches_numpy(m: int, k: int, n: int, layout: str) -> None:
    plan = check(m, k, n, layout)
    *copies, product = plan.kernels
    assert product.opts.vector is not None  # B's panels are read as vectors
    # a copy moves vectors where its operand lies along the panel's width; B stored (n, k) is a transpose
    assert [c.opts.vector is not None for c in copies] == [layout != "abt"] + [True] * (len(copies) - 1)
    assert plan.steps[0].buffers[0] == 1  # the first copy reads B
    # A is packed too where the reduce strides through it, and the tile takes whole groups of its rows
    assert len(copies) == (2 if layout == "atb" and m % 8 == 0 else 1)
    assert [s.kernel for s in plan.steps] == list(range(len(plan.kernels)))  # the copies run first


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 17),
    k=st.integers(2, 40),
    panels=st.integers(1, 3),
    layout=st.sampled_from(["ab", "abt", "atb"]),
)
def test_packed_matmul_matches_numpy_at_any_shape(m: int, k: int, panels: int, layout: str) -> None:
    check(m, k, 32 * panels, layout, seed=m * k)


@pytest.mark.o0
@pytest.mark.parametrize(
    ("m", "threads", "shared"),
    # 2 and 6 groups of 8 rows shared among 2 and 3 threads; 3 groups for 2 threads and 1 group for 2, which
    # do not split evenly: the panels or the groups are threaded as for one thread
    [(16, 2, True), (48, 3, True), (24, 2, False), (8, 2, False)],
)
def test_packed_a_shared_among_threads_matches_numpy(m: int, threads: int, shared: bool) -> None:
    """A.T @ B planned for `threads`: where A's groups of rows split evenly among them, each trip of the
    matmul's threaded loop reads its own 1 / threads of packed A (pack.share_groups), whatever count OpenMP
    runs; elsewhere a trip reads one group (rows threaded) or all of A (panels threaded)."""
    plan = check(m, 24, 96, "atb", seed=m, threads=threads)
    *_, product = plan.kernels
    loop = next(u for u in product.ast.toposort() if u.op is Ops.RANGE and u.arg.axis == product.opts.thread)
    packed_a = plan.steps[1].buffers[1]  # the copy of A writes it; the matmul reads it in this slot
    slot = plan.steps[-1].buffers.index(packed_a)
    a_load = next(u for u in product.ast.toposort() if u.op is Ops.LOAD and u.src[0].arg.slot == slot)
    step = linear_terms(a_load.src[1])[0].get(loop, 0)
    assert (loop.src[0].arg == threads and step == plan.buffers[packed_a].size // threads) == shared


@pytest.mark.parametrize(
    ("m", "k", "n"),
    # N x 1; columns that no whole vectors fill (the GPT's vocabulary: 65); k = 1, no reduce loop left
    [(8, 16, 1), (4, 16, 40), (3, 16, 65), (7, 1, 128)],
)
def test_matmuls_without_panels_or_sums_are_not_packed(m: int, k: int, n: int) -> None:
    assert len(check(m, k, n, "ab").kernels) == 1


def test_a_buffer_read_twice_is_not_packed() -> None:
    """A @ A reads one buffer as both operands: the matmul still needs it unpacked, so there is no copy."""
    a = UOp.buffer(0, 64 * 64).reshape((64, 64))
    rows, columns = a.reshape((64, 1, 64)), a.permute((1, 0)).reshape((1, 64, 64))
    square = (rows.expand((64, 64, 64)) * columns.expand((64, 64, 64))).sum([2])
    assert len(make_plan(normalize([square.reshape((64, 64))])[0], pack=1).kernels) == 1


def test_a_fused_max_keeps_the_matmul_unpacked() -> None:
    """relu(A @ B) fuses a max that vector lanes do not compute (check_vector): the matmul is not packed."""
    plan = make_plan(normalize([matmul(8, 16, 64, "ab").maximum(0.0)])[0], pack=1)
    assert len(plan.kernels) == 1 and plan.kernels[0].opts.vector is None


def test_kernels_equal_but_for_their_vector_axis_get_programs_of_their_own() -> None:
    """The driver lowers equal graphs under equal opts once (pipeline._linear_programs); its key must hold every
    field of Opts, or a kernel with vectors and one without share whichever program came first."""
    plain = make_plan(normalize([matmul(4, 8, 64, "ab")])[0], opt=False)
    (kernel,) = plain.kernels
    twins = (
        dataclasses.replace(kernel, name="lanes", opts=Opts(vector=(1, 16))),
        dataclasses.replace(kernel, name="scalars", opts=Opts()),
    )
    plan = dataclasses.replace(plain, steps=(*plain.steps, *plain.steps), make_kernels=lambda: twins)
    lanes, scalars = compile_plan(plan, get_backend("C")).programs
    assert any(u.op is Ops.RANGE and u.arg.kind is AxisType.VECTOR for u in lanes.uops)
    assert not any(u.op is Ops.RANGE and u.arg.kind is AxisType.VECTOR for u in scalars.uops)


def packed_buffers(m: int, k: int, n: int, layout: str, a: Array, b: Array) -> list[Array]:
    """The buffers the plan's packing copies write, after a run: B's panels, then A's groups of rows."""
    plan = make_plan(normalize([matmul(m, k, n, layout)])[0], pack=1)
    buffers = [a.reshape(-1), b.reshape(-1)] + [np.full(s.size, np.nan, np.float32) for s in plan.buffers[2:]]
    compile_plan(plan, get_backend("C")).executable.run(buffers)
    return [buffers[s.buffers[1]] for s in plan.steps[:-1]]


@pytest.mark.o0
@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        *[(1, 7, 32), (16, 7, 64), (8, 33, 32), (24, 300, 96), (296, 12, 32), (7, 2, 32), (8, 48, 64)],
        *[(8, 5, 16), (16, 9, 80)],  # a padded last panel
    ],
)
def test_packing_copies_move_bits(m: int, k: int, n: int, layout: str) -> None:
    """The copies, as vectors or not, in blocks of rows or not, write each operand's bits unchanged into the
    panel order the matmul reads: random bit patterns (NaNs with payloads, infinities, -0.0, subnormals)."""
    rng = np.random.default_rng(m + k + n)
    a = rng.integers(0, 1 << 32, (k, m) if layout == "atb" else (m, k), dtype=np.uint32).view(np.float32)
    b = rng.integers(0, 1 << 32, (n, k) if layout == "abt" else (k, n), dtype=np.uint32).view(np.float32)
    w = panel_width(n, 1)  # 48 at n = 96 and 80, else 32
    b_kn = np.pad(b.T if layout == "abt" else b, ((0, 0), (0, -n % w)))  # a last panel n does not fill: zeros
    want = [b_kn.reshape(k, -1, w).transpose(1, 0, 2)]  # panel o: columns wo .. wo+w-1, k rows
    if layout == "atb" and m % 8 == 0:
        want.append(a.reshape(k, m // 8, 8).transpose(1, 0, 2))  # group o: A's rows 8o .. 8o+7, k of each
    got = packed_buffers(m, k, n, layout, a, b)
    assert len(got) == len(want)
    assert [g.view(np.uint32).tolist() for g in got] == [w.reshape(-1).view(np.uint32).tolist() for w in want]


@pytest.mark.o0
@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
# the MLP's first weight gradient (784 columns: 16 panels of 48 and a third); one half panel; 80 columns, A packed
@pytest.mark.parametrize(("m", "k", "n"), [(128, 128, 784), (5, 17, 16), (16, 33, 80)])
def test_a_padded_last_panel_matches_numpy(m: int, k: int, n: int, layout: str) -> None:
    """Columns a multiple of 16 but not of the panel's width: B's last panel is padded with zeros, and the
    matmul stores none of the columns the padding computes."""
    plan = check(m, k, n, layout, seed=n)
    *copies, product = plan.kernels
    assert product.opts.vector is not None and copies
    w = panel_width(n, 1)
    assert n % w and plan.buffers[plan.steps[0].buffers[1]].size == -(-n // w) * w * k  # the last panel padded


def sentinel_run(plan: Plan, out_slot: int, inputs: dict[int, Array], around: int) -> tuple[Array, Array]:
    """Run the plan with its output inside a larger array of sentinels, `around` on each side; the output,
    and the sentinels after the run."""
    size = plan.buffers[out_slot].size
    frame = np.full(size + 2 * around, 1234.5, np.float32)
    buffers = [
        inputs[i].reshape(-1) if i in inputs else np.full(s.size, np.nan, np.float32)
        for i, s in enumerate(plan.buffers)
    ]
    buffers[out_slot] = frame[around : around + size]
    compile_plan(plan, get_backend("C")).executable.run(buffers)
    return frame[around : around + size], np.concatenate([frame[:around], frame[around + size :]])


@pytest.mark.o0
@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
def test_a_padded_panel_stores_nothing_past_the_columns(layout: str) -> None:
    """The output in a frame of sentinels: a store of a padded column would write into the next row (a
    sentinel-free check: the values) or, from the last row, past the end (the sentinels after it)."""
    m, k, n = 16, 24, 80
    assert n % panel_width(n, 1)  # the last panel is padded
    rng = np.random.default_rng(48)
    a = rng.standard_normal((k, m) if layout == "atb" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "abt" else (k, n)).astype(np.float32)
    x, y = (a.T if layout == "atb" else a), (b.T if layout == "abt" else b)
    plan = make_plan(normalize([matmul(m, k, n, layout)])[0], pack=1)
    assert len(plan.kernels) > 1  # packed
    got, sentinels = sentinel_run(plan, plan.outputs[0], {0: a, 1: b}, 64)
    assert np.all(sentinels == 1234.5)
    np.testing.assert_allclose(got.reshape(m, n), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)


@pytest.mark.o0
@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
def test_nan_and_inf_in_a_padded_matmul_propagate_as_numpy(layout: str) -> None:
    """NaN and inf in A and B: each output is NaN, inf or finite as numpy's is; A's NaN meets the padding's
    zeros only in columns nobody stores."""
    m, k, n = 16, 24, 80
    rng = np.random.default_rng(80)
    a = rng.standard_normal((k, m) if layout == "atb" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "abt" else (k, n)).astype(np.float32)
    a.reshape(-1)[::37], a.reshape(-1)[5::53], b.reshape(-1)[3::101] = np.nan, np.inf, -np.inf
    x, y = (a.T if layout == "atb" else a), (b.T if layout == "abt" else b)
    plan = make_plan(normalize([matmul(m, k, n, layout)])[0], pack=1)
    assert len(plan.kernels) > 1  # packed
    got = run(plan, a, b).reshape(m, n)
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ y.astype(np.float64)
    assert np.isnan(want).any() and np.isinf(want).any() and np.isfinite(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.where(np.isfinite(want), 0, got), np.where(np.isfinite(want), 0, want))
    np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [512, 1024, 2048])
@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
def test_a_is_packed_only_where_the_reduce_strides_through_it(n: int, layout: str) -> None:
    """The default's choice for square matmuls: A is packed where it is stored (k, m), and read as it is
    where it is stored (m, k), at any size (pack.packs_rows)."""
    plan = make_plan(normalize([matmul(n, n, n, layout)])[0], pack=1)
    assert len(plan.kernels) == (3 if layout == "atb" else 2)


@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
def test_the_matmul_asks_for_bs_panel_rows_ahead_and_for_nothing_else(layout: str) -> None:
    """The packed matmul's one prefetch hint is on its read of B's packed copy, PREFETCH_STEPS rows of the
    panel ahead (a row is the step of k); A, packed or not, is read unhinted (pack.split_range)."""
    plan = make_plan(normalize([matmul(64, 64, 64, layout)])[0], pack=1)
    (copy_b, *_, product), (b_step, *_, product_step) = plan.kernels, plan.steps
    hinted = [u for u in product.ast.toposort() if u.op is Ops.LOAD and u.arg is not None]
    assert len(hinted) == 1, hinted
    (read,) = hinted
    (written,) = copy_b.written
    assert product_step.buffers[read.src[0].arg.slot] == b_step.buffers[written]  # B's copy, not A or A's copy
    k = next(u for u in product.ast.toposort() if u.op is Ops.RANGE and u.arg.kind is AxisType.REDUCE)
    assert read.arg == PREFETCH_STEPS * linear_terms(read.src[1])[0][k]


def test_b_stored_by_columns_is_copied_whole_lines_at_a_time() -> None:
    """B stored as (n, k): the copy's innermost loop reads whole cache lines of k (64 floats where k
    allows, 16 where it does not) from one column of B, not one float from each of a panel's columns
    (pack.copy_block)."""
    for k, run in ((64, 64), (48, 16)):
        plan = make_plan(normalize([matmul(8, k, 64, "abt")])[0], pack=1)
        end = plan.kernels[0].ast.src[0]
        load = next(u for u in end.toposort() if u.op is Ops.LOAD)
        innermost = end.src[-1]
        assert innermost.src[0].arg == run and linear_terms(load.src[1])[0][innermost] == 1


def run_graph(graph: UOp, *by_slot: Array) -> tuple[Plan, Array]:
    """The packed plan of a graph over buffers 0, 1, ..., run on `by_slot` (in the plan's order of inputs,
    which normalize numbers by first use), and its output."""
    normalized, inputs = normalize([graph])
    plan = make_plan(normalized, pack=1)
    buffers = [by_slot[u.arg.slot].reshape(-1) for u in inputs]
    buffers += [np.full(s.size, np.nan, np.float32) for s in plan.buffers[len(inputs) :]]
    compile_plan(plan, get_backend("C")).executable.run(buffers)
    return plan, buffers[plan.outputs[0]]


def relu_backward(m: int, k: int, n: int) -> UOp:
    """A ReLU layer's backward fused with the next product, as the GPT step's MLP makes it: (A @ B) where
    the layer's input x + bias (slots 2 and 3) is above 0, else 0."""
    x = UOp.buffer(2, m * n).reshape((m, n))
    bias = UOp.buffer(3, n).reshape((1, n)).expand((m, n))
    return (x + bias <= 0.0).where(0.0, matmul(m, k, n, "ab"))


@pytest.mark.o0
# the last: a padded panel, whose loads of x and the bias are gated as its stores are
@pytest.mark.parametrize(("m", "k", "n"), [(1, 7, 32), (8, 33, 64), (24, 300, 96), (7, 64, 256), (8, 33, 80)])
def test_a_fused_relu_backward_is_packed_and_selects_as_numpy(m: int, k: int, n: int) -> None:
    """The selection and the comparisons before it run on vector lanes, as masks: the same values as numpy's,
    NaN in x (no comparison holds: the product passes), -0.0 and 0.0 (both <= 0: zero)."""
    rng = np.random.default_rng(m * k + n)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
    x, bias = rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x.reshape(-1)[::5], x.reshape(-1)[1::7], bias[::3] = np.nan, -0.0, 0.0
    x.reshape(-1)[2::7] = 0.0
    plan, got = run_graph(relu_backward(m, k, n), a, b, x, bias)
    assert plan.kernels[-1].opts.vector is not None and len(plan.kernels) == 2
    product = a.astype(np.float64) @ b.astype(np.float64)
    want = np.where(x + bias <= 0, 0.0, product)
    got = got.reshape(m, n)
    bound = k * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(got - want) <= bound) and np.array_equal(got == 0, want == 0)


def before_a_guard_page(values: Array) -> Array:
    """A copy of float32 `values` that ends where an unreadable page (PROT_NONE) begins: a read one element
    past its end is a segmentation fault, where a stray read of the heap would go unseen."""
    pages = -(-values.nbytes // mmap.PAGESIZE)
    memory = mmap.mmap(-1, (pages + 1) * mmap.PAGESIZE)
    guard = ctypes.addressof(ctypes.c_char.from_buffer(memory)) + pages * mmap.PAGESIZE
    if ctypes.CDLL(None, use_errno=True).mprotect(ctypes.c_void_p(guard), ctypes.c_size_t(mmap.PAGESIZE), 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect failed")
    out = np.frombuffer(memory, np.float32, count=values.size, offset=pages * mmap.PAGESIZE - values.nbytes)
    out[...] = values.reshape(-1)
    return out


def run_padded_relu_backward_before_guard_pages() -> None:
    """In the child: the fused ReLU backward with a padded panel, every input ending at a guard page."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr("uopc.lower.pack.PACK_MIN_WORK", 0)
    m, k, n = 8, 33, 80
    rng = np.random.default_rng(80)
    a, b, x = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    bias = rng.standard_normal(n).astype(np.float32)
    guarded = [before_a_guard_page(v) for v in (a, b, x, bias)]
    plan, got = run_graph(relu_backward(m, k, n), *guarded)
    assert len(plan.kernels) == 2  # packed
    want = np.where(x + bias <= 0, 0.0, a.astype(np.float64) @ b)
    np.testing.assert_allclose(got.reshape(m, n), want, rtol=1e-4, atol=1e-4)


@pytest.mark.o0
@pytest.mark.skipif(sys.platform == "win32", reason="mmap with PROT_NONE pages")
def test_a_padded_panel_reads_nothing_past_its_operands() -> None:
    """B's last row, x's and the bias's last columns end at a guard page: the padded panel's columns past n
    must be gated in the copy of B and in the matmul's loads of x and the bias. Built at -O0, where each load
    in the source is a load (test_guard_pages.py), in a child process, so that a fault fails the test."""
    env = {**os.environ, "CFLAGS": "-O0 -fopenmp -fwrapv"}
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, check=False, timeout=300, env=env)
    fault = " (a segmentation fault: a read past an operand)" if done.returncode == -11 else ""
    assert done.returncode == 0, f"exit status {done.returncode}{fault}\n{done.stdout}{done.stderr}"


def weight_gradient(batch: int, length: int, m: int, n: int) -> UOp:
    """x.T @ dy for x (batch, length, m) and dy (batch, length, n): a sum over two reduce axes, batch and
    position, as autodiff builds a Linear layer's weight gradient in a model of sequences."""
    x = UOp.buffer(0, batch * length * m).reshape((batch, length, m, 1)).expand((batch, length, m, n))
    dy = UOp.buffer(1, batch * length * n).reshape((batch, length, 1, n)).expand((batch, length, m, n))
    return (x * dy).sum([0, 1]).reshape((m, n))


@pytest.mark.o0
@pytest.mark.parametrize(("batch", "length", "m", "n"), [(8, 32, 64, 256), (3, 5, 16, 32), (1, 7, 9, 64)])
def test_a_sum_over_batch_and_positions_is_packed_as_one_reduce(batch: int, length: int, m: int, n: int) -> None:
    """The two reduce ranges move every load as one range of batch x length (merge_reduce_ranges): the
    product is packed, A's rows too where they fill groups of 8."""
    rng = np.random.default_rng(batch + length + m + n)
    x, dy = (rng.standard_normal((batch, length, c)).astype(np.float32) for c in (m, n))
    plan, got = run_graph(weight_gradient(batch, length, m, n), x, dy)
    assert len(plan.kernels) == (3 if m % 8 == 0 else 2)
    got = got.reshape(m, n)
    xs, dys = x.reshape(-1, m).astype(np.float64), dy.reshape(-1, n).astype(np.float64)
    bound = batch * length * np.finfo(np.float32).eps * (np.abs(xs).T @ np.abs(dys))
    assert np.all(np.abs(got - xs.T @ dys) <= bound)


def test_reduce_ranges_that_loads_see_apart_are_not_merged() -> None:
    """x stored (batch, position, m), dy (position, batch, n): x moves along t by m and along b by T m, dy
    along b by n and along t by B n, so no single range walks both in one order for both loads."""
    batch, length, m, n = 4, 8, 16, 64
    x = UOp.buffer(0, batch * length * m).reshape((batch, length, m)).permute((1, 0, 2))  # (t, b, m)
    x = x.reshape((length, batch, m, 1)).expand((length, batch, m, n))
    dy = UOp.buffer(1, batch * length * n).reshape((length, batch, 1, n)).expand((length, batch, m, n))
    graph = (x * dy).sum([0, 1]).reshape((m, n))
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((batch, length, m)).astype(np.float32)
    dyv = rng.standard_normal((length, batch, n)).astype(np.float32)
    plan, got = run_graph(graph, xv, dyv)
    assert len(plan.kernels) == 1  # not packed: the sum keeps its two reduce loops
    want = np.einsum("btm,tbn->mn", xv.astype(np.float64), dyv.astype(np.float64))
    np.testing.assert_allclose(got.reshape(m, n), want, rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    run_padded_relu_backward_before_guard_pages()
