"""The GPU backends: `EMU`, GPU programs run in lockstep on the CPU, registered in `uopc.backends`.

Both map kernels onto blocks and threads (lower_gpu) and render them as CUDA (CUDARenderer); the emulator
runs the same programs on numpy arrays, so every GPU kernel is tested without a GPU.
"""

from __future__ import annotations

from uopc.backend.cuda.emulator import EmuCompiler, EmuRuntime
from uopc.backend.cuda.mapping import lower_gpu
from uopc.backend.cuda.render import CUDARenderer
from uopc.lower import Backend

EMU_BACKEND = Backend("EMU", CUDARenderer(), EmuCompiler(), EmuRuntime(), lower_gpu)
