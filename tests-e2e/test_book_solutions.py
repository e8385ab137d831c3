"""The book's exercise solutions (docs/solutions/*.py) are real code: each one is checked here.

docs/ is not a package, so each solution is loaded from its path.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from uopc.ir import Ops, UOp, param, range_, run, stack, substitute, to_python, to_uir

SOLUTIONS = Path(__file__).resolve().parent.parent / "docs" / "solutions"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"book_solution_{name}", SOLUTIONS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_solution_file_is_tested() -> None:
    tested = {
        "ch01_tree_size",
        "ch01_broadcast",
        "ch02_desugar_sub",
        "ch02_count_ops",
        "ch03_trunc_div",
        "ch03_in_bounds",
        "ch04_mean",
        "ch04_op_histogram",
        "ch05_strides",
        "ch05_saxpy",
        "ch06_executions",
        "ch06_acc_scopes",
        "ch07_roll",
        "ch07_read_map",
        "ch08_buffer_uses",
        "ch08_plans_per_step",
        "ch09_second_derivative",
        "ch09_gradient_check",
        "ch10_tril",
        "ch10_bce",
        "ch11_sequential",
        "ch11_rmsprop",
        "ch12_confusion",
        "ch12_schedule",
        "ch17_top_k",
        "appendix_b_ieee_equal",
        "appendix_b_shrink_graph",
        "appendix_b_sum_width_mutant",
    }
    assert {p.stem for p in SOLUTIONS.glob("*.py")} == tested


def test_ch01_tree_size_counts_every_use() -> None:
    tree_size = load("ch01_tree_size").tree_size
    x = param(0)
    assert tree_size(x) == 1
    assert tree_size(x + x) == 3  # two uses of x, one ADD
    y = x
    for _ in range(40):
        y = y + y
    assert len(y.toposort()) == 41
    assert tree_size(y) == 2**41 - 1


def test_ch01_broadcast_follows_numpy() -> None:
    broadcast_to = load("ch01_broadcast").broadcast_to
    row = stack(1.0, 2.0, 3.0)
    out = broadcast_to(row, (2, 3))
    assert out.shape == (2, 3)
    assert to_python(run(out)) == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    col = stack(stack(1.0), stack(2.0))  # shape (2, 1)
    assert to_python(run(broadcast_to(col, (2, 3)))) == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    assert broadcast_to(row, (3,)) is row
    with pytest.raises(ValueError, match="cannot broadcast"):
        broadcast_to(row, (2, 4))
    with pytest.raises(ValueError, match="lower rank"):
        broadcast_to(col, (3,))


def test_ch02_desugar_sub_removes_sub_and_keeps_values() -> None:
    desugar_sub = load("ch02_desugar_sub").desugar_sub
    a, b = param(0), param(1)
    out = desugar_sub((a - b) - (b - 3))
    assert all(u.op is not Ops.SUB for u in out.toposort())
    for x, y in [(5, 7), (-3, 2), (2**31 - 1, -1)]:
        values = {a: UOp.const(x), b: UOp.const(y)}
        assert run(substitute(out, values)) is run(substitute((a - b) - (b - 3), values))
    f = stack(1.5, -0.0, math.inf)
    assert to_python(run(desugar_sub(f - stack(0.5, 0.0, 1.0)))) == [1.0, -0.0, math.inf]


def test_ch02_count_ops_counts_distinct_nodes() -> None:
    count_ops = load("ch02_count_ops").count_ops
    x = param(0)
    g = (x + 1) * (x + 1) + x
    assert count_ops(g) == Counter({"PARAM": 1, "CONST": 1, "ADD": 2, "MUL": 1})
    assert count_ops(g) == Counter(u.op.name for u in g.toposort())


def test_ch03_trunc_div_matches_c() -> None:
    trunc_div = load("ch03_trunc_div").trunc_div
    a, b = param(0), param(1)
    q = trunc_div(a, b)
    for x in range(-9, 10):
        for y in [*range(-9, 0), *range(1, 10)]:
            got = run(substitute(q, {a: UOp.const(x), b: UOp.const(y)})).arg
            assert got == int(x / y), (x, y)


def test_ch03_provably_in_bounds() -> None:
    provably_in_bounds = load("ch03_in_bounds").provably_in_bounds
    i, j = range_(4, 0), range_(3, 1)
    assert provably_in_bounds(i * 3 + j, 12)
    assert not provably_in_bounds(i * 3 + j, 11)
    assert not provably_in_bounds(i - 1, 12)
    assert provably_in_bounds((i * 3 + j + 5) % 12, 12)
    assert not provably_in_bounds(param(0), 12)


def test_ch04_mean_runs() -> None:
    mod = load("ch04_mean")
    assert mod.mean_value() == [5.0]
    assert "reduce_axis" in mod.MEAN


def test_ch04_op_histogram() -> None:
    op_histogram = load("ch04_op_histogram").op_histogram
    text = "%0 = param i32 : 0\n%1 = mul %0, 2\n%2 = add %1, %0\n"
    assert op_histogram(text) == {"add": 1, "const": 1, "mul": 1, "param": 1}
    assert op_histogram(to_uir(stack(1.0, 1.0))) == {"const": 1, "stack": 1}


def test_ch05_strides_and_offsets_match_numpy() -> None:
    import numpy as np

    from uopc.ir import simplify
    from uopc.lower.rangeify import flat_index

    mod = load("ch05_strides")
    for shape in [(2, 3, 4), (5,), (1, 7, 1, 3), ()]:
        a = np.zeros(shape, np.float32)
        assert mod.strides(shape) == tuple(s // a.itemsize for s in a.strides)
        for index in np.ndindex(*shape):
            assert mod.offset(index, shape) == (np.ravel_multi_index(index, shape) if shape else 0)
    ranges = [range_(s, n) for n, s in enumerate((2, 3, 4))]
    for index in np.ndindex(2, 3, 4):
        fixed = {r: UOp.const(int(v)) for r, v in zip(ranges, index, strict=True)}
        assert simplify(substitute(flat_index(tuple(ranges), (2, 3, 4)), fixed)).arg == mod.offset(index, (2, 3, 4))
    with pytest.raises(IndexError, match="outside"):
        mod.offset((2, 0, 0), (2, 3, 4))


def test_ch05_saxpy_computes_and_refuses_bad_arrays() -> None:
    import numpy as np

    from uopc.backend.c import ArgumentError

    mod = load("ch05_saxpy")
    x = np.arange(mod.N, dtype=np.float32)
    y = np.ones(mod.N, dtype=np.float32)
    mod.saxpy(3.0, x, y)
    np.testing.assert_array_equal(y, 3 * np.arange(mod.N) + 1)
    with pytest.raises(ArgumentError, match="dtype float64"):
        mod.saxpy(3.0, x.astype(np.float64), y)
    with pytest.raises(ArgumentError, match="elements"):
        mod.saxpy(3.0, x[:-1], y)
    frozen = np.zeros(mod.N, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        mod.saxpy(3.0, x, frozen)


def test_ch06_executions_count_hoisted_work() -> None:
    from uopc.lower import linear_order, rangeify

    executions = load("ch06_executions").executions
    x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))
    program = linear_order(rangeify([(UOp.buffer(2, 12), x * UOp.buffer(1, 12).reshape((3, 4)))]))
    runs = executions(program)
    by_slot = {u.src[0].arg.slot: runs[u] for u in program if u.op is Ops.LOAD}
    assert by_slot == {0: 3, 1: 12}  # x[i] once per row, y[i, j] once per element
    assert [runs[u] for u in program if u.op is Ops.STORE] == [12]
    assert all(runs[u] == 1 for u in program if u.op is Ops.DEFINE_GLOBAL)


def test_ch06_accumulator_scopes() -> None:
    from uopc.lower import Opts, apply_opts, linear_order, rangeify

    scopes = load("ch06_acc_scopes").accumulator_scopes
    a = UOp.buffer(0, 4 * 8).reshape((4, 1, 8)).expand((4, 6, 8))
    b = UOp.buffer(1, 8 * 6).reshape((8, 6)).permute((1, 0)).reshape((1, 6, 8)).expand((4, 6, 8))
    gemm = rangeify([(UOp.buffer(2, 24), (a * b).sum([2]).reshape((4, 6)))])
    assert scopes(linear_order(gemm)) == [["idx0", "idx1"]]
    assert scopes(linear_order(apply_opts(gemm, Opts(thread=1, upcast={0: 2})))) == [["tidx1", "idx0"]] * 2
    x = UOp.buffer(0, 12).reshape((3, 4))
    rows = rangeify([(UOp.buffer(1, 3), (x.sum([1]) + x.reduce(Ops.MAX, [1])).reshape((3,)))])
    assert scopes(linear_order(rows)) == [["idx0"], ["idx0"]]


def test_ch07_roll_matches_numpy() -> None:
    import numpy as np

    from uopc.backend.c import C_BACKEND
    from uopc.lower import Kernel, linearize, rangeify

    roll = load("ch07_roll").roll
    shifts = [-6, -1, 0, 1, 2, 4, 5, 13]
    kernels = [
        Kernel(f"roll_{n}", rangeify([(UOp.buffer(1, 5), roll(UOp.buffer(0, 5), s))])) for n, s in enumerate(shifts)
    ]
    programs = [linearize(k) for k in kernels]
    exe = C_BACKEND.runtime.load(C_BACKEND.compiler.compile(C_BACKEND.renderer.render(programs, [])), programs, [])
    x = np.arange(1, 6, dtype=np.float32)
    for n, s in enumerate(shifts):
        out = np.zeros(5, np.float32)
        exe.run_kernel(n, [x, out])
        np.testing.assert_array_equal(out, np.roll(x, s), err_msg=f"shift {s}")
    assert all(u.op is not Ops.CONST or u.shape == () for u in roll(UOp.buffer(0, 5), 2).toposort())


def test_ch07_read_map_matches_numpy() -> None:
    import numpy as np

    read_map = load("ch07_read_map").read_map
    x, a = UOp.buffer(0, 24), np.arange(24)
    cases = [
        (x.reshape((6, 4)).permute((1, 0)), a.reshape(6, 4).T),
        (x.reshape((4, 6)).permute((1, 0)).reshape((24,)), a.reshape(4, 6).T.reshape(24)),
        (x.reshape((2, 3, 4)).shrink(((1, 2), (0, 3), (1, 3))), a.reshape(2, 3, 4)[1:2, :, 1:3]),
        (x.reshape((4, 6)).flip([0, 1]), a.reshape(4, 6)[::-1, ::-1]),
        (x.reshape((1, 24)).expand((2, 24)), np.broadcast_to(a.reshape(1, 24), (2, 24))),
        (x.reshape((4, 6)).pad(((1, 0), (2, 1))), np.pad(a.reshape(4, 6), ((1, 0), (2, 1)), constant_values=-1)),
        (x.pad(((0, 3),)).shrink(((25, 27),)), np.full(2, -1)),
    ]
    for view, want in cases:
        assert read_map(view) == [None if v < 0 else int(v) for v in want.reshape(-1)]


def test_ch08_buffer_uses_of_a_softmax_plan() -> None:
    import numpy as np

    from uopc.lower import make_plan, normalize
    from uopc.tensor import Tensor

    buffer_uses = load("ch08_buffer_uses").buffer_uses
    x = Tensor(np.ones((4, 6), np.float32))
    graph, _ = normalize([x.softmax(1).uop])
    assert buffer_uses(make_plan(graph, opt=False)) == {
        0: ([], ["r_4_1", "E_4_6"]),
        1: (["E_4_6_1"], []),
        2: (["r_4_1"], ["E_4_6"]),
        3: (["E_4_6"], ["r_4_1_1", "E_4_6_1"]),
        4: (["r_4_1_1"], ["E_4_6_1"]),
    }


def test_ch08_constants_cost_plans_and_tensors_do_not() -> None:
    mod = load("ch08_plans_per_step")
    assert mod.plans_per_step(mod.step_with_constant, 3) == [1, 1, 1]
    assert mod.plans_per_step(mod.step_with_tensor, 3) == [1, 0, 0]


def test_ch09_second_derivatives() -> None:
    import numpy as np

    second_derivative = load("ch09_second_derivative").second_derivative
    a = np.array([[0.5, 1.0, -2.0], [1.5, -0.25, 0.75]], np.float32)
    np.testing.assert_allclose(second_derivative(lambda t: t**3, a), 6 * a, rtol=1e-5)
    np.testing.assert_allclose(second_derivative(lambda t: t.sin(), a), -np.sin(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(second_derivative(lambda t: t * t.exp(), a), np.exp(a) * (a + 2), rtol=1e-5, atol=1e-6)


def test_ch09_gradient_check_sees_a_permute_that_is_not_inverted() -> None:
    import numpy as np
    import numpy.typing as npt

    from uopc.ir import Ops, UOpError
    from uopc.tensor.autodiff import GRADIENT_RULES

    mod = load("ch09_gradient_check")
    cube = np.random.default_rng(0).standard_normal((3, 3, 3)).astype(np.float32)
    cycle, swap = mod.CYCLE, (0, 2, 1)

    def check(order: tuple[int, ...], a: npt.NDArray[np.float32]) -> float:
        return float(mod.gradient_check(lambda t: t.permute(order), lambda v: v.transpose(order), a))

    assert check(cycle, cube) < 1e-5 and check(swap, cube) < 1e-5
    right = GRADIENT_RULES[Ops.PERMUTE]
    GRADIENT_RULES[Ops.PERMUTE] = lambda u, g: (g.permute(u.arg),)
    try:
        assert check(cycle, cube) > 0.1  # a 3-cycle is not its own inverse: wrong numbers
        assert check(swap, cube) < 1e-5  # a swap is: the bug hides
        with pytest.raises(UOpError):
            check(cycle, np.ones((2, 3, 2), np.float32))  # sizes that differ: a shape error instead
    finally:
        GRADIENT_RULES[Ops.PERMUTE] = right


def test_ch10_tril_matches_numpy() -> None:
    import numpy as np

    from uopc.tensor import Tensor, TensorError, dtypes

    tril = load("ch10_tril").tril
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in (-1, 0, 1, 5):
        np.testing.assert_array_equal(tril(Tensor(a), k).numpy(), np.tril(a, k))
    b = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    out = tril(Tensor(b))
    assert out.dtype is dtypes.int32
    np.testing.assert_array_equal(out.numpy(), np.tril(b))
    with pytest.raises(TensorError, match="at least 2 dimensions"):
        tril(Tensor(np.ones(3, np.float32)))


def test_ch10_bce_with_logits_is_stable_and_has_the_right_gradient() -> None:
    import numpy as np

    from uopc.tensor import Tensor

    bce_with_logits = load("ch10_bce").bce_with_logits
    z = np.array([-100.0, -3.0, -0.5, 0.0, 2.0, 100.0], np.float32)
    y = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0], np.float32)
    z64 = z.astype(np.float64)
    want = float(np.mean(np.logaddexp(0.0, z64) - z64 * y))
    logits = Tensor(z, requires_grad=True)
    loss = bce_with_logits(logits, Tensor(y))
    assert loss.item() == pytest.approx(want, rel=1e-5)
    loss.backward()
    assert logits.grad is not None
    sigmoid = 1.0 / (1.0 + np.exp(-z64))
    np.testing.assert_allclose(logits.grad.numpy(), (sigmoid - y) / len(z), rtol=1e-5, atol=1e-7)  # z = 0 too


def test_ch11_sequential_names_and_applies_its_layers() -> None:
    import numpy as np

    from uopc.tensor import Tensor
    from uopc.tensor.nn import Dropout, Linear

    Sequential = load("ch11_sequential").Sequential
    Tensor.manual_seed(0)
    model = Sequential(Linear(4, 8), Tensor.relu, Dropout(0.5), Linear(8, 2))
    assert list(model.state_dict()) == ["layers.0.bias", "layers.0.weight", "layers.3.bias", "layers.3.weight"]
    assert len(model.parameters()) == 4
    model.eval()
    assert not model.layers[2].training
    x = Tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    want = model.layers[3](model.layers[0](x).relu()).numpy()
    np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-6)


def test_ch11_rmsprop_matches_torch_algorithm_in_one_plan() -> None:
    import numpy as np

    from uopc.tensor import Tensor, realizer

    RMSprop = load("ch11_rmsprop").RMSprop
    start = np.array([1.0, -2.0, 0.5], np.float32)
    p = Tensor(start, requires_grad=True)
    opt = RMSprop([p], lr=0.1)
    ref, v, made = start.astype(np.float64), np.zeros(3), []
    for step in range(4):
        target = np.array([0.3, 0.1, -0.2]) * (step + 1)
        loss = (p - Tensor(target.astype(np.float32))).square().sum()
        opt.zero_grad()
        loss.backward()
        before = realizer.plans.made
        opt.step(loss)
        made.append(realizer.plans.made - before)
        g = 2 * (ref - target)
        v = 0.99 * v + 0.01 * g * g
        ref = ref - 0.1 * g / (np.sqrt(v) + 1e-8)
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-6)
    assert made[1:] == [0, 0, 0]


def test_ch12_confusion_matrix_matches_numpy() -> None:
    import numpy as np

    from uopc.tensor import Tensor, TensorError, dtypes

    confusion_matrix = load("ch12_confusion").confusion_matrix
    rng = np.random.default_rng(0)
    labels, predictions = rng.integers(0, 4, 50).astype(np.int32), rng.integers(0, 4, 50).astype(np.int32)
    want = np.zeros((4, 4), np.int64)
    np.add.at(want, (labels, predictions), 1)
    got = confusion_matrix(Tensor(labels), Tensor(predictions), 4)
    assert got.dtype is dtypes.int32
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(TensorError, match="must be 1-D"):
        confusion_matrix(Tensor(labels), Tensor(predictions[:10]), 4)


def test_ch12_warmup_cosine_schedule_and_one_plan() -> None:
    import itertools

    import numpy as np

    from uopc.tensor import Tensor, realizer
    from uopc.tensor.optim import AdamW

    schedule = load("ch12_schedule").warmup_cosine
    rates = [schedule(1.0, s, 10, 4) for s in range(10)]
    assert rates[:4] == [0.25, 0.5, 0.75, 1.0]
    assert rates[4] == 1.0 and all(a > b for a, b in itertools.pairwise(rates[4:]))
    assert rates[-1] == pytest.approx(0.5 * (1 + math.cos(math.pi * 5 / 6)))
    with pytest.raises(ValueError, match="need 0 <= step < total"):
        schedule(1.0, 10, 10, 4)
    p = Tensor(np.array([1.0, -1.0], np.float32), requires_grad=True)
    opt = AdamW([p], lr=0.1)
    made = []
    for step in range(4):
        opt.lr = schedule(0.1, step, 4, 2)
        loss = (p * p).sum()
        opt.zero_grad()
        loss.backward()
        before = realizer.plans.made
        opt.step(loss)
        made.append(realizer.plans.made - before)
    assert made[1:] == [0, 0, 0]


def test_appendix_b_ieee_differences_see_nan_and_the_sign_of_zero() -> None:
    import numpy as np

    ieee_differences = load("appendix_b_ieee_equal").ieee_differences
    ours = np.array([np.nan, -0.0, 0.0, 1.0, np.inf, -np.inf, 5e-324], np.float64)
    theirs = np.array([np.nan, 0.0, 0.0, 1.0, np.inf, np.inf, 5e-324], np.float64)
    assert ieee_differences(ours, theirs).tolist() == [False, True, False, False, False, True, False]
    half = np.array([-0.0, np.nan, 65504], np.float16)
    assert not ieee_differences(half, half.astype(np.float32)).any()  # the same values in another dtype
    with pytest.raises(ValueError, match="shapes"):
        ieee_differences(ours, theirs[:3])


def test_appendix_b_shrink_keeps_the_failure_and_removes_what_it_can() -> None:
    import numpy as np

    solution = load("appendix_b_shrink_graph")

    def truncating_mod_differs(g: UOp) -> bool:
        """The check of a renderer that used C's %: it differs from the IR's floor % on a negative operand."""
        for u in g.toposort():
            if u.op is Ops.MOD:
                a, b = (np.array(to_python(run(s))) for s in u.src)
                if np.any((b != 0) & (np.fmod(a, np.where(b == 0, 1, b)) != np.mod(a, np.where(b == 0, 1, b)))):
                    return True
        return False

    a = stack(3, -7, 2, 5)
    program = ((a * 2 + 1) % 3).reshape((2, 2)).permute((1, 0)) + stack(stack(1, 1), stack(2, 2))
    program = program.reduce(Ops.MAX, [1]) * 4
    assert truncating_mod_differs(program)
    small = solution.shrink(program, truncating_mod_differs)
    assert truncating_mod_differs(small)
    assert len(small.toposort()) < len(program.toposort()) // 2
    assert small.shape == program.shape and small.dtype is program.dtype
    size = len(small.toposort())
    assert not any(truncating_mod_differs(c) for c in solution.smaller_versions(small) if len(c.toposort()) < size)
    with pytest.raises(ValueError, match="nothing to shrink"):
        solution.shrink(stack(1, 2), truncating_mod_differs)


def test_appendix_b_a_new_mutant_applies_and_is_killed() -> None:
    solution = load("appendix_b_sum_width_mutant")
    mutant = solution.SUM_IN_OWN_WIDTH
    assert mutant.mutated in solution.mutants.mutated_source(mutant)  # its snippet occurs exactly once
    assert mutant.name not in solution.mutants.BY_NAME  # a new one, not a copy of the catalogue's
    killer = solution.first_failure(mutant)
    assert killer is not None and "test_integer_sums_take_numpy_s_width" in killer


def test_ch17_top_k_matches_the_sampler() -> None:
    import numpy as np

    from uopc.tensor import Tensor

    distribution = load("ch17_top_k").distribution
    sys.path.append(str(SOLUTIONS.parent.parent / "scripts"))  # scripts/gpt.py, as the training script imports it
    from gpt import next_char_distribution

    rng = np.random.default_rng(17)
    logits = rng.normal(0, 2, 23).astype(np.float32)
    for temperature in (0.5, 1.0, 2.0):
        for k in (1, 2, 5, 22, 23, None):
            mine = distribution(logits, temperature, k)
            theirs = next_char_distribution(Tensor(logits), temperature, k).numpy()
            np.testing.assert_allclose(theirs, mine, rtol=1e-5, atol=1e-7)
            assert np.count_nonzero(mine) == (k or 23)
    assert distribution(logits, 2.0, 1)[np.argmax(logits)] == 1.0  # k = 1 is greedy at any temperature
