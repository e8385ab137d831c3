"""uopc.lower: from shaped graphs to kernels, and from kernels to ordered programs.

rangeify lowers movement ops and reductions to loops over flat buffers, kernelize cuts a graph into the
kernels of a plan, the opts reshape a kernel's loops (search.py times candidates on the machine),
linearize orders a kernel into a linear program, and
compile_plan walks a plan down to an executable with a backend's renderer, compiler and runtime. The stages
are plain values (stages.py); the backend protocol (backend.py) says what a backend must provide, and the
stage viewer (viewer.py) prints them all as one web page.
"""

from uopc.lower.backend import (
    Backend,
    BackendNotFound,
    Compiler,
    Executable,
    OptsStore,
    PartsCompiler,
    PartsRenderer,
    PlanStore,
    Renderer,
    Runtime,
    get_backend,
)
from uopc.lower.kernelize import PlanCache, make_plan, materialized, normalize
from uopc.lower.linearize import LinearizeError, expand_reduces, linear_order, linearize
from uopc.lower.memory import MemoryPlan, plan_memory, step_spans
from uopc.lower.opt import Opts, apply_opts, choose_opts
from uopc.lower.pipeline import CompiledPlan, StageTimes, compile_plan, plan_key, restore_plan
from uopc.lower.rangeify import LowerError, rangeify
from uopc.lower.search import (
    actions,
    beam_search,
    kernel_key,
    measure_on,
    time_kernel,
    tuned_kernels,
)
from uopc.lower.stages import (
    Binary,
    BufferSpec,
    Kernel,
    LinearProgram,
    Manifest,
    Param,
    Plan,
    Signature,
    Source,
    Step,
    kernel_params,
)
from uopc.lower.viewer import RealizeRecord, index_page, stage_page

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendNotFound",
    "Binary",
    "BufferSpec",
    "CompiledPlan",
    "Compiler",
    "Executable",
    "Kernel",
    "LinearProgram",
    "LinearizeError",
    "LowerError",
    "Manifest",
    "MemoryPlan",
    "Opts",
    "OptsStore",
    "Param",
    "PartsCompiler",
    "PartsRenderer",
    "Plan",
    "PlanCache",
    "PlanStore",
    "RealizeRecord",
    "Renderer",
    "Runtime",
    "Signature",
    "Source",
    "StageTimes",
    "Step",
    "actions",
    "apply_opts",
    "beam_search",
    "choose_opts",
    "compile_plan",
    "expand_reduces",
    "get_backend",
    "index_page",
    "kernel_key",
    "kernel_params",
    "linear_order",
    "linearize",
    "make_plan",
    "materialized",
    "measure_on",
    "normalize",
    "plan_key",
    "plan_memory",
    "rangeify",
    "restore_plan",
    "stage_page",
    "step_spans",
    "time_kernel",
    "tuned_kernels",
]
