"""The differential suite: every public Tensor op against PyTorch 2.13 on the CPU, values and gradients.

Hypothesis draws the inputs (derandomized, so CI reruns the same cases): small shapes from fixed pools, so
that a kernel built for one example serves the next; dtypes float16/32/64, int32/64 and bool; and values
that mix ordinary numbers with the edges where compilers lose IEEE semantics: 0, -0.0, subnormals, the
smallest normal, huge magnitudes, +-inf and NaN. Each example runs a family of ops on the same inputs in
one plan (one compiler call), takes the gradient of `sum(out * w)` for a fixed cotangent `w` with respect
to every float input, and compares with torch: result dtype and shape, NaN positions, infinities, the
signs of zeros (in values, where torch's follow IEEE), and values within a tolerance for the dtype. One
failure lists every disagreement of its example, with the inputs. Besides the drawn examples, every run
sends each edge value through every elementwise op, each pair of edge values through every binary op,
rows that reduce to an edge through every reduction, and 4096 terms through the sums.

Result dtypes are torch's, except where uopc keeps a documented convention of its own:

| result                                  | uopc    | torch   | numpy   | uopc follows                      |
|-----------------------------------------|---------|---------|---------|-----------------------------------|
| argmax, argmin                          | int32   | int64   | int64   | itself: indices are dtypes.index  |
| one_hot, arange and lists of ints       | int32   | int64   | int64   | itself: dtypes.default_int        |
| bool tensor with a Python int           | int32   | int64   | int64   | itself: dtypes.default_int        |
| int / int, int tensor with Python float | float32 | float32 | float64 | torch                             |
| sum of int32 or bool                    | int64   | int64   | int64   | both                              |
| mean, var, activations of float16/64    | same    | same    | same    | both                              |
| int32 // 0, int32 % 0                   | 0       | raises  | 0       | numpy (not compared: torch raises)|

Tolerances: integers, bools, comparisons and the ops that only move or select values are compared
exactly. A rounded result must lie within `rtol * (|torch| + c) + acc * terms + 8 * |torch - torch in
float64|`. rtol is 1e-2, 2e-5 and 1e-10 for float16, 32 and 64 (|torch| counts as at least the smallest
normal: subnormals have absolute spacing); c is 1 for a composite formula, whose error is absolute
(tanh(1e-30) may come out 0), else 0. Results that add up terms (reductions, matmul, the gradient of a
broadcast operand) may also be off by `acc * terms`, where terms is the op evaluated on |inputs| and acc
is the accumulator's precision: 2e-5 for float16 and 32 (float16 adds up in float32, as in torch and
numpy), 1e-10 for float64. The last term allows for torch's own rounding; it is left out where torch in
float64 is not finite and torch in the dtype is.

Inputs are mapped into an op's domain (Op.domain) only where torch is not an oracle; each such map says
why: integer division by zero, float to int casts of values the int cannot hold, C's pow and sqrt at
-inf and -0.0, squares that overflow or underflow in var and std (as in numpy), torch's own underflow and
overflow in the gradient of a / b and its absorbed logsumexp gradient at huge magnitudes, and products
that overflow in a matrix product, whose result depends on whether the multiply-adds are fused.

Where uopc keeps a documented convention of its own (numpy's, or the exact value where torch rounds it
away), the table DEVIATIONS names the op, the elements, the reason and the reference used instead: at
those elements torch's result is replaced by that reference (a numpy value or a mathematical limit), and
uopc is checked against it to the dtype's rtol, no composite or accumulation allowance. Each deviation is
also run on inputs where it shows, every run, which fails if torch has come to agree (the entry is then
obsolete) or uopc has stopped following its convention.

The number of differential cases (examples x ops) is printed at the end of the module's run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from uopc.tensor import Tensor, dtypes

torch = pytest.importorskip("torch")
F = torch.nn.functional

Array = npt.NDArray[Any]
Fn = Callable[..., Any]
Shape = tuple[int, ...]
Axis = int | tuple[int, ...] | None

FLOATS = frozenset({"float16", "float32", "float64"})
INTS = frozenset({"int32", "int64"})
NUMBERS = FLOATS | INTS
ALL = NUMBERS | {"bool"}
LOGIC = INTS | {"bool"}
FLOAT_WIDTH: dict[str, Literal[16, 32, 64]] = {"float16": 16, "float32": 32, "float64": 64}
RTOL = {"float16": 1e-2, "float32": 2e-5, "float64": 1e-10}
ACCUMULATOR_RTOL = {"float16": 2e-5, "float32": 2e-5, "float64": 1e-10}  # float16 adds up in float32
TORCH_ERROR_FACTOR = 8.0

# Few examples per test: the suite's reach comes from many ops per example and many tests.
SUITE = settings(
    max_examples=6,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure already names its inputs
    suppress_health_check=list(HealthCheck),
)
CASES: Counter[str] = Counter()
DEVIATED: Counter[str] = Counter()  # per op: elements checked against a deviation's reference, not torch


@pytest.fixture(scope="module", autouse=True)
def report_case_count(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    line = f"torch differential cases (examples x ops): {sum(CASES.values())} over {len(CASES)} ops"
    line += f"; {sum(DEVIATED.values())} elements checked against a deviation's reference instead"
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n{line}")


# ---- one op, run on both sides ----


@dataclass(frozen=True)
class Op:
    """A public Tensor op and its torch counterpart, each called with the same inputs."""

    name: str
    ours: Fn  # uopc Tensors -> Tensor
    theirs: Fn  # torch tensors -> torch tensor
    takes: frozenset[str] = ALL  # the dtypes every input may have
    exact: bool = False  # no rounding: moves, selects, compares, integer arithmetic
    signed_zero: bool = False  # torch's zeros carry IEEE's sign here: compare it too
    composite: bool = False  # several rounded steps: error measured against 1 as well as the result
    summed: bool = False  # adds up terms: error measured against the op on |inputs|
    dtype: Callable[[Sequence[str]], str | None] | None = None  # uopc's own result dtype (table above)
    domain: Callable[[Array], Array] | None = None  # maps each input into the op's domain
    grad: bool = True  # compare gradients too


def same(name: str, f: Fn, takes: frozenset[str] = ALL, **kw: Any) -> Op:
    """An op spelled alike in uopc and torch."""
    return Op(name, f, f, takes, **kw)


def default_int(input_dtypes: Sequence[str]) -> str:
    """uopc's default integer where torch's is int64: Python ints, indices, counts."""
    return "int32"


@dataclass
class Result:
    value: Array
    grads: list[Array | None]


@dataclass
class Staged:
    out: Tensor
    leaves: list[Tensor]


def cotangent(shape: Shape) -> Array:
    """A fixed, exactly representable weight per output element: a permuted or dropped gradient shows."""
    return np.resize(np.array([1.0, -2.0, 0.5, -1.0, 2.0, -0.5, 4.0]), shape).reshape(shape)


def is_float(a: Array) -> bool:
    return a.dtype.kind == "f"


def inputs_for(op: Op, inputs: Sequence[Array]) -> list[Array]:
    return [op.domain(a) if op.domain else a for a in inputs]


def stage_ours(op: Op, args: Sequence[Array]) -> Staged:
    leaves = [Tensor(a, requires_grad=op.grad and is_float(a)) for a in args]
    out = op.ours(*leaves)
    if out.requires_grad:
        (out * Tensor(cotangent(out.shape), dtype=out.dtype)).sum().backward()
    return Staged(out, leaves)


def finish_ours(staged: Staged) -> Result:
    return Result(staged.out.numpy(), [None if t.grad is None else t.grad.numpy() for t in staged.leaves])


def run_ours(ops: Sequence[Op], inputs: Sequence[Array]) -> list[Result | str]:
    """Every op's value and gradients, realized in one plan; an op that raises gets its message instead."""
    staged: list[Staged | str] = []
    for op in ops:
        try:
            staged.append(stage_ours(op, inputs_for(op, inputs)))
        except Exception as e:
            staged.append(f"raised {type(e).__name__}: {e}")
    pending = [t for s in staged if isinstance(s, Staged) for t in (s.out, *(x.grad for x in s.leaves))]
    with contextlib.suppress(Exception):  # on failure each op is realized alone below, naming its error
        Tensor.realize(*(t for t in pending if t is not None))
    results: list[Result | str] = []
    for s in staged:
        try:
            results.append(s if isinstance(s, str) else finish_ours(s))
        except Exception as e:
            results.append(f"raised {type(e).__name__}: {e}")
    return results


def run_theirs(op: Op, args: Sequence[Array], as_float64: bool = False, magnitude: bool = False) -> Result:
    """torch's value and gradients; `as_float64` computes in float64, `magnitude` on |finite inputs|."""
    leaves = []
    for a in args:
        t = torch.from_numpy(np.array(np.abs(np.where(np.isfinite(a), a, 0)) if magnitude and is_float(a) else a))
        if is_float(a):
            t = t.to(torch.float64) if as_float64 or magnitude else t
            t.requires_grad_(op.grad)
        leaves.append(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var of one element warns; its NaN is the value compared
        out = op.theirs(*leaves)
        if out.requires_grad:
            w = torch.from_numpy(cotangent(tuple(out.shape))).to(out.dtype)
            (out * (w.abs() if magnitude else w)).sum().backward()
    return Result(out.detach().numpy(), [None if t.grad is None else t.grad.numpy() for t in leaves])


# ---- comparing ----


def allowed_error(op: Op, theirs: Array, theirs64: Array | None, magnitude: Array | None) -> Array | float:
    """How far uopc may be from torch, per element (see the module docstring); None: exactly."""
    if theirs64 is None or not is_float(theirs):
        return 0.0
    dtype, ref = str(theirs.dtype), theirs.astype(np.float64)
    terms = 0.0 if magnitude is None else ACCUMULATOR_RTOL[dtype] * np.abs(magnitude.astype(np.float64))
    normal = np.maximum(np.abs(ref), np.finfo(dtype).smallest_normal)  # subnormals: absolute spacing
    with np.errstate(all="ignore"):
        # where torch in float64 leaves the real domain (NaN, inf) and torch in the dtype does not, it says
        # nothing of torch's rounding: float16's y - 1 can round to an integer, which makes x**(y-1) finite
        # at a negative x, as it is not in float64
        own = np.where(np.isfinite(theirs64), TORCH_ERROR_FACTOR * np.abs(ref - theirs64), 0.0)
        allowed = RTOL[dtype] * (normal + (1.0 if op.composite else 0.0)) + terms + own
    return np.where(np.isfinite(allowed), allowed, 0.0)


def differences(ours: Array, theirs: Array, allowed: Array | float, signed_zero: bool) -> Array:
    """A boolean mask of the elements that disagree."""
    if not is_float(theirs):
        return np.asarray(ours != theirs)
    a, b = ours.astype(np.float64), theirs.astype(np.float64)
    with np.errstate(all="ignore"):
        same_value = (a == b) | (np.abs(a - b) <= allowed) | (np.isnan(a) & np.isnan(b))
    if signed_zero:
        same_value &= ~((a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b)))
    return np.asarray(~same_value)


