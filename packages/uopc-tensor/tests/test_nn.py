"""Layers, modules and checkpoints of uopc.tensor.nn, each against an independent oracle.

Forward passes are checked against the same formula written in numpy. Gradients (with respect to the
input and to every parameter) are checked against central finite differences of that numpy formula in
float64, with a random upstream gradient so that no term cancels; the tolerances are far tighter than a
factor of 2. Initializations are checked by their bounds and moments, with margins of several standard
deviations of the estimate. A checkpoint is also read back by parsing the safetensors header by hand.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.tensor import Tensor, TensorError, dtypes, realizer
from uopc.tensor.nn import (
    ELU,
    GELU,
    AvgPool2d,
    CausalSelfAttention,
    CheckpointError,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    Hardswish,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    MaxPool2d,
    Module,
    ModuleList,
    MultiHeadAttention,
    ReLU,
    ReLU6,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
    load,
    save,
)

F64 = npt.NDArray[np.float64]
Array = npt.NDArray[Any]


def floats(shape: tuple[int, ...], seed: int, low: float = -2.0, high: float = 2.0) -> Array:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def numeric_grad(f: Callable[[F64], float], x: Array, h: float = 1e-6) -> F64:
    """d f / d x by central differences, in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    grad = np.zeros_like(x64)
    for idx in np.ndindex(*x64.shape):
        up, down = x64.copy(), x64.copy()
        up[idx] += h
        down[idx] -= h
        grad[idx] = (f(up) - f(down)) / (2 * h)
    return grad


def grad_of(t: Tensor) -> Array:
    assert t.grad is not None, "backward() left no gradient"
    return t.grad.numpy()


def check_grad(got: Array, want: F64) -> None:
    """float32 analytic gradient against a float64 numeric one: a factor of 2 anywhere is far outside this."""
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


# ---- Linear ----


def test_linear_forward_is_x_at_weight_t_plus_bias() -> None:
    Tensor.manual_seed(0)
    lin = Linear(4, 3)
    x2, x3 = floats((5, 4), 1), floats((2, 5, 4), 2)
    y2, y3 = lin(Tensor(x2)), lin(Tensor(x3))
    Tensor.realize(y2, y3)
    w, b = lin.weight.numpy().astype(np.float64), lin.state_dict()["bias"].numpy().astype(np.float64)
    assert w.shape == (3, 4) and b.shape == (3,)
    np.testing.assert_allclose(y2.numpy(), x2 @ w.T + b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y3.numpy(), x3 @ w.T + b, rtol=1e-5, atol=1e-6)


def test_linear_without_bias() -> None:
    Tensor.manual_seed(0)
    lin = Linear(4, 3, bias=False)
    assert lin.bias is None
    assert list(lin.state_dict()) == ["weight"]
    x = floats((5, 4), 3)
    np.testing.assert_allclose(lin(Tensor(x)).numpy(), x @ lin.weight.numpy().T, rtol=1e-5, atol=1e-6)


def test_linear_init_is_uniform_in_plus_minus_one_over_sqrt_fan_in() -> None:
    Tensor.manual_seed(0)
    for fan_in in (16, 64):
        lin = Linear(fan_in, 300)
        bound = 1.0 / math.sqrt(fan_in)
        w = lin.weight.numpy().astype(np.float64)
        assert lin.bias is not None
        b = lin.bias.numpy().astype(np.float64)
        assert w.shape == (300, fan_in) and b.shape == (300,)
        assert lin.weight.requires_grad and lin.bias.requires_grad
        # bounds: inside, and reached (the bound comes from in_features, not out_features)
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
        assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
        # moments of U(-bound, bound): mean 0, variance bound^2 / 3
        assert abs(w.mean()) < 0.02 * bound
        assert w.var() == pytest.approx(bound**2 / 3, rel=0.06)
        assert b.var() == pytest.approx(bound**2 / 3, rel=0.3)
    Tensor.manual_seed(5)
    a = Linear(8, 8).weight.numpy()
    Tensor.manual_seed(5)
    np.testing.assert_array_equal(Linear(8, 8).weight.numpy(), a)


