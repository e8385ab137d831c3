"""The emulator: GPU programs run in lockstep on numpy vectors, against the rewrite interpreter, and the
mistakes a GPU would not report (races on shared memory, accesses out of bounds, bad shuffles, threads
storing different values to one element) reported with the kernel and the thread.

The random closed programs are backend-c's differential suite (its generator is loaded from that file):
`uopc.ir.run` evaluates each by rewriting alone, which shares no code with the mapping or the emulator.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from uopc.backend.c import ArgumentError, numpy_dtype
from uopc.backend.cuda import EmulationError, GPUOpts, GPUProgram, Launch, emulate, lower_gpu, render_cuda
from uopc.ir import AddrSpace, AxisType, BufferArg, DType, Ops, UOp, dtypes, range_, run, to_python
from uopc.lower import Kernel, Param, rangeify

CLOSED_PROGRAMS = Path(__file__).resolve().parents[2] / "uopc-backend-c" / "tests" / "test_closed_programs.py"


def closed_programs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("backend_c_closed_programs", CLOSED_PROGRAMS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    with warnings.catch_warnings():  # its tests carry backend-c's markers, which this suite does not know
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        spec.loader.exec_module(module)
    return module


GENERATOR = closed_programs()


@pytest.mark.parametrize("seed", range(80))
@pytest.mark.parametrize("opts", [None, GPUOpts(threads=8), GPUOpts(reduce_threads=32)], ids=["own", "small", "coop"])
def test_closed_program_emulated_matches_rewrite_interpreter(seed: int, opts: GPUOpts | None) -> None:
    """Every dtype and op the generator makes, mapped three ways: the opts chosen for the kernel, blocks of
    8 threads, and every reduction shared by a block of 32."""
    p = GENERATOR.program(seed)
    dtype: DType = p.scalar_dtype
    want = np.array(to_python(run(p)), np.float32 if dtype is dtypes.bfloat16 else dtype.np_name).reshape(-1)
    kernel = Kernel(f"closed_{seed}", rangeify([(UOp.buffer(0, p.size, dtype), p)]))
    out = np.zeros(want.size, numpy_dtype(dtype))
    emulate(lower_gpu(kernel, opts), [out])
    if dtype is dtypes.bfloat16:
        out = (out.astype(np.uint32) << 16).view(np.float32)
    if dtype.is_float:  # sums in another order; numpy's exp and sin differ from Python's in the last bit
        rtol = {dtypes.float32: 1e-4, dtypes.float64: 1e-9, dtypes.float16: 2**-10}.get(dtype, 2**-7)
        np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(out, want)


# ---- hand-written programs: what a GPU would not report -----------------------------------------------------


def straight_line(*statements: UOp) -> tuple[UOp, ...]:
    """The nodes of `statements` in program order, each statement after the one before: for programs with
    no loops but the GPU's, written by hand to put a read before or after a write on purpose."""
    out: list[UOp] = []
    seen: set[UOp] = set()
    for s in statements:
        for u in s.toposort():
            if u not in seen:
                seen.add(u)
                out.append(u)
    return tuple(out)


def one_block(name: str, threads: int, statements: Sequence[UOp], params: Sequence[Param]) -> GPUProgram:
    launch = Launch((1, 1, 1), (threads, 1, 1), ((AxisType.LOCAL, 0, "threadIdx.x"),))
    written = frozenset(p.slot for p in params if p.slot > 0)
    return GPUProgram(name, tuple(params), written, straight_line(*statements), frozenset(), launch)


T = 64
LANE = range_(T, 0, AxisType.LOCAL)
IN, OUT = UOp.define_global(0, T), UOp.define_global(1, T)
SMEM = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(AddrSpace.SHARED), (), BufferArg(0, T))
PARAMS = (Param(0, dtypes.float32, T), Param(1, dtypes.float32, T))
DATA = np.arange(T, dtype=np.float32)


def neighbour_program(barrier: bool) -> GPUProgram:
    """Each thread stores its element into shared memory and reads its right neighbour's."""
    stored = SMEM.store(LANE, IN.load(LANE))
    smem = UOp(Ops.BARRIER, SMEM.dtype, (SMEM, stored)) if barrier else SMEM
    return one_block("rotate", T, [stored, OUT.store(LANE, smem.load((LANE + 1) % T))], PARAMS)