def compare(
    what: str,
    ours: Array,
    theirs: Array,
    allowed: Array | float,
    want: str,
    signed_zero: bool,
    deviating: Array | None = None,
) -> list[str]:
    """Disagreements in dtype, shape and values; `deviating` marks the elements whose reference is not torch's."""
    problems = [] if str(ours.dtype) == want else [f"{what} dtype {ours.dtype}, expected {want}"]
    if ours.shape != theirs.shape:
        return [*problems, f"{what} shape {ours.shape}, torch gives {theirs.shape}"]
    bad = differences(ours, theirs, allowed, signed_zero)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        source = "the deviation's reference" if deviating is not None and deviating[first] else "torch"
        problems.append(
            f"{what}: {int(bad.sum())} of {bad.size} elements differ, first at {first}: "
            f"uopc {ours[first]!r} vs {source} {theirs[first]!r}"
        )
    return problems


def compare_op(op: Op, args: Sequence[Array], ours: Result | str) -> list[str]:
    """Value and gradients of one op. Zeros' signs are compared in values only: a gradient's zero sign
    depends on the order in which its terms were added."""
    theirs = run_theirs(op, args)
    if isinstance(ours, str):
        return [ours]
    precise, rough = run_theirs(op, args, as_float64=True), run_theirs(op, args, magnitude=True)
    exact = op.exact or not is_float(theirs.value)
    allowed = allowed_error(op, theirs.value, None if exact else precise.value, rough.value if op.summed else None)
    value, in_value = deviated(op, "value", args, theirs.value)
    allowed = np.where(in_value, strict_error(value, exact), allowed)
    DEVIATED[op.name] += int(in_value.sum())
    want = (op.dtype and op.dtype([str(a.dtype) for a in args])) or str(theirs.value.dtype)
    problems = compare("value", ours.value, value, allowed, want, op.signed_zero, in_value)
    for i, (got, ref) in enumerate(zip(ours.grads, theirs.grads, strict=True)):
        if got is None and ref is None:
            continue
        zeros = np.zeros(args[i].shape, args[i].dtype)  # no path to this input: a zero gradient
        got_or_zeros, ref_or_zeros = zeros if got is None else got, zeros if ref is None else ref
        summed = op.summed or args[i].size < theirs.value.size  # a broadcast input's gradient is a sum
        ref64 = precise.grads[i]
        allowed = allowed_error(
            op,
            ref_or_zeros,
            ref_or_zeros.astype(np.float64) if ref64 is None else ref64,
            rough.grads[i] if summed else None,
        )
        deviating: Array | None = None
        if i == 0:  # deviations are conventions of one-input ops
            ref_or_zeros, deviating = deviated(op, "grad", args, ref_or_zeros)
            allowed = np.where(deviating, strict_error(ref_or_zeros, False), allowed)
            DEVIATED[op.name] += int(deviating.sum())
        dt = str(args[i].dtype)
        problems += compare(f"grad of input {i}", got_or_zeros, ref_or_zeros, allowed, dt, False, deviating)
    return problems


def show(a: Array) -> str:
    return f"{a.dtype}{list(a.shape)} {a.tolist()}"


def check(ops: Sequence[Op], inputs: Sequence[Array]) -> None:
    """Run every op on both sides; one AssertionError names every disagreement, with the inputs."""
    __tracebackhide__ = True
    problems = []
    for op, ours in zip(ops, run_ours(ops, inputs), strict=True):
        CASES[op.name] += 1
        problems += [f"{op.name}: {p}" for p in compare_op(op, inputs_for(op, inputs), ours)]
    if problems:
        listed = "\n".join(f"  input {i}: {show(a)}" for i, a in enumerate(inputs))
        raise AssertionError("uopc and torch disagree\n" + "\n".join(problems) + "\n" + listed)


# ---- deviations: elements where uopc keeps a documented convention and torch is not the reference ----


@dataclass(frozen=True)
class Deviation:
    """Where uopc follows a convention of its own, decided by the project, instead of torch's. At the elements
    `where` picks, torch's result is replaced by `expected`, and uopc is checked against that instead."""

    name: str
    op: str  # the Op's name
    part: Literal["value", "grad"]  # the op's value, or the gradient of its (only) input
    convention: str  # uopc's rule, and why; where it is decided
    reference: str  # what uopc is checked against instead of torch
    where: Callable[[Array, Array], Array]  # (input, torch's result) -> the elements torch does not decide
    expected: Callable[[Op, Array], Array]  # (op, input) -> the reference, for every element
    points: Any  # an input (array-like) where torch and the reference differ, run on every run


def slope(f: Callable[[Array], Array]) -> Callable[[Op, Array], Array]:
    """The gradient of sum(out * w), for the fixed cotangent w, of an elementwise op whose slope at x is f(x),
    computed in float64."""

    def expected(op: Op, x: Array) -> Array:
        with np.errstate(all="ignore"):
            return np.asarray(cotangent(x.shape) * f(x.astype(np.float64)))

    return expected


def nan_shared(extreme: float) -> Callable[[Op, Array], Array]:
    """torch's own even split among the elements equal to the result (its rule for ties), applied with the
    NaNs as the tied elements: torch's gradient of the op at an input that is `extreme` where x is NaN, else 0.
    That is also what torch.max() without a dim gives a NaN maximum."""

    def expected(op: Op, x: Array) -> Array:
        tied = np.where(np.isnan(x), extreme, 0.0).astype(x.dtype)
        grad = run_theirs(op, [tied]).grads[0]
        assert grad is not None
        return grad

    return expected


def far_out(x: Array, _: Array) -> Array:
    """|x| >= 30 (infinities included): the slopes of sigmoid, tanh and gelu are within e^-30 of their limits."""
    with np.errstate(invalid="ignore"):
        return np.asarray(np.abs(x) >= 30)


def exp_abs(x: Array, scale: float) -> Array:
    return np.asarray(np.exp(-scale * np.abs(x)))


DEVIATIONS = [
    Deviation(
        "sign of NaN",
        "sign",
        "value",
        "sign(nan) is NaN, as in numpy (torch: 0), so a NaN stays visible (notes 41)",
        "numpy's sign",
        lambda x, _: np.isnan(x),
        lambda op, x: np.sign(x),
        [np.nan, 1.0, -0.0],
    ),
    Deviation(
        "slope of abs at NaN",
        "abs",
        "grad",
        "the slope of abs is sign(x), so NaN at NaN (torch: 0), consistent with sign (notes 41)",
        "the cotangent times numpy's sign",
        lambda x, _: np.isnan(x),
        slope(np.sign),
        [np.nan, -1.0, 0.0],
    ),
    Deviation(
        "relu of -0.0",
        "relu",
        "value",
        "relu is (x <= 0).where(0, x): every x <= 0, -0.0 included, gives +0 (torch: -0.0) (notes 41)",
        "IEEE 754-2019's maximum(x, +0), in which -0.0 orders below +0 (numpy's maximum keeps -0.0 in float16 "
        "and gives +0 in float32 and float64)",
        lambda x, _: np.asarray((x == 0) & np.signbit(x)),
        lambda op, x: np.where(np.isnan(x) | (x > 0), x, 0.0),
        [-0.0, 0.0, np.nan, -1.0],
    ),
    Deviation(
        "slope of gelu far out",
        "gelu tanh",
        "grad",
        "gelu (tanh form)'s slope is its exact limit, 1 above and 0 below, where torch's x**3 overflows into "
        "0 * inf = NaN (huge magnitudes and infinities); uopc clamps x inside tanh's argument to [-30, 30] (notes 46)",
        "the limit, 1 for x > 0 and 0 for x < 0",
        far_out,
        slope(lambda x: np.where(x > 0, 1.0, 0.0)),
        [np.inf, -np.inf, 30.0, -30.0, 1e4],
    ),
    Deviation(
        "slope of sigmoid far out",
        "sigmoid",
        "grad",
        "sigmoid's slope is e / (1 + e)**2 with e = exp(-|x|), the tiny exact value, where torch's y * (1 - y) "
        "is 0 (float32) or off in its third digit (float64) once y has rounded to 1 (notes 46)",
        "e / (1 + e)**2 in float64",
        far_out,
        slope(lambda x: exp_abs(x, 1.0) / (1 + exp_abs(x, 1.0)) ** 2),
        [30.0, -30.0, 40.0, np.inf],
    ),
    Deviation(
        "slope of tanh far out",
        "tanh",
        "grad",
        "tanh's slope is 4e / (1 + e)**2 with e = exp(-2|x|), the tiny exact value, where torch's 1 - y**2 is 0 "
        "once y has rounded to +-1 (notes 46)",
        "4e / (1 + e)**2 in float64",
        far_out,
        slope(lambda x: 4 * exp_abs(x, 2.0) / (1 + exp_abs(x, 2.0)) ** 2),
        [30.0, -30.0, np.inf],
    ),
    Deviation(
        "max of a slice holding NaN",
        "max",
        "grad",
        "a max whose result is NaN shares the gradient among the NaNs, as torch.max() without a dim does; "
        "torch's amax divides by the count of elements equal to NaN, 0, and gives the slice NaN (notes 48)",
        "torch's even split for ties, with the NaNs as the tied elements",
        lambda x, theirs: np.isnan(theirs),
        nan_shared(1.0),
        [[1.0, np.nan, np.nan], [np.nan, 2.0, np.inf], [1.0, 2.0, 2.0]],
    ),
    Deviation(
        "min of a slice holding NaN",
        "min",
        "grad",
        "as for max: the NaNs share the gradient (notes 48)",
        "torch's even split for ties, with the NaNs as the tied elements",
        lambda x, theirs: np.isnan(theirs),
        nan_shared(-1.0),
        [[1.0, np.nan, np.nan], [np.nan, 2.0, -np.inf], [1.0, 1.0, 2.0]],
    ),
]