def test_linear_gradients_match_finite_differences() -> None:
    Tensor.manual_seed(1)
    lin = Linear(4, 3)
    x_np, up = floats((5, 4), 10), floats((5, 3), 11)
    w0, b0 = lin.weight.numpy(), lin.state_dict()["bias"].numpy()
    x = Tensor(x_np, requires_grad=True)
    (lin(x) * Tensor(up)).sum().backward()
    assert lin.bias is not None
    Tensor.realize(*(t.grad for t in (x, lin.weight, lin.bias) if t.grad is not None))

    def f(x: F64, w: F64, b: F64) -> float:
        return float(((x @ w.T + b) * up).sum())

    check_grad(grad_of(x), numeric_grad(lambda v: f(v, w0, b0), x_np))
    check_grad(grad_of(lin.weight), numeric_grad(lambda v: f(x_np, v, b0), w0))
    check_grad(grad_of(lin.bias), numeric_grad(lambda v: f(x_np, w0, v), b0))


# ---- LayerNorm ----


def layer_norm_ref(x: F64, w: F64, b: F64, n_axes: int, eps: float) -> F64:
    axes = tuple(range(x.ndim - n_axes, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)  # biased, as PyTorch
    out: F64 = (x - mean) / np.sqrt(var + eps) * w + b
    return out


def test_layernorm_init_is_ones_and_zeros() -> None:
    ln = LayerNorm((2, 3))
    assert ln.weight is not None and ln.bias is not None
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(ln.bias.numpy(), np.zeros((2, 3), np.float32))
    assert sorted(ln.state_dict()) == ["bias", "weight"]
    assert all(p.requires_grad for p in ln.parameters())
    plain = LayerNorm(4, elementwise_affine=False)
    assert plain.state_dict() == {} and plain.parameters() == []


def test_layernorm_forward_uses_biased_variance_and_eps() -> None:
    ln = LayerNorm(8)
    w, b = floats((8,), 20, 0.5, 1.5), floats((8,), 21)
    ln.weight, ln.bias = Tensor(w, requires_grad=True), Tensor(b, requires_grad=True)
    x = floats((3, 8), 22) * 4.0 + 1.0
    # values whose variance (~1e-6) is below eps: a misplaced or missing eps changes the result threefold
    tiny = floats((3, 8), 23) * 1e-3
    plain = LayerNorm(8, eps=1e-3, elementwise_affine=False)
    outs = [ln(Tensor(x)), ln(Tensor(tiny)), plain(Tensor(x))]
    Tensor.realize(*outs)
    one, zero = np.ones(8), np.zeros(8)
    np.testing.assert_allclose(outs[0].numpy(), layer_norm_ref(x, w, b, 1, 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[1].numpy(), layer_norm_ref(tiny, w, b, 1, 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[2].numpy(), layer_norm_ref(x, one, zero, 1, 1e-3), rtol=1e-4, atol=1e-5)


def test_layernorm_over_several_trailing_axes_and_shape_errors() -> None:
    ln = LayerNorm((3, 4))
    x = floats((2, 3, 4), 24)
    np.testing.assert_allclose(
        ln(Tensor(x)).numpy(), layer_norm_ref(x, np.ones((3, 4)), np.zeros((3, 4)), 2, 1e-5), rtol=1e-4, atol=1e-5
    )
    with pytest.raises(TensorError, match=r"LayerNorm\(3, 4\).*\(2, 4, 3\)"):
        ln(Tensor(floats((2, 4, 3), 25)))


def test_layernorm_gradients_match_finite_differences() -> None:
    ln = LayerNorm(5)
    w0, b0 = floats((5,), 30, 0.5, 1.5), floats((5,), 31)
    ln.weight, ln.bias = Tensor(w0, requires_grad=True), Tensor(b0, requires_grad=True)
    x_np, up = floats((3, 5), 32), floats((3, 5), 33)
    x = Tensor(x_np, requires_grad=True)
    (ln(x) * Tensor(up)).sum().backward()
    Tensor.realize(*(t.grad for t in (x, ln.weight, ln.bias) if t.grad is not None))

    def f(x: F64, w: F64, b: F64) -> float:
        return float((layer_norm_ref(x, w, b, 1, 1e-5) * up).sum())

    want_x = numeric_grad(lambda v: f(v, w0, b0), x_np)
    assert np.abs(want_x).max() > 0.1  # a random upstream gradient: the input gradient does not vanish
    check_grad(grad_of(x), want_x)
    check_grad(grad_of(ln.weight), numeric_grad(lambda v: f(x_np, v, b0), w0))
    check_grad(grad_of(ln.bias), numeric_grad(lambda v: f(x_np, w0, v), b0))


# ---- Embedding ----


def test_embedding_looks_up_rows() -> None:
    Tensor.manual_seed(2)
    emb = Embedding(10, 4)
    idx = np.array([[3, 0, 9], [3, 7, 1]], dtype=np.int32)
    out = emb(Tensor(idx)).numpy()
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, emb.weight.numpy()[idx])
    with pytest.raises(TensorError, match="integers"):
        emb(Tensor(idx.astype(np.float32)))


@pytest.mark.parametrize("bad", [[0, 5], [-1, 2]])
def test_embedding_rejects_indices_outside_the_table(bad: list[int]) -> None:
    """One-hot lookup would silently give a row of zeros for these; the layer refuses them instead."""
    emb = Embedding(5, 3)
    with pytest.raises(TensorError, match=r"indices must lie in \[0, 5\)"):
        emb(Tensor(np.array(bad, dtype=np.int32)))


def test_embedding_init_is_standard_normal() -> None:
    Tensor.manual_seed(3)
    w = Embedding(500, 40).weight.numpy().astype(np.float64)
    assert w.shape == (500, 40)
    assert abs(w.mean()) < 0.03
    assert w.std() == pytest.approx(1.0, abs=0.03)
    # a normal, not a uniform of the same variance (which has 57.7% within one standard deviation)
    assert np.mean(np.abs(w) < 1.0) == pytest.approx(0.6827, abs=0.02)


def test_embedding_gradient_accumulates_repeated_rows() -> None:
    Tensor.manual_seed(4)
    emb = Embedding(6, 3)
    idx = np.array([[1, 4, 1], [5, 1, 0]], dtype=np.int32)  # row 1 three times, rows 2 and 3 never
    up = floats((2, 3, 3), 40)
    (emb(Tensor(idx)) * Tensor(up)).sum().backward()
    w0 = emb.weight.numpy()
    want = numeric_grad(lambda w: float((w[idx] * up).sum()), w0)
    check_grad(grad_of(emb.weight), want)
    assert np.all(want[[2, 3]] == 0) and np.abs(want[1]).sum() > 0


# ---- Dropout ----


def modes(modules: list[Module]) -> list[bool]:
    return [m.training for m in modules]


def test_dropout_in_training_zeros_about_p_and_scales_the_rest() -> None:
    x = floats((100, 200), 50, 0.5, 1.5)  # no zeros of its own
    drop = Dropout(0.25)
    Tensor.manual_seed(7)
    y = drop(Tensor(x)).numpy()
    made = realizer.plans.made
    kept = y != 0
    assert np.mean(~kept) == pytest.approx(0.25, abs=0.02)  # 20,000 draws: 6 standard deviations
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-6)
    # seeded: the same seed gives the same mask, a new call a new one (new data, not a new plan)
    Tensor.manual_seed(7)
    np.testing.assert_array_equal(drop(Tensor(x)).numpy(), y)
    again = drop(Tensor(x)).numpy()
    assert realizer.plans.made == made
    assert np.mean((again != 0) != kept) > 0.2


def test_dropout_is_identity_in_eval_and_for_p_zero() -> None:
    x = floats((4, 5), 51)
    drop = Dropout(0.5)
    assert drop.eval() is drop and modes([drop]) == [False]
    np.testing.assert_array_equal(drop(Tensor(x)).numpy(), x)
    drop.train()
    assert modes([drop]) == [True]
    Tensor.manual_seed(52)
    assert np.any(drop(Tensor(x)).numpy() == 0)
    np.testing.assert_array_equal(Dropout(0.0)(Tensor(x)).numpy(), x)
    for p in (1.0, -0.1):
        with pytest.raises(ValueError, match="p must be in"):
            Dropout(p)


def test_dropout_gradient_matches_finite_differences() -> None:
    Tensor.manual_seed(8)
    x_np, up = floats((6, 7), 52, 0.5, 1.5), floats((6, 7), 53)
    x = Tensor(x_np, requires_grad=True)
    y = Dropout(0.4)(x)
    (y * Tensor(up)).sum().backward()
    Tensor.realize(y, *([x.grad] if x.grad is not None else []))
    mask = y.numpy() != 0  # the mask this forward pass drew
    assert 0 < mask.mean() < 1
    want = numeric_grad(lambda v: float((np.where(mask, v / 0.6, 0.0) * up).sum()), x_np)
    check_grad(grad_of(x), want)


# ---- Module ----


class Block(Module):
    def __init__(self) -> None:
        self.ln = LayerNorm(4)
        self.fc = Linear(4, 4)
        self.drop = Dropout(0.5)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.fc(self.ln(x)))


