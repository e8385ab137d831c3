"""Shared set-up for the uopc-backend-cuda tests: a private kernel cache, the `gpu` marker, and the kernel dump.

Tests marked `gpu` need a real GPU and its driver, and are skipped where there is none (everywhere CI runs).
When UOPC_CUDA_DUMP names a folder, every CUDA file the suite renders is written into it, by its hash, so that
CI can compile each one with nvcc for several architectures afterwards (scripts/ptxas_report.py --check).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import uopc.backend.cuda.emulator as cuda_emulator
import uopc.backend.cuda.render as cuda_render
from uopc.backend.c import RenderError, numpy_dtype
from uopc.backend.cuda import CUDAError, GPUOpts, GPUProgram, device_name, emulate, lower_gpu
from uopc.ir import DType, UOp, dtypes
from uopc.lower import Kernel, LinearProgram, make_plan, normalize

settings.register_profile(
    "uopc-backend-cuda",
    derandomize=True,
    database=None,
    deadline=None,  # the first example of a test builds its plan: slow, not wrong
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("uopc-backend-cuda")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a real GPU and its driver; skipped where there is none")


def gpu_present() -> bool:
    try:
        device_name()
    except CUDAError:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not gpu_present():
        skip = pytest.mark.skip(reason="no GPU here: DEVICE=CUDA needs the NVIDIA driver and a device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("uopc-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UOPC_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def dump_rendered_kernels() -> Iterator[None]:
    """With UOPC_CUDA_DUMP set, keep every CUDA file the suite renders, and the CUDA of every program it
    emulates (what a GPU would compile for it): the emulator's tests run most kernels without rendering them."""
    folder = os.environ.get("UOPC_CUDA_DUMP")
    if not folder:
        yield
        return
    Path(folder).mkdir(parents=True, exist_ok=True)

    def keep(text: str) -> None:
        name = hashlib.sha256(text.encode()).hexdigest()[:16]
        (Path(folder) / f"{name}.cu").write_text(text)

    render, check = cuda_render.render_cuda_kernel, cuda_emulator.check_buffers

    def render_and_keep(program: LinearProgram) -> tuple[str, dict[str, str]]:
        kernel, helpers = render(program)
        keep("\n\n".join([cuda_render.CUDA_PRELUDE, *helpers.values(), kernel]) + "\n")
        return kernel, helpers

    def check_and_keep(program: GPUProgram, buffers: Sequence[Any]) -> None:
        check(program, buffers)
        with contextlib.suppress(RenderError):  # hand-built programs of the emulator's tests, not meant to render
            render_and_keep(program)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cuda_render, "render_cuda_kernel", render_and_keep)
        mp.setattr(cuda_emulator, "check_buffers", check_and_keep)
        yield


def _kernels(*roots: UOp) -> list[Kernel]:
    graph, _ = normalize(list(roots))
    return list(make_plan(graph).kernels)


def _blank(dtype: DType, size: int) -> np.ndarray[Any, Any]:
    """An output buffer whose every element shows if no thread writes it: NaN, or -1."""
    if dtype is dtypes.bfloat16:
        return np.full(size, 0x7FC0, np.uint16)  # a bfloat16 NaN
    return np.full(size, np.nan if dtype.is_float else -1, numpy_dtype(dtype))


def _emulated(kernel: Kernel, inputs: Sequence[Any], opts: GPUOpts | None = None) -> list[np.ndarray[Any, Any]]:
    program = lower_gpu(kernel, opts)
    given = iter(inputs)
    buffers = [
        _blank(p.dtype, p.size)
        if p.slot in program.written
        else np.ascontiguousarray(next(given), numpy_dtype(p.dtype)).reshape(-1)
        for p in program.params
    ]
    emulate(program, buffers)
    return buffers


@pytest.fixture(scope="session")
def kernels_of() -> Callable[..., list[Kernel]]:
    """The kernels of a plan for shaped roots, made as the Tensor library makes them (with the CPU's opts,
    which lower_gpu does not apply)."""
    return _kernels


@pytest.fixture(scope="session")
def emulated() -> Callable[..., list[np.ndarray[Any, Any]]]:
    """A kernel mapped (with the given GPU opts, or its own) and emulated on `inputs`, its read-only
    parameters in slot order; returns every parameter after the run, outputs included."""
    return _emulated