def deviated(op: Op, part: str, args: Sequence[Array], theirs: Array) -> tuple[Array, Array]:
    """torch's result for `part` with the elements a deviation covers replaced by its reference, and the
    mask of those elements."""
    ref, mask = theirs, np.zeros(theirs.shape, bool)
    for d in DEVIATIONS:
        if d.op != op.name or d.part != part or not is_float(args[0]):
            continue
        here = d.where(args[0], theirs) & ~mask
        if here.any():
            ref = np.where(here, d.expected(op, args[0]).astype(theirs.dtype), ref)
            mask |= here
    return ref, mask


def strict_error(ref: Array, exact: bool) -> Array | float:
    """The error allowed against a deviation's reference: rounding to the dtype, nothing more."""
    if exact or not is_float(ref):
        return 0.0
    normal = np.maximum(np.abs(ref.astype(np.float64)), np.finfo(ref.dtype).smallest_normal)
    allowed = RTOL[str(ref.dtype)] * normal
    return np.where(np.isfinite(allowed), allowed, 0.0)


# ---- inputs ----


def edges(dtype: str) -> list[Any]:
    if dtype == "bool":
        return [False, True]
    if dtype in INTS:
        info = np.iinfo(dtype)
        return [0, 1, -1, int(info.min), int(info.max)]
    f = np.finfo(dtype)
    sub, tiny, huge = float(f.smallest_subnormal), float(f.smallest_normal), float(f.max) / 16
    return [0.0, -0.0, sub, -sub, tiny, -tiny, huge, -huge, np.inf, -np.inf, np.nan]


def elements(dtype: str, with_edges: bool) -> st.SearchStrategy[Any]:
    if dtype == "bool":
        return st.booleans()
    plain = st.integers(-6, 6) if dtype in INTS else st.floats(-4, 4, width=FLOAT_WIDTH[dtype])
    return st.one_of(plain, st.sampled_from(edges(dtype))) if with_edges else plain


def array(data: st.DataObject, dtype: str, shape: Shape) -> Array:
    with_edges = data.draw(st.booleans(), label="edge values")
    drawn: Array = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, with_edges)))
    return drawn


# ---- domains: inputs where torch is no oracle, mapped to ones where it is ----


def nonzero_divisor(a: Array) -> Array:
    """torch raises on integer division by zero (uopc gives 0, as numpy does)."""
    return np.where(a == 0, 3, a).astype(a.dtype)


def modest(a: Array) -> Array:
    """The gradient of a / b is -a / b**2. For tiny b torch's b**2 underflows to 0 (0/0 = NaN where the true
    value is 0), and for huge a over tiny b the terms overflow, where torch (rounding after each op) and
    uopc's -(a / b) / b can meet inf from opposite sides (inf - inf = NaN in one, -inf in the other).
    Finite nonzero magnitudes are kept within [1/16, 16] for this gradient; 0, inf and NaN stay."""
    if not is_float(a):
        return a
    kept = np.copysign(np.clip(np.abs(a), 1 / 16, 16), a)
    return np.where(np.isfinite(a) & (a != 0), kept, a).astype(a.dtype)


def no_negative_infinity_or_zero(a: Array) -> Array:
    """At -inf and -0.0, x ** 0.5 and its gradient differ between C's pow (+inf, +inf) and sqrt (NaN,
    -inf); torch and numpy each give both, depending on the dtype. Those two inputs are left out."""
    if not is_float(a):
        return a
    return np.where(a == -np.inf, np.inf, np.where(a == 0, 0.0, a)).astype(a.dtype)


def moderate(a: Array) -> Array:
    """var and std square their inputs, in the input's dtype as numpy does: squares past the largest float
    overflow to inf and squares of values below sqrt(smallest normal) underflow to 0, where torch (Welford's
    algorithm, accumulating float32 in double) stays finite and nonzero. Such magnitudes, and infinities,
    whose gradient means nothing, are left out."""
    if not is_float(a):
        return a
    f = np.finfo(a.dtype)
    big, small = np.sqrt(f.max) / 16, np.sqrt(f.smallest_normal) * 16
    clipped = np.where(np.isinf(a) | (np.abs(a) > big), np.sign(a) * big, a)
    return np.where(np.abs(a) < small, 0.0, clipped).astype(a.dtype)


def no_absorption(a: Array) -> Array:
    """torch's logsumexp gradient is exp(x - lse), and lse = max + log(sum) carries the rounding of max's
    magnitude: past 2**14 even float64's reference is off by more than its tolerance, and at the huge edge
    values n equal maxima get 1 each instead of 1/n (uopc's gradient goes through x - max, exactly)."""
    if not is_float(a):
        return a
    bound = 2.0**14
    return np.where(np.isfinite(a) & (np.abs(a) > bound), np.sign(a) * bound, a).astype(a.dtype)


def no_overflowing_products(a: Array) -> Array:
    """uopc fuses a matrix product's `acc + a * b` into one multiply-add (chapter 5), as BLAS kernels do, and
    a fused product is not rounded before it is added. Where a product overflows, the two orders part: one
    row times one column of the float64 edge values gives -inf in numpy's matmul (OpenBLAS) and in torch's
    2-D matmul, NaN in numpy's einsum, torch's 1-D matmul and its batched one (the rounded product is +inf,
    and inf + -inf is NaN). Neither is the reference, so finite magnitudes are kept below sqrt(max) / 4,
    where no product and no sum of up to 16 products overflows; 0, inf and NaN stay (a product with them is
    exact either way). float16 adds up in float32, where no product of two float16 values overflows."""
    if not is_float(a) or a.dtype.itemsize < 4:
        return a
    bound = np.sqrt(np.finfo(a.dtype).max) / 4
    return np.where(np.isfinite(a) & (np.abs(a) > bound), np.sign(a) * bound, a).astype(a.dtype)


def in_int_range(a: Array) -> Array:
    """Float to integer is defined only for finite values the integer holds (in C and torch alike)."""
    if not is_float(a):
        return a
    return np.where(np.isfinite(a) & (np.abs(a.astype(np.float64)) < 2.0**31), a, 0).astype(a.dtype)


def finite(a: Array) -> Array:
    """torch's exact gelu is NaN at +inf in float16 and float32 (inf in float64), and its gradient NaN at
    +-inf in every dtype; uopc gives gelu(inf) = inf and the limits of the gradient, 1 and 0. Infinities
    are left out (NaN stays)."""
    if not is_float(a):
        return a
    return np.where(np.isinf(a), np.sign(a) * 8, a).astype(a.dtype)


def short_products(a: Array) -> Array:
    """torch multiplies float16 in float16, so a long product can overflow to inf on the way (and inf * 0
    is NaN) where uopc's float32 accumulator does not: float16 magnitudes are kept in [1/2, 2]."""
    if a.dtype != np.float16:
        return a
    kept = np.copysign(np.clip(np.abs(a), 0.5, 2), a)
    return np.where(np.isfinite(a) & (a != 0), kept, a).astype(a.dtype)


def product_gradient_inputs(a: Array) -> Array:
    """The gradient of prod is prod / x in both where the tensor holds no 0. Where it holds one anywhere,
    torch switches to products of the other elements for every slice, which differ from prod / x at inf
    and NaN (inf / inf is NaN): those are left out, and float16 magnitudes kept short (short_products)."""
    if not is_float(a):
        return a
    return short_products(np.where(np.isfinite(a), a, 2).astype(a.dtype))


# ---- elementwise ops of one tensor, and of a tensor with a Python scalar on either side ----


def scalar(value: float, like: Any) -> Any:
    """A 0-d torch tensor: torch.maximum takes no Python number (clamp would, with another tie rule)."""
    return torch.tensor(value, dtype=like.dtype)