class Net(Module):
    def __init__(self) -> None:
        self.embed = Embedding(10, 4)
        self.blocks = [Block(), Block()]
        self.heads = {"b": Linear(4, 3, bias=False), "a": Linear(4, 2)}
        self.pair = (Dropout(0.1), Linear(2, 2))
        self.scale = Tensor(np.full(4, 0.5, np.float32))  # state, not a parameter: no requires_grad
        self.name = "net"  # neither

    def forward(self, idx: Tensor) -> Tensor:
        h = self.embed(idx) * self.scale
        for block in self.blocks:
            h = block(h)
        return self.heads["a"](h)


NET_KEYS = [
    "blocks.0.fc.bias",
    "blocks.0.fc.weight",
    "blocks.0.ln.bias",
    "blocks.0.ln.weight",
    "blocks.1.fc.bias",
    "blocks.1.fc.weight",
    "blocks.1.ln.bias",
    "blocks.1.ln.weight",
    "embed.weight",
    "heads.a.bias",
    "heads.a.weight",
    "heads.b.weight",
    "pair.1.bias",
    "pair.1.weight",
    "scale",
]


def test_state_dict_names_nested_modules_lists_and_dicts() -> None:
    Tensor.manual_seed(0)
    net = Net()
    state = net.state_dict()
    assert list(state) == NET_KEYS
    assert state["blocks.1.fc.weight"] is net.blocks[1].fc.weight
    assert state["heads.b.weight"] is net.heads["b"].weight
    assert state["pair.1.weight"] is net.pair[1].weight
    assert state["scale"] is net.scale
    params = net.parameters()
    assert [id(p) for p in params] == [id(state[k]) for k in NET_KEYS if k != "scale"]
    assert sum(p.numel() for p in params) == 2 * (4 * 4 + 4 + 4 + 4) + 10 * 4 + (4 * 2 + 2) + 4 * 3 + (2 * 2 + 2)


