"""Render GPU programs as CUDA C: one `extern "C" __global__` function per kernel, named as the C renderer names.

The body is the program of one thread. Loop indices are idx<axis>, ridx<axis> (as in C), and the indices a
thread reads from the hardware are gidx<axis> (its block's position in the grid, `blockIdx`) and
lidx<axis> (its position in the block, `threadIdx`); accumulators are acc<n>, loaded values val<n>, other
computed values alu<n>, and shared memory smem<n>. An ALU value used once, in the block where it is
computed, is written inline into its user, as in C.

float16 and bfloat16 values live in `float` variables that hold them exactly: a load widens, a store
narrows, and every op that can leave the type rounds its result back, as numpy computes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from uopc.backend.c import C_OPS, KernelWriter, RenderError, c_literal, helper_body
from uopc.backend.cuda.launch import GPU_KINDS, GPUProgram
from uopc.ir import AddrSpace, AxisType, DType, Ops, PtrDType, UOp, dtypes, vmin
from uopc.lower import LinearProgram, Source, Step

_HALF = (dtypes.float16, dtypes.bfloat16)  # held in float variables (see value_type)


def value_type(dt: DType) -> str:
    """The CUDA type of a value: a float16 or bfloat16 value is a float that holds it exactly."""
    return "float" if dt in _HALF else dt.c_name


def storage_type(dt: DType) -> str:
    """The CUDA type of an element in memory: the 16-bit types of cuda_fp16.h and cuda_bf16.h."""
    return {dtypes.float16: "__half", dtypes.bfloat16: "__nv_bfloat16"}.get(dt, dt.c_name)


def literal(value: bool | int | float, dt: DType) -> str:
    """A constant as C spells it; a 16-bit float is a float literal (it holds the value exactly)."""
    return c_literal(value, dtypes.float32 if dt in _HALF else dt)


_WIDEN = {dtypes.float16: "__half2float", dtypes.bfloat16: "__bfloat162float"}
_NARROW = {dtypes.float16: "__float2half_rn", dtypes.bfloat16: "__float2bfloat16_rn"}
_ROUND = {dtypes.float16: "f16_round", dtypes.bfloat16: "bf16_round"}
_LIBM = {Ops.EXP: "exp", Ops.LOG: "log", Ops.SQRT: "sqrt", Ops.SIN: "sin", Ops.COS: "cos", Ops.POW: "pow"}


def _math(name: str) -> Callable[[list[str], DType], str]:
    return lambda a, dt: f"{name}({', '.join(a)})" if dt is dtypes.float64 else f"{name}f({', '.join(a)})"


# CUDA C spells arithmetic as C does: the C renderer's table, except that libm calls need no float16 casts
# (a 16-bit float is held in a float here, and rounded back by the writer).
CUDA_OPS: dict[Ops, Callable[[list[str], DType], str]] = {
    **C_OPS,
    **{op: _math(name) for op, name in _LIBM.items()},
}
_ROUND_BODIES = {
    "f16_round": "static __device__ inline float f16_round(float x) { return __half2float(__float2half_rn(x)); }",
    "bf16_round": "static __device__ inline float bf16_round(float x) "
    "{ return __bfloat162float(__float2bfloat16_rn(x)); }",
}


def mma_helper(dt: DType) -> tuple[str, str]:
    """The name and definition of the helper that runs one mma.sync m16n8k16 for a lane: its 8 values of A and
    4 of B packed in pairs into 32-bit registers (the first of a pair in the low half), D = A*B in float32."""
    short, pack, pair = {
        dtypes.float16: ("f16", "__floats2half2_rn", "__half2"),
        dtypes.bfloat16: ("bf16", "__floats2bfloat162_rn", "__nv_bfloat162"),
    }[dt]
    name = f"mma_m16n8k16_{short}"
    args = ", ".join([*(f"float a{i}" for i in range(8)), *(f"float b{i}" for i in range(4))])
    body = [
        f"static __device__ inline void {name}(float* d, {args}) {{",
        f"  {pair} a[4] = {{{pack}(a0, a1), {pack}(a2, a3), {pack}(a4, a5), {pack}(a6, a7)}};",
        f"  {pair} b[2] = {{{pack}(b0, b1), {pack}(b2, b3)}};",
        "  const unsigned* ra = reinterpret_cast<const unsigned*>(a);",
        "  const unsigned* rb = reinterpret_cast<const unsigned*>(b);",
        f'  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{short}.{short}.f32 '
        '{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"',
        '    : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])',
        '    : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),',
        '      "f"(0.0f), "f"(0.0f), "f"(0.0f), "f"(0.0f));',
        "}",
    ]
    return name, "\n".join(body)


def cuda_helper(kind: str, dt: DType) -> str:
    """The C renderer's helper (floor division and modulo, NaN-propagating max and min) as a device function."""
    t = value_type(dt)
    return f"static __device__ inline {t} {kind}_{dt.short}({t} a, {t} b) {{ {helper_body(kind, dt, t)} }}"


