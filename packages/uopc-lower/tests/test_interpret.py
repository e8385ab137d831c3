"""An oracle that needs no C compiler: a small interpreter for linearized programs.

`interpret` walks the flat program with a program counter, runs RANGE/ENDRANGE as loops, reads and writes
Python lists, and computes every ALU op with `uopc.ir.exec_alu` (the reference semantics). It is strict
about scopes: when a loop iteration ends, every value computed inside the loop is forgotten, so a node that
linearize placed outside a loop it depends on (or after a loop it needed to be inside) fails loudly instead
of reusing a stale value.

The tests compare rangeify + opts + linear_order + interpret with two independent oracles: `uopc.ir.run`, the
rewrite interpreter, for closed programs (STACK constants, no buffers), and plain Python for small programs
over buffers. The interpreter is also a backend of its own (renderer, compiler, runtime), which runs whole
plans through compile_plan.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.ir import (
    AxisType,
    ConstValue,
    DType,
    Ops,
    UOp,
    dtypes,
    exec_alu,
    range_,
    round_to,
    run,
    sink,
    stack,
    to_python,
)
from uopc.lower import (
    Backend,
    Binary,
    Kernel,
    LinearProgram,
    LowerError,
    Opts,
    Plan,
    Source,
    Step,
    actions,
    apply_opts,
    beam_search,
    choose_opts,
    compile_plan,
    kernel_key,
    linear_order,
    linearize,
    make_plan,
    measure_on,
    normalize,
    rangeify,
)
from uopc.lower.pipeline import lowering_code

Buffers = dict[int, list[ConstValue]]


class InterpretError(AssertionError):
    """The program reads a value outside its scope, or memory outside a buffer."""


def _matching_ends(program: Sequence[UOp]) -> dict[int, int]:
    """For each RANGE position, the position of its ENDRANGE; checks the loops nest like brackets."""
    close: dict[int, int] = {}
    open_at: list[int] = []
    for pc, u in enumerate(program):
        if u.op is Ops.RANGE:
            open_at.append(pc)
        elif u.op is Ops.ENDRANGE:
            if not open_at or program[open_at[-1]] is not u.src[0]:
                raise InterpretError(f"ENDRANGE at {pc} does not close the innermost open loop")
            close[open_at.pop()] = pc
    if open_at:
        raise InterpretError(f"loops opened at {open_at} are never closed")
    return close


class Machine:
    """The state of one run: values by node, buffers by slot."""

    def __init__(self, program: Sequence[UOp], buffers: Buffers) -> None:
        self.program, self.buffers = program, buffers
        self.values: dict[UOp, ConstValue] = {}

    def get(self, u: UOp) -> ConstValue:
        if u not in self.values:
            raise InterpretError(f"{u.op.name} is used where it was not computed (out of scope or later)")
        return self.values[u]

    def memory(self, ptr: UOp, idx: UOp) -> tuple[list[ConstValue], int]:
        buf, i = self.buffers[ptr.arg.slot], self.get(idx)
        assert isinstance(i, int)
        if not 0 <= i < ptr.arg.size or len(buf) != ptr.arg.size:
            raise InterpretError(f"access to element {i} of buffer {ptr.arg.slot} of size {ptr.arg.size}")
        return buf, i

    def step(self, u: UOp) -> None:
        """Execute one straight-line node (everything but RANGE and ENDRANGE)."""
        if u.op in (Ops.CONST, Ops.DEFINE_GLOBAL):
            self.values[u] = u.arg.slot if u.op is Ops.DEFINE_GLOBAL else u.arg
        elif u.op is Ops.LOAD:
            if len(u.src) == 3 and not self.get(u.src[2]):
                self.values[u] = round_to(u.scalar_dtype, 0)  # a gated-off load reads nothing
            else:
                buf, i = self.memory(u.src[0], u.src[1])
                self.values[u] = buf[i]
        elif u.op is Ops.STORE and len(u.src) == 4 and not self.get(u.src[3]):
            pass  # a gated-off store writes nothing
        elif u.op is Ops.STORE:
            buf, i = self.memory(u.src[0], u.src[1])
            buf[i] = self.get(u.src[2])
        elif u.op is Ops.DEFINE_ACC:
            self.values[u] = self.get(u.src[0])
        elif u.op is Ops.ACCUMULATE:
            self.values[u.src[0]] = self.alu(u.arg, u.scalar_dtype, [self.get(u.src[0]), self.get(u.src[1])])
            self.values[u] = self.values[u.src[0]]
        elif u.op is Ops.END:
            inner = u.src[0]
            if inner.op is Ops.ACCUMULATE:  # the final value of the accumulator, read after its loops
                self.values[u] = self.get(inner.src[0])
            elif inner.op is Ops.END:
                self.values[u] = self.get(inner)
        elif u.op in Ops.ALU or u.op is Ops.CAST:
            self.values[u] = self.alu(u.op, u.scalar_dtype, [self.get(s) for s in u.src])
        else:
            raise InterpretError(f"no rule for {u.op.name}")

    @staticmethod
    def alu(op: Ops, dtype: DType, operands: list[ConstValue]) -> ConstValue:
        value = exec_alu(op, dtype, operands)
        if value is None:
            raise InterpretError(f"{op.name}{operands} has no defined value")
        return value

    def run(self) -> None:
        close = _matching_ends(self.program)
        opened = {self.program[pc]: pc for pc in close}
        pc = 0
        while pc < len(self.program):
            u = self.program[pc]
            if u.op is Ops.RANGE:
                if self.get(u.src[0]) <= 0:
                    pc = close[pc] + 1
                    continue
                self.values[u] = 0
            elif u.op is Ops.ENDRANGE:
                r, start = u.src[0], opened[u.src[0]]
                for inner in self.program[start + 1 : pc]:  # an iteration's values die with it
                    self.values.pop(inner, None)
                nxt = self.get(r) + 1
                if nxt < self.get(r.src[0]):
                    self.values[r] = nxt
                    pc = start + 1
                    continue
                del self.values[r]
            else:
                self.step(u)
            pc += 1


def interpret(program: Sequence[UOp], buffers: Buffers) -> None:
    """Run a linearized program on `buffers` (slot -> list), in place."""
    Machine(program, buffers).run()


def lower_and_interpret(
    value: UOp, inputs: Sequence[Sequence[ConstValue]] = (), opts: Opts | None = None
) -> list[ConstValue]:
    """Lower `value` (its BUFFERs are slots 0..len(inputs)-1) into slot len(inputs), run it, return it flat."""
    slot = len(inputs)
    kernel = rangeify([(UOp.buffer(slot, value.size, value.scalar_dtype), value)])
    if opts is not None:
        kernel = apply_opts(kernel, opts)
    out: list[ConstValue] = [-12345] * value.size  # a sentinel: every element must be written
    interpret(linear_order(kernel), {**dict(enumerate(list(x) for x in inputs)), slot: out})
    return out


def flat(nested: object) -> list[ConstValue]:
    """A nested list from `to_python` (or a scalar), flattened in row-major order."""
    if not isinstance(nested, list):
        return [nested]  # type: ignore[list-item]
    return [x for item in nested for x in flat(item)]


def same(a: ConstValue, b: ConstValue, dtype: DType) -> bool:
    """Exact for integers and bools; floats equal up to rounding, nan equal to nan."""
    if dtype.is_float:
        fa, fb = float(a), float(b)
        return (math.isnan(fa) and math.isnan(fb)) or math.isclose(fa, fb, rel_tol=1e-5, abs_tol=1e-6)
    return a == b


# ---------------------------------------------------------------------------------------------------------
# The interpreter itself must be able to fail: hand-built programs that break its rules
# ---------------------------------------------------------------------------------------------------------


def test_interpreter_runs_a_hand_built_loop() -> None:
    # out[i] = 3 * in[i], written with UOp constructors: checks the interpreter against plain Python first
    i = range_(4, 0)
    src, dst = UOp.define_global(0, 4), UOp.define_global(1, 4)
    kernel = sink(dst.store(i, src.load(i) * 3.0).end(i))
    out: list[ConstValue] = [0.0] * 4
    interpret(linear_order(kernel), {0: [1.0, 2.0, 3.0, 4.0], 1: out})
    assert out == [3.0, 6.0, 9.0, 12.0]


def test_interpreter_rejects_out_of_scope_and_out_of_bounds() -> None:
    i = range_(4, 0)
    dst = UOp.define_global(0, 4)
    load = dst.load(i)
    # the load of the loop index used after its loop has closed: a misplaced node
    bad = [dst, i.src[0], i, UOp(Ops.ENDRANGE, dtypes.void, (i,)), load]
    with pytest.raises(InterpretError, match="not computed"):
        interpret(bad, {0: [0.0] * 4})
    # index 4 of a 4-element buffer
    four = UOp.const(4)
    with pytest.raises(InterpretError, match="element 4"):
        interpret([dst, four, dst.load(four)], {0: [0.0] * 4})


# ---------------------------------------------------------------------------------------------------------
# Closed programs: rangeify + linearize + interpret against uopc.ir.run
# ---------------------------------------------------------------------------------------------------------


def _factorizations(n: int, rng: random.Random) -> tuple[int, ...]:
    """A random shape with n elements: n's prime factors, grouped at random."""
    factors, p, m = [], 2, n
    while m > 1:
        while m % p == 0:
            factors.append(p)
            m //= p
        p += 1
    rng.shuffle(factors)
    dims: list[int] = []
    for f in factors:
        if dims and rng.random() < 0.4:
            dims[-1] *= f
        else:
            dims.append(f)
    return tuple(dims) or (1,)