def test_train_and_eval_reach_every_module() -> None:
    Tensor.manual_seed(0)
    net = Net()
    every = net.modules()
    assert len(every) == 1 + 2 * 4 + 2 + 2  # embed, 2 blocks of (block, ln, fc, drop), 2 heads, 2 in the pair
    assert net.eval() is net
    assert modes([net, *every]) == [False] * 14
    idx = Tensor(np.array([[1, 2, 3]], dtype=np.int32))
    first = net(idx).numpy()
    np.testing.assert_array_equal(net(idx).numpy(), first)  # no dropout in evaluation: deterministic
    net.train()
    assert modes([net, *every]) == [True] * 14
    assert not np.array_equal(net(idx).numpy(), net(idx).numpy())  # dropout is back
    with pytest.raises(TypeError, match="Module defines no forward"):
        Module()()


# ---- checkpoints ----


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The format by hand: an 8-byte little-endian length, then that many bytes of JSON."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header: dict[str, Any] = json.loads(data[8 : 8 + n])
    return header


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path: Path) -> None:
    Tensor.manual_seed(11)
    net = Net()
    net.eval()
    idx = Tensor(np.array([[0, 5, 9], [2, 2, 7]], dtype=np.int32))
    want = net(idx).numpy()
    path = tmp_path / "net.safetensors"
    save(net.state_dict(), path)

    header = read_safetensors_header(path)
    assert sorted(k for k in header if k != "__metadata__") == NET_KEYS
    assert header["embed.weight"]["dtype"] == "F32" and header["embed.weight"]["shape"] == [10, 4]
    arrays = load(path)
    assert sorted(arrays) == NET_KEYS
    np.testing.assert_array_equal(arrays["heads.a.weight"], net.heads["a"].weight.numpy())

    Tensor.manual_seed(12)
    fresh = Net()
    fresh.eval()
    assert not np.allclose(fresh(idx).numpy(), want)
    fresh.load_state_dict(arrays)
    np.testing.assert_array_equal(fresh(idx).numpy(), want)
    assert all(p.requires_grad for p in fresh.parameters()) and len(fresh.parameters()) == len(NET_KEYS) - 1
    assert fresh.heads["a"].weight.dtype is dtypes.float32

    # a state dict of tensors loads as well
    other = Net()
    other.eval()
    other.load_state_dict(net.state_dict())
    np.testing.assert_array_equal(other(idx).numpy(), want)


