"""Property tests: claims checked on expressions and graphs nobody chose by hand.

Every test is derandomized (see `seeded`): a failure prints its example and reruns identically.

- simplify never changes the value of an integer index expression, and every value of every subexpression
  lies within [vmin, vmax], before and after simplification. The value comes from the rewrite interpreter
  (substitute each RANGE with a constant, then `run`), cross-checked by a pure-Python evaluator below.
- a memo shared by several simplifications changes none of their results.
- parse(to_uir(g)) is g for random graphs of every dtype, including awkward constants.
- hash consing: rebuilding a graph node by node gives back the very same object.
- movement ops evaluate like the same moves done on a Python dict of index -> value.
"""

import math
import struct
from collections.abc import Callable, Sequence
from itertools import product
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uopc.ir import (
    DType,
    Ops,
    UOp,
    call,
    dtypes,
    fmt,
    param,
    parse,
    range_,
    run,
    simplify,
    sink,
    stack,
    substitute,
    to_python,
    to_uir,
    toposort,
    vmax,
    vmin,
)


def seeded(examples: int) -> settings:
    """Derandomized: the same examples on every run, so a failure is rerun by rerunning the test."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,  # nothing written to the repository
        deadline=None,  # the first call of a test warms caches; slow is not wrong
        suppress_health_check=[HealthCheck.too_slow],
    )


# ---- random index expressions ---------------------------------------------------------------------------
#
# An expression is a recipe: loop sizes, then steps that each combine earlier nodes the way lowering combines
# loop indices. Operands are counted back from the newest node, and constants are offset, so that the values
# Hypothesis likes best (0, and what shrinking moves toward) build deep expressions with divisors other than 1.
# Recipes shrink well and can be built twice.

Step = tuple[str, int, int, int]  # (kind, first operand, second operand, constant)

KINDS = ("add", "sub", "mul", "idiv", "mod", "affine", "lt_where", "gate", "eq_where", "max", "divmod")


def build(sizes: Sequence[int], steps: Sequence[Step]) -> UOp:
    """The expression a recipe describes: its last step (or its last loop index, with no steps)."""
    nodes = [range_(n, axis) for axis, n in enumerate(sizes)]
    for kind, i, j, c in steps:
        a, b = nodes[-1 - i % len(nodes)], nodes[-1 - j % len(nodes)]
        nodes.append(_STEP[kind](a, b, c))
    return nodes[-1]


def _stride(c: int) -> int:
    return (c + 5) % 9 - 3  # -3 .. 5, 2 for c = 0


def _divisor(c: int) -> int:
    return (c + 2) % 9 + 1  # 1 .. 9, 3 for c = 0


def _divmod(x: UOp, d: int) -> UOp:
    return (x // d) * d + x % d


_STEP: dict[str, Callable[[UOp, UOp, int], UOp]] = {
    "add": lambda a, b, c: a + b,
    "sub": lambda a, b, c: a - b,
    "mul": lambda a, b, c: a * _stride(c),
    "idiv": lambda a, b, c: a // _divisor(c),
    "mod": lambda a, b, c: a % _divisor(c),
    # a flat index: one loop variable times a stride, plus another, plus an offset
    "affine": lambda a, b, c: a * (c % 4 + 2) + b + (c + 3) % 11 - 2,
    "lt_where": lambda a, b, c: (a < b).where(a, b),
    # a pad or shrink gates an index: stride * i + offset < size. The two branches always differ, so a
    # wrongly decided comparison always shows in the value
    "gate": lambda a, b, c: (a * (c % 3 + 2) + c % 5 < (c + 7) % 17).where(b + 1, b),
    "eq_where": lambda a, b, c: a.eq(b).where(a + 1, b),
    "max": lambda a, b, c: a.maximum(b),
    # a reshape reads an index back as x // c * c + x % c, often with an offset from a shrink or pad in x:
    # the pair must merge to x, constant part included
    "divmod": lambda a, b, c: _divmod(a + (c + 1) % 5, _divisor(c)),
}

steps_strategy = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 63), st.integers(0, 63), st.integers(0, 63)),
    min_size=1,
    max_size=9,  # with strides up to 5 and sizes up to 12, nine steps stay far below int32 overflow
)
sizes_strategy = st.lists(st.integers(1, 12), min_size=1, max_size=3)


# ---- an evaluator that shares no code with uopc's -------------------------------------------------------


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


_PY: dict[Ops, Callable[..., int | bool]] = {
    Ops.ADD: lambda a, b: _wrap32(a + b),
    Ops.SUB: lambda a, b: _wrap32(a - b),
    Ops.MUL: lambda a, b: _wrap32(a * b),
    Ops.NEG: lambda a: _wrap32(-a),
    Ops.IDIV: lambda a, b: a // b,  # Python's // and % are the floor operations the IR defines
    Ops.MOD: lambda a, b: a % b,
    Ops.MAX: max,
    Ops.MIN: min,
    Ops.CMPLT: lambda a, b: a < b,
    Ops.CMPEQ: lambda a, b: a == b,
    Ops.CMPNE: lambda a, b: a != b,
    Ops.AND: lambda a, b: a and b,
    Ops.OR: lambda a, b: a or b,
    Ops.WHERE: lambda c, a, b: a if c else b,
}


def py_values(root: UOp, env: dict[UOp, int]) -> dict[UOp, int | bool]:
    """The value of every node under `root`, with RANGEs taken from env; sources first, by an explicit stack."""
    values: dict[UOp, int | bool] = {}
    todo: list[tuple[UOp, bool]] = [(root, False)]
    while todo:
        u, sources_done = todo.pop()
        if u in values:
            continue
        if u.op is Ops.RANGE:
            values[u] = env[u]
        elif u.op is Ops.CONST:
            values[u] = u.arg
        elif sources_done:
            values[u] = _PY[u.op](*(values[s] for s in u.src))
        else:
            todo.append((u, True))
            todo.extend((s, False) for s in u.src)
    return values


def run_at(e: UOp, env: dict[UOp, int]) -> int | bool:
    """The interpreter's value of e, with every RANGE replaced by its value in env."""
    out = run(substitute(e, {r: UOp.const(v) for r, v in env.items()}))
    assert out.op is Ops.CONST
    value: int | bool = out.arg
    return value


