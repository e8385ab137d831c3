"""CExecutable: several kernels built in one library, and a plan that calls them in order in one call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from uopc.backend.c import C_BACKEND, ArgumentError, CExecutable, CRenderer, RenderError, batch_source, program, runtime
from uopc.backend.c.compiler import UNIT_BREAK
from uopc.ir import DType, UOp, dtypes
from uopc.lower import (
    BufferSpec,
    Kernel,
    Plan,
    Step,
    compile_plan,
    get_backend,
    linearize,
    make_plan,
    normalize,
    plan_memory,
    rangeify,
)

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]

# scale: out = 2 x + 1 over 6 floats; rowsum: out[r] = sum of row r of a 2 x 3 matrix
SCALE = Kernel("scale", rangeify([(UOp.buffer(1, 6), UOp.buffer(0, 6) * 2.0 + 1.0)]))
ROWSUM = Kernel("rowsum", rangeify([(UOp.buffer(1, 2), UOp.buffer(0, 6).reshape((2, 3)).sum([1]).reshape((2,)))]))
# a kernel whose buffers disagree in dtype with SCALE's
TO_INT = Kernel("to_int", rangeify([(UOp.buffer(1, 6, dtypes.int32), UOp.buffer(0, 6).cast(dtypes.int32))]))


def scale(x: Any) -> Any:
    return x * 2 + 1


# x -> scale -> tmp -> scale -> tmp2 -> rowsum -> out: the later steps read what the earlier ones wrote
CHAIN = [Step(0, (0, 1)), Step(0, (1, 2)), Step(1, (2, 3))]


@pytest.fixture(scope="module")
def chain(build_kernels: Build) -> CExecutable:
    return build_kernels([SCALE, ROWSUM], CHAIN)


def buffers() -> list[Any]:
    return [np.arange(6, dtype=np.float32), np.zeros(6, np.float32), np.zeros(6, np.float32), np.zeros(2, np.float32)]


@pytest.mark.o0
def test_plan_runs_steps_in_order_in_one_call(chain: CExecutable) -> None:
    bufs = buffers()
    chain.run(bufs)
    x = bufs[0]
    np.testing.assert_array_equal(bufs[1], scale(x))
    np.testing.assert_array_equal(bufs[2], scale(scale(x)))
    np.testing.assert_array_equal(bufs[3], scale(scale(x)).reshape(2, 3).sum(1))
    source = CRenderer().render([linearize(SCALE), linearize(ROWSUM)], CHAIN).text
    assert source.count("void uopc_plan") == 1
    plan = source[source.index("void uopc_plan") :]
    assert plan.index("scale(bufs[0], bufs[1])") < plan.index("scale(bufs[1], bufs[2])") < plan.index("rowsum(")


@pytest.mark.o0
def test_run_kernel_runs_one_kernel_alone(chain: CExecutable) -> None:
    x, out = np.arange(6, dtype=np.float32), np.zeros(2, np.float32)
    chain.run_kernel(1, [x, out])
    np.testing.assert_array_equal(out, [3.0, 12.0])
    y = np.zeros(6, np.float32)
    chain.run_kernel(0, [x, y])
    np.testing.assert_array_equal(y, scale(x))


def test_plan_buffers_take_dtype_size_and_writability_from_their_kernels(chain: CExecutable) -> None:
    described = {b: (p.dtype, p.size, p.const) for b, p in chain.buffers.items()}
    assert described == {
        0: (dtypes.float32, 6, True),  # only read
        1: (dtypes.float32, 6, False),  # written by step 0, read by step 1
        2: (dtypes.float32, 6, False),
        3: (dtypes.float32, 2, False),
    }


@pytest.mark.parametrize(
    ("position", "array", "message"),
    [
        (0, np.arange(6, dtype=np.float64), "buffer 0 is dtype float64"),
        (3, np.zeros(3, np.float32), r"buffer 3 is 3 elements \(shape \(3,\)\), expected 2"),
        (2, np.zeros(12, np.float32)[::2], "buffer 2 is not C-contiguous"),
    ],
)
def test_plan_checks_every_buffer(chain: CExecutable, position: int, array: Any, message: str) -> None:
    bufs = buffers()
    bufs[position] = array
    with pytest.raises(ArgumentError, match=message):
        chain.run(bufs)
    assert not bufs[3].any()  # refused before any kernel ran


def test_plan_refuses_read_only_output_but_not_read_only_input(chain: CExecutable) -> None:
    bufs = buffers()
    bufs[0].flags.writeable = False
    chain.run(bufs)  # buffer 0 is only ever read
    bufs[1].flags.writeable = False
    with pytest.raises(ArgumentError, match="buffer 1 is read-only"):
        chain.run(bufs)


def test_plan_refuses_too_few_buffers(chain: CExecutable) -> None:
    with pytest.raises(ArgumentError, match="uopc_plan takes 4 buffers, got 3"):
        chain.run(buffers()[:3])


def test_a_binding_is_checked_once_and_only_its_changed_arrays_again(
    chain: CExecutable, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[list[str]] = []

    def counted(fn: str, params: Sequence[Any], arrays: Sequence[Any], spans: Any = None) -> None:
        checked.append([p.name for p in params])
        program.check_arrays(fn, params, arrays, spans)

    monkeypatch.setattr(runtime, "check_arrays", counted)
    bufs = buffers()
    chain.run(bufs)
    chain.run(list(bufs))  # the same arrays in a new list: a replay's
    bufs[0] = np.arange(6, dtype=np.float32) + 1  # a new input
    chain.run(bufs)
    assert checked == [["buffer 0", "buffer 1", "buffer 2", "buffer 3"], ["buffer 0"]]
    np.testing.assert_array_equal(bufs[3], scale(scale(bufs[0])).reshape(2, 3).sum(1))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda bufs: bufs.__setitem__(2, np.zeros(6, np.float64)), "buffer 2 is dtype float64"),
        (lambda bufs: bufs.__setitem__(2, bufs[1]), r"buffer 2 shares memory with buffer 1.* in use at once"),
        (lambda bufs: setattr(bufs[1], "dtype", np.int32), "buffer 1 is dtype int32"),
        (lambda bufs: setattr(bufs[2].flags, "writeable", False), "buffer 2 is read-only"),
    ],
)
def test_a_bound_list_changed_afterwards_is_checked_again(
    chain: CExecutable, change: Callable[[list[Any]], None], message: str
) -> None:
    bufs = buffers()
    chain.run(bufs)
    change(bufs)
    bufs[3][:] = 0
    with pytest.raises(ArgumentError, match=message):
        chain.run(bufs)
    assert not bufs[3].any()  # refused before any kernel ran


def test_plan_buffers_whose_steps_do_not_overlap_may_share_memory(chain: CExecutable) -> None:
    # buffer 1 is needed by steps 0-1, buffer 3 by step 2 and after: the output may live in buffer 1's memory
    bufs = buffers()
    bufs[3] = bufs[1][:2]
    chain.run(bufs)
    np.testing.assert_array_equal(bufs[3], scale(scale(bufs[0])).reshape(2, 3).sum(1))
    assert [chain.spans[b] for b in range(4)] == [(-1, 0), (0, 1), (1, 2), (2, 3)]


def test_an_input_read_late_may_not_share_memory_with_a_buffer_written_before(build_kernels: Build) -> None:
    # x -> scale -> tmp -> scale -> out, then y -> scale -> out2: y holds the caller's data from the start
    exe = build_kernels([SCALE], [Step(0, (0, 1)), Step(0, (1, 2)), Step(0, (3, 4))])
    x, tmp, out, out2 = (np.zeros(6, np.float32) for _ in range(4))
    with pytest.raises(ArgumentError, match=r"buffer 1 shares memory with buffer 3.* in use at once"):
        exe.run([x, tmp, out, tmp, out2])  # y passed in tmp's array: step 0 would overwrite it


def test_the_runtime_accepts_the_memory_plan_of_a_plan_with_a_buffer_written_and_never_read(
    build_kernels: Build,
) -> None:
    # buffer 1 is written and never read (a result nobody asked for); buffer 2 is read by the last step
    steps = (Step(0, (0, 1)), Step(0, (0, 2)), Step(0, (2, 3)))
    exe = build_kernels([SCALE], steps)
    plan = Plan(steps, (BufferSpec(dtypes.float32, 6),) * 4, 1, (3,), make_kernels=tuple)
    memory = plan_memory(plan)
    storage: dict[int, Any] = {}
    x = np.arange(6, dtype=np.float32)
    arrays = [x, *(storage.setdefault(memory.slot[b], np.zeros(6, np.float32)) for b in range(1, 4))]
    exe.run(arrays)
    np.testing.assert_array_equal(arrays[3], scale(scale(x)))


def test_run_kernel_checks_its_parameters(chain: CExecutable) -> None:
    with pytest.raises(ArgumentError, match=r"rowsum: data1 is 6 elements"):
        chain.run_kernel(1, [np.zeros(6, np.float32), np.zeros(6, np.float32)])


def test_run_kernel_refuses_a_read_only_output_but_not_a_read_only_input(chain: CExecutable) -> None:
    x, out = np.arange(6, dtype=np.float32), np.zeros(2, np.float32)
    x.flags.writeable = False
    out.flags.writeable = False
    with pytest.raises(ArgumentError, match="rowsum: data1 is read-only, but the kernel writes it"):
        chain.run_kernel(1, [x, out])
    assert not out.any()
    out = np.zeros(2, np.float32)
    chain.run_kernel(1, [x, out])
    np.testing.assert_array_equal(out, [3.0, 12.0])


def test_inconsistent_plans_are_refused(build_kernels: Build) -> None:
    with pytest.raises(RenderError, match="step calls scale with 3 buffers; it takes 2"):
        build_kernels([SCALE], [Step(0, (0, 1, 2))])
    with pytest.raises(RenderError, match="plan buffer 1 is float32 in one kernel and int32 in to_int"):
        build_kernels([SCALE, TO_INT], [Step(0, (0, 1)), Step(1, (2, 1))])
    with pytest.raises(RenderError, match="kernel names in one batch must be unique"):
        batch_source([linearize(SCALE), linearize(SCALE)], [])


def test_plan_buffer_shared_by_kernels_of_different_sizes_takes_the_largest(build_kernels: Build) -> None:
    # ROWSUM writes 2 elements of buffer 1, SCALE then reads all 6 of it: the plan needs 6
    exe = build_kernels([SCALE, ROWSUM], [Step(1, (0, 1)), Step(0, (1, 2))])
    assert [p.size for p in exe.buffers.values()] == [6, 6, 6]
    x, mid, out = np.arange(6, dtype=np.float32), np.full(6, 10, np.float32), np.zeros(6, np.float32)
    exe.run([x, mid, out])
    np.testing.assert_array_equal(out, scale(np.array([3, 12, 10, 10, 10, 10], np.float32)))
    # and the other way round: SCALE writes all 6 elements of buffer 1, then ROWSUM overwrites the first 2
    exe = build_kernels([SCALE, ROWSUM], [Step(0, (0, 1)), Step(1, (0, 1))])
    assert [p.size for p in exe.buffers.values()] == [6, 6]
    out = np.zeros(6, np.float32)
    exe.run([x, out])
    np.testing.assert_array_equal(out, np.concatenate([x.reshape(2, 3).sum(1), scale(x)[2:]]))


def test_c_backend_is_registered_and_round_trips_numpy() -> None:
    backend = get_backend("c")
    assert backend is C_BACKEND and backend.name == "C"
    runtime = backend.runtime
    buf = runtime.allocate(dtypes.int16, 5)
    assert buf.dtype == np.int16 and buf.shape == (5,)
    a = np.arange(6, dtype=np.float32).reshape(2, 3).T  # not contiguous: from_numpy copies into C order
    stored = runtime.from_numpy(a)
    assert stored.flags.c_contiguous and stored.shape == (6,)
    np.testing.assert_array_equal(runtime.to_numpy(stored), a.reshape(-1))


@pytest.mark.parametrize("size", [1, 5, 1000, 1 << 20])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.bfloat16, dtypes.float64])
def test_runtime_buffers_start_a_cache_line(size: int, dtype: DType) -> None:
    """The buffers the runtime makes start at a multiple of 64 bytes, so that a packed panel's vectors each lie
    in one cache line (numpy's own large arrays start 16 bytes past one); from_numpy keeps the values."""
    made = C_BACKEND.runtime.allocate(dtype, size)
    assert made.ctypes.data % 64 == 0 and made.shape == (size,) and made.flags.c_contiguous and made.flags.writeable
    values = np.random.default_rng(size).integers(0, 1000, (size, 1)).astype(made.dtype)
    stored = C_BACKEND.runtime.from_numpy(values)
    assert stored.ctypes.data % 64 == 0 and stored.dtype == made.dtype
    np.testing.assert_array_equal(stored, values.reshape(-1))
    values[0] += 1  # a copy, not a view of the caller's array
    assert stored[0] != values[0, 0]


def test_compile_plan_runs_a_plan_on_the_c_backend() -> None:
    """The driver with the C backend's three parts: a plan of two kernels (a row sum, then the rest)."""
    x = UOp.buffer(0, 6).reshape((2, 3))
    graph, _ = normalize([x * 2.0 - x.sum([1]).expand((2, 3))])
    plan = make_plan(graph)
    assert len(plan.kernels) == 2
    compiled = compile_plan(plan, C_BACKEND)
    assert [p.name for p in compiled.programs] == [k.name for k in plan.kernels]
    assert "void uopc_plan" in compiled.source.text and compiled.binary.path.exists()
    xs = np.arange(6, dtype=np.float32)
    buffers = [xs] + [C_BACKEND.runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :]]
    compiled.executable.run(buffers)
    want = xs.reshape(2, 3) * 2 - xs.reshape(2, 3).sum(1, keepdims=True)
    np.testing.assert_array_equal(buffers[plan.outputs[0]].reshape(2, 3), want)