_EXACT = (Ops.NEG, Ops.MAX, Ops.MIN, Ops.WHERE)  # they return one of their operands: no rounding
_WIDENED = (Ops.NEG, Ops.ADD, Ops.SUB, Ops.MUL)  # results that can leave a narrow integer type's range


def _shared(u: UOp) -> bool:
    return isinstance(u.dtype, PtrDType) and u.dtype.addrspace is AddrSpace.SHARED


class _CUDAWriter(KernelWriter):
    """Walks one GPU program, naming values and writing lines: the C renderer's walk, for one thread."""

    def __init__(self, program: GPUProgram) -> None:
        super().__init__(program.uops, lambda r: r.arg.kind not in GPU_KINDS)
        self.program = program
        self.shared_used = True  # whether shared memory may have been touched since the last barrier
        self.products: dict[tuple[UOp, ...], str] = {}  # an mma instruction's sources -> its result array

    def value(self, u: UOp, text: str, prefix: str) -> None:
        if prefix == "alu" and self.inlined(u):
            self.expr[u] = text
            return
        name = self.fresh(prefix)
        self.line(f"{value_type(u.scalar_dtype)} {name} = {text};")
        self.expr[u] = name

    def rounded(self, dt: DType, text: str) -> str:
        """`text`, a float, rounded to `dt` when dt is a 16-bit float."""
        if dt not in _HALF:
            return text
        self.helpers[_ROUND[dt]] = _ROUND_BODIES[_ROUND[dt]]
        return f"{_ROUND[dt]}({text})"

    def alu(self, op: Ops, u: UOp, srcs: Sequence[UOp]) -> str:
        operands = [self.expr[s] for s in srcs]
        dt = srcs[-1].scalar_dtype
        if op in (Ops.IDIV, Ops.MOD) and dt.is_int and vmin(srcs[0]) >= 0 and vmin(srcs[1]) > 0:
            return f"({operands[0]}{'/' if op is Ops.IDIV else '%'}{operands[1]})"  # truncation is floor here
        if op in (Ops.IDIV, Ops.MOD, Ops.MAX, Ops.MIN):
            kind = {Ops.IDIV: "floordiv", Ops.MOD: "floormod", Ops.MAX: "max", Ops.MIN: "min"}[op]
            self.helpers[f"{kind}_{dt.short}"] = cuda_helper(kind, dt)
        text = CUDA_OPS[op](operands, dt)
        if op in _WIDENED and dt.is_int and dt.itemsize < 4:
            return f"(({value_type(dt)}){text})"  # C computes narrow integers as int: wrap at the type's width
        return text if op in _EXACT else self.rounded(u.scalar_dtype, text)

    def statement(self, u: UOp) -> None:
        if u.op in (Ops.RANGE, Ops.ENDRANGE) or (u.op in (Ops.LOAD, Ops.STORE) and _shared(u.src[0])):
            self.shared_used = True  # a loop's body may touch shared memory: a barrier after it waits for it
        if u.op is Ops.CONST:
            self.expr[u] = literal(u.arg, u.scalar_dtype)
        elif u.op is Ops.DEFINE_GLOBAL:
            self.expr[u] = self.shared(u) if _shared(u) else f"data{u.arg.slot}"
        elif u.op is Ops.RANGE:
            self.range(u)
        elif u.op is Ops.ENDRANGE:
            if u.src[0].arg.kind not in GPU_KINDS:
                self.depth -= 1
                self.line("}")
        elif u.op is Ops.LOAD:
            read = f"{self.expr[u.src[0]]}[{self.expr[u.src[1]]}]"
            if u.dtype in _HALF and not _shared(u.src[0]):
                read = f"{_WIDEN[u.scalar_dtype]}({read})"
            if len(u.src) == 3:
                read = f"{self.expr[u.src[2]]} ? {read} : {literal(0, u.scalar_dtype)}"
            self.value(u, read, "val")
        elif u.op is Ops.STORE:
            value = self.expr[u.src[2]]
            if u.src[2].dtype in _HALF and not _shared(u.src[0]):
                value = f"{_NARROW[u.src[2].scalar_dtype]}({value})"
            self.line(f"{self.gated(u)}{self.expr[u.src[0]]}[{self.expr[u.src[1]]}] = {value};")
        elif u.op is Ops.BARRIER:
            if self.shared_used:  # a barrier right after a barrier waits for nothing more
                self.line("__syncthreads();")
            self.shared_used = False
            self.expr[u] = self.expr[u.src[0]]
        elif u.op is Ops.MMA:
            self.mma(u)
        elif u.op is Ops.SHUFFLE:
            self.value(u, f"__shfl_sync(0xffffffffu, {self.expr[u.src[0]]}, {self.expr[u.src[1]]})", "alu")
        elif u.op is Ops.DEFINE_ACC:
            self.value(u, self.expr[u.src[0]], "acc")
        elif u.op is Ops.ACCUMULATE:
            self.line(f"{self.expr[u.src[0]]} = {self.accumulate(u)};")
        elif u.op is Ops.END:
            if u.src[0].op is not Ops.STORE:
                self.expr[u] = self.expr[u.src[0].src[0]] if u.src[0].op is Ops.ACCUMULATE else self.expr[u.src[0]]
        elif u.op is Ops.CAST:
            self.value(u, self.cast(u), "alu")
        elif u.op in CUDA_OPS:
            self.value(u, self.alu(u.op, u, u.src), "alu")
        else:
            raise RenderError(f"the CUDA renderer has no rule for {u.op.name}")

    def mma(self, u: UOp) -> None:
        """The four MMA nodes of one instruction share their sources: the first one met writes the call."""
        if u.src not in self.products:
            name, helper = mma_helper(u.src[0].scalar_dtype)
            self.helpers[name] = helper
            self.products[u.src] = self.fresh("mma")
            self.line(f"float {self.products[u.src]}[4];")
            self.line(f"{name}({self.products[u.src]}, {', '.join(self.expr[s] for s in u.src)});")
        self.expr[u] = f"{self.products[u.src]}[{u.arg}]"

    def accumulate(self, u: UOp) -> str:
        """acc + value, or fmaf(a, b, acc) for a product used nowhere else: nvcc fuses nothing by itself
        (--fmad=false), so only the sums of products, as in a matmul, round once instead of twice."""
        acc, value = u.src[0], u.src[1]
        if u.arg is None:
            return self.expr[value]
        product = value.op is Ops.MUL and value.dtype in (dtypes.float32, dtypes.float64) and self.inlined(value)
        if u.arg is Ops.ADD and product:
            fma = "fmaf" if value.dtype is dtypes.float32 else "fma"
            return f"{fma}({self.expr[value.src[0]]}, {self.expr[value.src[1]]}, {self.expr[acc]})"
        return self.alu(u.arg, u, (acc, value))

    def shared(self, u: UOp) -> str:
        name = f"smem{u.arg.slot}"
        self.line(f"__shared__ {value_type(u.scalar_dtype)} {name}[{u.arg.size}];")
        return name

    def range(self, r: UOp) -> None:
        prefix = {AxisType.REDUCE: "ridx", AxisType.GROUP: "gidx", AxisType.LOCAL: "lidx"}.get(r.arg.kind, "idx")
        name = f"{prefix}{r.arg.axis}"
        self.expr[r] = name
        if r.arg.kind in GPU_KINDS:  # every thread runs the body once, at its own position
            self.line(f"const {value_type(r.scalar_dtype)} {name} = {self.program.launch.hardware(r)};")
            return
        self.line(f"for ({value_type(r.scalar_dtype)} {name} = 0; {name} < {self.expr[r.src[0]]}; {name}++) {{")
        self.depth += 1

    def cast(self, u: UOp) -> str:
        to, src, x = u.scalar_dtype, u.src[0].scalar_dtype, self.expr[u.src[0]]
        if to.is_bool:
            return f"({x}!=0)"
        if to in _HALF and src is dtypes.float64:  # one rounding, straight from double
            suffix = "half" if to is dtypes.float16 else "bfloat16"
            return f"{_WIDEN[to]}(__double2{suffix}({x}))"
        return self.rounded(to, f"((float){x})" if to in _HALF else f"(({value_type(to)}){x})")


