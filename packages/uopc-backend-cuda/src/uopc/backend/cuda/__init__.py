"""uopc.backend.cuda: kernels on GPUs, and the same kernels run on a CPU by an emulator.

`lower_gpu` maps a kernel's loops onto the blocks and threads of a GPU (mapping.py), `CUDARenderer` writes
the mapped programs as CUDA C (render.py), and two backends run them: `CUDA`, through nvcc (compiler.py)
and NVIDIA's driver (driver.py), and `EMU`, which runs every thread of a block in lockstep as numpy vectors
and reports out-of-bounds accesses and races on shared memory (emulator.py). Both are registered in the
`uopc.backends` entry-point group: `DEVICE=EMU` runs the Tensor library on the emulator.
"""

from uopc.backend.cuda.backend import CUDA_BACKEND, EMU_BACKEND
from uopc.backend.cuda.compiler import KernelReport, NVCCCompiler, NVCCNotFound, build_cubin, ptxas_report
from uopc.backend.cuda.driver import CUDAError, CUDAExecutable, CUDARuntime, DeviceBuffer, device_arch, device_name
from uopc.backend.cuda.emulator import EmuCompiler, EmuExecutable, EmulationError, EmuRuntime, emulate
from uopc.backend.cuda.launch import LIMITS, DeviceLimits, GPUOpts, GPUProgram, Launch
from uopc.backend.cuda.mapping import choose_gpu_opts, lower_gpu, map_kernel
from uopc.backend.cuda.render import CUDARenderer, render_cuda, render_cuda_kernel

__version__ = "0.1.0"

__all__ = [
    "CUDA_BACKEND",
    "EMU_BACKEND",
    "LIMITS",
    "CUDAError",
    "CUDAExecutable",
    "CUDARenderer",
    "CUDARuntime",
    "DeviceBuffer",
    "DeviceLimits",
    "EmuCompiler",
    "EmuExecutable",
    "EmuRuntime",
    "EmulationError",
    "GPUOpts",
    "GPUProgram",
    "KernelReport",
    "Launch",
    "NVCCCompiler",
    "NVCCNotFound",
    "build_cubin",
    "choose_gpu_opts",
    "device_arch",
    "device_name",
    "emulate",
    "lower_gpu",
    "map_kernel",
    "ptxas_report",
    "render_cuda",
    "render_cuda_kernel",
]
