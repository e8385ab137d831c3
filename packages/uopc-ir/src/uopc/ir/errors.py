"""Every error uopc raises on purpose is a `UopcError`, and its class names the stage that found the mistake.

The error is raised once, where the mistake is made, and its message names the op, the dtypes and the
shapes involved, and what would be valid; no stage catches another's error to prefix it with its own name.
`except UopcError` catches them all. Each class also derives from the builtin exception a Python caller
would expect of that kind of mistake (the second base below), so `except ValueError` keeps working:

    UopcError
    ├── UOpError          ValueError    uopc.ir          a node that cannot be built: op, dtypes, shapes or arg
    ├── RewriteError      RuntimeError  uopc.ir          a rule table that reaches no fixed point
    ├── UIRSyntaxError    ValueError    uopc.ir          .uir text that does not parse, with line and column
    ├── RunError          ValueError    uopc.ir          a program the interpreter cannot evaluate
    ├── LowerError        ValueError    uopc.lower       a graph rangeify or an opt cannot lower
    ├── LinearizeError    RuntimeError  uopc.lower       a kernel whose nodes cannot be put in order
    ├── BackendNotFound   LookupError   uopc.lower       no backend registered under the name asked for
    ├── RenderError       ValueError    uopc.backend.c   a kernel the renderer cannot express
    ├── CompileError      RuntimeError  uopc.backend.c   a source the compiler rejects, or no compiler
    │   └── NVCCNotFound                uopc.backend.cuda  no nvcc on PATH to build a cubin with
    ├── CacheError        RuntimeError  uopc.backend.c   a kernel cache that cannot be trusted or is set up wrong
    ├── ArgumentError     TypeError     uopc.backend.c   buffers that do not fit the kernel or plan they are passed to
    ├── EmulationError    RuntimeError  uopc.backend.cuda  a GPU program that races, or reads or writes out of bounds
    ├── CUDAError         RuntimeError  uopc.backend.cuda  no CUDA driver or GPU, or a driver call that failed
    ├── TensorError       ValueError    uopc.tensor      a tensor operation called with arguments it cannot take
    │   └── TensorIndexError  IndexError                 an index beyond the end of an axis
    ├── DatasetError      RuntimeError  uopc.tensor      no source of a data set worked
    │   └── ChecksumError                                a file whose SHA-256 is not the pinned one
    └── CheckpointError   ValueError    uopc.tensor      a state dict that does not fit the model

The classes of the IR are defined here; each package above defines its own, on `UopcError`. What is not
a `UopcError` is either a bug in uopc or the exception a Python protocol prescribes: `len()` of a 0-d
tensor is a `TypeError`, as `len` requires, `np.asarray(t, copy=False)` a `ValueError`, as numpy requires,
and a `Module` without `forward()` a `TypeError`, as calling an abstract method.
"""

from __future__ import annotations


class UopcError(Exception):
    """The base of every error uopc raises on purpose; the subclass names the stage that found the mistake."""


class UOpError(UopcError, ValueError):
    """A node that cannot be built. Raised by the constructor of the first bad node (or by the lookup of a
    dtype's name), naming op, dtypes and shapes."""


class RewriteError(UopcError, RuntimeError):
    """A rewrite that never reaches a fixed point (a cycle, or a table that keeps growing); names the rule."""


class UIRSyntaxError(UopcError, ValueError):
    """A .uir text that does not parse; says the line, the column and what was expected there."""

    def __init__(self, line: int, col: int, message: str) -> None:
        super().__init__(f"line {line}, column {col}: {message}")
        self.line, self.col = line, col


class RunError(UopcError, ValueError):
    """The program is not closed (it reads a buffer, a parameter or a loop index) or has no defined value."""