UNARY = [
    same("neg", lambda x: -x, NUMBERS, exact=True, signed_zero=True),
    same("abs", lambda x: x.abs(), NUMBERS, exact=True, signed_zero=True),
    same("sign", lambda x: x.sign(), NUMBERS, exact=True),
    same("exp", lambda x: x.exp()),
    same("log", lambda x: x.log()),
    same("sqrt", lambda x: x.sqrt(), signed_zero=True),
    same("rsqrt", lambda x: x.rsqrt()),
    same("sin", lambda x: x.sin(), signed_zero=True),
    same("cos", lambda x: x.cos()),
    same("square", lambda x: x.square(), NUMBERS),
    same("sigmoid", lambda x: x.sigmoid(), NUMBERS, composite=True),
    same("tanh", lambda x: x.tanh(), NUMBERS, composite=True),
    same("relu", lambda x: x.relu(), NUMBERS, exact=True, signed_zero=True),
    Op("gelu", Tensor.gelu, F.gelu, FLOATS, composite=True, domain=finite),
    Op("gelu tanh", lambda x: x.gelu("tanh"), lambda x: F.gelu(x, approximate="tanh"), FLOATS, composite=True),
    Op("silu", Tensor.silu, F.silu, FLOATS, composite=True),
    same("isnan", lambda x: x.isnan(), exact=True),
    same("logical_not", lambda x: x.logical_not(), exact=True),
    same("float", lambda x: x.float(), exact=True, signed_zero=True),
    same("contiguous", lambda x: x.contiguous(), exact=True, signed_zero=True),
    same("detach", lambda x: x.detach(), exact=True, signed_zero=True),
    Op("ones_like", Tensor.ones_like, torch.ones_like, exact=True),
    Op("zeros_like", Tensor.zeros_like, torch.zeros_like, exact=True),
    same("pow 0", lambda x: x**0, NUMBERS, exact=True),
    same("pow 2", lambda x: x**2, NUMBERS),
    same("pow 3", lambda x: x**3, NUMBERS),
    same("pow 0.5", lambda x: x**0.5, NUMBERS, domain=no_negative_infinity_or_zero),
    same("pow -1.0", lambda x: x**-1.0, FLOATS),
    same("pow 2.5", lambda x: x**2.5, FLOATS),
    same("rpow 2", lambda x: 2**x, NUMBERS),
    same("rpow 0.5", lambda x: 0.5**x, NUMBERS),
    # rounding: exact, signs of zeros included; no gradient on either side (torch's is 0)
    same("trunc", lambda x: x.trunc(), NUMBERS, exact=True, signed_zero=True),
    same("floor", lambda x: x.floor(), NUMBERS, exact=True, signed_zero=True),
    same("ceil", lambda x: x.ceil(), NUMBERS, exact=True, signed_zero=True),
    same("round", lambda x: x.round(), NUMBERS, exact=True, signed_zero=True),
    same("log2", lambda x: x.log2(), NUMBERS),
    same("exp2", lambda x: x.exp2(), NUMBERS),
    same("isinf", lambda x: x.isinf(), exact=True),
    same("isfinite", lambda x: x.isfinite(), exact=True),
    same("erf", lambda x: x.erf(), NUMBERS, composite=True, signed_zero=True),
    Op("leaky_relu", lambda x: x.leaky_relu(0.1), lambda x: F.leaky_relu(x, 0.1), FLOATS, signed_zero=True),
    Op("elu", Tensor.elu, F.elu, FLOATS, composite=True),
    Op("elu 0.5", lambda x: x.elu(0.5), lambda x: F.elu(x, 0.5), FLOATS, composite=True),
    Op("softplus", Tensor.softplus, F.softplus, FLOATS, composite=True),
    Op("softplus 2 5", lambda x: x.softplus(2.0, 5.0), lambda x: F.softplus(x, 2.0, 5.0), FLOATS, composite=True),
    Op("relu6", Tensor.relu6, F.relu6, FLOATS, exact=True),
    Op("hardswish", Tensor.hardswish, F.hardswish, FLOATS, composite=True),
    # the method names of the operators and casts
    same("neg method", lambda x: x.neg(), NUMBERS, exact=True, signed_zero=True),
    same("pow method", lambda x: x.pow(2), NUMBERS),
    same("int", lambda x: x.int(), exact=True, domain=in_int_range),
    same("long", lambda x: x.long(), exact=True, domain=in_int_range),
    same("half", lambda x: x.half(), exact=True, signed_zero=True),
    same("double", lambda x: x.double(), exact=True, signed_zero=True),
    same("bool", lambda x: x.bool(), exact=True),
]