class ClosedProgram:
    """A random closed shaped program: STACK leaves, elementwise math, movement ops and reductions.

    Built top-down: `make(shape)` returns a node of exactly `shape`, choosing at random how to get it
    (a leaf, an ALU op of two such nodes, or a movement/reduction of a node of another shape)."""

    def __init__(self, rng: random.Random, dtype: DType) -> None:
        self.rng, self.dtype = rng, dtype

    def leaf(self, shape: tuple[int, ...]) -> UOp:
        return stack_of([self.scalar() for _ in range(math.prod(shape))], shape, self.dtype)

    def scalar(self) -> ConstValue:
        if self.dtype.is_float:
            return float(round(self.rng.uniform(-4, 4), 2))
        return self.rng.randint(-9, 9)

    def make(self, shape: tuple[int, ...], depth: int) -> UOp:
        if depth == 0 or math.prod(shape) > 48:  # keep the rewrite interpreter's work small
            return self.leaf(shape)
        builders = [self.alu, self.alu, self.permute, self.reshape, self.expand, self.shrink, self.pad]
        return self.rng.choice([*builders, self.flip, self.reduce, self.reduce])(shape, depth - 1)

    def alu(self, shape: tuple[int, ...], depth: int) -> UOp:
        a, b = self.make(shape, depth), self.make(shape, depth)
        op = self.rng.choice([Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.MIN, Ops.CMPLT])
        if op is Ops.CMPLT:  # a comparison feeding a WHERE: keeps the dtype
            return (a < b).where(a, b - a)
        return a.alu(op, b)

    def permute(self, shape: tuple[int, ...], depth: int) -> UOp:
        order = list(range(len(shape)))
        self.rng.shuffle(order)
        inverse = [order.index(k) for k in range(len(shape))]
        return self.make(tuple(shape[k] for k in inverse), depth).permute(order)

    def reshape(self, shape: tuple[int, ...], depth: int) -> UOp:
        return self.make(_factorizations(math.prod(shape), self.rng), depth).reshape(shape)

    def expand(self, shape: tuple[int, ...], depth: int) -> UOp:
        small = tuple(1 if self.rng.random() < 0.5 else s for s in shape)
        return self.make(small, depth).expand(shape)

    def shrink(self, shape: tuple[int, ...], depth: int) -> UOp:
        before = [self.rng.randint(0, 2) for _ in shape]
        after = [self.rng.randint(0, 1) for _ in shape]
        big = tuple(s + b + a for s, b, a in zip(shape, before, after, strict=True))
        return self.make(big, depth).shrink([(b, b + s) for b, s in zip(before, shape, strict=True)])

    def pad(self, shape: tuple[int, ...], depth: int) -> UOp:
        widths = [(self.rng.randint(0, min(1, s - 1)), 0) if s > 1 else (0, 0) for s in shape]
        widths = [(b, self.rng.randint(0, s - 1 - b)) for (b, _), s in zip(widths, shape, strict=True)]
        small = tuple(s - b - a for s, (b, a) in zip(shape, widths, strict=True))
        return self.make(small, depth).pad(widths)

    def flip(self, shape: tuple[int, ...], depth: int) -> UOp:
        axes = [a for a in range(len(shape)) if self.rng.random() < 0.5]
        return self.make(shape, depth).flip(axes)

    def reduce(self, shape: tuple[int, ...], depth: int) -> UOp:
        axis, n = self.rng.randrange(len(shape) + 1), self.rng.randint(2, 4)
        wide = (*shape[:axis], n, *shape[axis:])
        op = self.rng.choice([Ops.ADD, Ops.MAX, Ops.MIN])
        return self.make(wide, depth).reduce(op, [axis]).reshape(shape)


