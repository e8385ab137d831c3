"""Layers, with the initializations PyTorch users expect, and checkpoints in the safetensors format.

A model is a `Module`: its parameters are the tensors (with requires_grad) found in its attributes, in
nested modules, and in lists and dicts of them. `state_dict()` names each parameter by its attribute path
("layers.0.weight"), and a checkpoint is that dict saved with safetensors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from uopc.ir import UopcError
from uopc.tensor.errors import TensorError
from uopc.tensor.tensor import Tensor


class CheckpointError(UopcError, ValueError):
    """A state dict that does not fit the model: names the missing, unexpected and misshapen keys."""


class Module:
    """Base class of layers and models: collects parameters and switches training and evaluation modes."""

    training: bool = True

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        raise TypeError(f"{type(self).__name__} defines no forward()")

    def named_children(self) -> Iterator[tuple[str, Any]]:
        """Attributes that hold tensors or modules, directly or in lists, tuples and dicts, with their names."""
        stack: list[tuple[str, Any]] = sorted(vars(self).items(), reverse=True)
        while stack:
            name, value = stack.pop()
            if isinstance(value, (Tensor, Module)):
                yield name, value
            elif isinstance(value, (list, tuple)):
                stack += [(f"{name}.{i}", v) for i, v in reversed(list(enumerate(value)))]
            elif isinstance(value, dict):
                stack += [(f"{name}.{k}", v) for k, v in sorted(value.items(), reverse=True)]

    def state_dict(self) -> dict[str, Tensor]:
        """Every tensor of the model by its dotted attribute path, in a stable order."""
        out: dict[str, Tensor] = {}
        stack: list[tuple[str, Any]] = [("", self)]
        while stack:
            prefix, module = stack.pop()
            for name, value in reversed(list(module.named_children())):
                if isinstance(value, Tensor):
                    out[prefix + name] = value
                else:
                    stack.append((f"{prefix}{name}.", value))
        return dict(sorted(out.items()))

    def parameters(self) -> list[Tensor]:
        """The tensors an optimizer updates: every tensor in the state dict that requires a gradient."""
        return [t for t in self.state_dict().values() if t.requires_grad]

    def train(self, mode: bool = True) -> Module:
        for m in [self, *self.modules()]:
            m.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def modules(self) -> list[Module]:
        found: list[Module] = []
        stack: list[Module] = [self]
        while stack:
            for _, value in stack.pop().named_children():
                if isinstance(value, Module):
                    found.append(value)
                    stack.append(value)
        return found

    def load_state_dict(self, state: Mapping[str, Tensor | np.ndarray[Any, Any]]) -> None:
        """Copy values into the model's tensors; every key must exist in both, with the same shape."""
        own = self.state_dict()
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        wrong = [
            f"{k}: checkpoint {tuple(state[k].shape)}, model {own[k].shape}"
            for k in sorted(set(own) & set(state))
            if tuple(state[k].shape) != own[k].shape
        ]
        if missing or unexpected or wrong:
            parts = [f"missing keys {missing}"] if missing else []
            parts += [f"unexpected keys {unexpected}"] if unexpected else []
            parts += [f"wrong shapes: {'; '.join(wrong)}"] if wrong else []
            raise CheckpointError(f"load_state_dict: {', '.join(parts)}")
        loaded = {k: Tensor(np.asarray(state[k]), dtype=t.dtype, device=t.device) for k, t in own.items()}
        for k, t in own.items():  # only once every value fits its tensor's dtype: a refused checkpoint changes nothing
            t.uop = loaded[k].uop


def save(state: Mapping[str, Tensor], path: str | Path) -> None:
    """Write a state dict to a .safetensors file."""
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(t.numpy()) for k, t in state.items()}, str(path))


def load(path: str | Path) -> dict[str, np.ndarray[Any, Any]]:
    """Read a .safetensors file into numpy arrays, for `Module.load_state_dict`."""
    from safetensors.numpy import load_file

    return dict(load_file(str(path)))


def _uniform(shape: tuple[int, ...], bound: float) -> Tensor:
    return Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=True)


