"""Compile CUDA files with nvcc for sm_80 and sm_90 and print what ptxas reports for each kernel.

The CUDA package's tests keep every file they render (UOPC_CUDA_DUMP=folder); CI then runs this script on
that folder with --check, which fails on a file nvcc rejects and on a GEMM kernel (one that stages tiles in
shared memory or runs mma.sync) whose registers spill to local memory: a spill there is a tiling that asks
more registers of each thread than the architecture gives, and costs more than the tiling saves. Kernels of
other kinds are reported, not checked (a spill in them is slow, not wrong). Without nvcc it says so and
passes: machines without the CUDA toolkit still run every other check.

    python scripts/ptxas_report.py build/cuda-kernels            # the table
    python scripts/ptxas_report.py --check build/cuda-kernels    # the table, and fail on an error or a spill
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from arguments import positive_int

from uopc.backend.c import CompileError
from uopc.backend.cuda import KernelReport, NVCCNotFound, ptxas_report
from uopc.backend.cuda.compiler import nvcc

ARCHS = ("sm_80", "sm_90")
_KERNEL = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(')


def gemm_kernels(source: str) -> set[str]:
    """The kernels of `source` that tile a matmul: their body declares shared memory and synchronizes the
    block inside a loop, or calls an mma helper."""
    found = set()
    for chunk in source.split('extern "C" __global__')[1:]:
        m = _KERNEL.match('extern "C" __global__' + chunk)
        if m and (("__shared__" in chunk and "__syncthreads" in chunk) or "mma_m16n8k16_" in chunk):
            found.add(m.group(1))
    return found


def blocks(text: str) -> list[str]:
    """A rendered file's parts: the includes, each helper, each kernel (render_cuda joins them with a blank
    line, and writes none inside one)."""
    return [b.strip("\n") for b in text.split("\n\n") if b.strip()]


def batch(files: list[Path]) -> tuple[str, dict[str, tuple[Path, str, bool]]]:
    """One CUDA file holding every kernel of `files`, each renamed after its file (two files may hold kernels
    of one name), each helper once; and for each new name, the file, the kernel's own name, and whether it is
    a GEMM kernel. nvcc starts once per batch instead of once per file: most of a small compile is start-up."""
    parts: dict[str, None] = {}
    names: dict[str, tuple[Path, str, bool]] = {}
    for path in files:
        text = path.read_text()
        gemm = gemm_kernels(text)
        for block in blocks(text):
            m = _KERNEL.match(block)
            if m is None:
                parts.setdefault(block)
                continue
            new = f"{m.group(1)}_{path.stem}"
            names[new] = (path, m.group(1), m.group(1) in gemm)
            parts.setdefault(block[: m.start(1)] + new + block[m.end(1) :])
    return "\n\n".join(parts) + "\n", names


def compile_batch(files: list[Path], arch: str) -> tuple[list[Path], str, list[KernelReport] | str, dict[str, Any]]:
    """ptxas's report of every kernel in `files` for `arch`, or nvcc's error message."""
    source, names = batch(files)
    with tempfile.TemporaryDirectory() as folder:
        try:
            return files, arch, ptxas_report(source, arch, Path(folder)), names
        except CompileError as e:
            return files, arch, str(e), names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a folder of .cu files (UOPC_CUDA_DUMP of the CUDA tests)")
    parser.add_argument("--check", action="store_true", help="exit 1 on a compile error or a spill in a GEMM kernel")
    parser.add_argument("--jobs", type=positive_int, default=2, help="nvcc processes at once (default 2)")
    parser.add_argument("--batch", type=positive_int, default=40, help="files compiled by one nvcc (default 40)")
    args = parser.parse_args()
    if not args.folder.is_dir():
        parser.error(f"argument folder: {args.folder} is not a folder")
    try:
        print(f"nvcc: {nvcc()[1]}")
    except NVCCNotFound as e:
        print(f"ptxas report skipped: {e}")
        return 0
    files = sorted(args.folder.glob("*.cu"))
    groups = [files[i : i + args.batch] for i in range(0, len(files), args.batch)]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda job: compile_batch(*job), [(g, a) for g in groups for a in ARCHS]))
    failures = []
    print(f"{'file':<18} {'kernel':<40} {'arch':<6} {'regs':>5} {'smem B':>7} {'spill B':>8}")
    for group, arch, result, names in results:
        if isinstance(result, str):
            failures.append(f"{', '.join(p.name for p in group)} ({arch}): {result}")
            continue
        for r in result:
            path, name, gemm = names[r.name]
            mark = " GEMM" if gemm else ""
            print(f"{path.stem:<18} {name:<40} {arch:<6} {r.registers:>5} {r.shared_bytes:>7} {r.spill_bytes:>8}{mark}")
            if gemm and r.spill_bytes:
                failures.append(f"{path.name} ({arch}): GEMM kernel {name} spills {r.spill_bytes} bytes")
    print(f"{len(files)} files in {len(results)} compiles, {len(failures)} failures")
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failures and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
