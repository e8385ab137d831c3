"""capture(step): a replayed training loop against the same loop run eagerly, and what a capture refuses.

The oracle is the eager loop itself, seeded the same way: a replay runs the kernels that the eager step
would run, on the same values, so losses and weights must agree bit for bit, not to a tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from uopc.backend.c.runtime import CRuntime
from uopc.lower import normalize
from uopc.tensor import Tensor, TensorError, capture
from uopc.tensor.nn import Dropout, Linear, ReLU, Sequential
from uopc.tensor.optim import Adam
from uopc.tensor.realize import realizer

Step = Callable[[Tensor, Tensor], Tensor]


def mlp_and_step(hidden: int = 1) -> tuple[Sequential, Adam, Step]:
    """An MLP with `hidden` hidden layers of 16, and its training step."""
    Tensor.manual_seed(3)
    layers: list[Any] = [Linear(12, 16), ReLU()]
    for _ in range(hidden - 1):
        layers += [Linear(16, 16), ReLU()]
    model = Sequential(*layers, Linear(16, 5))
    opt = Adam(model.parameters(), lr=1e-2)

    def step(x: Tensor, y: Tensor) -> Tensor:
        loss = model(x).cross_entropy(y)
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        return loss

    return model, opt, step


def batches(n: int, rows: int = 8) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(7)
    return [
        (rng.standard_normal((rows, 12)).astype(np.float32), rng.integers(0, 5, rows).astype(np.int32))
        for _ in range(n)
    ]


def train(captured: bool, steps: int, hidden: int = 1) -> tuple[list[float], list[np.ndarray[Any, Any]]]:
    """`steps` steps with a learning rate that changes at every step, set between calls as scripts do."""
    model, opt, step = mlp_and_step(hidden)
    run = capture(step) if captured else step
    losses = []
    for i, (x, y) in enumerate(batches(steps)):
        opt.lr = 0.01 / (1 + i)
        losses.append(run(Tensor(x), Tensor(y)).item())
    return losses, [p.numpy() for p in model.parameters()]


def test_replayed_training_matches_the_eager_loop_bit_for_bit() -> None:
    eager_losses, eager_weights = train(captured=False, steps=8)
    losses, weights = train(captured=True, steps=8)  # calls 4 to 8 are replays
    assert losses == eager_losses
    for got, want in zip(weights, eager_weights, strict=True):
        assert got.tobytes() == want.tobytes()
    assert losses[-1] < losses[0]  # it trains: the comparison is not between two frozen loops


def test_memory_planning_changes_no_value_of_a_captured_training_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # two hidden layers: with one, the step's intermediates all overlap in time since each gradient is
    # computed in the kernel that updates its parameter (kernelize's epilogues), so nothing would share
    monkeypatch.setattr(realizer, "share_memory", False)
    separate_losses, separate_weights = train(captured=True, steps=6, hidden=2)
    monkeypatch.setattr(realizer, "share_memory", True)
    realizer.memory.clear()
    losses, weights = train(captured=True, steps=6, hidden=2)
    assert losses == separate_losses
    for got, want in zip(weights, separate_weights, strict=True):
        assert got.tobytes() == want.tobytes()
    shared = [plan for plan, memory in realizer.memory.items() if len(memory.sizes) < len(plan.buffers)]
    assert shared  # some plan of the step did share storage between intermediates


def test_a_plan_run_again_allocates_only_its_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    ((x.exp().sum(1, keepdim=True) * x).softmax(1) + 1).numpy()  # compiles the plan, allocates its scratch
    allocated: list[int] = []
    allocate = CRuntime.allocate

    def counted(self: CRuntime, dtype: Any, size: int) -> Any:
        allocated.append(size)
        return allocate(self, dtype, size)

    monkeypatch.setattr(CRuntime, "allocate", counted)
    y = Tensor(np.ones((3, 4), np.float32))
    got = ((y.exp().sum(1, keepdim=True) * y).softmax(1) + 1).numpy()
    assert allocated == [12]  # the output; the intermediates' storage is the plan's, kept from its first run
    np.testing.assert_allclose(got, np.full((3, 4), 1.25), rtol=1e-6)


def test_a_replay_builds_no_graph_and_allocates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, step = mlp_and_step()
    run = capture(step)
    data = batches(6)
    for x, y in data[:3]:
        run(Tensor(x), Tensor(y)).item()
    seen: list[str] = []

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen.append(name)
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr("uopc.tensor.realize.normalize", counted("normalize", normalize))
    monkeypatch.setattr(CRuntime, "allocate", counted("allocate", CRuntime.allocate))
    inputs = [(Tensor(x), Tensor(y)) for x, y in data[3:]]  # made before: their buffers are the caller's
    for images, labels in inputs:
        run(images, labels).item()
    assert seen == []


def test_a_new_shape_is_refused_naming_the_argument() -> None:
    _, _, step = mlp_and_step()
    run = capture(step)
    for x, y in batches(4):
        run(Tensor(x), Tensor(y))
    x, y = batches(1, rows=6)[0]
    with pytest.raises(TensorError, match=r"argument 'x' as a float32 tensor of shape \(8, 12\).*shape \(6, 12\)"):
        run(Tensor(x), Tensor(y))


def test_a_new_dtype_is_refused_naming_the_argument() -> None:
    _, _, step = mlp_and_step()
    run = capture(step)
    for x, y in batches(2):
        run(Tensor(x), Tensor(y))
    x, y = batches(1)[0]
    with pytest.raises(TensorError, match=r"argument 'y' as a int32 tensor of shape \(8,\).*a int64 tensor"):
        run(Tensor(x), Tensor(y.astype(np.int64)))


def test_a_bad_label_is_refused_at_the_replay_that_passes_it() -> None:
    _, _, step = mlp_and_step()
    run = capture(step)
    for x, y in batches(4):
        run(Tensor(x), Tensor(y))
    x, y = batches(1)[0]
    y[2] = 5  # 5 classes: labels 0 to 4
    with pytest.raises(TensorError, match=r"cross_entropy: indices must lie in \[0, 5\)"):
        run(Tensor(x), Tensor(y))


def test_random_numbers_made_inside_the_step_are_refused() -> None:
    Tensor.manual_seed(0)
    model = Sequential(Linear(12, 5), Dropout(0.5))

    @capture
    def forward(x: Tensor) -> Tensor:
        return model(x).sum()

    x = Tensor(batches(1)[0][0])
    forward(x)
    forward(x)
    with pytest.raises(TensorError, match="differed between calls 2 and 3"):
        forward(x)


@pytest.mark.c_backend  # the attention kernels run on C only (test_flash_attention.py)
@pytest.mark.parametrize("kernel", ["online", "tiled"])
def test_a_kernel_written_in_uops_is_refused_by_name_not_taken_for_python_data(kernel: str) -> None:
    """run_kernel's launches are not recorded: its output was once blamed on "Python data" inside the step."""

    @capture
    def attend(q: Tensor) -> Tensor:
        return q.scaled_dot_product_attention(q * 2.0, q + 1.0, is_causal=True, kernel=kernel).sum()

    rng = np.random.default_rng(3)
    attend(Tensor(rng.standard_normal((1, 8, 16)).astype(np.float32)))
    with pytest.raises(TensorError, match=r"runs the kernel attention_\w+ written in UOps .* use kernel='plain'"):
        attend(Tensor(rng.standard_normal((1, 8, 16)).astype(np.float32)))


def test_reading_values_inside_the_step_is_refused() -> None:
    @capture
    def total(x: Tensor) -> Tensor:
        s = x.sum()
        s.item()
        return s

    x = Tensor(np.ones(4, np.float32))
    total(x)
    with pytest.raises(TensorError, match="reads a tensor's values"):
        total(x)


def test_a_python_argument_that_changes_is_refused() -> None:
    @capture
    def scaled(x: Tensor, k: float) -> Tensor:
        return x * k

    x = Tensor(np.ones(4, np.float32))
    scaled(x, 2.0)
    with pytest.raises(TensorError, match=r"argument 'k' as 2.0, and now gets 3.0"):
        scaled(x, 3.0)


def test_a_replay_returns_new_values_and_arguments_as_given() -> None:
    """Steps without state: each replay computes from its own arguments; an argument returned is that one."""

    @capture
    def double(x: Tensor) -> tuple[Tensor, Tensor]:
        return x * 2.0, x

    for k in range(5):
        x = Tensor(np.full(3, k, np.float32))
        doubled, same = double(x)
        assert doubled.numpy().tolist() == [2.0 * k] * 3
        assert same is x