def stack_of(values: Sequence[ConstValue], shape: tuple[int, ...], dtype: DType) -> UOp:
    """The STACK of `shape` holding `values` in row-major order."""
    level = [UOp.const(v, dtype) for v in values]
    for n in reversed(shape):
        level = [stack(*level[k : k + n]) for k in range(0, len(level), n)]
    return level[0]


def random_closed_program(seed: int) -> UOp:
    rng = random.Random(seed)
    dtype = dtypes.int32 if seed % 2 else dtypes.float32
    shape = _factorizations(rng.choice([2, 3, 4, 6, 8, 12]), rng)
    return ClosedProgram(rng, dtype).make(shape, depth=rng.randint(2, 4))


@pytest.mark.parametrize("seed", range(120))
def test_closed_program_matches_rewrite_interpreter(seed: int) -> None:
    program = random_closed_program(seed)
    want = flat(to_python(run(program)))
    got = lower_and_interpret(program)
    assert len(got) == len(want)
    bad = [(k, g, w) for k, (g, w) in enumerate(zip(got, want, strict=True)) if not same(g, w, program.scalar_dtype)]
    assert not bad, f"seed {seed}: (element, lowered, run) {bad[:5]}"


def test_closed_program_lowers_without_input_buffers() -> None:
    # a closed program needs no memory but its destination: STACKs become WHERE-select chains
    program = stack(1.0, -2.0, 3.0).reshape((3, 1)).expand((3, 2)).permute((1, 0)).reduce(Ops.MAX, [0])
    kernel = rangeify([(UOp.buffer(0, 3), program.reshape((3,)))])
    assert {u.arg.slot for u in kernel.toposort() if u.op is Ops.DEFINE_GLOBAL} == {0}
    assert not [u for u in kernel.toposort() if u.op is Ops.LOAD]
    assert lower_and_interpret(program.reshape((3,))) == [1.0, -2.0, 3.0]