def test_a_barrier_between_store_and_load_makes_the_exchange_correct() -> None:
    out = np.zeros(T, np.float32)
    emulate(neighbour_program(barrier=True), [DATA, out])
    np.testing.assert_array_equal(out, np.roll(DATA, -1))


def test_a_missing_barrier_is_a_race_named_with_the_kernel_and_the_thread() -> None:
    """In lockstep every store happens before every load, so the values would come out right: the emulator
    reports the race that a GPU, whose warps run in any order, would turn into wrong values now and then."""
    with pytest.raises(EmulationError) as e:
        emulate(neighbour_program(barrier=False), [DATA, np.zeros(T, np.float32)])
    assert str(e.value) == (
        "rotate: thread (0, 0, 0) of block (0, 0, 0) reads smem0[1], which thread 1 of its block wrote with no "
        "barrier between"
    )


def test_writing_what_another_thread_has_read_since_the_barrier_is_a_race() -> None:
    stored = SMEM.store(LANE, IN.load(LANE))
    synced = UOp(Ops.BARRIER, SMEM.dtype, (SMEM, stored))
    neighbour = synced.load((LANE + 1) % T)
    again = SMEM.store(LANE, neighbour * 2.0)  # overwrites an element the left neighbour has just read
    program = one_block("overwrite", T, [stored, neighbour, again, OUT.store(LANE, neighbour)], PARAMS)
    with pytest.raises(EmulationError, match=r"overwrite: thread \(0, 0, 0\) .* writes smem0\[0\], which thread 63 "):
        emulate(program, [DATA, np.zeros(T, np.float32)])