def check_bounds(values: dict[UOp, int | bool]) -> None:
    for node, v in values.items():
        assert vmin(node) <= v <= vmax(node), f"{v} outside [{vmin(node)}, {vmax(node)}] for\n{to_uir(node)}"


@seeded(250)
@given(sizes_strategy, steps_strategy, st.data())
def test_simplify_preserves_value_and_bounds(sizes: list[int], steps: list[Step], data: st.DataObject) -> None:
    e = build(sizes, steps)
    s = simplify(e)
    ranges = [range_(n, axis) for axis, n in enumerate(sizes)]
    # every assignment of the loop variables when there are few (a wrong rule is often wrong at one point
    # only), a sample otherwise; the Python evaluator is cheap enough for that
    every = list(product(*(range(n) for n in sizes)))
    points = every if len(every) <= 256 else data.draw(st.lists(st.sampled_from(every), min_size=1, max_size=64))
    for point in points:
        env = dict(zip(ranges, point, strict=True))
        by_python, simplified = py_values(e, env), py_values(s, env)
        want, got = by_python[e], simplified[s]
        assert got == want, f"simplify changed the value at {point}: {want} -> {got}\n{to_uir(e)}->\n{to_uir(s)}"
        check_bounds(by_python)  # every subexpression of the original ...
        check_bounds(simplified)  # ... and of the simplified expression
    # the rewrite interpreter is the reference: the Python evaluator must agree with it, on both graphs
    for point in data.draw(st.lists(st.sampled_from(points), min_size=1, max_size=3)):
        env = dict(zip(ranges, point, strict=True))
        want = py_values(e, env)[e]
        assert run_at(e, env) == want, f"the interpreter and the Python evaluator disagree at {point}"
        assert run_at(s, env) == want, f"simplify changed the value at {point}"


@seeded(100)
@given(sizes_strategy, steps_strategy)
def test_simplify_reaches_a_fixed_point(sizes: list[int], steps: list[Step]) -> None:
    s = simplify(build(sizes, steps))
    assert simplify(s) is s


@seeded(100)
@given(sizes_strategy, st.lists(steps_strategy, min_size=1, max_size=4))
def test_a_shared_memo_simplifies_as_a_fresh_rewrite(sizes: list[int], recipes: list[list[Step]]) -> None:
    # expressions over the same loops, and each one's prefixes: they share subexpressions, which the memo
    # keeps from one call to the next; longest first, so that later calls meet nodes simplified before
    exprs = [build(sizes, steps[:n]) for steps in recipes for n in range(len(steps), -1, -1)]
    memo: dict[UOp, UOp] = {}
    for e in exprs:
        assert simplify(e, memo) is simplify(e), f"the memo changed the simplified form of\n{to_uir(e)}"
    assert all(memo[s] is simplify(s) for s in memo), "the memo holds a node that is not fully simplified"