# a padded STACK read only in its padding: the read index is a constant past the STACK's end
@pytest.mark.parametrize(
    "build",
    [
        lambda s: s.pad(((0, 2),)).shrink(((2, 4),)),
        lambda s: s.pad(((3, 0),)).shrink(((0, 2),)),
        lambda s: s.reshape((2, 1)).pad(((0, 0), (1, 1))).shrink(((0, 2), (2, 3))).reshape((2,)),
    ],
    ids=["after-end", "before-start", "inner-axis"],
)
def test_padding_of_a_stack_is_zero(build: Callable[[UOp], UOp]) -> None:
    program = build(stack(1.5, 2.5))
    assert lower_and_interpret(program) == flat(to_python(run(program)))


# ---------------------------------------------------------------------------------------------------------
# Movement chains on a STACK, with hypothesis choosing the chain (derandomized: see conftest.py)
# ---------------------------------------------------------------------------------------------------------


@st.composite
def movement_chain(draw: st.DrawFn) -> UOp:
    u = stack_of(list(range(1, 25)), (2, 3, 4), dtypes.int32)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["permute", "reshape", "expand", "shrink", "pad", "flip"]))
        shape = u.shape
        if kind == "permute":
            u = u.permute(draw(st.permutations(range(len(shape)))))
        elif kind == "reshape":
            u = u.reshape(_factorizations(math.prod(shape), random.Random(draw(st.integers(0, 99)))))
        elif kind == "expand" and math.prod(shape) <= 32:
            u = u.reshape((1, *shape)).expand((draw(st.integers(1, 3)), *shape))
        elif kind == "shrink":
            begins = [draw(st.integers(0, s - 1)) for s in shape]
            u = u.shrink([(b, draw(st.integers(b + 1, s))) for b, s in zip(begins, shape, strict=True)])
        elif kind == "pad" and math.prod(shape) <= 48:
            u = u.pad([(draw(st.integers(0, 2)), draw(st.integers(0, 1))) for _ in shape])
        elif kind == "flip":
            u = u.flip(sorted(draw(st.sets(st.integers(0, len(shape) - 1)))))
    return u