def test_two_threads_writing_one_shared_element_in_one_instruction_is_a_race() -> None:
    program = one_block("collide", T, [SMEM.store(LANE // 2, IN.load(LANE))], PARAMS[:1])
    with pytest.raises(EmulationError, match=r"collide: thread \(1, 0, 0\) .* writes smem0\[0\] in the same"):
        emulate(program, [DATA])


def test_a_load_outside_its_buffer_names_the_thread_and_the_index() -> None:
    program = one_block("shifted", T, [OUT.store(LANE, IN.load(LANE + 1))], PARAMS)
    with pytest.raises(EmulationError) as e:
        emulate(program, [DATA, np.zeros(T, np.float32)])
    assert str(e.value) == "shifted: thread (63, 0, 0) of block (0, 0, 0) loads data0[64], outside its 64 elements"


def test_a_gated_load_reads_nothing_where_its_gate_is_false() -> None:
    program = one_block("guarded", T, [OUT.store(LANE, IN.load(LANE + 1, LANE + 1 < T))], PARAMS)
    out = np.zeros(T, np.float32)
    emulate(program, [DATA, out])
    np.testing.assert_array_equal(out, np.append(DATA[1:], 0))


def test_a_gated_store_renders_as_a_test_and_the_emulator_refuses_it() -> None:
    """Only the C backend's packed matmuls gate stores (pack.py); the CUDA file keeps the gate, and the
    emulator says it has no rule rather than store where the gate is false."""
    program = one_block("gated", T, [OUT.store(LANE, IN.load(LANE), LANE < 32)], PARAMS)
    assert "if ((lidx0<32)) data1[lidx0] = val0;" in render_cuda([program])
    with pytest.raises(EmulationError, match="gated: the emulator has no rule for a gated STORE"):
        emulate(program, [DATA, np.zeros(T, np.float32)])


def test_threads_storing_different_values_to_one_element_are_reported() -> None:
    program = one_block("last_wins", T, [OUT.store(UOp.const(0), IN.load(LANE))], PARAMS)
    with pytest.raises(EmulationError, match=r"last_wins: thread \(1, 0, 0\) .* stores to data1\[0\], which another"):
        emulate(program, [DATA, np.zeros(T, np.float32)])


def test_threads_storing_one_value_to_one_element_are_allowed() -> None:
    """What a cooperative reduction does: every thread of the block holds the total and stores it."""
    program = one_block("same", T, [OUT.store(UOp.const(0), IN.load(UOp.const(3)))], PARAMS)
    out = np.zeros(T, np.float32)
    emulate(program, [DATA, out])
    assert out[0] == 3.0


@pytest.mark.parametrize("lane", ["xor", "rotate", "broadcast"])
def test_a_shuffle_reads_the_value_another_lane_of_the_same_warp_holds(lane: str) -> None:
    """CUDA's __shfl_sync(mask, v, src): lane src mod 32 of the caller's own warp; warps do not mix."""
    lane32 = LANE.cast(dtypes.int32)
    source = {"xor": lane32 ^ 5, "rotate": lane32 + 3, "broadcast": UOp.const(7)}[lane]
    v = IN.load(LANE)
    program = one_block("shuffle", T, [OUT.store(LANE, UOp(Ops.SHUFFLE, dtypes.float32, (v, source)))], PARAMS)
    out = np.zeros(T, np.float32)
    emulate(program, [DATA, out])
    ids = np.arange(T)
    src = {"xor": ids ^ 5, "rotate": ids + 3, "broadcast": np.full(T, 7)}[lane] % 32
    np.testing.assert_array_equal(out, DATA[ids - ids % 32 + src])


def test_a_shuffle_from_a_lane_the_warp_does_not_have_is_reported() -> None:
    """A block of 16 threads is half a warp: lanes 16 to 31 do not exist."""
    lane = range_(16, 0, AxisType.LOCAL)
    v = IN.load(lane)
    shuffled = UOp(Ops.SHUFFLE, dtypes.float32, (v, lane.cast(dtypes.int32) + 16))
    program = one_block("half_warp", 16, [OUT.store(lane, shuffled)], PARAMS)
    with pytest.raises(EmulationError, match=r"half_warp: thread \(0, 0, 0\) .* shuffles from lane 16, which its warp"):
        emulate(program, [DATA, np.zeros(T, np.float32)])


def test_blocks_have_shared_memory_of_their_own(kernels_of: Any, emulated: Any) -> None:
    """Many blocks in one group of vectors: each block's shared array is its own."""
    a = np.random.default_rng(3).standard_normal((40, 300)).astype(np.float32)
    (kernel,) = kernels_of(UOp.buffer(0, a.size).reshape((40, 300)).sum([1]))
    (out, _) = emulated(kernel, [a], GPUOpts(reduce_threads=128))
    np.testing.assert_allclose(out, a.sum(1), rtol=1e-4, atol=1e-5)


def test_buffers_that_do_not_match_the_parameters_are_refused() -> None:
    program = neighbour_program(barrier=True)
    with pytest.raises(ArgumentError, match="rotate: data0 must be a flat float32 array of 64 elements, got float64"):
        emulate(program, [DATA.astype(np.float64), np.zeros(T, np.float32)])
    with pytest.raises(ArgumentError, match="rotate: data1 is written by the kernel, but the array is read-only"):
        emulate(program, [DATA, np.frombuffer(bytes(4 * T), np.float32)])
    with pytest.raises(ArgumentError, match="rotate takes 2 buffers, got 1"):
        emulate(program, [DATA])


def test_many_blocks_run_in_groups_and_every_block_runs(monkeypatch: pytest.MonkeyPatch, emulated: Any) -> None:
    """Blocks beyond what one group of vectors holds run in later groups; none is skipped or run twice."""
    import uopc.backend.cuda.emulator as emulator_module

    monkeypatch.setattr(emulator_module, "MAX_THREADS_AT_ONCE", 96)
    x = np.arange(4096, dtype=np.int32)
    kernel = Kernel("add_one", rangeify([(UOp.buffer(1, 4096, dtypes.int32), UOp.buffer(0, 4096, dtypes.int32) + 1)]))
    (_, out) = emulated(kernel, [x], GPUOpts(threads=32))
    np.testing.assert_array_equal(out, x + 1)


def test_float_floor_division_and_modulo_emulate_as_numpy() -> None:
    """By zero, at infinities and with a huge quotient, bit for bit with numpy (NaNs aside, whose sign means
    nothing)."""
    a = np.array([5.5, -5.5, 1e30, 0.0, -7.5, np.inf, -1.0, 7.0], np.float32)
    b = np.array([2.0, 2.0, 3.0, -3.0, 0.0, 2.0, np.inf, -np.inf], np.float32)
    x, y = UOp.buffer(0, 8), UOp.buffer(1, 8)
    for op, reference in [(Ops.IDIV, np.floor_divide), (Ops.MOD, np.mod)]:
        kernel = Kernel("k", rangeify([(UOp.buffer(2, 8), x.alu(op, y))]))
        out = np.zeros(8, np.float32)
        emulate(lower_gpu(kernel), [a, b, out])
        with np.errstate(all="ignore"):
            want = reference(a, b)
        np.testing.assert_array_equal(out, want)
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(out[numbers]), np.signbit(want[numbers]))