def param_decl(p_dtype: DType, name: str, written: bool) -> str:
    """`const float* __restrict__ data1`: restrict promises no two parameters overlap, as in C."""
    return f"{'' if written else 'const '}{storage_type(p_dtype)}* __restrict__ {name}"


def render_cuda_kernel(program: LinearProgram) -> tuple[str, dict[str, str]]:
    """A GPU program's kernel, and the helpers it calls (by name, so a file defines each once)."""
    if not isinstance(program, GPUProgram):
        raise RenderError(f"{program.name}: the CUDA renderer takes GPU programs (mapped by lower_gpu)")
    w = _CUDAWriter(program)
    for u in program.uops:
        w.statement(u)
    params = ", ".join(param_decl(p.dtype, p.name, p.slot in program.written) for p in program.params)
    head = f'extern "C" __global__ void __launch_bounds__({program.launch.threads}) {program.name}({params}) {{'
    return "\n".join([head, *w.lines, "}"]), w.helpers


CUDA_PRELUDE = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"


def render_cuda(programs: Sequence[LinearProgram]) -> str:
    """One CUDA file: every kernel, each helper once. The runtime launches them in the plan's order."""
    names = [p.name for p in programs]
    if len(set(names)) != len(names):
        raise RenderError(f"kernel names in one file must be unique, got {names}")
    helpers: dict[str, str] = {}
    kernels = []
    for p in programs:
        kernel, used = render_cuda_kernel(p)
        helpers |= used
        kernels.append(kernel)
    return "\n\n".join([CUDA_PRELUDE, *helpers.values(), *kernels]) + "\n"


class CUDARenderer:
    """The GPU backends' renderer: a plan's GPU programs as one CUDA file (the steps are the runtime's)."""

    def render(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        return Source(render_cuda(programs))
