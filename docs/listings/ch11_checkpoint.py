"""Chapter 11: a checkpoint round trip through a .safetensors file, and what load_state_dict refuses."""

import tempfile
import textwrap
from pathlib import Path

import numpy as np

from uopc.tensor import Tensor
from uopc.tensor.nn import CheckpointError, Linear, Module, load, save


class MLP(Module):
    def __init__(self, hidden: int) -> None:
        self.l1 = Linear(4, hidden)
        self.l2 = Linear(hidden, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


x = Tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))

# --8<-- [start:round-trip]
Tensor.manual_seed(0)
trained, fresh = MLP(8), MLP(8)  # two different random initializations
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "mlp.safetensors"
    save(trained.state_dict(), path)
    arrays = load(path)
print({k: v.shape for k, v in arrays.items()})
fresh.load_state_dict(arrays)
print("same outputs after loading:", np.array_equal(fresh(x).numpy(), trained(x).numpy()))
# --8<-- [end:round-trip]

# --8<-- [start:errors]
broken = {k: v for k, v in arrays.items() if k != "l2.bias"} | {"l3.weight": np.zeros((2, 2), np.float32)}
try:
    MLP(16).load_state_dict(broken)  # a wider model, a key missing, a key too many: all reported at once
except CheckpointError as e:
    print(textwrap.fill(str(e), width=100, subsequent_indent="    "))  # one long line, wrapped for the page
# --8<-- [end:errors]