@settings(derandomize=True, database=None, deadline=None, max_examples=60)  # seeded: the same chains every run
@given(movement_chain())
def test_movement_chains_match_rewrite_interpreter(program: UOp) -> None:
    assert lower_and_interpret(program) == flat(to_python(run(program)))


# ---------------------------------------------------------------------------------------------------------
# Programs over buffers, against results computed by hand in Python
# ---------------------------------------------------------------------------------------------------------


def _matmul(a: list[int], b: list[int], m: int, k: int, n: int) -> list[int]:
    return [sum(a[i * k + x] * b[x * n + j] for x in range(k)) for i in range(m) for j in range(n)]


OPTS = [
    Opts(),
    Opts(upcast={0: 2}),
    Opts(upcast={0: 2, 1: 3}),
    Opts(upcast={1: 6}),
    Opts(unroll={2: 2}),
    Opts(unroll={2: 4}),
    Opts(upcast={0: 4, 1: 2}, unroll={2: 2}),
    Opts(thread=0),
    Opts(thread=1, upcast={0: 2}),
    Opts(thread=0, upcast={0: 2, 1: 2}, unroll={2: 4}),
]


@pytest.mark.parametrize("opts", OPTS, ids=repr)
def test_gemm_with_opts_matches_python(opts: Opts, gemm: Callable[[int, int, int], UOp]) -> None:
    rng = random.Random(7)
    m, k, n = 4, 4, 6
    a, b = [rng.randint(-5, 5) for _ in range(m * k)], [rng.randint(-5, 5) for _ in range(k * n)]
    assert lower_and_interpret(gemm(m, k, n), [a, b], opts) == _matmul(a, b, m, k, n)


@pytest.mark.parametrize("seed", range(20))
def test_opts_keep_closed_program_values(seed: int) -> None:
    # any opt that applies to a random closed program must leave its values unchanged
    program = random_closed_program(seed)
    kernel = rangeify([(UOp.buffer(0, program.size, program.scalar_dtype), program)])
    ranges = {u.arg.axis: (u.arg.kind.value, u.src[0].arg) for u in kernel.toposort() if u.op is Ops.RANGE}
    want = lower_and_interpret(program)
    rng = random.Random(seed)
    for axis, (kind, size) in sorted(ranges.items()):
        divisors = [d for d in range(2, size + 1) if size % d == 0]
        if not divisors:
            continue
        factor = rng.choice(divisors)
        opts = Opts(unroll={axis: factor}) if kind == "reduce" else Opts(upcast={axis: factor})
        got = lower_and_interpret(program, opts=opts)
        assert all(same(g, w, program.scalar_dtype) for g, w in zip(got, want, strict=True)), (seed, opts)
        if kind == "loop":
            assert lower_and_interpret(program, opts=Opts(thread=axis)) == want


def test_upcast_of_a_padded_reduction_matches_python() -> None:
    # the upcast copy that reads only padding reduces a constant, the other one a row of x (see
    # test_linearize.py): both accumulators must restart for every row
    value = UOp.buffer(0, 6, dtypes.int32).reshape((2, 1, 3)).pad(((0, 0), (1, 0), (0, 0))).sum([2]).reshape((2, 2))
    x = [0, 1, 2, 3, 4, 5]
    assert lower_and_interpret(value, [x]) == [0, 3, 0, 12]
    assert lower_and_interpret(value, [x], Opts(upcast={1: 2})) == [0, 3, 0, 12]
    assert lower_and_interpret(value, [x], Opts(upcast={0: 2, 1: 2})) == [0, 3, 0, 12]


