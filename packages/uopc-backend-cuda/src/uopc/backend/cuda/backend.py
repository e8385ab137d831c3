"""The GPU backends, registered in `uopc.backends`: `CUDA`, a real GPU, and `EMU`, the same programs run in
lockstep on the CPU.

Both map kernels onto blocks and threads (lower_gpu) and render them as CUDA (CUDARenderer). CUDA builds the
source with nvcc and launches it through the driver; the emulator runs the programs on numpy arrays, so that
every GPU kernel is tested on machines without a GPU. Nothing here touches the driver until a CUDA buffer is
allocated or a plan is compiled, so both backends load everywhere.
"""

from __future__ import annotations

from uopc.backend.cuda.compiler import NVCCCompiler
from uopc.backend.cuda.driver import CUDARuntime, device_arch
from uopc.backend.cuda.emulator import EmuCompiler, EmuRuntime
from uopc.backend.cuda.mapping import lower_gpu
from uopc.backend.cuda.render import CUDARenderer
from uopc.lower import Backend

CUDA_BACKEND = Backend("CUDA", CUDARenderer(), NVCCCompiler(device_arch), CUDARuntime(), linearize=lower_gpu)
EMU_BACKEND = Backend("EMU", CUDARenderer(), EmuCompiler(), EmuRuntime(), linearize=lower_gpu)