def test_load_state_dict_names_missing_extra_and_misshapen_keys() -> None:
    Tensor.manual_seed(0)
    lin = Linear(3, 2)
    before = lin.weight.numpy()
    good = {"weight": np.zeros((2, 3), np.float32), "bias": np.zeros(2, np.float32)}
    with pytest.raises(CheckpointError, match=r"missing keys \['bias'\]"):
        lin.load_state_dict({"weight": good["weight"]})
    with pytest.raises(CheckpointError, match=r"unexpected keys \['extra'\]"):
        lin.load_state_dict({**good, "extra": np.zeros(1, np.float32)})
    with pytest.raises(CheckpointError, match=r"wrong shapes: weight: checkpoint \(3, 2\), model \(2, 3\)"):
        lin.load_state_dict({"weight": np.zeros((3, 2), np.float32), "bias": good["bias"]})
    with pytest.raises(CheckpointError) as info:
        lin.load_state_dict({"weight": np.zeros((2, 4), np.float32), "other": np.zeros(2, np.float32)})
    message = str(info.value)
    assert "missing keys ['bias']" in message and "unexpected keys ['other']" in message
    assert "weight: checkpoint (2, 4)" in message
    np.testing.assert_array_equal(lin.weight.numpy(), before)  # a rejected checkpoint changes nothing
    lin.load_state_dict(good)
    np.testing.assert_array_equal(lin.weight.numpy(), good["weight"])


def test_load_state_dict_refuses_values_the_parameters_cannot_hold() -> None:
    """A float64 checkpoint value beyond float32 became inf, without a word, through astype."""
    lin = Linear(3, 2)
    before = lin.weight.numpy()
    huge = {"weight": np.full((2, 3), 1e39), "bias": np.zeros(2)}
    with pytest.raises(TensorError, match="beyond the range of float32"):
        lin.load_state_dict(huge)
    np.testing.assert_array_equal(lin.weight.numpy(), before)
    lin.load_state_dict({"weight": np.full((2, 3), 0.1), "bias": np.ones(2)})  # float64 values that fit
    assert lin.weight.dtype is dtypes.float32
    np.testing.assert_array_equal(lin.weight.numpy(), np.full((2, 3), 0.1, np.float32))


# ---- containers, activation modules, convolution and attention layers ----


