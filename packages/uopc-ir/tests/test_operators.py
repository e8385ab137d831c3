"""The operator layer: UOp and UPat share Python's operators, so a pattern written `x // c` matches the node
that `x // c` builds, for every operator, in both operand orders, with Python numbers on either side.

The values of what the operators build are checked with `run` against Python's own arithmetic; the patterns
are checked against the nodes, never against another pattern.
"""

import math
import operator
from collections.abc import Callable
from typing import Any, cast

import pytest

from uopc.ir import (
    Ops,
    PatternMatcher,
    RewriteError,
    UOp,
    UOpError,
    UPat,
    dtypes,
    graph_rewrite,
    param,
    run,
    to_python,
)

# (name, the operator, the op it builds, whether the operands swap) for every binary operator of the layer
BINARY: list[tuple[str, Callable[[Any, Any], Any], Ops, bool]] = [
    ("+", operator.add, Ops.ADD, False),
    ("-", operator.sub, Ops.SUB, False),
    ("*", operator.mul, Ops.MUL, False),
    ("//", operator.floordiv, Ops.IDIV, False),
    ("%", operator.mod, Ops.MOD, False),
    ("&", operator.and_, Ops.AND, False),
    ("|", operator.or_, Ops.OR, False),
    ("^", operator.xor, Ops.XOR, False),
    ("<", operator.lt, Ops.CMPLT, False),
    (">", operator.gt, Ops.CMPLT, True),
    ("maximum", lambda a, b: a.maximum(b), Ops.MAX, False),
    ("minimum", lambda a, b: a.minimum(b), Ops.MIN, False),
    ("eq", lambda a, b: a.eq(b), Ops.CMPEQ, False),
    ("ne", lambda a, b: a.ne(b), Ops.CMPNE, False),
]
FLOAT_BINARY: list[tuple[str, Callable[[Any, Any], Any], Ops]] = [
    ("/", operator.truediv, Ops.DIV),
    ("**", operator.pow, Ops.POW),
]


@pytest.mark.parametrize(("name", "fn", "op", "swapped"), BINARY, ids=[b[0] for b in BINARY])
def test_each_operator_builds_its_op_and_its_pattern_matches_it(
    name: str, fn: Callable[[Any, Any], Any], op: Ops, swapped: bool
) -> None:
    x, y = param(0), param(1)
    node = fn(x, y)
    assert node.op is op and node.src == ((y, x) if swapped else (x, y))
    captures = fn(UPat.var("x"), UPat.var("y")).match(node, {})
    assert {"x": x, "y": y} in captures
    assert not fn(UPat.var("x"), UPat.var("y")).match(x * 3 if op is not Ops.MUL else x + 3, {})


@pytest.mark.parametrize(("name", "fn", "op"), FLOAT_BINARY, ids=[b[0] for b in FLOAT_BINARY])
def test_float_operators_build_their_op_and_match(name: str, fn: Callable[[Any, Any], Any], op: Ops) -> None:
    x, y = param(0, dtypes.float32), param(1, dtypes.float32)
    node = fn(x, y)
    assert node.op is op and node.src == (x, y)
    assert {"x": x, "y": y} in fn(UPat.var("x"), UPat.var("y")).match(node, {})