SCALAR = [
    same("add 1.5", lambda x: x + 1.5, signed_zero=True),
    same("radd 2", lambda x: 2 + x, NUMBERS, signed_zero=True),
    same("radd 2 (bool)", lambda x: 2 + x, frozenset({"bool"}), exact=True, dtype=default_int),
    same("sub 0.5", lambda x: x - 0.5, NUMBERS, signed_zero=True),
    same("rsub 2.5", lambda x: 2.5 - x, NUMBERS, signed_zero=True),
    same("mul -2", lambda x: x * -2, NUMBERS, signed_zero=True),
    same("rmul 1.5", lambda x: 1.5 * x, signed_zero=True),
    same("mul 0.0", lambda x: x * 0.0, signed_zero=True),
    same("truediv 4.0", lambda x: x / 4.0, signed_zero=True),
    same("truediv 3", lambda x: x / 3, signed_zero=True),
    same("rtruediv 3.0", lambda x: 3.0 / x, signed_zero=True),
    same("lt 0.5", lambda x: x < 0.5, exact=True),
    same("gt 0", lambda x: x > 0, exact=True),
    same("le 0", lambda x: x <= 0, exact=True),
    same("ge -1.5", lambda x: x >= -1.5, exact=True),
    same("eq 0", lambda x: x == 0, exact=True),
    same("ne 1", lambda x: x != 1, exact=True),
    Op("maximum 0.5", lambda x: x.maximum(0.5), lambda x: torch.maximum(x, scalar(0.5, x)), FLOATS, exact=True),
    Op("minimum -1", lambda x: x.minimum(-1), lambda x: torch.minimum(x, scalar(-1, x)), NUMBERS, exact=True),
    same("xor True", lambda x: x ^ True, LOGIC, exact=True),
    same("and 6", lambda x: x & 6, INTS, exact=True),
    same("floordiv 3", lambda x: x // 3, INTS, exact=True),
    same("floordiv -2", lambda x: x // -2, INTS, exact=True),
    same("mod 3", lambda x: x % 3, INTS, exact=True),
    same("mod -2", lambda x: x % -2, INTS, exact=True),
    Op("where 0.5", lambda x: (x > 0).where(x, 0.5), lambda x: torch.where(x > 0, x, 0.5), NUMBERS, exact=True),
    same("add method", lambda x: x.add(1.5), signed_zero=True),
    same("add alpha", lambda x: x.add(x, alpha=2), NUMBERS, signed_zero=True),
    same("sub alpha", lambda x: x.sub(1, alpha=3), NUMBERS, signed_zero=True),
    same("mul method", lambda x: x.mul(-2), NUMBERS, signed_zero=True),
    same("div method", lambda x: x.div(4.0), signed_zero=True),
    same("clip", lambda x: x.clip(-1.5, 2.0), FLOATS, exact=True, signed_zero=True),
    same("clamp ints", lambda x: x.clamp(-1, 2), NUMBERS, exact=True, signed_zero=True),
    same("clip min", lambda x: x.clip(min=0.5), FLOATS, exact=True, signed_zero=True),
    same("clip max", lambda x: x.clip(max=0), NUMBERS, exact=True, signed_zero=True),
    same("clip min > max", lambda x: x.clip(1, -1), NUMBERS, exact=True, signed_zero=True),
    same("clip nan", lambda x: x.clip(0.0, float("nan")), FLOATS, exact=True),
    same("masked_fill", lambda x: x.masked_fill(x > 0, 2), NUMBERS, exact=True, signed_zero=True),
]

UNARY_SHAPES: list[Shape] = [(), (7,), (2, 3)]


@pytest.mark.parametrize("dtype", sorted(ALL))
@SUITE
@given(data=st.data())
def test_elementwise_one_tensor(dtype: str, data: st.DataObject) -> None:
    x = array(data, dtype, data.draw(st.sampled_from(UNARY_SHAPES)))
    check([op for op in UNARY + SCALAR if dtype in op.takes], [x])


@pytest.mark.parametrize("dtype", sorted(ALL))
def test_every_edge_value_through_elementwise_ops(dtype: str) -> None:
    """Hypothesis mixes edge values in at random; here each one goes through every op, every run."""
    check([op for op in UNARY + SCALAR if dtype in op.takes], [np.array(edges(dtype), dtype)])


# ---- elementwise ops of two tensors: broadcasting and promotion ----


def where_dtype(input_dtypes: Sequence[str]) -> str | None:
    """where(c, bool tensor, 0): the Python int makes uopc's default integer."""
    return default_int(input_dtypes) if input_dtypes[1] == "bool" else None


BINARY = [
    same("add", lambda a, b: a + b, signed_zero=True),
    same("sub", lambda a, b: a - b, NUMBERS, signed_zero=True),
    same("mul", lambda a, b: a * b, signed_zero=True),
    same("truediv", lambda a, b: a / b, signed_zero=True, grad=False),
    same("truediv grad", lambda a, b: a / b, domain=modest),
    same("pow", lambda a, b: a**b, NUMBERS),
    same("maximum", lambda a, b: a.maximum(b), exact=True),
    same("minimum", lambda a, b: a.minimum(b), exact=True),
    same("lt", lambda a, b: a < b, exact=True),
    same("gt", lambda a, b: a > b, exact=True),
    same("le", lambda a, b: a <= b, exact=True),
    same("ge", lambda a, b: a >= b, exact=True),
    same("eq", lambda a, b: a == b, exact=True),
    same("ne", lambda a, b: a != b, exact=True),
    same("and", lambda a, b: a & b, LOGIC, exact=True),
    same("or", lambda a, b: a | b, LOGIC, exact=True),
    same("xor", lambda a, b: a ^ b, LOGIC, exact=True),
    same("floordiv", lambda a, b: a // b, INTS, exact=True, domain=nonzero_divisor),
    same("mod", lambda a, b: a % b, INTS, exact=True, domain=nonzero_divisor),
    # of floats, by zero too (a / b, and NaN); // has no gradient (torch defines none), % has torch's. A zero
    # remainder takes the divisor's sign in numpy and Python (5.0 % -1.0 is -0.0), and is +0.0 in torch. Where
    # a / b overflows, torch's float64 remainder is NaN and numpy's is fmod's exact value (1e307 % 5e-324 is 0):
    # magnitudes stay modest; the backend's and the tensor's tests compare every pair with numpy
    same("floordiv float", lambda a, b: a // b, FLOATS, exact=True, signed_zero=True, grad=False),
    same("mod float", lambda a, b: a % b, FLOATS, exact=True, domain=modest),
    Op("where", lambda a, b: (a < b).where(a, b), lambda a, b: torch.where(a < b, a, b), exact=True),
    Op("where 0", lambda a, b: a.where(b, 0), lambda a, b: torch.where(a.bool(), b, 0), exact=True, dtype=where_dtype),
]

SHAPE_PAIRS: list[tuple[Shape, Shape]] = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((), (2, 2))]
DTYPE_PAIRS = [(d, d) for d in sorted(ALL)] + [
    ("int32", "float32"),
    ("float16", "float32"),
    ("bool", "float64"),
    ("int32", "int64"),
    ("bool", "int32"),
    ("float32", "float64"),
]


@pytest.mark.parametrize(("dtype_a", "dtype_b"), DTYPE_PAIRS)
@SUITE
@given(data=st.data())
def test_elementwise_two_tensors(dtype_a: str, dtype_b: str, data: st.DataObject) -> None:
    shape_a, shape_b = data.draw(st.sampled_from(SHAPE_PAIRS))
    a, b = array(data, dtype_a, shape_a), array(data, dtype_b, shape_b)
    check([op for op in BINARY if dtype_a in op.takes and dtype_b in op.takes], [a, b])


@pytest.mark.parametrize("dtype", sorted(ALL))
def test_every_pair_of_edge_values(dtype: str) -> None:
    """Every edge value against every edge value (a column broadcast against a row), through every op."""
    column = np.array(edges(dtype), dtype).reshape(-1, 1)
    check([op for op in BINARY if dtype in op.takes], [column, column.reshape(1, -1)])


# ---- reductions ----


def reductions(axis: Axis, keep: bool, ndim: int) -> list[Op]:
    """Every reduction over `axis`; torch gets the axes spelled out (its dim=() is not always 'all')."""
    dims = tuple(range(ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis
    stats: dict[str, Any] = {"composite": True, "summed": True}
    moments: dict[str, Any] = {"takes": FLOATS, "domain": moderate, **stats}
    ops = [
        Op("sum", lambda x: x.sum(axis, keep), lambda x: x.sum(dims, keepdim=keep), summed=True),
        Op("max", lambda x: x.max(axis, keep), lambda x: x.amax(dims, keepdim=keep), NUMBERS, exact=True),
        Op("min", lambda x: x.min(axis, keep), lambda x: x.amin(dims, keepdim=keep), NUMBERS, exact=True),
        Op("mean", lambda x: x.mean(axis, keep), lambda x: x.mean(dims, keepdim=keep), FLOATS, summed=True),
        Op(
            "logsumexp",
            lambda x: x.logsumexp(axis, keep),
            lambda x: x.logsumexp(dims, keep),
            FLOATS,
            domain=no_absorption,
            **stats,
        ),
        Op("any", lambda x: x.any(axis, keep), lambda x: x.any(dims, keepdim=keep), exact=True),
        Op("all", lambda x: x.all(axis, keep), lambda x: x.all(dims, keepdim=keep), exact=True),
    ]

    def moment(name: str, c: int) -> Op:
        ours = lambda x: getattr(x, name)(axis, keep, c)
        return Op(f"{name} {c}", ours, lambda x: getattr(x, name)(dims, correction=c, keepdim=keep), **moments)

    ops += [moment(name, c) for name in ("var", "std") for c in (0, 1)]
    if isinstance(axis, int):
        ops += [
            same("softmax", lambda x: x.softmax(axis), FLOATS, **stats),
            same("log_softmax", lambda x: x.log_softmax(axis), FLOATS, **stats),
            same("argmax", lambda x: x.argmax(axis, keep), NUMBERS, exact=True, dtype=default_int),
            same("argmin", lambda x: x.argmin(axis, keep), NUMBERS, exact=True, dtype=default_int),
            same("prod", lambda x: x.prod(axis, keep), summed=True, grad=False, domain=short_products),
            same("prod grad", lambda x: x.prod(axis, keep), summed=True, domain=product_gradient_inputs),
        ]
    if axis is None and not keep:
        ops += [
            same("argmax", lambda x: x.argmax(), NUMBERS, exact=True, dtype=default_int),
            same("argmin", lambda x: x.argmin(), NUMBERS, exact=True, dtype=default_int),
            same("prod all", lambda x: x.prod(), summed=True, grad=False, domain=short_products),
            same("prod all grad", lambda x: x.prod(), summed=True, domain=product_gradient_inputs),
        ]
    return ops


REDUCE_SHAPES: list[Shape] = [(5,), (3, 4), (2, 3, 2)]


@pytest.mark.parametrize("dtype", sorted(ALL))
@SUITE
@given(data=st.data())
def test_reductions(dtype: str, data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(REDUCE_SHAPES))
    n = len(shape)
    several = st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True).map(tuple)
    axis = data.draw(st.one_of(st.none(), st.integers(-n, n - 1), several))
    keep = data.draw(st.booleans())
    x = array(data, dtype, shape)
    check([op for op in reductions(axis, keep, n) if dtype in op.takes], [x])


def edge_rows(dtype: str) -> Array:
    """Rows of three that reduce to an edge: all -inf, an inf or NaN among numbers, signed zeros, huge
    magnitudes that cancel, subnormals, the integers' extremes (whose int32 sum overflows)."""
    if dtype == "bool":
        return np.array([[True, True, True], [True, False, False], [False, False, False]])
    e = edges(dtype)
    if dtype in INTS:
        lo, hi = e[3], e[4]
        return np.array([[hi, hi, hi], [lo, lo, 1], [lo, hi, 0], [0, -1, 1]], dtype)
    zero, neg_zero, sub, neg_sub, tiny, _, huge, neg_huge, inf, neg_inf, nan = e
    rows = [
        [neg_inf, neg_inf, neg_inf],
        [inf, 1.0, 2.0],
        [inf, neg_inf, 1.0],
        [nan, 1.0, 2.0],
        [neg_zero, neg_zero, neg_zero],
        [zero, neg_zero, zero],
        [huge, huge, neg_huge],
        [sub, neg_sub, tiny],
        [1.0, 1.0, 1.0],
    ]
    return np.array(rows, dtype)


@pytest.mark.parametrize("dtype", sorted(ALL))
def test_reductions_of_edge_rows(dtype: str) -> None:
    check([op for op in reductions(1, False, 2) if dtype in op.takes], [edge_rows(dtype)])


@pytest.mark.parametrize("deviation", DEVIATIONS, ids=lambda d: d.name)
def test_each_deviation_shows_at_its_points_and_uopc_meets_its_reference(deviation: Deviation) -> None:
    """On its own points, in every float dtype: the deviation covers some, torch differs from its reference
    at some in at least one dtype (else torch has come to agree and the entry is obsolete), and uopc meets
    the reference there and torch everywhere else."""
    op = {o.name: o for o in UNARY + reductions(1, False, 2)}[deviation.op]
    torch_differs = False
    for dtype in sorted(FLOATS):
        x = np.array(deviation.points, dtype)
        theirs = run_theirs(op, [x])
        part = theirs.value if deviation.part == "value" else theirs.grads[0]
        assert part is not None
        ref, mask = deviated(op, deviation.part, [x], part)
        assert mask.any(), f"{deviation.name}: covers none of its points in {dtype}"
        signed_zero = op.signed_zero and deviation.part == "value"
        torch_differs |= bool(differences(part, ref, strict_error(ref, False), signed_zero)[mask].any())
        check([op], [x])
    assert torch_differs, f"{deviation.name}: torch agrees with {deviation.reference} at every point: obsolete?"


@pytest.mark.parametrize("dtype", sorted(FLOATS))
def test_long_sums(dtype: str) -> None:
    """4096 terms, where a float16 accumulator stops counting at 2048 (torch accumulates in float32)."""
    x = np.resize(np.array([1.0, 0.5, 1.0, 0.25], dtype), 4096)
    check([op for op in reductions(0, False, 1) if dtype in op.takes], [x])
    check(MATMUL, [x, x])


# ---- running sums and sorting along one axis ----


def along_axis(axis: int, k: int) -> list[Op]:
    """cumsum, sort and topk along `axis`. Sorts are compared with torch's stable sort, which keeps equal
    values in order, as uopc's always does; topk compares values, since torch may order ties either way."""
    return [
        same("cumsum", lambda x: x.cumsum(axis), summed=True),
        Op("sort", lambda x: x.sort(axis)[0], lambda x: torch.sort(x, dim=axis, stable=True)[0], exact=True),
        Op(
            "sort indices",
            lambda x: x.sort(axis)[1],
            lambda x: torch.sort(x, dim=axis, stable=True)[1],
            exact=True,
            dtype=default_int,
        ),
        Op(
            "sort descending",
            lambda x: x.sort(axis, descending=True)[0],
            lambda x: torch.sort(x, dim=axis, descending=True, stable=True)[0],
            exact=True,
        ),
        Op(
            "sort descending indices",
            lambda x: x.sort(axis, descending=True)[1],
            lambda x: torch.sort(x, dim=axis, descending=True, stable=True)[1],
            exact=True,
            dtype=default_int,
        ),
        Op("topk", lambda x: x.topk(k, axis)[0], lambda x: x.topk(k, axis)[0], NUMBERS, exact=True, grad=False),
        Op(
            "topk smallest",
            lambda x: x.topk(k, axis, largest=False)[0],
            lambda x: x.topk(k, axis, largest=False)[0],
            NUMBERS,
            exact=True,
            grad=False,
        ),
        # which of several equal values torch.topk picks is unspecified: its gradient is compared with that
        # of the first k of a stable sort, which is what uopc's topk takes
        Op(
            "topk grad",
            lambda x: x.topk(k, axis)[0],
            lambda x: torch.sort(x, dim=axis, descending=True, stable=True)[0].narrow(axis, 0, k),
            NUMBERS,
            exact=True,
        ),
    ]


@pytest.mark.parametrize("dtype", sorted(ALL))
@SUITE
@given(data=st.data())
def test_along_an_axis(dtype: str, data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(REDUCE_SHAPES))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(1, shape[axis]))
    check([op for op in along_axis(axis, k) if dtype in op.takes], [array(data, dtype, shape)])


@pytest.mark.parametrize("dtype", sorted(ALL))
def test_along_an_axis_of_edge_rows(dtype: str) -> None:
    check([op for op in along_axis(1, 2) if dtype in op.takes], [edge_rows(dtype)])


# ---- matrix products ----

MATMUL = [
    same("matmul", lambda a, b: a.matmul(b), NUMBERS, summed=True, domain=no_overflowing_products),
    same("@", lambda a, b: a @ b, NUMBERS, summed=True, domain=no_overflowing_products),
    # uopc's dot is matmul; torch's is 1-D only
    Op("dot", Tensor.dot, torch.matmul, NUMBERS, summed=True, domain=no_overflowing_products),
]
MATMUL_SHAPES: list[tuple[Shape, Shape]] = [
    ((3,), (3,)),
    ((3,), (3, 2)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 4)),
    ((1, 2, 3), (2, 3, 2)),
    ((2, 1, 2, 3), (3, 3, 2)),
]


@pytest.mark.parametrize("dtype", sorted(NUMBERS))
@SUITE
@given(data=st.data())
def test_matmul(dtype: str, data: st.DataObject) -> None:
    shape_a, shape_b = data.draw(st.sampled_from(MATMUL_SHAPES))
    check(MATMUL, [array(data, dtype, shape_a), array(data, dtype, shape_b)])


# ---- movement: views, indexing, joining ----


def index_items(data: st.DataObject, shape: Shape) -> tuple[Any, ...]:
    """A numpy index: per axis an int or a non-empty slice of any step, with None and ... mixed in."""
    items: list[Any] = []
    for size in shape:
        if data.draw(st.booleans(), label="int index"):
            items.append(data.draw(st.integers(-size, size - 1)))
            continue
        ends = st.one_of(st.none(), st.integers(-size - 1, size + 1))
        step = data.draw(st.sampled_from([None, 1, 2, -1, -2]))
        chosen = slice(data.draw(ends), data.draw(ends), step)
        items.append(chosen if range(size)[chosen] else slice(None, None, step))
    if data.draw(st.booleans(), label="new axis"):
        items.insert(data.draw(st.integers(0, len(items))), None)
    if data.draw(st.booleans(), label="ellipsis"):  # ... in place of a run of items (whole axes)
        at = data.draw(st.integers(0, len(items)))
        items[at : at + data.draw(st.integers(0, len(items) - at))] = [Ellipsis]
    return tuple(items)


def torch_index(x: Any, index: tuple[Any, ...]) -> Any:
    """x[index] in torch, which refuses negative steps: the same elements by a positive slice, flipped."""
    real = sum(1 for i in index if i is not None and i is not Ellipsis)
    items = [j for i in index for j in ([slice(None)] * (x.ndim - real) if i is Ellipsis else [i])]
    plain, flips, axis, out_axis = [], [], 0, 0
    for item in items:
        step_forward = item
        if isinstance(item, slice):
            picked = range(x.shape[axis])[item]
            if picked.step < 0:
                step_forward = slice(picked[-1], picked[0] + 1, -picked.step)
                flips.append(out_axis)
        out_axis += 0 if isinstance(item, int) else 1
        axis += 0 if item is None else 1
        plain.append(step_forward)
    out = x[tuple(plain)]
    return out.flip(flips) if flips else out


def views(data: st.DataObject, shape: Shape) -> list[Op]:
    """Ops that keep or regroup the elements, with parameters drawn for this shape."""
    n, size = len(shape), int(np.prod(shape))
    index = index_items(data, shape)
    unsqueeze_dim = data.draw(st.integers(-n - 1, n), label="unsqueeze dim")
    stack_dim = data.draw(st.integers(-n - 1, n), label="stack dim")
    reverse = tuple(range(n))[::-1]

    def stacked(x: Any) -> Any:
        return torch.stack([x, x.flip(reverse)], stack_dim)

    return [
        Op("getitem", lambda x: x[index], lambda x: torch_index(x, index)),
        same("reshape -1", lambda x: x.reshape(-1)),
        same("reshape", lambda x: x.reshape(1, size)),
        Op("T", lambda x: x.T, lambda x: x.permute(reverse)),  # torch's .T is for 2-D only
        same("unsqueeze", lambda x: x.unsqueeze(unsqueeze_dim)),
        same("squeeze", lambda x: x.squeeze()),
        same("flatten", lambda x: x.flatten()),
        Op("stack", lambda x: Tensor.stack([x, x.flip()], dim=stack_dim), stacked),
        Op("stack method", lambda x: x.stack(x.flip(), dim=stack_dim), stacked),
        same("view", lambda x: x.view(size, 1)),
        same("repeat", lambda x: x.repeat(2, *(1 if s > 1 else 3 for s in shape))),
    ]


def keeps_an_element(size: int) -> Callable[[tuple[int, int]], bool]:
    """Pad widths (before, after) that leave at least one element of an axis of `size`."""
    return lambda w: size + min(w[0], 0) + min(w[1], 0) > 0


def axis_moves(data: st.DataObject, shape: Shape) -> list[Op]:
    """Ops that need at least one axis, with parameters drawn for this shape."""
    n, axis = len(shape), st.integers(-len(shape), len(shape) - 1)
    perm = data.draw(st.permutations(range(n)), label="permutation")
    d0, d1, cat_dim, squeeze_dim = (data.draw(axis) for _ in range(4))
    start, end = sorted((data.draw(axis), data.draw(axis)), key=lambda a: a % n)
    flips = tuple(data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True), label="flip axes"))
    ranges = [st.tuples(st.integers(0, s - 1), st.integers(1, s)).filter(lambda r: r[0] < r[1]) for s in shape]
    bounds = [data.draw(r) for r in ranges]
    pads = st.tuples(st.integers(-1, 2), st.integers(-1, 2))  # a negative width cuts an element off
    widths = [data.draw(pads.filter(keeps_an_element(s))) for s in shape]
    torch_widths = [w for pair in reversed(widths) for w in pair]  # torch: the last axis first
    value = data.draw(st.sampled_from([0, 2]), label="pad value")
    grow = (2, *(3 if s == 1 else -1 for s in shape))

    split_size = data.draw(st.integers(1, shape[cat_dim]), label="split size")
    sections = data.draw(st.sampled_from([[shape[cat_dim]], [1, shape[cat_dim] - 1]]).filter(lambda p: min(p) > 0))
    chunks = data.draw(st.integers(1, 4), label="chunks")
    triangle = data.draw(st.integers(-2, 2), label="diagonal")

    def same_x(x: Any) -> Any:
        return x

    def pieces_reversed(split: Fn) -> Fn:
        return lambda x: (Tensor if isinstance(x, Tensor) else torch).cat(list(reversed(split(x))), cat_dim)

    def joined(*pieces: Fn) -> Fn:
        return lambda x: torch.cat([p(x) for p in pieces], cat_dim)

    return [
        same("permute", lambda x: x.permute(perm)),
        same("transpose", lambda x: x.transpose(d0, d1)),
        same("flip", lambda x: x.flip(flips)),
        Op("shrink", lambda x: x.shrink(bounds), lambda x: x[tuple(slice(b, e) for b, e in bounds)]),
        Op("pad", lambda x: x.pad(widths), lambda x: F.pad(x, torch_widths)),
        Op("pad value", lambda x: x.pad(widths, value), lambda x: F.pad(x, torch_widths, value=value), NUMBERS),
        same("expand", lambda x: x.reshape((1, *shape)).expand(grow)),
        same("flatten range", lambda x: x.flatten(start, end)),
        same("squeeze dim", lambda x: x.squeeze(squeeze_dim)),
        Op("cat", lambda x: Tensor.cat(x, x.flip(cat_dim), dim=cat_dim), joined(same_x, lambda x: x.flip(cat_dim))),
        Op("cat list", lambda x: Tensor.cat([x, x], dim=cat_dim), joined(same_x, same_x)),
        Op(
            "cat method",
            lambda x: x.cat(x.flip(cat_dim), x, dim=cat_dim),
            joined(same_x, lambda x: x.flip(cat_dim), same_x),
        ),
        same("split", pieces_reversed(lambda x: x.split(split_size, cat_dim))),
        same("split sections", pieces_reversed(lambda x: x.split(sections, cat_dim))),
        same("chunk", pieces_reversed(lambda x: x.chunk(chunks, cat_dim))),
        same("unflatten", lambda x: x.unflatten(cat_dim, (1, shape[cat_dim]))),
        same("unflatten -1", lambda x: x.unflatten(cat_dim, (-1, 1))),
        *([same("tril", lambda x: x.tril(triangle)), same("triu", lambda x: x.triu(triangle))] if n >= 2 else []),
    ]