class Linear(Module):
    """y = x @ weight.T + bias, with weight (out, in) and bias drawn from U(-1/sqrt(in), 1/sqrt(in)), as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        bound = 1.0 / math.sqrt(in_features)
        self.weight = _uniform((out_features, in_features), bound)
        self.bias = _uniform((out_features,), bound) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y


class LayerNorm(Module):
    """Normalize over the last axes to mean 0 and variance 1 (biased, as in PyTorch), then scale and shift."""

    def __init__(self, shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True) -> None:
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        self.weight = Tensor.ones(*self.shape, requires_grad=True) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.shape, requires_grad=True) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-len(self.shape) :] != self.shape:
            raise TensorError(f"LayerNorm{self.shape}: input shape {x.shape} does not end in {self.shape}")
        axes = tuple(range(x.ndim - len(self.shape), x.ndim))
        centered = x - x.mean(axes, keepdim=True)
        y = centered * (centered.square().mean(axes, keepdim=True) + self.eps).rsqrt()
        return y * self.weight + self.bias if self.weight is not None and self.bias is not None else y


class Embedding(Module):
    """Row `i` of a (num_embeddings, dim) table for each integer index i; weight drawn from N(0, 1)."""

    def __init__(self, num_embeddings: int, dim: int) -> None:
        self.num_embeddings = num_embeddings
        self.weight = Tensor.randn(num_embeddings, dim, requires_grad=True)

    def forward(self, idx: Tensor) -> Tensor:
        if not idx.dtype.is_int:
            raise TensorError(f"Embedding: indices must be integers, got {idx.dtype.name}")
        return idx.one_hot(self.num_embeddings).float() @ self.weight


class Dropout(Module):
    """In training, zero each element with probability p and scale the rest by 1/(1-p); in evaluation, nothing."""

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p < 1.0:
            raise TensorError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = Tensor.rand(*x.shape, device=x.device) >= self.p
        return keep.where(x / (1.0 - self.p), 0.0)


class ModuleList(Module):
    """A list of modules whose parameters are named by position: "1.bias" inside it, "layers.1.bias" for a
    ModuleList in the attribute `layers`, as in PyTorch. (A plain list attribute works too, and is named the
    same way; ModuleList is for code written against PyTorch's name.)"""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        self._items: list[Module] = []
        self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__} holds modules, not a {type(module).__name__}")
        self._items.append(module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def named_children(self) -> Iterator[tuple[str, Any]]:
        return ((str(i), m) for i, m in enumerate(self._items))

    def __getitem__(self, i: int) -> Module:
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._items)


class Sequential(ModuleList):
    """Modules applied in order, `Sequential(a, b, c)(x) = c(b(a(x)))`; parameters are named by position
    ("0.weight", "2.bias"), as in PyTorch."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def forward(self, x: Tensor) -> Tensor:
        for m in self._items:
            x = m(x)
        return x


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class ReLU6(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.relu6()


class GELU(Module):
    """GELU, exact by default; approximate="tanh" for the tanh form, as in PyTorch."""

    def __init__(self, approximate: str = "none") -> None:
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return x.gelu(self.approximate)


class SiLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.silu()


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01) -> None:
        self.negative_slope = negative_slope

    def forward(self, x: Tensor) -> Tensor:
        return x.leaky_relu(self.negative_slope)


class ELU(Module):
    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha

    def forward(self, x: Tensor) -> Tensor:
        return x.elu(self.alpha)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return x.softplus(self.beta, self.threshold)


class Hardswish(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.hardswish()


class Softmax(Module):
    def __init__(self, dim: int) -> None:
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return x.softmax(self.dim)


class Identity(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x


class Flatten(Module):
    """Axes start_dim..end_dim merged into one; by default all but the batch axis, as in PyTorch."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


