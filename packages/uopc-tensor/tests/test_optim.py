"""SGD, Adam and AdamW against hand-written numpy loops of the published algorithms (torch.optim's).

Each reference runs in float64 over five steps of a quadratic loss whose data is new at every step and
whose gradient depends on the parameters, so an error in any step carries into the later ones. The
learning rate changes between steps: the trajectory must follow it, and no step after the first may build
a plan or compile a kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import CCompiler
from uopc.ir import Ops
from uopc.lower import Binary, Source
from uopc.tensor import Tensor, TensorError, dtypes, realizer
from uopc.tensor.nn import Linear, Module
from uopc.tensor.optim import SGD, Adam, AdamW, Optimizer

F64 = npt.NDArray[np.float64]
Array = npt.NDArray[Any]
MakeOpt = Callable[[list[Tensor]], Optimizer]

SHAPES = [(3, 4), (5,)]
LRS = [0.1, 0.05, 0.2, 0.02, 0.1]  # a new learning rate at every step


def initial() -> list[F64]:
    rng = np.random.default_rng(0)
    return [rng.uniform(-1, 1, s).astype(np.float32).astype(np.float64) for s in SHAPES]


def step_data(step: int) -> list[tuple[F64, F64]]:
    """(scale, target) per parameter: the loss at `step` is sum(0.5 * scale * (p - target)^2)."""
    rng = np.random.default_rng(100 + step)
    return [
        (
            rng.uniform(0.5, 2.0, s).astype(np.float32).astype(np.float64),
            rng.uniform(-1, 1, s).astype(np.float32).astype(np.float64),
        )
        for s in SHAPES
    ]


def quad_grad(p: F64, scale: F64, target: F64) -> F64:
    g: F64 = scale * (p - target)
    return g


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every C source the backend compiles (or finds in the disk cache) from now on, in a list."""
    builds: list[str] = []
    compile_source = CCompiler.compile

    def counting_compile(self: CCompiler, source: Source) -> Binary:
        builds.append(source.text)
        return compile_source(self, source)

    monkeypatch.setattr(CCompiler, "compile", counting_compile)
    return builds


def run_uopc(make: MakeOpt, monkeypatch: pytest.MonkeyPatch) -> list[list[Array]]:
    """The parameters after each step; checks that steps after the first build and compile nothing."""
    params = [Tensor(p.astype(np.float32), requires_grad=True) for p in initial()]
    opt = make(params)
    builds = count_builds(monkeypatch)
    trajectory, made = [], 0
    for step, lr in enumerate(LRS):
        opt.lr = lr
        assert opt.lr == pytest.approx(lr)
        loss: Tensor | None = None
        for p, (scale, target) in zip(params, step_data(step), strict=True):
            a, b = Tensor(scale.astype(np.float32)), Tensor(target.astype(np.float32))
            term = (0.5 * a * (p - b).square()).sum()
            loss = term if loss is None else loss + term
        assert loss is not None
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        if step == 0:
            made, builds[:] = realizer.plans.made, []
        trajectory.append([p.numpy() for p in params])
    assert realizer.plans.made == made, "a step after the first built a new plan"
    assert builds == [], "a step after the first compiled a kernel"
    return trajectory


def check_trajectory(got: list[list[Array]], want: list[list[F64]]) -> None:
    assert len(got) == len(want) == len(LRS)
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        for a, b in zip(g, w, strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=f"after step {step + 1}")


# ---- the references: torch.optim's documented algorithms, in numpy ----


def sgd_reference(momentum: float, weight_decay: float) -> list[list[F64]]:
    params, bufs, out = initial(), [np.zeros(0)] * len(SHAPES), []
    for step, lr in enumerate(LRS):
        for i, (scale, target) in enumerate(step_data(step)):
            g = quad_grad(params[i], scale, target)
            if weight_decay:
                g = g + weight_decay * params[i]
            if momentum:
                bufs[i] = g if step == 0 else momentum * bufs[i] + g  # dampening 0
                g = bufs[i]
            params[i] = params[i] - lr * g
        out.append([p.copy() for p in params])
    return out