def test_reductions_over_buffers_match_python() -> None:
    rng = random.Random(3)
    x = [rng.randint(-20, 20) for _ in range(2 * 3 * 4)]
    t = UOp.buffer(0, 24, dtypes.int32).reshape((2, 3, 4))
    for axes in itertools.chain.from_iterable(itertools.combinations(range(3), n) for n in range(4)):
        for op, combine in ((Ops.ADD, sum), (Ops.MAX, max), (Ops.MIN, min)):
            keep = [a for a in range(3) if a not in axes]
            groups: dict[tuple[int, ...], list[int]] = {}
            for idx in itertools.product(range(2), range(3), range(4)):
                groups.setdefault(tuple(idx[a] for a in keep), []).append(x[(idx[0] * 3 + idx[1]) * 4 + idx[2]])
            want = [combine(groups[key]) for key in sorted(groups)]
            got = lower_and_interpret(t.reduce(op, axes).reshape((max(1, len(want)),)), [x])
            assert got == want, (axes, op)


def test_pad_flip_shrink_over_buffers_match_python() -> None:
    x = list(range(1, 7))  # a 2 x 3 matrix
    t = UOp.buffer(0, 6, dtypes.int32).reshape((2, 3))
    # pad one row above and one column on each side, flip rows, then drop the last column
    got = lower_and_interpret(t.pad(((1, 0), (1, 1))).flip([0]).shrink(((0, 3), (0, 4))), [x])
    assert got == [0, 4, 5, 6, 0, 1, 2, 3, 0, 0, 0, 0]


# ---------------------------------------------------------------------------------------------------------
# The interpreter as a backend: compile_plan with three parts written here, none of them C
# ---------------------------------------------------------------------------------------------------------


