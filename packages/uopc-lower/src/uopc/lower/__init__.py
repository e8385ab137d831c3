"""uopc.lower: from shaped graphs to kernels, and from kernels to ordered programs.

rangeify lowers movement ops and reductions to loops over flat buffers, the opts reshape those loops,
linearize orders a kernel into a flat program, and the backend protocol says what a backend must provide.
"""

from uopc.lower.backend import Backend, BackendNotFound, Executable, Kernel, Param, Step, get_backend, kernel_params
from uopc.lower.kernelize import BufferSpec, Plan, PlanCache, make_plan, materialized, normalize
from uopc.lower.linearize import LinearizeError, expand_reduces, linearize
from uopc.lower.opt import Opts, apply_opts, choose_opts
from uopc.lower.rangeify import LowerError, rangeify

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendNotFound",
    "BufferSpec",
    "Executable",
    "Kernel",
    "LinearizeError",
    "LowerError",
    "Opts",
    "Param",
    "Plan",
    "PlanCache",
    "Step",
    "apply_opts",
    "choose_opts",
    "expand_reduces",
    "get_backend",
    "kernel_params",
    "linearize",
    "make_plan",
    "materialized",
    "normalize",
    "rangeify",
]
