"""Layers, with the initializations PyTorch users expect, and checkpoints in the safetensors format.

A model is a `Module`: its parameters are the tensors (with requires_grad) found in its attributes, in
nested modules, and in lists and dicts of them. `state_dict()` names each parameter by its attribute path
("layers.0.weight"), and a checkpoint is that dict saved with safetensors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
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


__all__ = ["CheckpointError", "Dropout", "Embedding", "LayerNorm", "Linear", "Module", "load", "save"]