@pytest.mark.o0
def test_a_kernel_equal_to_another_but_for_its_name_is_written_once_and_runs_as_itself(build_kernels: Build) -> None:
    """A model's repeated layer makes kernels that differ only in name: the C is written once, uopc_plan
    calls it for both, the other name is a function that calls it, and each name, called through the plan
    or alone, computes the kernel."""
    again = dataclasses.replace(SCALE, name="scale_again")
    steps = [Step(0, (0, 1)), Step(1, (1, 2)), Step(2, (2, 3))]
    source = CRenderer().render([linearize(SCALE), linearize(again), linearize(ROWSUM)], steps).text
    assert source.count("void scale(") == 2  # defined, then declared for uopc_plan
    assert "{ scale(data0, data1); }" in source and "scale(bufs[1], bufs[2]);" in source
    built = build_kernels([SCALE, again, ROWSUM], steps)
    bufs = buffers()
    built.run(bufs)
    np.testing.assert_array_equal(bufs[2], scale(scale(bufs[0])))
    y = np.zeros(6, np.float32)
    built.run_kernel(1, [bufs[0], y])
    np.testing.assert_array_equal(y, scale(bufs[0]))


def test_a_plan_of_many_kernels_builds_in_units_with_the_same_values(build_kernels: Build) -> None:
    """The plan's C is cut into units that compile apart (one translation unit per core, at most): every
    kernel is in exactly one unit, and the library runs the plan as one file would."""
    kernels = [
        dataclasses.replace(
            SCALE, ast=rangeify([(UOp.buffer(1, 6), UOp.buffer(0, 6) * float(i) + 1.0)]), name=f"scale{i}"
        )
        for i in range(6)
    ]
    steps = [Step(i, (i, i + 1)) for i in range(6)]
    source = CRenderer().render([linearize(k) for k in kernels], steps).text
    assert source.count(f"\n{UNIT_BREAK}\n") == 7  # after the header: six kernels and uopc_plan
    built = build_kernels(kernels, steps)
    bufs = [np.arange(6, dtype=np.float32), *(np.zeros(6, np.float32) for _ in range(6))]
    built.run(bufs)
    expected = bufs[0]
    for i in range(6):
        expected = expected * np.float32(i) + np.float32(1)
        np.testing.assert_array_equal(bufs[i + 1], expected)
