"""`run` at test sizes: large sums and elementwise ops evaluate; programs beyond the element limit are refused.

Oracle: Python's exact integer arithmetic. The float values are small integers, so every product and every
partial sum is exact in float32 and the interpreter's answer must equal the integer one.
"""

import random
import re

import pytest

from uopc.ir import Ops, RunError, UOp, dtypes, run, stack, to_python
from uopc.ir.interpret import DEFAULT_MAX_ELEMENTS, element_limit


def _vector(values: list[float] | list[int]) -> UOp:
    return stack(*values)


def test_run_sums_more_elements_than_the_rewrite_budget() -> None:
    # the sum used to become a chain of 20,000 ADD nodes, one rule application each
    n = 20_000
    ones = UOp.const(1.0).reshape((1,)).expand((n,))
    assert to_python(run(ones.sum((0,)))) == [float(n)]  # a reduced axis keeps size 1
    ints = UOp.const(3).reshape((1,)).expand((n,))
    assert to_python(run(ints.sum((0,)))) == [3 * n]
    assert to_python(run(ints.reduce(Ops.MAX, (0,)))) == [3]


def test_run_applies_an_elementwise_op_to_many_elements() -> None:
    n = 20_000
    # 40,000 different sums from a graph of 200 constants: the rewrite budget follows the graph's size
    rows = _vector(list(range(200))).reshape((200, 1)).expand((200, 200))
    flat = to_python(run((rows * 200 + rows.permute((1, 0))).reshape((40_000,))))
    assert flat == list(range(40_000))
    rng = random.Random(0)
    xs = [rng.randint(-1000, 1000) for _ in range(n)]
    assert to_python(run(_vector(xs) * 2 + 1)) == [2 * x + 1 for x in xs]


def test_run_checks_a_matmul_sized_reduction() -> None:
    # (1, 784) @ (784, 128): the size of the first layer of the book's MNIST model
    k, n = 784, 128
    rng = random.Random(1)
    x = [rng.randint(-8, 8) for _ in range(k)]
    w = [[rng.randint(-8, 8) for _ in range(n)] for _ in range(k)]
    xs = _vector([float(v) for v in x]).reshape((k, 1)).expand((k, n))
    ws = _vector([float(v) for row in w for v in row]).reshape((k, n))
    got = to_python(run((xs * ws).sum((0,)).reshape((n,))))
    assert got == [float(sum(x[i] * w[i][j] for i in range(k))) for j in range(n)]


def test_run_refuses_a_program_beyond_the_limit_before_any_work() -> None:
    huge = UOp.const(1.0).reshape((1, 1)).expand((100_000, 100_000)).sum((0, 1))
    with pytest.raises(RunError) as e:
        run(huge)
    message = str(e.value)
    assert "EXPAND of shape (100000, 100000)" in message and "has 10,000,000,000)" in message
    assert f"{DEFAULT_MAX_ELEMENTS:,}" in message and "UOPC_IR_MAX_ELEMENTS" in message


def test_the_limit_named_in_the_message_is_exact_and_can_be_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    program = UOp.const(2).reshape((1,)).expand((100,)) + 1
    with pytest.raises(RunError, match=r"at most 50 ") as e:
        run(program, max_elements=50)
    size = int(re.search(r"has ([\d,]+) elements", str(e.value)).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert 200 <= size < 300  # two nodes of 100 elements and a few scalars
    with pytest.raises(RunError, match=f"at most {size - 1:,} "):
        run(program, max_elements=size - 1)
    assert to_python(run(program, max_elements=size)) == [3] * 100
    monkeypatch.setenv("UOPC_IR_MAX_ELEMENTS", str(size - 1))
    assert element_limit() == size - 1
    with pytest.raises(RunError, match=f"at most {size - 1:,} "):
        run(program)


@pytest.mark.parametrize("value", ["", "ten", "0", "-5", "1.5"])
def test_a_bad_limit_setting_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("UOPC_IR_MAX_ELEMENTS", value)
    with pytest.raises(RunError, match=f"UOPC_IR_MAX_ELEMENTS={value!r} is not a positive integer"):
        element_limit()


def test_an_undefined_element_still_stops_the_run() -> None:
    # folding elements directly must keep the old answer where a value is undefined
    casts = stack(1.5, float("inf")).cast(dtypes.int32)
    with pytest.raises(RunError, match="CAST node has no defined value"):
        run(casts)
    with pytest.raises(RunError, match="CAST node has no defined value"):
        run(casts.sum((0,)))  # a sum that meets it keeps it too
    assert to_python(run(stack(1.5, -2.5).cast(dtypes.int32))) == [1, -2]
