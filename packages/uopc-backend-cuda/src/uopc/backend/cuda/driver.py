"""The real device: NVIDIA's driver API through ctypes, with device memory and one launch per kernel.

`libcuda.so.1` is the driver's own library (it comes with the NVIDIA driver, not with the CUDA toolkit),
and the dozen calls this runtime makes are the ones every CUDA program makes underneath: initialize, take
the device's primary context, load a cubin as a module, find its kernels, allocate memory, copy to and from
it, launch, wait. On a machine without the driver, or without a GPU, the first of them fails, and the
CUDAError says which is missing and what to use instead.
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from uopc.backend.c import ArgumentError, numpy_dtype
from uopc.backend.cuda.launch import GPUProgram
from uopc.ir import DType, UopcError, dtypes
from uopc.lower import Binary, LinearProgram, Step


class CUDAError(UopcError, RuntimeError):
    """The CUDA driver is missing, has no device, or refused a call: names the call and the driver's error."""


NO_DRIVER = (
    "DEVICE=CUDA needs NVIDIA's driver library libcuda.so.1, which this machine does not have ({error}). "
    "It comes with the NVIDIA driver on a machine with a GPU. To run the same kernels without one, use "
    "DEVICE=EMU, the emulator."
)


@functools.cache
def driver() -> ctypes.CDLL:
    """The driver library, initialized; a CUDAError naming what is missing if there is no driver or GPU."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise CUDAError(NO_DRIVER.format(error=e)) from None
    check(lib, lib.cuInit(0), "cuInit")
    count = ctypes.c_int(0)
    check(lib, lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    if count.value == 0:
        raise CUDAError("DEVICE=CUDA: the NVIDIA driver is installed but sees no GPU; DEVICE=EMU runs without one")
    return lib


def check(lib: ctypes.CDLL, status: int, call: str) -> None:
    """Raise a CUDAError naming `call` and the driver's name and description of `status`, unless it is 0."""
    if status == 0:
        return
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    lib.cuGetErrorName(status, ctypes.byref(name))
    lib.cuGetErrorString(status, ctypes.byref(text))
    described = f"{(name.value or b'?').decode()}: {(text.value or b'').decode()}"
    if status == 100:  # CUDA_ERROR_NO_DEVICE
        raise CUDAError(f"DEVICE=CUDA: {call} found no GPU ({described}); DEVICE=EMU runs without one")
    raise CUDAError(f"{call} failed with error {status} ({described})")