class Conv2d(Module):
    """2-D convolution with weight (out, in / groups, kH, kW) and bias drawn from U(-1/sqrt(fan_in),
    1/sqrt(fan_in)), fan_in = in / groups * kH * kW, as PyTorch initializes them."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
    ) -> None:
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        if in_channels % groups or out_channels % groups:
            raise TensorError(f"Conv2d: channels {in_channels} -> {out_channels} are not multiples of groups={groups}")
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1.0 / math.sqrt(in_channels // groups * kh * kw)
        self.weight = _uniform((out_channels, in_channels // groups, kh, kw), bound)
        self.bias = _uniform((out_channels,), bound) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class MaxPool2d(Module):
    def __init__(
        self,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] | None = None,
        padding: int | tuple[int, int] = 0,
        dilation: int | tuple[int, int] = 1,
    ) -> None:
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation

    def forward(self, x: Tensor) -> Tensor:
        return x.max_pool2d(self.kernel_size, self.stride, self.padding, self.dilation)


class AvgPool2d(Module):
    def __init__(
        self,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] | None = None,
        padding: int | tuple[int, int] = 0,
        count_include_pad: bool = True,
    ) -> None:
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return x.avg_pool2d(self.kernel_size, self.stride, self.padding, self.count_include_pad)


class MultiHeadAttention(Module):
    """Multi-head attention with the parameters of PyTorch's nn.MultiheadAttention, by the same names, so
    its checkpoints load: in_proj_weight (3E, E) holds the query, key and value projections, in_proj_bias
    (3E), and out_proj (a Linear). Inputs are (L, N, E) unless batch_first, as in PyTorch; forward returns
    (output, weights), the weights averaged over heads unless average_attn_weights is False, or None
    unless need_weights.

    attn_mask is PyTorch's: a bool mask is True where a query may NOT see a key (the opposite of
    scaled_dot_product_attention's), a float one is added to the scores; (L, S) or (N * heads, L, S).
    is_causal without a mask builds the causal one (PyTorch requires the mask itself).

    `kernel` is scaled_dot_product_attention's: "plain" composes the attention from Tensor ops; "online"
    and "tiled" compute it in a kernel of their own, without the scores, where no weights are asked for
    and no mask is given (elsewhere the plain composition runs)."""

    def __init__(
        self, embed_dim: int, num_heads: int, bias: bool = True, batch_first: bool = False, kernel: str = "plain"
    ) -> None:
        if embed_dim % num_heads:
            raise TensorError(f"MultiHeadAttention: embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
        if kernel not in ("plain", "online", "tiled"):
            raise TensorError(f"MultiHeadAttention: kernel is 'plain', 'online' or 'tiled', not {kernel!r}")
        self.embed_dim, self.num_heads, self.batch_first, self.kernel = embed_dim, num_heads, batch_first, kernel
        self.in_proj_weight = _uniform((3 * embed_dim, embed_dim), math.sqrt(6.0 / (4 * embed_dim)))  # Xavier
        self.in_proj_bias = Tensor.zeros(3 * embed_dim, requires_grad=True) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if self.out_proj.bias is not None:
            self.out_proj.bias = Tensor.zeros(embed_dim, requires_grad=True)

    # a pair, where Module's methods return a tensor: PyTorch's signature wins over the base class's
    def __call__(  # type: ignore[override]
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        need_weights: bool = True,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        return self.forward(query, key, value, attn_mask, need_weights, average_attn_weights, is_causal)

    def forward(  # type: ignore[override]
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        need_weights: bool = True,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        (n, length, e), keys = query.shape, key.shape[1]
        if e != self.embed_dim:
            raise TensorError(f"MultiHeadAttention({self.embed_dim}): inputs of width {e}")
        q, k, v = (self._project(t, i) for i, t in enumerate((query, key, value)))
        if self.kernel != "plain" and attn_mask is None and not need_weights:
            heads = q.scaled_dot_product_attention(k, v, is_causal=is_causal, kernel=self.kernel)
            out = self.out_proj(heads.transpose(1, 2).reshape(n, length, e))
            return (out if self.batch_first else out.transpose(0, 1)), None
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(e // self.num_heads))
        if attn_mask is None and is_causal:
            attn_mask = Tensor.ones(length, keys, dtype="bool").triu(1)
        if attn_mask is not None:
            mask = attn_mask.reshape(n, self.num_heads, length, keys) if attn_mask.ndim == 3 else attn_mask
            scores = mask.where(-math.inf, scores) if mask.dtype.is_bool else scores + mask
        weights = scores.softmax(-1)
        out = self.out_proj((weights @ v).transpose(1, 2).reshape(n, length, e))
        out = out if self.batch_first else out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, weights.mean(1) if average_attn_weights else weights

    def _project(self, x: Tensor, which: int) -> Tensor:
        """The query (0), key (1) or value (2) projection of x (N, L, E), split into heads (N, H, L, E / H)."""
        e = self.embed_dim
        w = self.in_proj_weight.shrink([(which * e, (which + 1) * e), None])
        y = x @ w.T
        if self.in_proj_bias is not None:
            y = y + self.in_proj_bias.shrink([(which * e, (which + 1) * e)])
        return y.reshape(*x.shape[:2], self.num_heads, e // self.num_heads).transpose(1, 2)


class CausalSelfAttention(Module):
    """Self-attention in which position i sees positions 0..i, on batch-first inputs (N, L, E): the block of
    a GPT. Its parameters are those of its `attn`, a MultiHeadAttention."""

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, kernel: str = "plain") -> None:
        self.attn = MultiHeadAttention(embed_dim, num_heads, bias=bias, batch_first=True, kernel=kernel)

    def forward(self, x: Tensor) -> Tensor:
        return self.attn(x, x, x, need_weights=False, is_causal=True)[0]


__all__ = [
    "ELU",
    "GELU",
    "AvgPool2d",
    "CausalSelfAttention",
    "CheckpointError",
    "Conv2d",
    "Dropout",
    "Embedding",
    "Flatten",
    "Hardswish",
    "Identity",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MaxPool2d",
    "Module",
    "ModuleList",
    "MultiHeadAttention",
    "ReLU",
    "ReLU6",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
    "load",
    "save",
]