def exactly(op: Op) -> Op:
    """Moving elements rounds nothing: values, NaNs and the signs of zeros all come through as they were."""
    return dataclasses.replace(op, exact=True, signed_zero=True)


MOVEMENT_SHAPES: list[Shape] = [(), (5,), (2, 3), (3, 1, 2)]


@pytest.mark.parametrize("dtype", sorted(ALL))
@SUITE
@given(data=st.data())
def test_movement(dtype: str, data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from(MOVEMENT_SHAPES))
    ops = views(data, shape) + (axis_moves(data, shape) if shape else [])
    x = array(data, dtype, shape)
    check([exactly(op) for op in ops if dtype in op.takes], [x])


# ---- indexing by tensors: gather, scatter, integer arrays and masks ----


def selecting(op: Op) -> Op:
    """An op that selects elements by comparing indices and summing: exact, but a selected -0.0 comes out
    +0.0 (the sum starts from +0.0), so the signs of zeros are not compared."""
    return dataclasses.replace(op, exact=True)


def indices(data: st.DataObject, shape: Shape, size: int, negative: bool = True) -> Array:
    low = -size if negative else 0
    drawn: Array = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(low, size - 1)), label="indices")
    return drawn


def by_index(data: st.DataObject, shape: Shape) -> list[Op]:
    """Integer lists, integer tensors and masks in x[...], and gather; indices drawn for this shape, repeats
    included, so that a gradient summed over a repeated index is checked too."""
    n, axis = len(shape), data.draw(st.integers(0, len(shape) - 1), label="axis")
    listed = indices(data, (data.draw(st.integers(1, 4)),), shape[0]).tolist()
    grid = indices(data, (2, 1), shape[axis])
    mask = data.draw(hnp.arrays(np.bool_, shape).filter(lambda m: bool(m.any())), label="mask")
    gathered = indices(
        data,
        tuple(s if i == axis else data.draw(st.integers(1, s)) for i, s in enumerate(shape)),
        shape[axis],
        negative=False,
    )

    def on_axis(item: Any) -> tuple[Any, ...]:
        return (*[slice(None)] * axis, item)

    ops = [
        same("index list", lambda x: x[listed]),
        Op("index tensor", lambda x: x[on_axis(Tensor(grid))], lambda x: x[on_axis(torch.from_numpy(grid))]),
        Op("index array", lambda x: x[on_axis(grid)], lambda x: x[on_axis(torch.from_numpy(grid))]),
        Op("index mask", lambda x: x[Tensor(mask)], lambda x: x[torch.from_numpy(mask)]),
        Op("gather", lambda x: x.gather(axis, Tensor(gathered)), lambda x: x.gather(axis, torch.from_numpy(gathered))),
    ]
    if n >= 2:  # two index tensors, next to each other and apart, and an int among them
        rows, cols = indices(data, (3,), shape[0]), indices(data, (2, 1), shape[-1])
        ops += [
            Op("index two", lambda x: x[Tensor(rows), ..., Tensor(cols)], lambda x: x[rows, ..., cols]),
            Op("index int and list", lambda x: x[..., 0, cols.ravel().tolist()], lambda x: x[..., 0, cols.ravel()]),
            Op("index list and int", lambda x: x[rows.tolist(), 0], lambda x: x[rows, 0]),
        ]
    return ops