@functools.cache
def context() -> tuple[ctypes.CDLL, int]:
    """The driver, with device 0's primary context current: the context the CUDA runtime itself would use."""
    lib = driver()
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(lib, lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(lib, lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(lib, lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return lib, dev.value


def device_arch() -> str:
    """The GPU's architecture as nvcc names it: sm_80 for an A100, sm_90 for an H100 or H200."""
    lib, dev = context()
    major, minor = ctypes.c_int(), ctypes.c_int()
    check(lib, lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "cuDeviceGetAttribute")  # major
    check(lib, lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "cuDeviceGetAttribute")  # minor
    return f"sm_{major.value}{minor.value}"


def device_name() -> str:
    lib, dev = context()
    name = ctypes.create_string_buffer(256)
    check(lib, lib.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    return name.value.decode()


class DeviceBuffer:
    """`size` elements of `dtype` in the GPU's memory, freed when the buffer is."""

    def __init__(self, dtype: DType, size: int) -> None:
        self.lib, _ = context()
        self.dtype, self.size = dtype, size
        self.nbytes = max(1, size * numpy_dtype(dtype).itemsize)
        ptr = ctypes.c_uint64()
        check(self.lib, self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(self.nbytes)), "cuMemAlloc")
        self.ptr = ptr.value

    def __del__(self) -> None:
        ptr = getattr(self, "ptr", 0)
        if ptr:
            self.lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def write(self, array: np.ndarray[Any, Any]) -> None:
        data = np.ascontiguousarray(array, numpy_dtype(self.dtype)).reshape(-1)
        if data.size != self.size:
            raise ArgumentError(f"a buffer of {self.size} elements cannot take {data.size}")
        call = self.lib.cuMemcpyHtoD_v2(
            ctypes.c_uint64(self.ptr), data.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(data.nbytes)
        )
        check(self.lib, call, "cuMemcpyHtoD")

    def read(self) -> np.ndarray[Any, Any]:
        out = np.empty(self.size, numpy_dtype(self.dtype))
        call = self.lib.cuMemcpyDtoH_v2(
            out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(self.ptr), ctypes.c_size_t(out.nbytes)
        )
        check(self.lib, call, "cuMemcpyDtoH")
        return out


class CUDAExecutable:
    """A plan's cubin loaded as a module: one launch per step, each with its program's grid and block."""

    def __init__(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> None:
        self.lib, _ = context()
        self.programs = [p for p in programs if isinstance(p, GPUProgram)]
        if len(self.programs) != len(programs):
            raise ArgumentError("the CUDA runtime launches GPU programs (mapped by lower_gpu), not C programs")
        self.steps = list(steps)
        self.image = ctypes.create_string_buffer(binary.data, len(binary.data))  # the driver reads it at load
        module = ctypes.c_void_p()
        check(self.lib, self.lib.cuModuleLoadData(ctypes.byref(module), self.image), "cuModuleLoadData")
        self.module = module
        self.functions = []
        for p in self.programs:
            fn = ctypes.c_void_p()
            status = self.lib.cuModuleGetFunction(ctypes.byref(fn), module, p.name.encode())
            check(self.lib, status, "cuModuleGetFunction")
            self.functions.append(fn)

    def run(self, buffers: Sequence[Any]) -> None:
        for s in self.steps:
            self.launch(s.kernel, [buffers[b] for b in s.buffers])
        check(self.lib, self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        self.launch(index, buffers)
        check(self.lib, self.lib.cuCtxSynchronize(), "cuCtxSynchronize")  # so that a caller's timer sees it done

    def launch(self, index: int, buffers: Sequence[Any]) -> None:
        program = self.programs[index]
        check_device_buffers(program, buffers)
        pointers = [ctypes.c_uint64(b.ptr) for b in buffers]
        params = (ctypes.c_void_p * len(pointers))(*(ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in pointers))
        (gx, gy, gz), (bx, by, bz) = program.launch.grid, program.launch.block
        status = self.lib.cuLaunchKernel(self.functions[index], gx, gy, gz, bx, by, bz, 0, None, params, None)
        check(self.lib, status, f"cuLaunchKernel({program.name})")


def check_device_buffers(program: GPUProgram, buffers: Sequence[Any]) -> None:
    if len(buffers) != len(program.params):
        raise ArgumentError(f"{program.name} takes {len(program.params)} buffers, got {len(buffers)}")
    for p, b in zip(program.params, buffers, strict=True):
        if not isinstance(b, DeviceBuffer) or b.dtype is not p.dtype or b.size < p.size:
            got = f"{b.dtype.name}[{b.size}]" if isinstance(b, DeviceBuffer) else type(b).__name__
            want = f"a device buffer of {p.size} {p.dtype.name}"
            raise ArgumentError(f"{program.name}: {p.name} must be {want}, got {got}")


class CUDARuntime:
    """The real device's runtime: buffers in the GPU's memory, binaries are cubins loaded as modules."""

    def allocate(self, dtype: DType, size: int) -> DeviceBuffer:
        return DeviceBuffer(dtype, size)

    def from_numpy(self, array: Any) -> DeviceBuffer:
        data = np.ascontiguousarray(array).reshape(-1)
        buffer = DeviceBuffer(_dtype_of(data), math.prod(data.shape))
        buffer.write(data)
        return buffer

    def to_numpy(self, buffer: Any) -> np.ndarray[Any, Any]:
        if not isinstance(buffer, DeviceBuffer):
            raise ArgumentError(f"the CUDA runtime reads device buffers, got {type(buffer).__name__}")
        return buffer.read()

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> CUDAExecutable:
        return CUDAExecutable(binary, programs, steps)


def _dtype_of(array: np.ndarray[Any, Any]) -> DType:
    return dtypes.from_numpy(array.dtype.name)