class InterpreterRenderer:
    """Renders nothing to run: the source names the programs and the steps, for the compiler to key."""

    def render(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        lines = [f"{p.name}: {len(p.uops)} nodes" for p in programs]
        return Source("\n".join([*lines, *(f"call {programs[s.kernel].name}{s.buffers}" for s in steps)]))


class InterpreterCompiler:
    """Keeps each source once, in a folder, by its hash: a cache like the C compiler's."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.built = folder, 0

    def compile(self, source: Source) -> Binary:
        key = hashlib.sha256(source.text.encode()).hexdigest()
        path = self.folder / key
        if not path.exists():
            path.write_text(source.text)
            self.built += 1
        return Binary(key, path, path.read_bytes())


class Interpreted:
    def __init__(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> None:
        self.programs, self.steps = programs, steps

    def run(self, buffers: Sequence[Any]) -> None:
        for s in self.steps:
            self.run_kernel(s.kernel, [buffers[b] for b in s.buffers])

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        interpret(self.programs[index].uops, dict(enumerate(buffers)))


class InterpreterRuntime:
    """Buffers are Python lists; a loaded binary interprets the programs it was built from."""

    def allocate(self, dtype: DType, size: int) -> list[ConstValue]:
        return [round_to(dtype, 0)] * size

    def from_numpy(self, array: Any) -> list[ConstValue]:
        return list(array)

    def to_numpy(self, buffer: Any) -> Any:
        return buffer

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Interpreted:
        assert binary.path.read_bytes() == binary.data
        return Interpreted(programs, steps)


def test_a_backend_of_three_parts_runs_a_plan(tmp_path: Path) -> None:
    """compile_plan walks a four-kernel plan (softmax over rows: the max, the exponentials, the sum, the
    output) with a backend written here; the values match Python, and each stage is the one the arrow before
    it made."""
    x = UOp.buffer(0, 6).reshape((2, 3))
    e = (x - x.reduce(Ops.MAX, [1]).expand((2, 3))).exp()
    graph, _ = normalize([e / e.sum([1]).expand((2, 3))])
    plan = make_plan(graph, opt=True)
    assert len(plan.kernels) == 4
    compiler = InterpreterCompiler(tmp_path)
    backend = Backend("PY", InterpreterRenderer(), compiler, InterpreterRuntime())
    compiled = compile_plan(plan, backend)
    assert compiled.programs == tuple(linearize(k) for k in plan.kernels)
    assert compiled.source == backend.renderer.render(compiled.programs, plan.steps)
    assert compiled.binary.data == compiled.source.text.encode() and compiler.built == 1
    assert all(t >= 0 for t in vars(compiled.times).values())
    rows = [[0.5, -1.0, 2.0], [3.0, 3.0, -7.5]]
    buffers = [[v for row in rows for v in row]]
    buffers += [backend.runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :]]
    compiled.executable.run(buffers)
    want = [math.exp(v - max(row)) / sum(math.exp(w - max(row)) for w in row) for row in rows for v in row]
    got = buffers[plan.outputs[0]]
    assert all(math.isclose(g, w, rel_tol=1e-6) for g, w in zip(got, want, strict=True)), got
    compile_plan(plan, backend)
    assert compiler.built == 1  # the same source again: found in the compiler's cache


def test_the_driver_linearizes_each_kernel_with_its_opts(tmp_path: Path) -> None:
    """A matmul's plan chooses a register tile; the programs compile_plan makes are the kernels linearized
    with their opts (as `linearize` makes them), not the plain loops of the graph without them."""
    m, k, n = 8, 16, 8
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    graph, _ = normalize([(a * b).sum([2])])
    plan = make_plan(graph, opt=True)
    assert any(kernel.opts.upcast for kernel in plan.kernels)
    backend = Backend("PY", InterpreterRenderer(), InterpreterCompiler(tmp_path), InterpreterRuntime())
    compiled = compile_plan(plan, backend)
    assert compiled.programs == tuple(linearize(kernel) for kernel in plan.kernels)
    plain = tuple(linearize(Kernel(kernel.name, kernel.ast)) for kernel in plan.kernels)
    assert compiled.programs != plain


def test_a_backend_may_bring_its_own_linearize(tmp_path: Path) -> None:
    """A backend whose device runs kernels its own way (a GPU maps loops onto threads) supplies the arrow from
    a Kernel to its LinearProgram; compile_plan takes that arrow for every kernel, and the default otherwise."""
    x = UOp.buffer(0, 6).reshape((2, 3))
    graph, _ = normalize([x.sum([1])])
    plan = make_plan(graph, opt=True)
    seen: list[str] = []

    def unoptimized(kernel: Kernel) -> LinearProgram:
        seen.append(kernel.name)
        return linearize(Kernel(kernel.name, kernel.ast))

    parts = (InterpreterRenderer(), InterpreterCompiler(tmp_path), InterpreterRuntime())
    compiled = compile_plan(plan, Backend("PY", *parts, linearize=unoptimized))
    assert seen == [k.name for k in plan.kernels]
    assert compiled.programs == tuple(unoptimized(k) for k in plan.kernels)
    assert Backend("PY", *parts).linearize is None  # the driver applies opts and linearizes


# ---------------------------------------------------------------------------------------------------------
# Search (search.py): its candidates against the unoptimized program, and a search run on this backend
# ---------------------------------------------------------------------------------------------------------


def _int_gemm(m: int, k: int, n: int) -> UOp:
    a = UOp.buffer(0, m * k, dtypes.int32).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n, dtypes.int32).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


def _float_gemm(m: int, k: int, n: int) -> UOp:
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).reshape((1, k, n)).permute((0, 2, 1)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


SEARCHED = {
    "int matmul": (_int_gemm(4, 8, 8), [4 * 8, 8 * 8]),
    "float matmul": (_float_gemm(4, 8, 16), [4 * 8, 8 * 16]),
    "row max": (UOp.buffer(0, 32, dtypes.int32).reshape((4, 8)).reduce(Ops.MAX, [1]).reshape((4,)), [32]),
    "elementwise": ((UOp.buffer(0, 32).reshape((4, 8)) * 2.0).exp(), [32]),
}


@pytest.mark.parametrize("name", SEARCHED)
def test_every_candidate_of_the_search_computes_what_the_plain_loops_do(name: str) -> None:
    """The action space yields only opts that apply and keep the kernel's values: every candidate one step
    from no opts and from the heuristic's, and a seeded sample two steps away, against the plain program."""
    value, sizes = SEARCHED[name]
    rng = random.Random(11)
    inputs = [
        [rng.randint(-9, 9) if value.scalar_dtype.is_int else rng.uniform(-2, 2) for _ in range(n)] for n in sizes
    ]
    kernel = rangeify([(UOp.buffer(len(inputs), value.size, value.scalar_dtype), value)])
    want = lower_and_interpret(value, inputs)
    first = actions(kernel, Opts()) + actions(kernel, choose_opts(kernel))
    candidates = first + [c for o in rng.sample(first, 4) for c in actions(kernel, o)]
    assert any(c.vector for c in candidates) == (name == "float matmul")  # lanes only where they can run
    for opts in candidates:
        got = lower_and_interpret(value, inputs, opts)
        assert all(same(g, w, value.scalar_dtype) for g, w in zip(got, want, strict=True)), opts


class Counted(Interpreted):
    def __init__(self, programs: Sequence[LinearProgram], steps: Sequence[Step], runtime: CountingRuntime) -> None:
        super().__init__(programs, steps)
        self.runtime = runtime

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        self.runtime.runs += 1
        super().run_kernel(index, buffers)


class CountingRuntime(InterpreterRuntime):
    """The interpreter's runtime, counting the kernel runs of the executables it loads: a search times
    candidates by running them, so no runs means no timing."""

    def __init__(self) -> None:
        self.runs = 0

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Interpreted:
        return Counted(programs, steps, self)


class DictOptsStore:
    """An opts store in a dict, as the C backend's keeps them in its cache."""

    def __init__(self) -> None:
        self.kept: dict[str, Opts] = {}

    def keep(self, key: str, opts: Opts) -> None:
        self.kept[key] = opts

    def find(self, key: str) -> Opts | None:
        return self.kept.get(key)


def _gemm_plan() -> Plan:
    graph, _ = normalize([_int_gemm(4, 8, 8)])
    return make_plan(graph, opt=True)


def test_a_searched_choice_is_kept_and_used_again_without_timing(tmp_path: Path) -> None:
    store, first = DictOptsStore(), CountingRuntime()
    backend = Backend("PY", InterpreterRenderer(), InterpreterCompiler(tmp_path), first, opts_store=store)
    compiled = compile_plan(_gemm_plan(), backend, beam=2)
    assert first.runs > 0 and len(store.kept) == 1
    (chosen,) = store.kept.values()
    for beam in (2, 0):  # a later process, searching or not, finds the choice and times nothing
        again = CountingRuntime()
        backend = Backend("PY", InterpreterRenderer(), InterpreterCompiler(tmp_path), again, opts_store=store)
        plan = _gemm_plan()
        assert compile_plan(plan, backend, beam=beam).programs == compiled.programs
        assert again.runs == 0
        assert compiled.programs[0] == linearize(dataclasses.replace(plan.kernels[0], opts=chosen))


def test_without_a_beam_the_driver_keeps_the_plans_opts(tmp_path: Path) -> None:
    store, runtime = DictOptsStore(), CountingRuntime()
    plan = _gemm_plan()
    backend = Backend("PY", InterpreterRenderer(), InterpreterCompiler(tmp_path), runtime, opts_store=store)
    store.keep(kernel_key(plan.kernels[0].ast, lowering_code()), Opts(thread=1))
    assert compile_plan(plan, backend).programs == (linearize(plan.kernels[0]),)  # no beam: the plan's own
    assert compile_plan(plan, backend, beam=0).programs[0] == linearize(
        dataclasses.replace(plan.kernels[0], opts=Opts(thread=1))
    )
    assert runtime.runs == 0


class ThreadlessRenderer(InterpreterRenderer):
    """Refuses programs with a threaded loop, as a renderer refuses what it cannot write."""

    def render(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        if any(u.op is Ops.RANGE and u.arg.kind is AxisType.THREAD for p in programs for u in p.uops):
            raise LowerError("this renderer writes no threads")
        return super().render(programs, steps)


def test_a_candidate_that_does_not_build_is_dropped_and_the_others_are_timed(tmp_path: Path) -> None:
    kernel = _gemm_plan().kernels[0]
    runtime = CountingRuntime()
    backend = Backend("PY", ThreadlessRenderer(), InterpreterCompiler(tmp_path), runtime)
    candidates = [Opts(), Opts(thread=0), Opts(upcast={0: 2}), Opts(upcast={0: 3})]  # the last does not apply
    seconds = measure_on(backend, kernel)(candidates)
    assert seconds[1] is None and seconds[3] is None
    assert all(isinstance(s, float) and s > 0 for s in (seconds[0], seconds[2]))
    threaded = dataclasses.replace(kernel, opts=Opts(upcast={0: 2}, thread=0))  # a heuristic that cannot run
    assert beam_search(threaded, 2, measure_on(backend, kernel)).thread is None
