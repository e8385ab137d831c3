"""Render linear programs as C: one statement a line, names that say what each value is.

Loop indices are idx<axis> (output loops), tidx<axis> (threaded loops) and ridx<axis> (reduce loops);
accumulators are acc<n>, loaded values val<n>, and other computed values alu<n>. An ALU value used once,
in the block where it is computed, is written inline into its user instead of getting a name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from uopc.backend.c.compiler import join_parts
from uopc.ir import AxisType, DType, Ops, UOp, UopcError, dtypes, never_wraps, vmin
from uopc.lower import LinearProgram, Param, Source, Step


class RenderError(UopcError, ValueError):
    """A kernel or plan the C renderer cannot express: an op it has no rule for, names that are no C identifiers."""


_FLOAT_VALUED = (dtypes.float32, dtypes.bfloat16)  # C float holds their values (see c_type)


def c_literal(value: bool | int | float, dtype: DType) -> str:
    """A C constant of exactly `dtype`'s value: 1.0f, 2LL, 3u, INFINITY, NAN."""
    if dtype.is_bool:
        return "1" if value else "0"
    if dtype.is_float:
        v = float(value)
        text = "NAN" if math.isnan(v) else ("INFINITY" if v > 0 else "(-INFINITY)") if math.isinf(v) else repr(v)
        if not math.isfinite(v):
            return text if dtype in _FLOAT_VALUED else f"(({dtype.c_name}){text})"
        literal = f"{text}f" if dtype in _FLOAT_VALUED else f"(({dtype.c_name}){text}f)"
        literal = text if dtype is dtypes.float64 else literal
        return f"({literal})" if literal.startswith("-") else literal  # `x - -1.5f` must not read as `x--1.5f`
    suffix = {dtypes.int64: "LL", dtypes.uint32: "u", dtypes.uint64: "ull"}.get(dtype, "")
    if value == dtype.min and dtype.kind == "int":  # -2147483648 is the negation of a too-large literal in C
        return f"({value + 1}{suffix}-1)"
    return f"({value}{suffix})" if int(value) < 0 else f"{value}{suffix}"


def _math(name: str) -> Callable[[list[str], DType], str]:
    def render(a: list[str], dt: DType) -> str:
        if dt is dtypes.float64:
            return f"{name}({', '.join(a)})"
        if dt in _FLOAT_VALUED:  # a bfloat16 result is rounded by the caller (_CWriter.alu)
            return f"{name}f({', '.join(a)})"
        args = ", ".join(f"(float){x}" for x in a)  # float16: compute in float, round back
        return f"(({dt.c_name}){name}f({args}))"

    return render


def _helper_call(kind: str) -> Callable[[list[str], DType], str]:
    return lambda a, dt: f"{kind}_{dt.short}({a[0]}, {a[1]})"


# How each op reads in C, given its operands' C expressions and their dtype. MAX, MIN, and IDIV/MOD on
# values that may be negative call small helpers, defined at the top of the file only when used.
C_OPS: dict[Ops, Callable[[list[str], DType], str]] = {
    Ops.NEG: lambda a, dt: f"(-{a[0]})",
    Ops.EXP: _math("exp"),
    Ops.LOG: _math("log"),
    Ops.SQRT: _math("sqrt"),
    Ops.SIN: _math("sin"),
    Ops.COS: _math("cos"),
    Ops.POW: _math("pow"),
    Ops.ADD: lambda a, dt: f"({a[0]}+{a[1]})",
    Ops.SUB: lambda a, dt: f"({a[0]}-{a[1]})",
    Ops.MUL: lambda a, dt: f"({a[0]}*{a[1]})",
    Ops.DIV: lambda a, dt: f"({a[0]}/{a[1]})",
    Ops.IDIV: _helper_call("floordiv"),
    Ops.MOD: _helper_call("floormod"),
    Ops.MAX: _helper_call("max"),
    Ops.MIN: _helper_call("min"),
    Ops.CMPLT: lambda a, dt: f"({a[0]}<{a[1]})",
    Ops.CMPEQ: lambda a, dt: f"({a[0]}=={a[1]})",
    Ops.CMPNE: lambda a, dt: f"({a[0]}!={a[1]})",
    Ops.AND: lambda a, dt: f"({a[0]}&&{a[1]})" if dt.is_bool else f"({a[0]}&{a[1]})",
    Ops.OR: lambda a, dt: f"({a[0]}||{a[1]})" if dt.is_bool else f"({a[0]}|{a[1]})",
    Ops.XOR: lambda a, dt: f"({a[0]}!={a[1]})" if dt.is_bool else f"({a[0]}^{a[1]})",
    Ops.WHERE: lambda a, dt: f"({a[0]}?{a[1]}:{a[2]})",
}


# Floor division and modulo as Python defines them (C truncates toward zero); division by zero gives 0,
# as in numpy, and INT_MIN / -1 wraps instead of trapping. max and min propagate NaN, as numpy does.
_HELPER_BODIES = {
    ("floordiv", "int"): "if (b == 0) return 0; if (b == -1) return -a; "
    "T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;",
    (
        "floormod",
        "int",
    ): "if (b == 0 || b == -1) return 0; T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;",
    ("floordiv", "uint"): "return b == 0 ? 0 : a / b;",
    ("floormod", "uint"): "return b == 0 ? 0 : a % b;",
    # floats as numpy's npy_divmod (and Python's float divmod): the remainder is fmod's, exact, moved to the
    # divisor's sign; the quotient is rounded from (a - mod) / b. By zero: a / b, and fmod's NaN.
    ("floordiv", "float"): "if (b == 0) return a / b; W m = fmod(a, b); W d = (a - m) / b; "
    "if (m != 0 && ((b < 0) != (m < 0))) d -= 1; if (d == 0) return copysign((W)0, a / b); "
    "W f = floor(d); return d - f > 0.5 ? f + 1 : f;",
    ("floormod", "float"): "W m = fmod(a, b); if (m == 0) return copysign((W)0, b); "
    "return (m == m && (b < 0) != (m < 0)) ? m + b : m;",
    ("max", "float"): "return (a > b || a != a) ? a : b;",
    ("min", "float"): "return (a < b || a != a) ? a : b;",
    ("max", "int"): "return a > b ? a : b;",
    ("min", "int"): "return a < b ? a : b;",
}