@seeded(100)
@given(sizes_strategy, steps_strategy)
def test_building_twice_gives_the_same_object(sizes: list[int], steps: list[Step]) -> None:
    e = build(sizes, steps)
    assert build(sizes, steps) is e
    # a node-by-node copy through the raw constructor is the same object too: structure is identity
    copies: dict[UOp, UOp] = {}
    for u in toposort(e):
        copies[u] = UOp(u.op, u.dtype, tuple(copies[s] for s in u.src), u.arg)
    assert copies[e] is e


# ---- constants ------------------------------------------------------------------------------------------


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


@seeded(300)
@given(st.floats(width=32) | st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf]))
def test_float_constants_keep_their_exact_value(v: float) -> None:
    c = UOp.const(v)
    assert c is UOp.const(v)
    if math.isnan(v):
        assert math.isnan(c.arg) and c is UOp.const(math.nan)
    else:
        assert _bits(c.arg) == _bits(v)  # -0.0 stays -0.0: the cache never hands back the 0.0 node
        assert c is not UOp.const(v, dtypes.float64)


@seeded(200)
@given(st.integers(-(2**31), 2**31 - 1))
def test_int_constants_never_alias_bools_or_floats(v: int) -> None:
    c = UOp.const(v)
    assert type(c.arg) is int and c.arg == v
    assert UOp.const(float(v)).arg == float(UOp.const(float(v)).arg)  # a float32 constant holds a float
    assert type(UOp.const(float(v)).arg) is float
    if v in (0, 1):
        assert UOp.const(bool(v)) is not c and type(UOp.const(bool(v)).arg) is bool


# ---- random graphs through the text format --------------------------------------------------------------

SCALARS = [d for d in dtypes.all() if not d.is_bool]
CALL_NAMES = ["f", "square", "my fn", "true", "nan", "x.y", "_"]
SHAPED_MOVES: list[Callable[[UOp], UOp]] = [
    lambda m: m.permute((1, 0)),
    lambda m: m.pad(((0, 1), (2, 0))),
    lambda m: m.flip((1,)),
    lambda m: m.shrink(((1, 2), (0, 2))).reshape((2, 1)).expand((2, 4)),
    lambda m: m.reduce(Ops.MAX, (0,)),
]


def constants(dt: DType) -> st.SearchStrategy[UOp]:
    """Constants of dt, biased to the awkward ones: limits, -0.0, nan, inf, values that need all 64 bits."""
    if dt.is_bool:
        return st.booleans().map(UOp.const)
    if dt.is_int:
        lo, hi = int(dt.min), int(dt.max)
        return (st.integers(lo, hi) | st.sampled_from([lo, hi, 0, -1 if lo else 1])).map(lambda v: UOp.const(v, dt))
    width: Literal[32, 64] = 64 if dt is dtypes.float64 else 32
    special = st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 0.1, 1e-45, 3.4e38])
    return (st.floats(width=width) | special).map(lambda v: UOp.const(v, dt))


@st.composite
def graphs(draw: st.DrawFn) -> UOp:
    """A graph of valid nodes of many ops and dtypes, built step by step from a growing pool."""
    pool: list[UOp] = [range_(draw(st.integers(1, 9)), 0)]
    for _ in range(draw(st.integers(1, 12))):
        dt = draw(st.sampled_from(SCALARS))
        # operands: earlier scalars of the same dtype where there are some, fresh constants otherwise
        same = [u for u in pool if u.dtype is dt and u.shape == ()]
        choices = st.sampled_from(same) | constants(dt) if same else constants(dt)
        a, b = draw(choices), draw(choices)
        kind = draw(st.sampled_from(["alu", "unary", "cmp", "cast", "call", "param", "stack", "where"]))
        if kind == "alu":
            ops = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.MIN]
            ops += [Ops.DIV, Ops.POW] if dt.is_float else [Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR]
            pool.append(a.alu(draw(st.sampled_from(ops)), b))
        elif kind == "unary":
            pool.append(a.alu(draw(st.sampled_from([Ops.NEG, *([Ops.EXP, Ops.SQRT, Ops.SIN] if dt.is_float else [])]))))
        elif kind == "cmp":
            pool.append(a.alu(draw(st.sampled_from(sorted(Ops.COMPARISON, key=str))), b))
        elif kind == "cast":
            pool.append(a.cast(draw(st.sampled_from([*SCALARS, dtypes.bool]))))
        elif kind == "call":
            pool.append(call(draw(st.sampled_from(CALL_NAMES)), param(0, dt) * param(1, dt), a, b))
        elif kind == "param":
            pool.append(param(draw(st.integers(0, 3)), dt))
        elif kind == "stack":
            pool.append(draw(st.sampled_from(SHAPED_MOVES))(stack(stack(a, b, a), stack(b, a, b))))
        else:
            pool.append((a < b).where(a, b))
    return sink(*pool)


