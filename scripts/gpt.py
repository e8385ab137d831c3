"""A character-level GPT in uopc: the model, its vocabulary, checkpoints and sampling.

Shared by scripts/train_gpt.py (which trains it on Tiny Shakespeare) and scripts/sample_gpt.py (which samples
from a saved checkpoint). The model is GPT-2's shape at a small size: token and position embeddings, a stack
of pre-norm blocks (causal self-attention, then a 4x MLP with the tanh GELU), a final LayerNorm and a linear
head. Parameter names follow nanoGPT's (wte, wpe, h.0.ln_1, ..., lm_head).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from uopc.tensor import Tensor
from uopc.tensor.nn import (
    CausalSelfAttention,
    CheckpointError,
    Embedding,
    LayerNorm,
    Linear,
    Module,
    ModuleList,
    ReLU,
    Sequential,
)

Tokens = npt.NDArray[np.int32]


@dataclass(frozen=True)
class Config:
    vocab_size: int
    block_size: int  # the longest context: positions have embeddings 0 .. block_size - 1
    dim: int
    heads: int
    layers: int


class Block(Module):
    """x + attention(norm(x)), then x + mlp(norm(x)): each sublayer adds to a residual stream."""

    def __init__(self, dim: int, heads: int) -> None:
        self.ln_1 = LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln_2 = LayerNorm(dim)
        self.mlp = Sequential(Linear(dim, 4 * dim), ReLU(), Linear(4 * dim, dim))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(Module):
    """Logits (batch, time, vocab) for the next character at each position of (batch, time) int32 indices."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.wte = Embedding(config.vocab_size, config.dim)
        self.wpe = Embedding(config.block_size, config.dim)
        self.h = ModuleList(Block(config.dim, config.heads) for _ in range(config.layers))
        self.ln_f = LayerNorm(config.dim)
        self.lm_head = Linear(config.dim, config.vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        length = idx.shape[1]
        x = self.wte(idx) + self.wpe.weight.shrink([(0, length), None])  # positions 0 .. length - 1
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def parameter_count(model: Module) -> int:
    return sum(math.prod(p.shape) for p in model.parameters())


class Vocabulary:
    """The characters of a text, each an index: sorted, so the same text always gives the same indices."""

    def __init__(self, chars: str) -> None:
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}

    @staticmethod
    def of(text: str) -> Vocabulary:
        return Vocabulary("".join(sorted(set(text))))

    def unknown(self, text: str) -> str:
        """The characters of `text` that are not in the vocabulary, sorted (encode needs there to be none)."""
        return "".join(sorted(set(text) - set(self.index)))

    def encode(self, text: str) -> Tokens:
        return np.fromiter((self.index[c] for c in text), dtype=np.int32, count=len(text))

    def decode(self, tokens: Tokens | list[int]) -> str:
        return "".join(self.chars[int(t)] for t in tokens)


def save_checkpoint(model: GPT, vocabulary: Vocabulary, path: Path) -> None:
    """The weights as safetensors, with the model's shape and its characters in the file's metadata, so a
    checkpoint is all that sample_gpt.py needs."""
    from safetensors.numpy import save_file

    arrays = {k: np.ascontiguousarray(t.numpy()) for k, t in model.state_dict().items()}
    meta = {"config": json.dumps(asdict(model.config)), "vocabulary": json.dumps(vocabulary.chars)}
    save_file(arrays, str(path), metadata=meta)


def load_checkpoint(path: Path) -> tuple[GPT, Vocabulary]:
    from safetensors import safe_open

    with safe_open(str(path), "np") as f:
        meta: dict[str, str] = f.metadata() or {}
        if "config" not in meta or "vocabulary" not in meta:
            raise CheckpointError(f"{path} is not a GPT checkpoint of train_gpt.py (no config or vocabulary in it)")
        arrays: dict[str, Any] = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open is no dict
    model = GPT(Config(**json.loads(meta["config"])))
    model.load_state_dict(arrays)
    return model, Vocabulary(json.loads(meta["vocabulary"]))


def next_char_distribution(logits: Tensor, temperature: float, top_k: int | None) -> Tensor:
    """Probabilities of the next character from one position's logits (vocab,): divided by the temperature
    (below 1 sharper, above 1 flatter), and all but the top_k most likely set to 0."""
    scaled = logits / temperature
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = scaled.topk(top_k)[0].shrink([(top_k - 1, top_k)])
        scaled = (scaled < kth).where(-math.inf, scaled)
    return scaled.softmax(-1)


def generate(
    model: GPT, prompt: Tokens, count: int, temperature: float = 1.0, top_k: int | None = None
) -> Iterator[int]:
    """`count` characters after `prompt`, one at a time. The model always sees a window of block_size
    characters: the prompt and what was generated so far, left-aligned and padded at the right until it
    fills up, then the last block_size of them. Causal attention keeps the padding out of every position
    that is read, and as every call has the same shape, the forward pass compiles once and its plan serves
    every position."""
    size = model.config.block_size
    window = np.zeros((1, size), dtype=np.int32)
    context = list(prompt[-size:])
    model.eval()
    with Tensor.no_grad():
        for _ in range(count):
            window[0, : len(context)] = context
            logits = model(Tensor(window)).numpy()[0, len(context) - 1]
            probs = next_char_distribution(Tensor(logits), temperature, top_k)
            token = int(probs.multinomial(1).item())
            context = [*context, token][-size:]
            yield token