def helper_body(kind: str, dt: DType, value_type: str) -> str:
    """The body of helper `kind` (floordiv, floormod, max, min) for `dt`, whose values are held in `value_type`.

    Shared with the CUDA renderer, which holds 16-bit floats in `float` where C holds float16 in `_Float16`."""
    family = "int" if dt.is_bool or (kind in ("max", "min") and dt.kind == "uint") else dt.kind
    body = re.sub(r"\bT\b", value_type, _HELPER_BODIES[(kind, family)])
    if family == "float":  # W: the type the libm calls compute in (float16 too computes in float)
        suffix = "" if dt is dtypes.float64 else "f"
        body = re.sub(r"\bW\b", "double" if dt is dtypes.float64 else "float", body)
        body = re.sub(r"\b(fmod|floor|copysign)\(", rf"\1{suffix}(", body)
    return body


def c_helper(kind: str, dt: DType) -> str:
    """The definition of helper `kind` (floordiv, floormod, max, min) for dtype `dt`."""
    t = c_type(dt)
    return f"static inline {t} {kind}_{dt.short}({t} a, {t} b) {{ {helper_body(kind, dt, t)} }}"


def c_type(dt: DType) -> str:
    """The C type of a value of `dt`. C has no portable bfloat16 arithmetic, so a bfloat16 value is a float
    that holds a bfloat16 number exactly: loads widen it, and every op that can leave bfloat16 rounds its
    result back (bf16_round), as float16 ops compute in float and round back."""
    return "float" if dt is dtypes.bfloat16 else dt.c_name


def c_storage_type(dt: DType) -> str:
    """The C type of an element of a buffer: a bfloat16 is stored as its 16 bits, the top half of a float."""
    return "unsigned short" if dt is dtypes.bfloat16 else dt.c_name


_EXACT_IN_BFLOAT16 = (Ops.NEG, Ops.MAX, Ops.MIN, Ops.WHERE)  # they return one of their bfloat16 operands

BF16_HELPERS = {
    "bf16_round": "static inline float bf16_round(float x) { union { float f; unsigned int u; } v = { x }; "
    "if (x != x) v.u |= 0x400000u; else v.u += 0x7fffu + ((v.u >> 16) & 1u); "  # nan stays nan; ties to even
    "v.u &= 0xffff0000u; return v.f; }",
    "bf16_load": "static inline float bf16_load(unsigned short b) { union { unsigned int u; float f; } v = "
    "{ (unsigned int)b << 16 }; return v.f; }",
    "bf16_store": "static inline unsigned short bf16_store(float x) { union { float f; unsigned int u; } v = "
    "{ bf16_round(x) }; return (unsigned short)(v.u >> 16); }",
}


def param_decl(p: Param, written: bool) -> str:
    """`float data0[restrict static 6]`: the size in the signature documents it and lets Program check it."""
    const = "" if written else "const "
    return f"{const}{c_storage_type(p.dtype)} {p.name}[restrict static {p.size}]"


SIMD_MIN_TRIPS = 32  # iterations a reduce loop needs before vector lanes pay for their final sums
SUM_LANES = 8  # partial sums per split reduce loop: 8 floats fill an AVX2 vector, as numpy's pairwise sum uses 8

FMA_CALLS = {dtypes.float32: "fmaf", dtypes.float64: "fma"}  # one rounding; C has no fused op for narrower floats


_WIDENED = (Ops.NEG, Ops.ADD, Ops.SUB, Ops.MUL)  # the ops whose result can leave a narrow integer type's range


