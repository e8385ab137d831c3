"""An accumulator that assigns (ACCUMULATE with no op) on the GPU path: the CUDA text reads the old maximum
before it is replaced, and the lockstep emulator computes an online log-sum-exp as numpy does."""

from __future__ import annotations

import math
import re

import numpy as np

from uopc.backend.cuda import GPUOpts, emulate, lower_gpu, render_cuda_kernel
from uopc.ir import AxisType, Ops, UOp, dtypes, range_, sink
from uopc.lower import Kernel

ROWS, COLS = 64, 37


def online_logsumexp() -> Kernel:
    """out[i] = log(sum_j exp(x[i, j])) in one pass: m = max(m, x), l = l * exp(m_old - m) + exp(x - m)."""
    out, x = UOp.define_global(0, ROWS), UOp.define_global(1, ROWS * COLS)
    i, j = range_(ROWS, 0), range_(COLS, 1, AxisType.REDUCE)
    m = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(-math.inf, dtypes.float32), i), 0)
    total = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(0.0, dtypes.float32), i), 1)
    value = x.load(i * COLS + j)
    new_m = m.maximum(value)
    m_end = UOp(Ops.ACCUMULATE, dtypes.float32, (m, new_m, j), None).end(j)
    new_total = total * (m - new_m).exp() + (value - new_m).exp()
    total_end = UOp(Ops.ACCUMULATE, dtypes.float32, (total, new_total, j), None).end(j)
    return Kernel("online_lse", sink(out.store(i, m_end + total_end.log()).end(i)))


def test_the_cuda_text_reads_the_old_maximum_before_assigning_the_new() -> None:
    source, _ = render_cuda_kernel(lower_gpu(online_logsumexp(), GPUOpts()))
    read = re.search(r"float (alu\d+) = \(acc0-(alu\d+)\);", source)
    assert read is not None, source
    assert source.index(read[0]) < source.index(f"acc0 = {read[2]};")


def test_the_emulator_runs_the_recurrence_as_numpy_computes_it() -> None:
    x = np.random.default_rng(0).normal(0, 30, (ROWS, COLS)).astype(np.float32)
    out = np.zeros(ROWS, np.float32)
    emulate(lower_gpu(online_logsumexp(), GPUOpts()), [out, x.reshape(-1)])
    m = x.max(1, keepdims=True)
    np.testing.assert_allclose(out, (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0], rtol=1e-5)
