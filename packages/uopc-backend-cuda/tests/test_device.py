"""DEVICE=CUDA: a clear error where there is no driver, and (marked `gpu`, run only where a GPU is) the
same plans on the device as on the emulator and in numpy."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import uopc.backend.cuda.driver as driver_module
from uopc.backend.cuda import CUDA_BACKEND, EMU_BACKEND, CUDAError, DeviceBuffer
from uopc.ir import UOp, dtypes
from uopc.lower import Backend, compile_plan, make_plan, normalize


def without_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without NVIDIA's driver, whatever it has."""

    def missing(name: str) -> ctypes.CDLL:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    driver_module.driver.cache_clear()
    driver_module.context.cache_clear()


def test_without_a_driver_the_first_use_says_what_is_missing_and_what_to_use(monkeypatch: pytest.MonkeyPatch) -> None:
    without_driver(monkeypatch)
    with pytest.raises(CUDAError) as e:
        CUDA_BACKEND.runtime.allocate(dtypes.float32, 4)
    assert "DEVICE=CUDA needs NVIDIA's driver library libcuda.so.1, which this machine does not have" in str(e.value)
    assert "DEVICE=EMU" in str(e.value)
    with pytest.raises(CUDAError, match=r"libcuda\.so\.1"):
        CUDA_BACKEND.runtime.from_numpy(np.zeros(3, np.float32))
    driver_module.driver.cache_clear()
    driver_module.context.cache_clear()


def test_a_driver_that_sees_no_gpu_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuInit answers CUDA_ERROR_NO_DEVICE (100) on a machine whose driver finds no GPU."""

    class NoGPU:
        def cuInit(self, flags: int) -> int:
            return 100

        def cuGetErrorName(self, status: int, out: ctypes._Pointer[ctypes.c_char_p]) -> int:
            return 0

        def cuGetErrorString(self, status: int, out: ctypes._Pointer[ctypes.c_char_p]) -> int:
            return 0

    monkeypatch.setattr(ctypes, "CDLL", lambda name: NoGPU())
    driver_module.driver.cache_clear()
    with pytest.raises(CUDAError, match=r"DEVICE=CUDA: cuInit found no GPU .*DEVICE=EMU runs without one"):
        driver_module.driver()
    driver_module.driver.cache_clear()


def test_the_backend_loads_and_plans_without_touching_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registering and mapping need no GPU: only memory and compiling for the device do."""
    without_driver(monkeypatch)
    x = UOp.buffer(0, 64)
    graph, _ = normalize([x * 2.0])
    (kernel,) = make_plan(graph).kernels
    assert CUDA_BACKEND.linearize is not None
    program = CUDA_BACKEND.linearize(kernel)
    assert "__global__" in CUDA_BACKEND.renderer.render([program], []).text
    driver_module.driver.cache_clear()
    driver_module.context.cache_clear()


# ---- on a GPU ---------------------------------------------------------------------------------------------


def run_plan(backend: Backend, roots: list[UOp], inputs: list[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    graph, _ = normalize(roots)
    plan = make_plan(graph)
    compiled = compile_plan(plan, backend)
    runtime = backend.runtime
    buffers = [runtime.from_numpy(a) for a in inputs]
    buffers += [runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :]]
    compiled.executable.run(buffers)
    return [np.asarray(runtime.to_numpy(buffers[o])) for o in plan.outputs]


CASES: dict[str, Callable[[UOp, UOp], UOp]] = {
    "elementwise": lambda a, b: (a * 2.0 + b).exp(),
    "row sums": lambda a, b: a.sum([1]),
    "total": lambda a, b: (a * b).sum([0, 1]),
    "matmul": lambda a, b: (
        (a.reshape((64, 96, 1)).expand((64, 96, 64)) * b.reshape((1, 96, 64)).expand((64, 96, 64)))
        .sum([1])
        .reshape((64, 64))
    ),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES)
def test_the_device_computes_what_the_emulator_and_numpy_compute(case: str) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 64) if case == "matmul" else (64, 96)).astype(np.float32)
    roots = [CASES[case](UOp.buffer(0, a.size).reshape(a.shape), UOp.buffer(1, b.size).reshape(b.shape))]
    (on_gpu,) = run_plan(CUDA_BACKEND, roots, [a, b])
    (emulated,) = run_plan(EMU_BACKEND, roots, [a, b])
    np.testing.assert_allclose(on_gpu, emulated, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_device_buffers_round_trip_and_check_their_size() -> None:
    x = np.arange(10, dtype=np.int32)
    buffer = CUDA_BACKEND.runtime.from_numpy(x)
    assert isinstance(buffer, DeviceBuffer) and buffer.size == 10 and buffer.dtype is dtypes.int32
    np.testing.assert_array_equal(CUDA_BACKEND.runtime.to_numpy(buffer), x)