class Stack(Module):
    def __init__(self) -> None:
        self.layers = ModuleList([Linear(3, 4), Linear(4, 4)])
        self.head = Sequential(ReLU(), Linear(4, 2), Dropout(0.5))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def test_containers_name_parameters_by_position_as_pytorch() -> None:
    Tensor.manual_seed(0)
    net = Stack()
    assert list(net.state_dict()) == [
        "head.1.bias",
        "head.1.weight",
        "layers.0.bias",
        "layers.0.weight",
        "layers.1.bias",
        "layers.1.weight",
    ]
    assert len(net.layers) == 2 and net.layers[1] is list(net.layers)[1]
    assert isinstance(net.head[2], Dropout)
    net.eval()
    assert not net.head[2].training  # eval() reaches into the containers
    x = floats((5, 3), 1)
    state = {k: v.numpy() for k, v in net.state_dict().items()}
    hidden = (x @ state["layers.0.weight"].T + state["layers.0.bias"]) @ state["layers.1.weight"].T
    want = np.maximum(hidden + state["layers.1.bias"], 0) @ state["head.1.weight"].T + state["head.1.bias"]
    np.testing.assert_allclose(net(Tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="holds modules, not a function"):
        ModuleList().append(lambda t: t)  # type: ignore[arg-type]


ACTIVATION_MODULES: list[tuple[Module, Callable[[Tensor], Tensor]]] = [
    (ReLU(), Tensor.relu),
    (ReLU6(), Tensor.relu6),
    (GELU(), Tensor.gelu),
    (GELU("tanh"), lambda t: t.gelu("tanh")),
    (SiLU(), Tensor.silu),
    (Tanh(), Tensor.tanh),
    (Sigmoid(), Tensor.sigmoid),
    (LeakyReLU(0.3), lambda t: t.leaky_relu(0.3)),
    (ELU(0.5), lambda t: t.elu(0.5)),
    (Softplus(2.0, 4.0), lambda t: t.softplus(2.0, 4.0)),
    (Hardswish(), Tensor.hardswish),
    (Softmax(0), lambda t: t.softmax(0)),
    (Identity(), lambda t: t),
    (Flatten(), lambda t: t.reshape(3, 20)),
]


@pytest.mark.parametrize(("module", "f"), ACTIVATION_MODULES, ids=lambda v: type(v).__name__)
def test_activation_modules_apply_their_function(module: Module, f: Callable[[Tensor], Tensor]) -> None:
    x = Tensor(floats((3, 4, 5), 2, -8, 8))
    np.testing.assert_array_equal(module(x).numpy(), f(x).numpy())
    assert module.state_dict() == {}


def test_conv2d_and_pooling_layers() -> None:
    Tensor.manual_seed(1)
    conv = Conv2d(4, 6, (3, 2), stride=2, padding=1, groups=2)
    assert conv.weight.shape == (6, 2, 3, 2) and conv.bias is not None and conv.bias.shape == (6,)
    bound = 1 / math.sqrt(2 * 3 * 2)  # fan_in = in / groups * kH * kW, as PyTorch
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.weight.numpy()).max() > 0.8 * bound
    x = Tensor(floats((2, 4, 7, 6), 3))
    np.testing.assert_array_equal(conv(x).numpy(), x.conv2d(conv.weight, conv.bias, 2, 1, 1, 2).numpy())
    np.testing.assert_array_equal(MaxPool2d(3, 2, 1)(x).numpy(), x.max_pool2d(3, 2, 1).numpy())
    np.testing.assert_array_equal(AvgPool2d(2)(x).numpy(), x.avg_pool2d(2).numpy())
    assert Conv2d(3, 3, 3, bias=False).bias is None
    with pytest.raises(TensorError, match="multiples of groups"):
        Conv2d(3, 4, 3, groups=2)


