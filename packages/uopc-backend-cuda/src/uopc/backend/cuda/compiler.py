"""Build CUDA source into a cubin with nvcc, once: the C backend's content-addressed cache, reused.

A cubin is machine code for one GPU architecture (sm_80 for an A100, sm_90 for an H100), loaded by the
driver as it is. nvcc makes one without a GPU, so the same step is the compile check that runs on machines
without one; `-Xptxas -v` makes the assembler report, per kernel, the registers each thread uses, the shared
memory each block uses, and whether registers spilled to memory (`ptxas_report`).

Float arithmetic is IEEE, as in the C backend: `--fmad=false` keeps nvcc from fusing a*b + c anywhere the
source does not ask for it; the renderer asks for it (fmaf) only where a product is added into an
accumulator, as the C renderer does.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from uopc.backend.c import CompileError, build_cached
from uopc.lower import Binary, Source

NVCC_FLAGS = "-O3 --fmad=false"


def nvcc_flags() -> str:
    """$NVCC_FLAGS, else NVCC_FLAGS. Part of the cache key, with the compiler and the architecture."""
    return os.environ.get("NVCC_FLAGS", NVCC_FLAGS)


class NVCCNotFound(CompileError):
    """nvcc is not on PATH: nothing can build a cubin (the emulator needs none)."""


@functools.cache
def nvcc() -> tuple[str, str]:
    """nvcc's resolved path and its version line; NVCCNotFound if there is none."""
    path = shutil.which(os.environ.get("NVCC", "nvcc"))
    if path is None:
        raise NVCCNotFound(
            "nvcc (the CUDA compiler) is not on PATH: install the CUDA toolkit or set NVCC to its path", ""
        )
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    return os.path.realpath(path), (version.strip().splitlines() or [""])[-1]


def run_nvcc(folder: Path, source: str, arch: str, extra: list[str]) -> subprocess.CompletedProcess[str]:
    """Compile `source` in `folder` into kernel.cubin for `arch`; a CompileError with nvcc's message if it fails."""
    (folder / "kernel.cu").write_text(source)
    cmd = [nvcc()[0], "-cubin", f"-arch={arch}", *shlex.split(nvcc_flags()), *extra, "-o", "kernel.cubin", "kernel.cu"]
    done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CompileError(f"{shlex.join(cmd)} failed:\n{done.stderr}", source)
    return done


def build_cubin(source: str, arch: str) -> Binary:
    """The cubin built from `source` for `arch`, from the cache when it is there."""
    path, version = nvcc()
    key = hashlib.sha256("\0".join(["nvcc-cubin", source, path, version, nvcc_flags(), arch]).encode()).hexdigest()

    def build(folder: Path) -> bytes:
        run_nvcc(folder, source, arch, [])
        return (folder / "kernel.cubin").read_bytes()

    return build_cached(key, build)


class NVCCCompiler:
    """The CUDA backend's compiler: CUDA source to a cubin for the device's architecture (`arch()`, asked
    when a plan is compiled: the device is looked at only when something is built for it)."""

    def __init__(self, arch: Callable[[], str]) -> None:
        self.arch = arch

    def compile(self, source: Source) -> Binary:
        return build_cubin(source.text, os.environ.get("UOPC_CUDA_ARCH") or self.arch())


@dataclass(frozen=True)
class KernelReport:
    """What ptxas says about one kernel: registers per thread, shared memory per block, spilled bytes."""

    name: str
    arch: str
    registers: int
    shared_bytes: int
    spill_bytes: int


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def ptxas_report(source: str, arch: str, folder: Path) -> list[KernelReport]:
    """Compile `source` for `arch` with `-Xptxas -v` in `folder`, and read the assembler's report per kernel."""
    done = run_nvcc(folder, source, arch, ["-Xptxas", "-v"])
    reports, name, spills = [], "", 0
    for line in done.stderr.splitlines():
        if m := _ENTRY.search(line):
            name, spills = m.group(1), 0
        elif m := _SPILLS.search(line):
            spills = int(m.group(1)) + int(m.group(2))
        elif (m := _USED.search(line)) and name:
            smem = _SMEM.search(line)
            reports.append(KernelReport(name, arch, int(m.group(1)), int(smem.group(1)) if smem else 0, spills))
            name = ""
    return reports
