"""uopc.backend.c: render kernels as C, build them with gcc into a cache, and run them on numpy arrays."""

from uopc.backend.c.backend import CBackend, CExecutable, batch_source
from uopc.backend.c.compiler import DEFAULT_CFLAGS, CacheError, CompileError, build_library
from uopc.backend.c.program import ArgumentError, Program, numpy_dtype
from uopc.backend.c.render import RenderError, c_literal, render_c, render_kernel

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_CFLAGS",
    "ArgumentError",
    "CBackend",
    "CExecutable",
    "CacheError",
    "CompileError",
    "Program",
    "RenderError",
    "batch_source",
    "build_library",
    "c_literal",
    "numpy_dtype",
    "render_c",
    "render_kernel",
]