@seeded(150)
@given(graphs())
def test_text_round_trip(g: UOp) -> None:
    text = to_uir(g)
    assert parse(text) is g, text
    assert fmt(text) == text


# ---- movement ops against a Python model ----------------------------------------------------------------
#
# The model is a dict from index tuple to value plus a shape; each move is written the way its definition
# reads (out[i] = src[f(i)]), with no flat offsets, so it shares nothing with uopc's index arithmetic.

Model = tuple[tuple[int, ...], dict[tuple[int, ...], int]]


def _indices(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(product(*(range(n) for n in shape)))


def model_move(model: Model, op: str, arg: Any) -> Model:
    shape, src = model
    if op == "reshape":
        flat = [src[i] for i in _indices(shape)]  # row-major order is itertools.product's order
        return arg, dict(zip(_indices(arg), flat, strict=True))
    if op == "permute":
        new = tuple(shape[a] for a in arg)
        return new, {i: src[tuple(i[arg.index(k)] for k in range(len(shape)))] for i in _indices(new)}
    if op == "expand":
        return arg, {i: src[tuple(0 if s == 1 else x for x, s in zip(i, shape, strict=True))] for i in _indices(arg)}
    if op == "shrink":
        new = tuple(e - b for b, e in arg)
        return new, {i: src[tuple(x + b for x, (b, _) in zip(i, arg, strict=True))] for i in _indices(new)}
    if op == "pad":
        new = tuple(s + b + a for s, (b, a) in zip(shape, arg, strict=True))
        inner = {i: tuple(x - b for x, (b, _) in zip(i, arg, strict=True)) for i in _indices(new)}
        return new, {i: src.get(j, 0) for i, j in inner.items()}
    # flip
    return shape, {
        i: src[tuple(s - 1 - x if k in arg else x for k, (x, s) in enumerate(zip(i, shape, strict=True)))] for i in src
    }


def nested(model: Model) -> Any:
    shape, values = model
    flat: list[Any] = [values[i] for i in _indices(shape)]
    for n in reversed(shape[1:]):
        flat = [flat[k : k + n] for k in range(0, len(flat), n)]
    return flat


@st.composite
def moves(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[str, Any]:
    op = draw(st.sampled_from(["reshape", "permute", "expand", "shrink", "pad", "flip"]))
    rank = len(shape)
    if op == "reshape":  # split off or merge a leading axis: the sizes people reshape to
        size = math.prod(shape)
        first = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
        return op, (first, size // first) if draw(st.booleans()) else (size,)
    if op == "permute":
        return op, tuple(draw(st.permutations(range(rank))))
    if op == "expand":
        return op, tuple(draw(st.integers(1, 3)) if s == 1 else s for s in shape)
    if op == "shrink":
        bounds = []
        for s in shape:
            b = draw(st.integers(0, s - 1))
            bounds.append((b, draw(st.integers(b + 1, s))))
        return op, tuple(bounds)
    if op == "pad":
        return op, tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
    return op, tuple(sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1))))


@seeded(120)
@given(st.data())
def test_movement_chains_match_the_model(data: st.DataObject) -> None:
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    model: Model = (shape, {i: 10 * k + 1 for k, i in enumerate(_indices(shape))})
    u = stack(*(model[1][i] for i in _indices(shape))).reshape(shape)
    for _ in range(data.draw(st.integers(1, 5))):
        op, arg = data.draw(moves(model[0]))
        u = getattr(u, op)(arg)
        model = model_move(model, op, arg)
        assert u.shape == model[0]
    assert to_python(run(u)) == nested(model)
    # a reduction at the end: sum over axis 0 against the model's own sums
    if model[0]:
        summed = to_python(run(u.sum((0,))))
        shape_rest = model[0][1:]
        want = [sum(model[1][(k, *rest)] for k in range(model[0][0])) for rest in _indices(shape_rest)]
        assert summed == nested(
            ((1, *shape_rest), {(0, *r): w for r, w in zip(_indices(shape_rest), want, strict=True)})
        )
