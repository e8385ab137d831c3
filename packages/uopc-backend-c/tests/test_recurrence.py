"""Accumulators that assign (ACCUMULATE with no op): a recurrence whose update reads the accumulators, as
online softmax's running maximum and rescaled sum. Checked against numpy's logsumexp of each row, with the
reads placed in every order the graph allows."""

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from uopc.backend.c import CExecutable, CRenderer
from uopc.ir import AxisType, Ops, UOp, dtypes, fmt, parse, range_, sink, to_uir
from uopc.lower import Kernel, Step, linearize

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]
ROWS, COLS = 5, 37


def online_logsumexp() -> Kernel:
    """out[i] = log(sum_j exp(x[i, j])) in one pass: m = max(m, x), l = l * exp(m_old - m) + exp(x - m)."""
    out, x = UOp.define_global(0, ROWS), UOp.define_global(1, ROWS * COLS)
    i, j = range_(ROWS, 0), range_(COLS, 1, AxisType.REDUCE)
    m = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(-np.inf, dtypes.float32), i), 0)
    total = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(0.0, dtypes.float32), i), 1)
    value = x.load(i * COLS + j)
    new_m = m.maximum(value)
    new_total = total * (m - new_m).exp() + (value - new_m).exp()
    m_end = UOp(Ops.ACCUMULATE, dtypes.float32, (m, new_m, j), None).end(j)
    total_end = UOp(Ops.ACCUMULATE, dtypes.float32, (total, new_total, j), None).end(j)
    return Kernel("online_lse", sink(out.store(i, m_end + total_end.log()).end(i)))


def test_an_assigning_update_reads_the_accumulators_before_they_change(build_kernels: Build) -> None:
    x = np.random.default_rng(0).normal(0, 30, (ROWS, COLS)).astype(np.float32)  # exp alone would overflow
    x[1] = -np.inf  # a row of -inf: m stays -inf, exp(-inf - -inf) is nan, as in a naive logsumexp
    x[2, 5] = np.inf
    out = np.zeros(ROWS, np.float32)
    build_kernels([online_logsumexp()], [Step(0, (0, 1))]).run([out, x])
    m = x.max(1, keepdims=True)
    with np.errstate(invalid="ignore"):
        want = (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]
    ok = np.isfinite(want)
    np.testing.assert_allclose(out[ok], want[ok], rtol=1e-5)
    assert np.isnan(out[1]) and np.isnan(out[2]) == np.isnan(want[2])


def test_reads_of_an_accumulator_come_before_its_update_and_are_not_inlined_past_it() -> None:
    program = linearize(online_logsumexp())
    order = {u: n for n, u in enumerate(program.uops)}
    for update in (u for u in program.uops if u.op is Ops.ACCUMULATE):
        for reader in (u for u in program.uops if update.src[0] in u.src and u.op is not Ops.ACCUMULATE):
            assert order[reader] < order[update]
    source = CRenderer().render([program], [Step(0, (0, 1))]).text
    body = source[source.index("online_lse(") :]
    assert body.index("acc0 = alu") > body.index("(acc0-")  # the rescaling reads the old maximum first


@pytest.mark.parametrize("op", [None, Ops.ADD])
def test_an_assignment_prints_without_an_op_and_parses_back(op: Ops | None) -> None:
    acc = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(0.0, dtypes.float32),), 0)
    j = range_(4, 0, AxisType.REDUCE)
    update = UOp(Ops.ACCUMULATE, dtypes.float32, (acc, acc + j.cast(dtypes.float32), j), op)
    text = to_uir(sink(update.end(j)))
    assert ("op=" in text) == (op is not None)
    assert parse(text) is sink(update.end(j)) and fmt(text) == text