class KernelWriter:
    """The walk both renderers share: each value's name or expression, the lines written so far, and for each
    node the loop whose block holds it and the nodes that use it, which decide what is written inline.
    `opens(r)` says whether a RANGE is a loop in the text (a GPU's thread and block axes are not)."""

    def __init__(self, uops: Sequence[UOp], opens: Callable[[UOp], bool] = lambda r: True) -> None:
        self.expr: dict[UOp, str] = {}
        self.lines: list[str] = []
        self.helpers: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.depth = 1
        self.block: dict[UOp, UOp | None] = {}
        self.users: dict[UOp, list[UOp]] = {}
        self.inside: dict[UOp | None, list[UOp]] = {}  # loop -> the nodes of its own block
        open_loops: list[UOp] = []
        for u in uops:
            self.block[u] = open_loops[-1] if open_loops else None
            self.inside.setdefault(self.block[u], []).append(u)
            if u.op is Ops.RANGE and opens(u):
                open_loops.append(u)
            elif u.op is Ops.ENDRANGE and opens(u.src[0]):
                open_loops.pop()
            for s in u.src:
                self.users.setdefault(s, []).append(u)

    def fresh(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def inlined(self, u: UOp) -> bool:
        """Whether u's expression is written where its one user is. Not if it reads an accumulator: it must
        read the value the accumulator has where u is (before this iteration's update), not where its user is."""
        users = self.users.get(u, [])
        reads_acc = any(s.op is Ops.DEFINE_ACC for s in u.src)
        return len(users) == 1 and self.block[users[0]] is self.block[u] and not reads_acc

    def gated(self, store: UOp) -> str:
        """What a STORE's line starts with: the test of its gate, if it has one."""
        return f"if ({self.expr[store.src[3]]}) " if len(store.src) == 4 else ""


class _CWriter(KernelWriter):
    """Walks a linear program once, naming values and writing lines."""

    def __init__(self, program: LinearProgram, vectorize_sums: bool = True) -> None:
        super().__init__(program.uops)
        self.strided, self.vectorize_sums = program.strided_axes, vectorize_sums
        self.fuse = fused_products(program)
        self.laned: dict[UOp, list[tuple[UOp, str]]] = {}  # a loop split into lanes -> its sums and their names
        self.vectors = vector_values(program.uops)
        self.wide = pointer_width_indices(program.uops)
        self.streamed = {p.slot: p.dtype for p in program.params if p.slot in program.streamed}

    def alu(self, u: UOp) -> str:
        narrow = u.scalar_dtype.is_int and u not in self.wide  # at its own width: it wraps as the IR says
        operands = [
            f"(({c_type(s.scalar_dtype)}){self.expr[s]})" if narrow and s in self.wide else self.expr[s] for s in u.src
        ]
        dt = u.src[-1].scalar_dtype
        if u.op is Ops.CMPNE and u.src[0].dtype is dtypes.bool and u.src[1].op is Ops.CONST and u.src[1].arg is True:
            return f"(!{operands[0]})"
        if u.op in (Ops.IDIV, Ops.MOD) and dt.is_int and vmin(u.src[0]) >= 0 and vmin(u.src[1]) > 0:
            return f"({operands[0]}{'/' if u.op is Ops.IDIV else '%'}{operands[1]})"  # C truncation is floor here
        if u.op in (Ops.IDIV, Ops.MOD, Ops.MAX, Ops.MIN):
            kind = {Ops.IDIV: "floordiv", Ops.MOD: "floormod", Ops.MAX: "max", Ops.MIN: "min"}[u.op]
            self.helpers[f"{kind}_{dt.short}"] = c_helper(kind, dt)
        if u.op in _WIDENED and dt.is_int and dt.itemsize < 4:
            # C computes 8- and 16-bit integers in int: the cast wraps the result at the type's width, as the
            # IR does, also where the expression is inlined into a comparison or a division
            return f"(({c_type(dt)}){C_OPS[u.op](operands, dt)})"
        if u.dtype is dtypes.bfloat16 and u.op not in _EXACT_IN_BFLOAT16:
            return self.bf16_round(C_OPS[u.op](operands, dt))
        return C_OPS[u.op](operands, dt)

    def bf16_round(self, text: str) -> str:
        self.helpers["bf16_round"] = BF16_HELPERS["bf16_round"]
        return f"bf16_round({text})"

    def value(self, u: UOp, text: str, prefix: str) -> None:
        """Name `text` as a variable, or keep it as an inline expression."""
        if prefix == "alu" and self.inlined(u):
            self.expr[u] = text
            return
        name = self.fresh(prefix)
        self.line(f"{self.vectors.get(u) or self.type_of(u)} {name} = {text};")
        self.expr[u] = name

    def type_of(self, u: UOp) -> str:
        """The C type a scalar value is declared with: an index at pointer width where it is one."""
        return dtypes.int64.c_name if u in self.wide else c_type(u.scalar_dtype)

    def statement(self, u: UOp) -> None:
        if self.vector_statement(u):
            return
        if u.op is Ops.CONST:
            self.expr[u] = c_literal(u.arg, u.scalar_dtype)
        elif u.op is Ops.DEFINE_GLOBAL:
            self.expr[u] = f"data{u.arg.slot}"
        elif u.op is Ops.RANGE:
            self.range(u)
        elif u.op is Ops.ENDRANGE:
            self.end_range(u.src[0])
        elif u.op is Ops.LOAD:
            ptr, idx = self.expr[u.src[0]], self.expr[u.src[1]]
            self.prefetch(u)
            read = f"{ptr}[{idx}]"
            if u.dtype is dtypes.bfloat16:
                self.helpers["bf16_load"] = BF16_HELPERS["bf16_load"]
                read = f"bf16_load({read})"
            if len(u.src) == 3:
                read = f"{self.expr[u.src[2]]} ? {read} : {c_literal(0, u.scalar_dtype)}"
            self.value(u, read, "val")
        elif u.op is Ops.STORE:
            value = self.expr[u.src[2]]
            if u.src[2].dtype is dtypes.bfloat16:
                self.helpers |= {k: BF16_HELPERS[k] for k in ("bf16_round", "bf16_store")}
                value = f"bf16_store({value})"
            self.line(f"{self.gated(u)}{self.store_target(u)} = {value};")
        elif u.op is Ops.DEFINE_ACC:
            self.value(u, self.expr[u.src[0]], "acc")
        elif u.op is Ops.ACCUMULATE:
            self.line(f"{self.expr[u.src[0]]} = {self.accumulate(u)};")
        elif u.op is Ops.END:
            if u.src[0].op is not Ops.STORE:
                self.expr[u] = self.expr[u.src[0].src[0]] if u.src[0].op is Ops.ACCUMULATE else self.expr[u.src[0]]
        elif u.op is Ops.CAST:
            to, x = u.scalar_dtype, self.expr[u.src[0]]
            text = f"({x}!=0)" if to.is_bool else f"(({c_type(to)}){x})"
            self.value(u, self.bf16_round(text) if to is dtypes.bfloat16 else text, "alu")
        elif u.op in C_OPS:
            self.value(u, self.alu(u), "alu")
        else:
            raise RenderError(f"the C renderer has no rule for {u.op.name}")

    def prefetch(self, u: UOp) -> None:
        """A load's prefetch hint (UOp.load) as gcc's __builtin_prefetch of the element u.arg places on. The
        address is computed as an integer: that element may lie past the buffer's end (the last steps of a
        loop), where a pointer may not point in C, but a prefetch of any address is harmless."""
        if u.arg is not None:
            ptr, idx = self.expr[u.src[0]], self.expr[u.src[1]]
            address = f"(__UINTPTR_TYPE__)({ptr} + {idx}) + {u.arg} * sizeof *{ptr}"
            self.line(f"__builtin_prefetch((const void*)({address}));")

    def vector_statement(self, u: UOp) -> bool:
        """Write `u` if it is part of a vector axis (vector_values); whether it was."""
        lanes = self.vectors.get(u)
        if u.op is Ops.RANGE and u.arg.kind is AxisType.VECTOR:
            self.line(f"// axis {u.arg.axis}: the lanes of {vector_type(u.src[0].arg)} vectors, at lane 0's index")
            self.expr[u] = "0"
        elif u.op is Ops.ENDRANGE and u.src[0].arg.kind is AxisType.VECTOR:
            pass
        elif lanes is None:
            return False
        elif u.op is Ops.LOAD:  # a gate is the same for all lanes (check_vector): the whole vector or zeros
            self.helpers[lanes] = vector_typedefs(lanes)
            self.prefetch(u)
            read = f"*(const {lanes}_u*)({self.expr[u.src[0]]} + {self.expr[u.src[1]]})"
            self.value(u, read if len(u.src) == 2 else f"{self.expr[u.src[2]]} ? {read} : ({lanes}_u){{}}", "val")
        elif u.op is Ops.STORE:
            target, value = f"*({lanes}_u*)({self.expr[u.src[0]]} + {self.expr[u.src[1]]})", self.expr[u.src[2]]
            if u.src[2] not in self.vectors:  # a constant, as a padded panel's zeros: spread as `x - 0`, exactly x
                self.helpers[lanes] = vector_typedefs(lanes)
                value = f"({value} - ({lanes}){{}})"
            self.line(f"{self.gated(u)}{target} = {value};")
        elif u.op is Ops.DEFINE_ACC:  # a scalar added to a vector is added to every lane: each starts at it
            self.helpers[lanes] = vector_typedefs(lanes)
            self.value(u, f"({lanes}){{}} + {self.expr[u.src[0]]}", "acc")
        elif u.op in _MASK_C_OPS or u.op is Ops.WHERE:
            self.value(u, self.mask_alu(u, lane_count(lanes)), "alu")
        else:
            return False
        return True

    def mask_alu(self, u: UOp, lanes: int) -> str:
        """A comparison of vectors, logic on masks, or a selection by a mask. A mask is a vector of ints, -1 in
        a lane where it holds and 0 elsewhere, as gcc's vector comparisons make it; C's `||` and `?:` take no
        vectors, so logic is bitwise and a selection picks bits (select_f32x16). A lane-independent operand
        is spread over the lanes first: a float as `x - 0` (exactly x), a bool as 0 - (int)x (-1 where it holds;
        gcc takes no _Bool beside a vector)."""
        floats, masks = vector_type(lanes), mask_type(lanes)
        self.helpers[floats] = vector_typedefs(floats)
        self.helpers[masks] = mask_typedef(masks)
        operands = []
        for s in u.src:
            x = self.expr[s]
            spread = f"({masks}){{}} - (int)({x})" if s.dtype is dtypes.bool else f"({x} - ({floats}){{}})"
            operands.append(x if s in self.vectors else f"({spread})")
        if u.op is Ops.WHERE:
            self.helpers[f"select_{floats}"] = vector_select(floats, masks)
            return f"select_{floats}({', '.join(operands)})"
        return _MASK_C_OPS[u.op].format(*operands)

    def accumulate(self, u: UOp) -> str:
        """The new value of an accumulator: `acc + a * b` as one fused multiply-add where the kernel fuses;
        an update with no op assigns its value (a recurrence, as online softmax's running max)."""
        product, dt = u.src[1], u.scalar_dtype
        if u.arg is None:
            return self.expr[product]
        if self.fuse and product.op is Ops.MUL and dt in FMA_CALLS and self.inlined(product):
            a, b = (self.expr[s] for s in product.src)
            lanes = self.vectors.get(u)
            if lanes is not None:  # a lane-independent operand is a scalar: spread it over the lanes as
                # `x - 0`, which is x exactly; `0 + x` is not (-0.0 becomes +0.0), so gcc would add before
                # broadcasting, on the FMAs' ports, once per row of the tile and step of k (notes 124)
                self.helpers[f"fma_{lanes}"] = vector_fma(lanes)
                operands = zip(product.src, (a, b), strict=True)
                a, b = (x if s in self.vectors else f"({x} - ({lanes}){{}})" for s, x in operands)
                return f"fma_{lanes}({a}, {b}, {self.expr[u.src[0]]})"
            return f"{FMA_CALLS[dt]}({a}, {b}, {self.expr[u.src[0]]})"
        return self.alu(UOp(u.arg, u.dtype, (u.src[0], u.src[1])))

    def range(self, r: UOp) -> None:
        if r.arg.kind is AxisType.THREAD and self.streamed:
            self.stream_range(r)
            return
        prefix = {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(r.arg.kind, "idx")
        name, end, index = f"{prefix}{r.arg.axis}", self.expr[r.src[0]], self.type_of(r)
        if r.arg.kind is AxisType.THREAD:
            self.line("#pragma omp parallel for")
        sums = self.lane_sums(r)
        if sums:
            self.laned[r] = [(acc, self.expr[acc]) for acc in sums]
            for acc in sums:
                self.line(f"{c_type(acc.scalar_dtype)} {self.expr[acc]}_lanes[{SUM_LANES}] = {{0}};")
                self.expr[acc] = f"{self.expr[acc]}_lanes[{name}_lane]"
            self.line(f"for ({index} {name}_base = 0; {name}_base < {end}; {name}_base += {SUM_LANES}) {{")
            self.line(f"  for ({index} {name}_lane = 0; {name}_lane < {SUM_LANES}; {name}_lane++) {{")
            self.depth += 2
            self.line(f"{index} {name} = {name}_base + {name}_lane;")
        else:
            self.line(f"for ({index} {name} = 0; {name} < {end}; {name}++) {{")
            self.depth += 1
        self.expr[r] = name

    def end_range(self, r: UOp) -> None:
        """Close a loop; after a loop split into lanes, add each sum's lanes into its accumulator."""
        if r.arg.kind is AxisType.THREAD and self.streamed:
            self.end_stream_range(r)
            return
        sums = self.laned.pop(r, [])
        for _ in range(2 if sums else 1):
            self.depth -= 1
            self.line("}")
        for acc, name in sums:
            self.expr[acc] = name
            dt = acc.scalar_dtype
            helper = f"lanes_sum_{dt.short}"
            if helper not in self.helpers:
                total = self.lanes_total("l", dt)  # first: it may need helpers of its own (bf16_round)
                self.helpers[helper] = f"static inline {c_type(dt)} {helper}(const {c_type(dt)} l[{SUM_LANES}]) "
                self.helpers[helper] += f"{{ return {total}; }}"
            self.line(f"{name} = {self.add(name, f'{helper}({name}_lanes)', dt)};")

    # Streaming stores (LinearProgram.streamed) write whole vectors around the cache, at addresses aligned to
    # the vector, and gcc emits them only where the C names the instruction. So the threaded loop runs in
    # blocks of STREAM_BLOCK iterations: a block computes its values as an ordinary loop, which gcc vectorizes
    # as before, into a buffer on the thread's stack (in L1), and stream_out writes the buffer out. The values
    # are those of the ordinary loop, bit for bit: only the way they reach memory changes. The blocks start
    # where the first streamed buffer is aligned to 64 bytes (a first short block runs up to there), and are
    # small, so that a thread's loads and its streaming stores overlap (measured: blocks of 4096 floats, or
    # blocks not aligned, ran at 80% of a loop that streams its stores as it computes them). Streaming stores
    # are weakly ordered, so each thread fences them (stream_fence) before OpenMP's barrier lets another
    # thread, or the next kernel, read the output.
    def stream_range(self, r: UOp) -> None:
        """Open a threaded loop whose streamed outputs are written a block at a time."""
        name, end, index = f"tidx{r.arg.axis}", self.expr[r.src[0]], self.type_of(r)
        first = f"data{min(self.streamed)}"
        self.helpers["stream_out"] = STREAM_HELPERS
        self.line("#pragma omp parallel")
        self.line("{")
        self.depth += 1
        self.line(f"long long {name}_head = (-(__UINTPTR_TYPE__){first} & 63) / sizeof {first}[0];")
        self.line(f"long long {name}_blocks = ({end} - {name}_head + {STREAM_BLOCK - 1}) / {STREAM_BLOCK};")
        self.line("#pragma omp for nowait")
        self.line(f"for (long long {name}_block = 0; {name}_block <= {name}_blocks; {name}_block++) {{")
        self.depth += 1
        for slot, dt in self.streamed.items():
            self.line(f"{c_storage_type(dt)} data{slot}_block[{STREAM_BLOCK}] __attribute__((aligned(64)));")
        start = f"{name}_head + ({name}_block - 1) * {STREAM_BLOCK}"
        stop = f"{name}_head + {name}_block * {STREAM_BLOCK}"
        self.line(f"{index} {name}_start = {name}_block ? {start} : 0;")  # the index type: gcc vectorizes the loop
        self.line(f"{index} {name}_end = {stop} < {end} ? {stop} : {end};")
        self.line(f"for ({index} {name} = {name}_start; {name} < {name}_end; {name}++) {{")
        self.depth += 1
        self.expr[r] = name

    def end_stream_range(self, r: UOp) -> None:
        """Close a block, stream its buffers out, and fence the thread's streaming stores after its last block."""
        name = self.expr[r]
        self.depth -= 1
        self.line("}")
        for slot in self.streamed:
            size = f"({name}_end - {name}_start) * sizeof data{slot}_block[0]"
            self.line(f"stream_out(data{slot} + {name}_start, data{slot}_block, {size});")
        self.depth -= 1
        self.line("}")
        self.line("stream_fence();")
        self.depth -= 1
        self.line("}")

    def store_target(self, u: UOp) -> str:
        """Where a scalar STORE writes: its buffer, or for a streamed buffer, the block buffer it goes out from."""
        buffer, index = self.expr[u.src[0]], self.expr[u.src[1]]
        if u.src[0].arg.slot not in self.streamed:
            return f"{buffer}[{index}]"
        if u.src[1].op is not Ops.RANGE or u.src[1].arg.kind is not AxisType.THREAD:
            raise RenderError(f"a streamed store to {buffer} must be at the threaded loop's index, not at {index}")
        return f"{buffer}_block[{index} - {index}_start]"

    def lanes_total(self, lanes: str, dt: DType) -> str:
        """The lanes added pairwise, in a fixed order: ((l[0]+l[1])+(l[2]+l[3]))+((l[4]+l[5])+(l[6]+l[7]))."""
        terms = [f"{lanes}[{i}]" for i in range(SUM_LANES)]
        while len(terms) > 1:
            terms = [self.add(a, b, dt) for a, b in zip(terms[::2], terms[1::2], strict=True)]
        return terms[0]

    def add(self, a: str, b: str, dt: DType) -> str:
        """`a + b` in `dt`, rounded or wrapped to it as an ADD node would be."""
        if dt is dtypes.bfloat16:
            return self.bf16_round(f"({a}+{b})")
        return f"(({c_type(dt)})({a}+{b}))" if dt.is_int and dt.itemsize < 4 else f"({a}+{b})"

    # The C is compiled with IEEE float semantics (compiler.py), and nothing in the flags lets gcc reorder
    # float arithmetic, so the C text alone fixes every result: a library built at -O0 computes exactly what
    # one built at -O3 does (the tiered build relies on it, compiler.py). Two reorderings that speed needs
    # are written into the source instead, each only where it changes nothing but the rounding of a sum,
    # whose order uopc never promised:
    #
    # - A reduce loop whose accumulators are all sums is split into SUM_LANES lanes: the loop runs in
    #   blocks of SUM_LANES iterations, iteration i of a block adds into lane i of each sum, and the lanes
    #   are added pairwise at the end, in a fixed order, as numpy's pairwise sum splits a sum into eight.
    #   The lanes are independent, so gcc makes each block one vector operation, without being allowed to
    #   reorder anything itself. Every other expression in the loop keeps its IEEE meaning (x * 0.0 stays
    #   nan for an infinite x). A loop that holds a max, a min, a product or another loop is not split, and
    #   keeps the order the loop says. Nor is a loop whose loads stride through memory: vector lanes would
    #   gather scattered elements, eight times slower than what gcc does alone (it vectorizes the loop
    #   around it, or the register tile). Nor a short loop: it would be mostly the lanes' final sums. Nor a
    #   loop whose trip count is not a constant multiple of SUM_LANES, which would need a tail loop.
    # - A kernel whose float products are all added into accumulators (acc + a * b, as in a matmul) fuses
    #   each product into its sum: fmaf(a, b, acc), one rounding instead of two, as the FMA instructions of
    #   numpy's matmul (BLAS) do (fused_products, below). inf and nan come out as unfused; only a product
    #   that overflows on its own while acc cancels it comes out finite, the exact answer.
    def lane_sums(self, r: UOp) -> list[UOp]:
        """The accumulators of the sums a reduce loop splits into lanes; none when it must keep its order."""
        inside = self.inside.get(r, [])
        updates = [u for u in inside if u.op is Ops.ACCUMULATE]
        if not self.vectorize_sums or r.arg.kind is not AxisType.REDUCE or any(u.op is Ops.RANGE for u in inside):
            return []
        if not updates or any(u.arg is not Ops.ADD for u in updates) or r.arg.axis in self.strided:
            return []
        if any(u in self.vectors for u in updates):
            return []
        trips = r.src[0].arg if r.src[0].op is Ops.CONST else 0
        if trips < SIMD_MIN_TRIPS or trips % SUM_LANES:
            return []
        return [u.src[0] for u in updates]


STREAM_BLOCK = 256  # iterations a thread computes into its stack buffer before it streams them out

# stream_out copies `bytes` bytes with the widest streaming store the machine has (AVX-512's 64 bytes, else
# SSE's 16), from the first address aligned to it; the bytes before it and after the last whole vector are
# copied as bytes. gcc's builtins are named, as for fma (clang spells them differently: it gets the copy).
STREAM_HELPERS = """static inline void stream_out(void* restrict dst, const void* restrict src, long bytes) {
  char* d = dst;
  const char* s = src;
  long i = 0;
#if defined(__AVX512F__) && !defined(__clang__)
  typedef float v __attribute__((vector_size(64), aligned(1), may_alias));
  for (; i < bytes && ((__UINTPTR_TYPE__)(d + i) & 63); i++) d[i] = s[i];
  for (; i + 64 <= bytes; i += 64) __builtin_ia32_movntps512((float*)(d + i), *(const v*)(s + i));
#elif defined(__SSE__) && !defined(__clang__)
  typedef float v __attribute__((vector_size(16), aligned(1), may_alias));
  for (; i < bytes && ((__UINTPTR_TYPE__)(d + i) & 15); i++) d[i] = s[i];
  for (; i + 16 <= bytes; i += 16) __builtin_ia32_movntps((float*)(d + i), *(const v*)(s + i));
#endif
  for (; i < bytes; i++) d[i] = s[i];
}
static inline void stream_fence(void) {
#if defined(__SSE__) && !defined(__clang__)
  __builtin_ia32_sfence();
#endif
}"""


def vector_type(lanes: int) -> str:
    return f"f32x{lanes}"


def mask_type(lanes: int) -> str:
    return f"i32x{lanes}"


def lane_count(name: str) -> int:
    """The lanes of a vector type named by vector_type or mask_type: 16 for f32x16 and i32x16."""
    return int(name.removeprefix("f32x").removeprefix("i32x"))


def mask_typedef(name: str) -> str:
    """The vector type gcc's comparisons of f32x<n> vectors give: n ints, -1 where the comparison holds."""
    return f"typedef int {name} __attribute__((vector_size({4 * lane_count(name)})));"


def vector_select(floats: str, masks: str) -> str:
    """select_<floats>(m, a, b): a's bits in the lanes where mask m holds, b's elsewhere (NaNs kept as they are)."""
    return (
        f"static inline {floats} select_{floats}({masks} m, {floats} a, {floats} b) {{ "
        f"return ({floats})((m & ({masks})a) | (~m & ({masks})b)); }}"
    )


# comparisons and logic on vector lanes (masks, mask_alu): bitwise, since C's logical operators take no vectors
_MASK_C_OPS = {
    Ops.CMPLT: "({0}<{1})",
    Ops.CMPEQ: "({0}=={1})",
    Ops.CMPNE: "({0}!={1})",
    Ops.AND: "({0}&{1})",
    Ops.OR: "({0}|{1})",
}


def vector_typedefs(name: str) -> str:
    """gcc's vector types for `name` (f32x16): one aligned, for registers, and one that may sit anywhere in
    a buffer and alias its floats, for loads and stores (an unaligned access costs nothing measurable)."""
    size = 4 * lane_count(name)
    return (
        f"typedef float {name} __attribute__((vector_size({size})));\n"
        f"typedef float {name}_u __attribute__((vector_size({size}), aligned(4), may_alias));"
    )


# One fused multiply-add per lane, as the FMA instruction of the machine's vectors when it has one. C has no
# fused operator for vectors, and gcc neither contracts `acc + a * b` under the IEEE flags nor turns a lane
# loop of fmaf into one instruction, so the instruction is named; its result is the lane loop's, bit for bit,
# at any -O level (the tiered build relies on that).
_VECTOR_FMA = {
    16: ("__AVX512F__", "__builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4)"),
    8: ("__FMA__", "__builtin_ia32_vfmaddps256(a, b, c)"),
    4: ("__FMA__", "__builtin_ia32_vfmaddps(a, b, c)"),
}


def vector_fma(name: str) -> str:
    """The definition of fma_<name> (fma_f32x16): a * b + c in each lane, rounded once."""
    lanes = lane_count(name)
    loop = f"{name} r; for (int i = 0; i < {lanes}; i++) r[i] = __builtin_fmaf(a[i], b[i], c[i]); return r;"
    head = f"static inline {name} fma_{name}({name} a, {name} b, {name} c) {{"
    if lanes not in _VECTOR_FMA:
        return f"{head} {loop} }}"
    guard, call = _VECTOR_FMA[lanes]
    return f"{head}\n#if defined({guard})\n  return {call};\n#else\n  {loop}\n#endif\n}}"


# The int32 ops whose result, where it cannot wrap, is the same computed in 64 bits from the same operands.
_EXACT_WIDE = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.MIN, Ops.WHERE)


def pointer_width_indices(uops: Sequence[UOp]) -> set[UOp]:
    """The int32 values written as 64-bit C integers: the loop indices, and arithmetic on them that bounds
    prove never wraps (never_wraps), so that its value is the same at either width. Under -fwrapv an int
    index may wrap, so gcc must sign-extend it afresh for every address and cannot step a pointer through
    the loop, nor describe the accesses of a loop OpenMP outlined (notes 133, 155); at pointer width, the
    wrap it must allow is the address's own. An int op that is not widened gets its wide operands cast back
    (_CWriter.alu) and wraps at 32 bits, as the IR says."""
    wide: set[UOp] = set()
    for u in uops:
        if u.dtype is not dtypes.int32:
            continue
        if (u.op is Ops.RANGE and u.arg.kind is not AxisType.VECTOR) or (
            u.op in _EXACT_WIDE and any(s in wide for s in u.src) and never_wraps(u)
        ):
            wide.add(u)
    return wide


def vector_values(uops: Sequence[UOp]) -> dict[UOp, str]:
    """The values that are vectors in a program with a vector axis (see opt.vectorize), each with its C type:
    the loads and accumulators along the lanes and what is computed from them. A value that does not depend on
    the lanes stays a scalar (gcc adds or multiplies it into every lane); the index arithmetic that depends on
    them is computed for lane 0 (the lane index reads as 0) and addresses a whole vector."""
    out: dict[UOp, str] = {}
    lane_of: dict[UOp, int] = {}  # nodes that depend on the lane index -> lanes
    for u in uops:
        if u.op is Ops.RANGE and u.arg.kind is AxisType.VECTOR:
            lane_of[u] = u.src[0].arg
            continue
        lanes = next((lane_of[s] for s in u.src if s in lane_of), None)
        if lanes is None or u.op is Ops.ENDRANGE:
            continue
        lane_of[u] = lanes
        if u.op in (Ops.LOAD, Ops.DEFINE_ACC, Ops.STORE) or any(s in out for s in u.src):
            out[u] = mask_type(lanes) if u.dtype is dtypes.bool else vector_type(lanes)
    return out


def render_kernel(program: LinearProgram) -> tuple[str, dict[str, str]]:
    """A program's C function, and the helpers it calls (by name, so a batch defines each once)."""
    w = _CWriter(program, vectorize_sums=not no_loop_vectorize(program))
    for u in program.uops:
        w.statement(u)
    return "\n".join([f"{_attributes(program)}{_signature(program)} {{", *w.lines, "}"]), w.helpers


def _attributes(program: LinearProgram) -> str:
    """The per-kernel options gcc gets on top of the flags, as a function attribute; and UOPC_HOT on a
    kernel of many flops, which the quick build of a tiered build defines (compiler.HOT_ATTRIBUTE)."""
    options = []
    if no_loop_vectorize(program):
        options.append("no-tree-loop-vectorize")
    if program.streamed:  # a block that copies its input is a vector loop, not a call of memcpy per block
        options.append("no-tree-loop-distribute-patterns")
    quoted = ", ".join(f'"{o}"' for o in options)
    hot = "UOPC_HOT " if program.flops >= HOT_FLOPS else ""
    return hot + (f"__attribute__((optimize({quoted}))) " if options else "")


# Floating-point operations per run from which a kernel is hot: in the GPT step, the 22 kernels above it
# take 260 of the 400 ms a step runs at -O0, and 60 at -O1, while gcc builds them at -O1 in 0.2 CPU seconds more.
HOT_FLOPS = 4_000_000


def fused_products(program: LinearProgram) -> bool:
    """Whether the kernel fuses multiplies into its sums (fmaf): only where every float product in it is
    added into an accumulator and used for nothing else, so the only fusions are acc + a * b."""
    users: dict[UOp, list[UOp]] = {}
    for u in program.uops:
        for s in u.src:
            users.setdefault(s, []).append(u)
    products = [u for u in program.uops if u.op is Ops.MUL and u.scalar_dtype.is_float]
    into_sums = all(v.op is Ops.ACCUMULATE and v.arg is Ops.ADD and v.src[1] is p for p in products for v in users[p])
    return bool(products) and into_sums


def no_loop_vectorize(program: LinearProgram) -> bool:
    """Whether gcc must leave the kernel's loops unvectorized. Where gcc may split a sum into vector lanes
    (an integer sum always, a float sum that lane_sums splits), it vectorizes a reduce loop even when
    its loads stride through memory, building each vector from scattered elements: ten times slower than
    vectorizing the register tile (notes 31). Kernels with a register tile (several accumulators,
    straight-line code to vectorize) ask gcc to vectorize that code only; without a tile, the reduce loop
    is all there is to vectorize."""
    tile = sum(1 for u in program.uops if u.op is Ops.DEFINE_ACC)
    return tile >= 4 and bool(program.strided_axes)


C_PRELUDE = "#include <math.h>\n#include <stdbool.h>\n#ifndef UOPC_HOT\n#define UOPC_HOT\n#endif\n"  # see _attributes


def render_c(program: LinearProgram) -> str:
    """A complete C file holding one program."""
    function, helpers = render_kernel(program)
    return "\n".join([C_PRELUDE, *helpers.values(), function]) + "\n"


C_KEYWORDS = frozenset(
    [
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "bool",
        "true",
        "false",
    ]
)


def batch_source(programs: Sequence[LinearProgram], steps: Sequence[Step]) -> str:
    """One C file: every program, each with the helpers it calls, and `uopc_plan`, which calls them in plan
    order; the parts of batch_parts, joined."""
    return join_parts(batch_parts(programs, steps))


def batch_parts(programs: Iterable[LinearProgram], steps: Sequence[Step]) -> Iterator[str]:
    """A plan's C in parts that compile apart, each yielded as soon as the programs it needs have arrived
    (a compiler may start on the first while later programs are still being linearized): the header every
    translation unit begins with, each program's function with the helpers it calls (guarded, so that a
    unit of several parts defines each once), and last `uopc_plan`, which calls them in plan order.

    A program equal to an earlier one but for its name (a repeated layer's kernel) is not written again:
    uopc_plan calls the earlier function, and the name is a one-line function that calls it, for whoever
    calls that kernel alone. (An alias would have to sit in the earlier function's part, which a compiler
    may have built already.)"""
    yield C_PRELUDE
    arrived: list[LinearProgram] = []
    first: dict[tuple[object, ...], str] = {}  # a program but for its name -> the name it was written under
    written_as: dict[str, str] = {}  # each program's name -> the function that computes it
    for k in programs:
        _check_name(k.name, written_as)
        arrived.append(k)
        same = (k.uops, k.params, k.written, k.strided_axes, k.streamed)
        if same in first:
            written_as[k.name] = first[same]
            continue
        first[same] = written_as[k.name] = k.name
        function, helpers = render_kernel(k)
        yield "\n\n".join([*(_guarded(name, text) for name, text in helpers.items()), function])
    yield _plan_part(arrived, written_as, steps)


def _check_name(name: str, taken: dict[str, str]) -> None:
    if name in taken:
        raise RenderError(f"kernel names in one batch must be unique, got {name!r} twice")
    if not name.isidentifier() or name in C_KEYWORDS or name == "uopc_plan":
        raise RenderError(f"kernel names must be C identifiers that are not keywords or uopc_plan, got {name!r}")


def _guarded(name: str, text: str) -> str:
    """A helper's definition, made once in a unit that holds several parts which call it."""
    return f"#ifndef UOPC_{name}\n#define UOPC_{name}\n{text}\n#endif"


def _plan_part(programs: Sequence[LinearProgram], written_as: dict[str, str], steps: Sequence[Step]) -> str:
    """`uopc_plan`, the declarations of the functions it calls, and the repeated kernels' functions."""
    declared = [f"{_signature(k)};" for k in programs if written_as[k.name] == k.name]
    calls_first = [
        f"{_signature(k)} {{ {written_as[k.name]}({', '.join(p.name for p in k.params)}); }}"
        for k in programs
        if written_as[k.name] != k.name
    ]
    calls = [_call(programs, written_as, s) for s in steps]
    return "\n".join([*declared, *calls_first, "void uopc_plan(void* const* bufs) {", *calls, "}"])


def _signature(k: LinearProgram) -> str:
    return f"void {k.name}({', '.join(param_decl(p, p.slot in k.written) for p in k.params)})"


def _call(programs: Sequence[LinearProgram], written_as: dict[str, str], step: Step) -> str:
    """The line of uopc_plan that runs one step: the kernel's function, on the plan buffers of its parameters."""
    k = programs[step.kernel]
    if len(step.buffers) != len(k.params):
        raise RenderError(f"step calls {k.name} with {len(step.buffers)} buffers; it takes {len(k.params)}")
    return f"  {written_as[k.name]}({', '.join(f'bufs[{b}]' for b in step.buffers)});"


class CRenderer:
    """The C backend's renderer: a plan's programs as one C file, or as its parts while they arrive."""

    def render(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        return Source(batch_source(programs, steps))

    def render_parts(self, programs: Iterable[LinearProgram], steps: Sequence[Step]) -> Iterator[Source]:
        return (Source(part) for part in batch_parts(programs, steps))
