"""Padded reads stay inside their buffer: inputs placed between pages that cannot be read.

Reading padding is a load guarded by a condition, and the condition, not luck, must keep the read inside
the buffer. Values cannot show a missing guard (the padding's WHERE picks 0 whatever was read), and a stray
read of the heap rarely faults. So here every input fills whole pages with an unreadable page (PROT_NONE)
on each side: reading one element before or after it is a segmentation fault. Each case runs in a child
process (this file, run as a script), so that a fault fails its test instead of ending the session.

The kernels are built at -O0: at -O3 gcc may move an unguarded load under the WHERE that discards it (an
out-of-bounds read is undefined behavior, so it may assume there is none), which hides the missing guard
today and may expose it with another compiler version. At -O0 each load in the source is a load.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import Program, render_c
from uopc.ir import UOp
from uopc.lower import Kernel, choose_opts, linearize, rangeify

Array = npt.NDArray[Any]
PAGE_FLOATS = mmap.PAGESIZE // 4

# each case: the same computation on a BUFFER node and on a numpy array. The padding is applied to the flat
# buffer itself: behind a reshape, the index of a read is taken modulo the buffer's size and stays inside it
CASES: dict[str, tuple[Callable[[UOp], UOp], Callable[[Array], Array]]] = {
    "pad-both-ends": (lambda x: x.pad(((3, 5),)), lambda a: np.pad(a, (3, 5))),
    "flip-then-pad": (lambda x: x.flip([0]).pad(((2, 6),)) * 2.0, lambda a: np.pad(a[::-1], (2, 6)) * 2),
    "pad-then-sum-rows": (  # gated loads inside a reduce loop, with the default opts an upcast one
        lambda x: x.pad(((4, 4),)).reshape((PAGE_FLOATS // 8 + 1, 8)).sum([0]),
        lambda a: np.pad(a, (4, 4)).reshape(-1, 8).sum(0, keepdims=True),
    ),
}


def guarded(values: Array) -> Array:
    """A copy of float32 `values` (a whole number of pages) with an unreadable page before and after it."""
    pages = values.nbytes // mmap.PAGESIZE
    assert values.dtype == np.float32 and values.nbytes == pages * mmap.PAGESIZE
    memory = mmap.mmap(-1, (pages + 2) * mmap.PAGESIZE)
    start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    libc = ctypes.CDLL(None, use_errno=True)
    for page in (start, start + (pages + 1) * mmap.PAGESIZE):
        if libc.mprotect(ctypes.c_void_p(page), ctypes.c_size_t(mmap.PAGESIZE), 0) != 0:  # 0: PROT_NONE
            raise OSError(ctypes.get_errno(), "mprotect failed")
    out = np.frombuffer(memory, np.float32, count=values.size, offset=mmap.PAGESIZE).reshape(values.shape)
    out[...] = values
    return out


def run_case(name: str) -> None:
    """In the child: lower, compile and run the case, plain and with the default opts, against numpy."""
    build, reference = CASES[name]
    x = np.random.default_rng(0).standard_normal(PAGE_FLOATS).astype(np.float32)
    value = build(UOp.buffer(0, x.size))
    ast = rangeify([(UOp.buffer(1, value.size), value.reshape((value.size,)))])
    for kernel in (Kernel("plain", ast), Kernel("opt", ast, choose_opts(ast))):
        out = np.zeros(value.size, np.float32)
        Program(render_c(linearize(kernel)), kernel.name)(guarded(x), out)
        np.testing.assert_allclose(out.reshape(value.shape), reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.o0
@pytest.mark.skipif(sys.platform == "win32", reason="mmap with PROT_NONE pages")
@pytest.mark.parametrize("name", list(CASES))
def test_padded_reads_stay_inside_their_buffer(name: str) -> None:
    env = {**os.environ, "CFLAGS": "-O0 -fopenmp -fwrapv"}
    cmd = [sys.executable, __file__, name]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300, env=env)
    fault = " (a segmentation fault: a read outside the input)" if done.returncode == -11 else ""
    assert done.returncode == 0, f"{name}: exit status {done.returncode}{fault}\n{done.stdout}{done.stderr}"


if __name__ == "__main__":
    run_case(sys.argv[1])