def adam_reference(betas: tuple[float, float], eps: float, weight_decay: float, decoupled: bool) -> list[list[F64]]:
    b1, b2 = betas
    params = initial()
    m = [np.zeros(s) for s in SHAPES]
    v = [np.zeros(s) for s in SHAPES]
    out = []
    for step, lr in enumerate(LRS):
        t = step + 1
        for i, (scale, target) in enumerate(step_data(step)):
            g = quad_grad(params[i], scale, target)
            if weight_decay and decoupled:
                params[i] = params[i] * (1 - lr * weight_decay)
            elif weight_decay:
                g = g + weight_decay * params[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = m[i] / (1 - b1**t), v[i] / (1 - b2**t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append([p.copy() for p in params])
    return out


@pytest.mark.parametrize(
    ("momentum", "weight_decay"),
    [(0.0, 0.0), (0.9, 0.0), (0.0, 0.1), (0.8, 0.05)],
    ids=["plain", "momentum", "wd", "both"],
)
def test_sgd_matches_reference(momentum: float, weight_decay: float, monkeypatch: pytest.MonkeyPatch) -> None:
    got = run_uopc(lambda ps: SGD(ps, lr=1.0, momentum=momentum, weight_decay=weight_decay), monkeypatch)
    check_trajectory(got, sgd_reference(momentum, weight_decay))


def test_adam_matches_reference_with_bias_correction(monkeypatch: pytest.MonkeyPatch) -> None:
    got = run_uopc(Adam, monkeypatch)
    check_trajectory(got, adam_reference((0.9, 0.999), 1e-8, 0.0, decoupled=False))


def test_adam_weight_decay_is_l2_added_to_the_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    got = run_uopc(lambda ps: Adam(ps, betas=(0.8, 0.95), eps=1e-3, weight_decay=0.5), monkeypatch)
    want = adam_reference((0.8, 0.95), 1e-3, 0.5, decoupled=False)
    check_trajectory(got, want)
    decoupled = adam_reference((0.8, 0.95), 1e-3, 0.5, decoupled=True)
    assert not np.allclose(want[-1][0], decoupled[-1][0], rtol=1e-3)  # the two kinds of decay differ here


def test_adamw_decouples_weight_decay(monkeypatch: pytest.MonkeyPatch) -> None:
    got = run_uopc(lambda ps: AdamW(ps, betas=(0.85, 0.99), weight_decay=0.5), monkeypatch)
    check_trajectory(got, adam_reference((0.85, 0.99), 1e-8, 0.5, decoupled=True))


def test_adamw_defaults_are_torchs(monkeypatch: pytest.MonkeyPatch) -> None:
    got = run_uopc(AdamW, monkeypatch)  # weight_decay 0.01, betas (0.9, 0.999), eps 1e-8
    check_trajectory(got, adam_reference((0.9, 0.999), 1e-8, 0.01, decoupled=True))


# ---- steps on a model: one plan, built once ----


class MLP(Module):
    def __init__(self) -> None:
        self.l1 = Linear(6, 8)
        self.l2 = Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


OPTIMIZERS: dict[str, MakeOpt] = {
    "sgd": lambda ps: SGD(ps, lr=0.1),
    "sgd-momentum-wd": lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    "adam": lambda ps: Adam(ps, lr=0.01, weight_decay=1e-3),
    "adamw": lambda ps: AdamW(ps, lr=0.01),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_steps_after_the_first_build_no_plan(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Tensor.manual_seed(0)
    model = MLP()
    opt = OPTIMIZERS[name](model.parameters())
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0).astype(np.int32)
    builds = count_builds(monkeypatch)
    made, losses = 0, []
    for step in range(6):
        idx = rng.permutation(32)[:16]  # new data every step
        opt.lr = 0.05 / (step + 1)
        loss = model(Tensor(x[idx])).cross_entropy(Tensor(y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        if step == 0:
            made, builds[:] = realizer.plans.made, []
        losses.append(float(loss.item()))
    assert realizer.plans.made == made, "a step after the first built a new plan"
    assert builds == [], "a step after the first compiled a kernel"
    assert all(np.isfinite(losses)) and len(set(losses)) == len(losses)  # the steps really ran, on new data


# ---- details and errors ----


def test_step_without_gradients_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    start = initial()
    params = [Tensor(p.astype(np.float32), requires_grad=True) for p in start]
    sgd = SGD(params, lr=0.1, momentum=0.9, weight_decay=0.1)
    sgd.step()  # before any backward(): nothing to do, as in PyTorch
    for p, p0 in zip(params, start, strict=True):
        np.testing.assert_array_equal(p.numpy(), p0)
    # Adam's step count must not advance either: the run that follows is the reference's from step 1
    got = run_uopc(lambda ps: no_op_first(Adam(ps)), monkeypatch)
    check_trajectory(got, adam_reference((0.9, 0.999), 1e-8, 0.0, decoupled=False))


def no_op_first(opt: Optimizer) -> Optimizer:
    opt.step()
    return opt


def test_parameters_without_gradient_are_left_alone() -> None:
    used = Tensor(np.ones(3, np.float32), requires_grad=True)
    unused = Tensor(np.full(3, 2.0, np.float32), requires_grad=True)
    opt = SGD([used, unused], lr=0.5, weight_decay=0.1)
    for _ in range(2):
        opt.zero_grad()
        (used * used).sum().backward()
        opt.step()
    # used: p -= 0.5 * (2p + 0.1p) twice, i.e. p *= -0.05 each step; unused is not even decayed
    np.testing.assert_allclose(used.numpy(), np.full(3, 0.05**2), rtol=1e-5)
    np.testing.assert_array_equal(unused.numpy(), np.full(3, 2.0, np.float32))


def test_gradients_accumulate_until_zero_grad() -> None:
    p = Tensor(np.array([1.0, -2.0], np.float32), requires_grad=True)
    opt = SGD([p], lr=0.25)
    for _ in range(2):
        (p * 3.0).sum().backward()  # no zero_grad between: the gradient is 3 + 3
    opt.step()
    np.testing.assert_allclose(p.numpy(), [1.0 - 0.25 * 6, -2.0 - 0.25 * 6], rtol=1e-6)
    opt.zero_grad()
    assert p.grad is None


@pytest.mark.parametrize("make", [SGD, Adam, AdamW], ids=["sgd", "adam", "adamw"])
def test_optimizer_errors_name_the_problem(make: Callable[[Sequence[Tensor]], Optimizer]) -> None:
    with pytest.raises(TensorError, match="got no parameters"):
        make([])
    frozen = Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(TensorError, match=r"shapes \[\(2, 3\)\] do not have requires_grad"):
        make([Tensor(np.zeros(4, np.float32), requires_grad=True), frozen])


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda ps: SGD(ps, lr=-0.1), "lr must be >= 0, got -0.1"),
        (lambda ps: SGD(ps, lr=float("nan")), "lr must be >= 0, got nan"),
        (lambda ps: SGD(ps, momentum=-0.9), "momentum must be >= 0"),
        (lambda ps: SGD(ps, weight_decay=-1e-4), "weight_decay must be >= 0"),
        (lambda ps: Adam(ps, betas=(1.0, 0.999)), r"betas must lie in \[0, 1\)"),
        (lambda ps: AdamW(ps, betas=(0.9, -0.1)), r"betas must lie in \[0, 1\)"),
        (lambda ps: Adam(ps, eps=-1e-8), "eps must be >= 0"),
        (lambda ps: AdamW(ps, weight_decay=-0.01), "weight_decay must be >= 0"),
        (lambda ps: Adam([*ps, ps[0]]), "listed more than once"),
    ],
)
def test_hyperparameters_torch_refuses_are_refused(make: Callable[[list[Tensor]], Optimizer], fragment: str) -> None:
    """A negative learning rate climbs the loss; a repeated parameter took two updates from one old value."""
    with pytest.raises(TensorError, match=fragment):
        make([Tensor(np.zeros(3, np.float32), requires_grad=True)])


def test_a_negative_learning_rate_is_refused_later_too() -> None:
    opt = SGD([Tensor(np.zeros(3, np.float32), requires_grad=True)], lr=0.1)
    with pytest.raises(TensorError, match="lr must be >= 0"):
        opt.lr = -0.1
    assert opt.lr == pytest.approx(0.1)


@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.5, momentum=0.9), Adam, AdamW], ids=["sgd", "adam", "adamw"])
def test_float16_parameters_stay_float16(make: Callable[[list[Tensor]], Optimizer]) -> None:
    """The float32 learning rate made an updated float16 parameter float32 without a word; PyTorch keeps
    each parameter's dtype."""
    start = np.array([1.0, -2.0, 0.5], np.float16)
    p = Tensor(start, requires_grad=True)
    opt = make([p])
    for _ in range(2):
        (p * 3.0).sum().backward()
        opt.step()
        opt.zero_grad()
    assert p.dtype is dtypes.float16 and p.numpy().dtype == np.float16
    assert np.all(p.numpy() < start)  # a gradient of +3 everywhere moved every value down