def attention_numpy(
    q: Array, k: Array, v: Array, mha: MultiHeadAttention, blocked: Array | None = None
) -> tuple[Array, Array]:
    """PyTorch's multi-head attention written out for batch-first inputs: project, split heads, softmax of
    scaled scores (with -inf where `blocked`), merge heads, project."""
    e, h = mha.embed_dim, mha.num_heads
    w, b = mha.in_proj_weight.numpy().astype(np.float64), np.zeros(3 * e)
    if mha.in_proj_bias is not None:
        b = mha.in_proj_bias.numpy()

    def heads(x: Array, i: int) -> Array:
        y = x @ w[i * e : (i + 1) * e].T + b[i * e : (i + 1) * e]
        return np.asarray(y.reshape(*x.shape[:2], h, e // h).transpose(0, 2, 1, 3))

    scores = heads(q, 0) @ heads(k, 1).transpose(0, 1, 3, 2) / math.sqrt(e // h)
    if blocked is not None:
        scores = np.where(blocked, -np.inf, scores)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ heads(v, 2)).transpose(0, 2, 1, 3).reshape(*q.shape[:2], e)
    bias = mha.out_proj.bias.numpy() if mha.out_proj.bias is not None else 0.0
    return out @ mha.out_proj.weight.numpy().T + bias, weights.mean(1)


def test_multi_head_attention_against_numpy() -> None:
    Tensor.manual_seed(2)
    mha = MultiHeadAttention(8, 2, batch_first=True)
    assert {k: v.shape for k, v in mha.state_dict().items()} == {
        "in_proj_bias": (24,),
        "in_proj_weight": (24, 8),
        "out_proj.bias": (8,),
        "out_proj.weight": (8, 8),
    }
    mha.in_proj_bias = Tensor(floats((24,), 4), requires_grad=True)  # PyTorch starts them at 0: test them too
    q, kv = floats((2, 3, 8), 5), floats((2, 5, 8), 6)
    out, weights = mha(Tensor(q), Tensor(kv), Tensor(kv))
    want_out, want_weights = attention_numpy(q, kv, kv, mha)
    assert weights is not None
    np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(weights.numpy(), want_weights, rtol=1e-4, atol=1e-6)
    blocked = np.array([[False, True, False, True, True]] * 3)  # PyTorch's bool mask: True is not allowed
    out, none = mha(Tensor(q), Tensor(kv), Tensor(kv), attn_mask=Tensor(blocked), need_weights=False)
    assert none is None
    np.testing.assert_allclose(out.numpy(), attention_numpy(q, kv, kv, mha, blocked)[0], rtol=1e-4, atol=1e-5)


def test_multi_head_attention_is_sequence_first_by_default() -> None:
    Tensor.manual_seed(3)
    first, batch_first = MultiHeadAttention(4, 1), MultiHeadAttention(4, 1, batch_first=True)
    batch_first.load_state_dict(first.state_dict())
    x = floats((3, 2, 4), 7)  # (L, N, E)
    seq_first, _ = first(Tensor(x), Tensor(x), Tensor(x))
    batched, _ = batch_first(Tensor(x.transpose(1, 0, 2)), Tensor(x.transpose(1, 0, 2)), Tensor(x.transpose(1, 0, 2)))
    np.testing.assert_allclose(seq_first.numpy(), batched.numpy().transpose(1, 0, 2), rtol=1e-6)


def test_causal_self_attention_sees_only_the_past() -> None:
    Tensor.manual_seed(4)
    block = CausalSelfAttention(6, 3)
    names = {"attn.in_proj_bias", "attn.in_proj_weight", "attn.out_proj.bias", "attn.out_proj.weight"}
    assert set(block.state_dict()) == names
    x = floats((2, 5, 6), 8)
    later = x.copy()
    later[:, 3:] += 1.0
    a, b = block(Tensor(x)).numpy(), block(Tensor(later)).numpy()
    np.testing.assert_array_equal(a[:, :3], b[:, :3])  # positions 0..2 never read 3..4
    assert (np.abs(a[:, 3:] - b[:, 3:]) > 1e-4).all()
    want = attention_numpy(x, x, x, block.attn, np.triu(np.ones((5, 5), bool), 1))[0]
    np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-5)