@pytest.mark.parametrize(("name", "fn", "op", "swapped"), BINARY[:8], ids=[b[0] for b in BINARY[:8]])
def test_a_number_on_either_side_is_a_constant_of_the_nodes_dtype(
    name: str, fn: Callable[[Any, Any], Any], op: Ops, swapped: bool
) -> None:
    x = param(0, dtypes.int8)
    left, right = fn(3, x), fn(x, 3)
    assert left.src == (UOp.const(3, dtypes.int8), x) and right.src == (x, UOp.const(3, dtypes.int8))
    assert fn(3, UPat.var("x")).match(left, {}) and fn(UPat.var("x"), 3).match(right, {})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (lambda a, b: 7 - a, 7 - 5),
        (lambda a, b: 17 // a, 17 // 5),
        (lambda a, b: -17 % a, -17 % 5),
        (lambda a, b: 6 & a, 6 & 5),
        (lambda a, b: 6 | a, 6 | 5),
        (lambda a, b: 6 ^ a, 6 ^ 5),
        (lambda a, b: 2.0**b, 2.0**1.5),
        (lambda a, b: 3.0 / b, 3.0 / 1.5),
        (lambda a, b: -a, -5),
        (lambda a, b: (a > 4).where(a * 2, 0), 10),
        (lambda a, b: b.sqrt().exp(), math.exp(math.sqrt(1.5))),
    ],
    ids=["7 - a", "17 // a", "-17 % a", "6 & a", "6 | a", "6 ^ a", "2.0 ** b", "3.0 / b", "-a", "where", "exp sqrt"],
)
def test_reflected_and_named_operators_compute_what_python_does(
    expression: Callable[[UOp, UOp], UOp], expected: float
) -> None:
    a, b = UOp.const(5), UOp.const(1.5)
    assert to_python(run(expression(a, b))) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("value", [math.nan, 1.0, 2.0, 3.0, -math.inf])
def test_float_le_and_ge_are_false_for_nan(value: float) -> None:
    x = UOp.const(value)
    assert to_python(run(x <= 2.0)) is (value <= 2.0)
    assert to_python(run(x >= 2.0)) is (value >= 2.0)


def test_integer_le_is_one_comparison_negated() -> None:
    x = param(0)
    assert (x <= 3).op is Ops.CMPNE and (x <= 3).src[0].op is Ops.CMPLT


def test_a_pattern_le_takes_the_form_of_its_dtype() -> None:
    i, f = param(0), param(1, dtypes.float32)
    assert (UPat.var("x", dtypes.int32) <= 3).match(i <= 3, {})
    assert (UPat.var("x", dtypes.float32) >= 3.0).match(f >= 3.0, {})
    assert not (UPat.var("x", dtypes.int32) <= 3).match(i < 3, {})
    with pytest.raises(RewriteError, match="give the pattern a dtype"):
        UPat.var("x") <= 3  # noqa: B015


def test_other_types_are_not_operands() -> None:
    x = param(0)
    assert cast(Any, x).__add__("1") is NotImplemented and cast(Any, UPat.var("x")).__mul__([2]) is NotImplemented
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "1"  # type: ignore[operator]
    with pytest.raises(TypeError):
        x <= None  # type: ignore[operator]  # noqa: B015


def test_where_lifts_a_number_to_the_other_branchs_dtype() -> None:
    cond = param(0) < 1
    assert cond.where(1.0, 2).dtype is dtypes.float32 and cond.where(1.0, 2).src[2].arg == 2.0
    assert cond.where(param(1, dtypes.int8), 2).src[2] is UOp.const(2, dtypes.int8)
    with pytest.raises(UOpError, match=r"WHERE: float constant 2\.5 with a int32 operand"):
        cond.where(1, 2.5)


def test_rules_written_with_operators_rewrite_as_their_algebra_says() -> None:
    x = UPat.var("x")
    rules = PatternMatcher([(x // 1, lambda x: x), (x * 0, lambda x: x.const_like(0)), (0 - x, lambda x: -x)])
    p = param(0)
    assert graph_rewrite((p // 1) + (p * 0) + (0 - p), rules) is p + p.const_like(0) + (-p)


def test_pytorchs_method_names_compute_what_the_operators_do() -> None:
    """t.add(x), t.pow(x), ... as PyTorch users type them, on every value of the layer."""
    x, three = UOp.const(7.5), UOp.const(3.0)
    for method, value in [("add", 10.5), ("sub", 4.5), ("mul", 22.5), ("div", 2.5), ("pow", 421.875)]:
        assert to_python(run(getattr(x, method)(three))) == value
    assert to_python(run(x.neg())) == -7.5
    assert (UPat.var("x").mul(2)).match(param(0).mul(2), {})