# ---- a parameter's update fused into its gradient's kernel ----

BATCH = 16


def batched_data(step: int) -> tuple[F64, F64]:
    """(scale, target) of shape (BATCH, 5): the loss is the sum over the batch of step_data's loss, so the
    gradient of a (5,) parameter is a sum over the batch, a reduction, as a bias's is."""
    rng = np.random.default_rng(200 + step)
    scale = rng.uniform(0.5, 2.0, (BATCH, 5)).astype(np.float32).astype(np.float64)
    return scale, rng.uniform(-1, 1, (BATCH, 5)).astype(np.float32).astype(np.float64)


def test_adamw_update_is_the_epilogue_of_its_gradients_reduction() -> None:
    """kernelize's epilogue rule: a small reduction (the gradient, summed over the batch) and the elementwise
    outputs that read it element for element (AdamW's new parameter, m and v) are one kernel, which computes
    the sum once; the trajectory is the float64 reference's."""
    b1, b2, eps, wd = 0.9, 0.99, 1e-8, 0.1
    p0 = np.random.default_rng(7).uniform(-1, 1, 5).astype(np.float32)
    p = Tensor(p0, requires_grad=True)
    opt = AdamW([p], lr=0.05, betas=(b1, b2), weight_decay=wd)
    want, m, v = p0.astype(np.float64), np.zeros(5), np.zeros(5)
    for step in range(4):
        scale, target = batched_data(step)
        loss = (0.5 * Tensor(scale.astype(np.float32)) * (p - Tensor(target.astype(np.float32))).square()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        g = (scale * (want - target)).sum(axis=0)
        want = want * (1 - 0.05 * wd)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        want = want - 0.05 * (m / (1 - b1 ** (step + 1))) / (np.sqrt(v / (1 - b2 ** (step + 1))) + eps)
        np.testing.assert_allclose(p.numpy(), want, rtol=2e-5, atol=2e-6, err_msg=f"after step {step + 1}")
    plan = next(reversed(realizer.plans.plans.values()))  # the step's, used last
    reducing = [k for k in plan.kernels if any(u.op is Ops.REDUCE for u in k.ast.toposort())]
    assert len(reducing) == 1, [k.name for k in plan.kernels]
    stores = sum(1 for u in reducing[0].ast.toposort() if u.op is Ops.STORE)
    assert stores == 3, "the new parameter, m and v; the gradient is read in this kernel alone, and not stored"
    assert len(plan.kernels) == 2, "the step count's kernel, and the fused one"
