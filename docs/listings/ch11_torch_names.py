"""Chapter 11: containers and layers name their parameters as PyTorch's do, so a PyTorch checkpoint loads."""

from uopc.tensor import Tensor
from uopc.tensor.nn import GELU, Conv2d, Flatten, Linear, MaxPool2d, Module, ModuleList, MultiHeadAttention, Sequential


# --8<-- [start:names]
class Block(Module):
    def __init__(self) -> None:
        self.attn = MultiHeadAttention(16, 2, batch_first=True)
        self.mlp = Sequential(Linear(16, 64), GELU(), Linear(64, 16))


class Model(Module):
    def __init__(self) -> None:
        self.stem = Sequential(Conv2d(1, 4, 3, padding=1), MaxPool2d(2), Flatten())
        self.blocks = ModuleList([Block(), Block()])


Tensor.manual_seed(0)
for name, t in Model().state_dict().items():
    print(f"{name:30s} {t.shape}")
# --8<-- [end:names]
