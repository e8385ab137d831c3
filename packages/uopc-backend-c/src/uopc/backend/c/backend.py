"""The C backend: its three parts, registered as `C` in the `uopc.backends` entry-point group.

The renderer writes a plan's programs as one C file (render.py), the compiler builds it with gcc into a
content-addressed cache (compiler.py), and the runtime loads the library and runs it on numpy arrays
(runtime.py). The plan store (store.py) keeps each compiled plan's manifest beside its library, so that
a new process restores the plan instead of compiling it again. The opts store (choices.py) keeps the opts
that a search found for each kernel on this machine.
"""

from __future__ import annotations

from uopc.backend.c.choices import COptsStore
from uopc.backend.c.compiler import CCompiler
from uopc.backend.c.openmp import threads
from uopc.backend.c.render import CRenderer
from uopc.backend.c.runtime import CRuntime
from uopc.backend.c.store import CPlanStore
from uopc.lower import Backend

C_BACKEND = Backend(
    "C",
    CRenderer(),
    CCompiler(),
    CRuntime(),
    CPlanStore(),
    packs_matmuls=True,
    opts_store=COptsStore(),
    threads=threads,
)