def scatters(data: st.DataObject, shape: Shape) -> tuple[list[Op], Shape]:
    """scatter with distinct targets along the axis (a permutation, cut short), and scatter_add with any;
    and the shape of the index, which src takes too (torch's gradient of a longer src has the wrong shape)."""
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    short = tuple(s if i == axis else data.draw(st.integers(1, s)) for i, s in enumerate(shape))
    short = tuple(data.draw(st.integers(1, s)) if i == axis else s for i, s in enumerate(short))
    others = tuple(s for i, s in enumerate(short) if i != axis)
    keys = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed")).random((*others, shape[axis]))
    distinct = np.moveaxis(np.argsort(keys, -1)[..., : short[axis]], -1, axis)  # part of a permutation
    anywhere = indices(data, short, shape[axis], negative=False)

    def torch_index(a: Array) -> Any:
        return torch.from_numpy(np.ascontiguousarray(a))

    return [
        Op(
            "scatter",
            lambda x, src: x.scatter(axis, Tensor(distinct), src),
            lambda x, src: x.scatter(axis, torch_index(distinct), src),
        ),
        Op(
            "scatter_add",
            lambda x, src: x.scatter_add(axis, Tensor(anywhere), src),
            lambda x, src: x.scatter_add(axis, torch_index(anywhere), src),
            NUMBERS,
            summed=True,
        ),
    ], short


@pytest.mark.parametrize("dtype", sorted(ALL))
@SUITE
@given(data=st.data())
def test_indexing_by_tensors(dtype: str, data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from([s for s in MOVEMENT_SHAPES if s]))
    check([selecting(op) for op in by_index(data, shape) if dtype in op.takes], [array(data, dtype, shape)])
    ops, short = scatters(data, shape)
    x, src = array(data, dtype, shape), array(data, dtype, short)
    check([op if op.summed else selecting(op) for op in ops if dtype in op.takes], [x, src])


# ---- casts ----

CASTS = [
    Op(
        f"cast {name}",
        lambda x, name=name: x.cast(dtypes.by_name(name)),
        lambda x, name=name: x.to(getattr(torch, name)),
        exact=True,
        signed_zero=True,
        domain=in_int_range if name in INTS else None,
    )
    for name in sorted(ALL)
]


@pytest.mark.parametrize("dtype", sorted(ALL))
@SUITE
@given(data=st.data())
def test_casts(dtype: str, data: st.DataObject) -> None:
    check(CASTS, [array(data, dtype, data.draw(st.sampled_from(UNARY_SHAPES)))])


# ---- losses ----

CLASSES = 4
LOSSES = [
    Op(
        "cross_entropy",
        Tensor.cross_entropy,
        lambda x, y: F.cross_entropy(x.reshape(-1, CLASSES), y.reshape(-1).long()),
        composite=True,
        summed=True,
    ),
    Op(
        "one_hot",
        lambda x, y: y.one_hot(CLASSES),
        lambda x, y: F.one_hot(y.long(), CLASSES),
        exact=True,
        dtype=default_int,
    ),
    *(
        Op(
            f"cross_entropy {name}",
            lambda x, y, kw=kw: x.cross_entropy(y, **kw).reshape(-1),
            lambda x, y, kw=kw: F.cross_entropy(x.reshape(-1, CLASSES), y.reshape(-1).long(), **kw).reshape(-1),
            composite=True,
            summed=True,
        )
        for name, kw in [
            ("sum", {"reduction": "sum"}),
            ("none", {"reduction": "none"}),
            ("label_smoothing", {"label_smoothing": 0.1}),
            ("ignore_index", {"ignore_index": 1}),
            ("ignore_index smoothed sum", {"ignore_index": 2, "label_smoothing": 0.25, "reduction": "sum"}),
        ]
    ),
    Op(
        "nll_loss",
        lambda x, y: x.log_softmax(-1).nll_loss(y, ignore_index=0),
        lambda x, y: F.nll_loss(x.reshape(-1, CLASSES).log_softmax(-1), y.reshape(-1).long(), ignore_index=0),
        composite=True,
        summed=True,
    ),
]


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@pytest.mark.parametrize("label_dtype", sorted(INTS))
@SUITE
@given(data=st.data())
def test_losses(dtype: str, label_dtype: str, data: st.DataObject) -> None:
    batch = data.draw(st.sampled_from([(3,), (2, 2)]))
    logits = array(data, dtype, (*batch, CLASSES))
    labels = data.draw(hnp.arrays(np.dtype(label_dtype), batch, elements=st.integers(0, CLASSES - 1)))
    check(LOSSES, [logits, labels])


def bounded(a: Array) -> Array:
    """Probabilities sigmoid(a) kept inside (0, 1): at exactly 0 or 1 the gradient of binary cross-entropy
    is torch's formula divided by max(p (1 - p), 1e-12), where autodiff divides by p and 1 - p apart."""
    if not is_float(a):
        return a
    return np.where(np.isfinite(a), np.clip(a, -8, 8), 0).astype(a.dtype)


PROBABILITY_LOSSES = [
    Op(
        "cross_entropy probabilities",
        lambda x, t: x.cross_entropy(t.softmax(-1)),
        lambda x, t: F.cross_entropy(x, t.softmax(-1)),
        composite=True,
        summed=True,
    ),
    Op(
        "cross_entropy probabilities smoothed none",
        lambda x, t: x.cross_entropy(t.softmax(-1), reduction="none", label_smoothing=0.2),
        lambda x, t: F.cross_entropy(x, t.softmax(-1), reduction="none", label_smoothing=0.2),
        composite=True,
        summed=True,
    ),
    Op(
        "binary_cross_entropy",
        lambda x, t: x.sigmoid().binary_cross_entropy(t.sigmoid()),
        lambda x, t: F.binary_cross_entropy(x.sigmoid(), t.sigmoid()),
        frozenset({"float32", "float64"}),  # torch has no float16 binary_cross_entropy on the CPU
        composite=True,
        summed=True,
        domain=bounded,
    ),
    Op(
        "binary_cross_entropy_with_logits",
        lambda x, t: x.binary_cross_entropy_with_logits(t.sigmoid()),
        lambda x, t: F.binary_cross_entropy_with_logits(x, t.sigmoid()),
        composite=True,
        summed=True,
        domain=bounded,
    ),
    Op(
        "binary_cross_entropy_with_logits none",
        lambda x, t: x.binary_cross_entropy_with_logits(t.sigmoid(), reduction="none"),
        lambda x, t: F.binary_cross_entropy_with_logits(x, t.sigmoid(), reduction="none"),
        composite=True,
        domain=bounded,
    ),
]


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@SUITE
@given(data=st.data())
def test_losses_of_probabilities(dtype: str, data: st.DataObject) -> None:
    logits, targets = array(data, dtype, (3, CLASSES)), array(data, dtype, (3, CLASSES))
    check([op for op in PROBABILITY_LOSSES if dtype in op.takes], [logits, targets])


# ---- convolution, pooling, attention: sums over ordinary numbers (the edges go through the ops they are
# made of above) ----


def ordinary(data: st.DataObject, dtype: str, shape: Shape) -> Array:
    drawn: Array = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=elements(dtype, with_edges=False)))
    return drawn


def convolutions(data: st.DataObject) -> tuple[list[Op], int]:
    """conv2d of (2, 4, 5, 6) images with every option drawn (inputs: images, weight, bias), and the groups."""
    groups = data.draw(st.sampled_from([1, 2, 4]), label="groups")
    stride, dilation = data.draw(st.sampled_from([1, 2, (1, 2)])), data.draw(st.sampled_from([1, 2, (2, 1)]))
    padding = data.draw(st.sampled_from([0, 1, (1, 0), "valid", *(["same"] if stride == 1 else [])]))
    options = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    return [
        Op(
            f"conv2d {options}",
            lambda x, w, b: x.conv2d(w, b, **options),
            lambda x, w, b: F.conv2d(x, w, b, **options),
            summed=True,
        ),
        Op(
            f"conv2d no bias {options}",
            lambda x, w, b: x.conv2d(w, **options),
            lambda x, w, b: F.conv2d(x, w, **options),
            summed=True,
        ),
    ], groups


