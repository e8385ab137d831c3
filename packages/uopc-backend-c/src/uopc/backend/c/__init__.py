"""uopc.backend.c: render kernels as C, build them with gcc into a cache, and run them on numpy arrays.

The backend is three parts (`C_BACKEND`): `CRenderer` (linear programs to one C file), `CCompiler` (C to a
shared library, through the cache) and `CRuntime` (numpy buffers, and the library loaded as a
`CExecutable`). `Program` calls one C function, generated or hand-written, with the same checks.
`start_openmp` starts the OpenMP runtime with uopc's settings, for a program that imports PyTorch (which
brings its own) before it runs a kernel.
"""

from uopc.backend.c.backend import C_BACKEND
from uopc.backend.c.choices import COptsStore, Machine, choice_key, this_machine
from uopc.backend.c.compiler import (
    DEFAULT_CFLAGS,
    CacheError,
    CCompiler,
    CompileError,
    build_binary,
    build_cached,
    build_library,
)
from uopc.backend.c.openmp import start_openmp
from uopc.backend.c.program import ArgumentError, Program, numpy_dtype
from uopc.backend.c.render import (
    C_OPS,
    CRenderer,
    KernelWriter,
    RenderError,
    batch_source,
    c_literal,
    helper_body,
    render_c,
    render_kernel,
)
from uopc.backend.c.runtime import CExecutable, CRuntime
from uopc.backend.c.store import CPlanStore

__version__ = "0.1.0"

__all__ = [
    "C_BACKEND",
    "C_OPS",
    "DEFAULT_CFLAGS",
    "ArgumentError",
    "CCompiler",
    "CExecutable",
    "COptsStore",
    "CPlanStore",
    "CRenderer",
    "CRuntime",
    "CacheError",
    "CompileError",
    "KernelWriter",
    "Machine",
    "Program",
    "RenderError",
    "batch_source",
    "build_binary",
    "build_cached",
    "build_library",
    "c_literal",
    "choice_key",
    "helper_body",
    "numpy_dtype",
    "render_c",
    "render_kernel",
    "start_openmp",
    "this_machine",
]