def poolings(data: st.DataObject) -> list[Op]:
    kernels: list[int | tuple[int, int]] = [2, 3, (2, 3)]
    kernel = data.draw(st.sampled_from(kernels), label="kernel")
    stride = data.draw(st.sampled_from([None, 1, 2, (2, 1)]), label="stride")
    half = (kernel // 2, kernel // 2) if isinstance(kernel, int) else (kernel[0] // 2, kernel[1] // 2)
    padding = data.draw(st.sampled_from([0, half]), label="padding")
    dilation = data.draw(st.sampled_from([1, 2]), label="dilation")
    return [
        Op(
            "max_pool2d",
            lambda x: x.max_pool2d(kernel, stride, padding, dilation),
            lambda x: F.max_pool2d(x, kernel, stride, padding, dilation),
            exact=True,
        ),
        Op(
            "avg_pool2d",
            lambda x: x.avg_pool2d(kernel, stride, padding),
            lambda x: F.avg_pool2d(x, kernel, stride, padding),
            summed=True,
        ),
        Op(
            "avg_pool2d without padding in the count",
            lambda x: x.avg_pool2d(kernel, stride, padding, count_include_pad=False),
            lambda x: F.avg_pool2d(x, kernel, stride, padding, count_include_pad=False),
            summed=True,
        ),
    ]


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@SUITE
@given(data=st.data())
def test_convolution_and_pooling(dtype: str, data: st.DataObject) -> None:
    """float16 convolutions are left out: uopc rounds each float16 product before adding it up in float32,
    as its matmul does, where torch's CPU convolution multiplies in float32; a sum that cancels then differs
    by more than the accumulation tolerance."""
    x = ordinary(data, dtype, (2, 4, 5, 6))
    convs, groups = convolutions(data)
    w, b = ordinary(data, dtype, (4, 4 // groups, 2, 3)), ordinary(data, dtype, (4,))
    if dtype != "float16":
        check(convs, [x, w, b])
    check(poolings(data), [x])


def attentions(data: st.DataObject, lengths: tuple[int, int]) -> list[Op]:
    allowed = data.draw(hnp.arrays(np.bool_, lengths).map(lambda m: m | np.eye(*lengths, dtype=bool)))
    added = data.draw(hnp.arrays(np.float32, lengths, elements=st.floats(-2, 2, width=32)), label="float mask")
    return [
        Op(
            "sdpa",
            lambda q, k, v: q.scaled_dot_product_attention(k, v),
            F.scaled_dot_product_attention,
            composite=True,
            summed=True,
        ),
        Op(
            "sdpa causal",
            lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            composite=True,
            summed=True,
        ),
        Op(
            "sdpa bool mask",
            lambda q, k, v: q.scaled_dot_product_attention(k, v, Tensor(allowed)),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, torch.from_numpy(allowed)),
            composite=True,
            summed=True,
        ),
        Op(
            "sdpa float mask and scale",
            lambda q, k, v: q.scaled_dot_product_attention(k, v, Tensor(added, dtype=q.dtype), scale=0.5),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, torch.from_numpy(added).to(q.dtype), scale=0.5),
            composite=True,
            summed=True,
        ),
    ]


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@SUITE
@given(data=st.data())
def test_attention(dtype: str, data: st.DataObject) -> None:
    length, keys = data.draw(st.sampled_from([(3, 5), (4, 4), (5, 2)]))
    q, k, v = (ordinary(data, dtype, (2, n, 4)) for n in (length, keys, keys))
    check(attentions(data, (length, keys)), [q, k, v])


# ---- creation ----


def made(name: str, ours: Fn, theirs: Fn, exact: bool = True, **kw: Any) -> Op:
    return Op(name, ours, theirs, exact=exact, signed_zero=True, **kw)


NAN, INF = float("nan"), float("inf")
CREATION = [
    made("full float", lambda: Tensor.full((2, 3), 1.5), lambda: torch.full((2, 3), 1.5)),
    made("full -0.0", lambda: Tensor.full((3,), -0.0, dtypes.float64), lambda: torch.full((3,), -0.0).double()),
    made("full nan", lambda: Tensor.full((2,), NAN, dtypes.float16), lambda: torch.full((2,), NAN).half()),
    made("full -inf", lambda: Tensor.full((), -INF), lambda: torch.full((), -INF)),
    made("full int", lambda: Tensor.full((2,), 7), lambda: torch.full((2,), 7), dtype=default_int),
    made("full int64", lambda: Tensor.full((2,), -(2**40), dtypes.int64), lambda: torch.full((2,), -(2**40))),
    made("full bool", lambda: Tensor.full((3,), True), lambda: torch.full((3,), True)),
    made("zeros", lambda: Tensor.zeros(2, 3), lambda: torch.zeros(2, 3)),
    made("zeros 0-d", Tensor.zeros, lambda: torch.zeros(())),
    made("ones int64", lambda: Tensor.ones((3,), dtype=dtypes.int64), lambda: torch.ones(3, dtype=torch.int64)),
    made("ones bool", lambda: Tensor.ones(2, dtype=dtypes.bool), lambda: torch.ones(2, dtype=torch.bool)),
    made("arange", lambda: Tensor.arange(5), lambda: torch.arange(5), dtype=default_int),
    made("arange step", lambda: Tensor.arange(10, 0, -3), lambda: torch.arange(10, 0, -3), dtype=default_int),
    made("arange float", lambda: Tensor.arange(-1.5, 4.0, 0.5), lambda: torch.arange(-1.5, 4.0, 0.5)),
    # numpy's float32 arange (uopc's) and torch's (start + i * step in double) differ by an ulp
    made("arange tenths", lambda: Tensor.arange(0.0, 1.0, 0.1), lambda: torch.arange(0.0, 1.0, 0.1), exact=False),
    made("arange f64", lambda: Tensor.arange(0, 3, dtype=dtypes.float64), lambda: torch.arange(0, 3).double()),
    made("eye", lambda: Tensor.eye(3), lambda: torch.eye(3)),
    made("eye int32", lambda: Tensor.eye(2, 4, dtype=dtypes.int32), lambda: torch.eye(2, 4, dtype=torch.int32)),
    made("Tensor floats", lambda: Tensor([1.5, -0.0, 1e-40]), lambda: torch.tensor([1.5, -0.0, 1e-40])),
    made("Tensor ints", lambda: Tensor([[1, -2], [3, 4]]), lambda: torch.tensor([[1, -2], [3, 4]]), dtype=default_int),
    made("Tensor big ints", lambda: Tensor([1, 2**40]), lambda: torch.tensor([1, 2**40])),
    made("Tensor bools", lambda: Tensor([True, False]), lambda: torch.tensor([True, False])),
    made("Tensor scalar", lambda: Tensor(2.5), lambda: torch.tensor(2.5)),
    made("Tensor f16", lambda: Tensor(np.array([65504, 1e-7], np.float16)), lambda: torch.tensor([65504, 1e-7]).half()),
]


def test_creation() -> None:
    check(CREATION, [])


@pytest.mark.parametrize("name", sorted(FLOATS))
def test_random_creation_has_torch_shape_dtype_and_range(name: str) -> None:
    """rand, randn and uniform draw from numpy's generator: torch vouches only for shape, dtype and range."""
    dt, tdt = dtypes.by_name(name), getattr(torch, name)
    Tensor.manual_seed(0)
    pairs = [
        (Tensor.rand(2, 3, dtype=dt), torch.rand(2, 3, dtype=tdt), (0.0, 1.0)),
        (Tensor.randn((4,), dtype=dt), torch.randn(4, dtype=tdt), (-INF, INF)),
        (Tensor.uniform(3, low=-2.0, high=-1.0, dtype=dt), torch.empty(3, dtype=tdt).uniform_(-2, -1), (-2.0, -1.0)),
    ]
    weights = np.array([[0.5, 0.0, 2.0], [1.0, 1.0, 0.0]], name)
    drawn = [
        (Tensor(weights).multinomial(5, replacement=True), torch.from_numpy(weights).multinomial(5, True)),
        (Tensor(weights).multinomial(2), torch.from_numpy(weights).multinomial(2)),
    ]
    for ours, theirs in drawn:  # categories of weight 0 are never drawn; without replacement, none twice
        value = ours.numpy()
        CASES[f"multinomial {name}"] += 1
        assert value.shape == tuple(theirs.shape) and value.dtype == np.int32  # torch: int64 (uopc: indices)
        assert (weights[np.arange(2)[:, None], value] > 0).all()
    assert all(len(set(row)) == 2 for row in drawn[1][0].numpy().tolist())
    for ours, theirs, (low, high) in pairs:
        value = ours.numpy()
        CASES[f"random {name}"] += 1
        assert (value.shape, str(value.dtype)) == (tuple(theirs.shape), str(theirs.dtype).removeprefix("torch."))
        assert np.all((low <= value) & (value <= high)), f"{value} outside [{low}, {high}]"


# ---- zero-size tensors ----

ZERO_SIZE = [
    same("empty: exp", lambda x, w: x.exp()),
    same("empty: sum over the empty axis", lambda x, w: x.sum(0)),
    same("empty: sum of everything", lambda x, w: x.sum()),
    same("empty: prod over the empty axis", lambda x, w: x.prod(0)),
    same("empty: mean over the empty axis", lambda x, w: x.mean(0)),
    same("empty: logsumexp over the empty axis", lambda x, w: x.logsumexp(0)),
    same("empty: softmax", lambda x, w: x.softmax(0)),
    same("empty: matmul, empty batch", lambda x, w: x @ w),
    same("empty: matmul, empty inner axis", lambda x, w: x.transpose(0, 1) @ x),
    Op("empty: cat", lambda x, w: x.cat(w.transpose(0, 1)), lambda x, w: torch.cat([x, w.transpose(0, 1)])),
]


@pytest.mark.parametrize("dtype", sorted(FLOATS))
def test_zero_size_tensors(dtype: str) -> None:
    """A (0, 3) tensor and a (3, 2) weight: values and gradients, the weight's a sum of no terms."""
    check(ZERO_SIZE, [np.zeros((0, 3), dtype), np.arange(6, dtype=dtype).reshape(3, 2)])
