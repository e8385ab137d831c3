"""Chapter 11: a Module finds its tensors in attributes, nested modules, lists and dicts, and names them by path."""

from uopc.tensor import Tensor
from uopc.tensor.nn import Dropout, LayerNorm, Linear, Module


# --8<-- [start:module]
class Block(Module):
    def __init__(self, dim: int) -> None:
        self.norm = LayerNorm(dim)
        self.mlp = [Linear(dim, 4 * dim), Linear(4 * dim, dim)]  # a list of layers
        self.drop = Dropout(0.1)

    def forward(self, x: Tensor) -> Tensor:
        h = self.mlp[1](self.mlp[0](self.norm(x)).gelu())
        return x + self.drop(h)


class Model(Module):
    def __init__(self) -> None:
        self.blocks = {"first": Block(8), "second": Block(8)}  # a dict of modules
        self.head = Linear(8, 3, bias=False)
        self.scale = Tensor([2.0])  # a tensor without requires_grad: state, not a parameter

    def forward(self, x: Tensor) -> Tensor:
        for block in self.blocks.values():
            x = block(x)
        return self.head(x) * self.scale


Tensor.manual_seed(0)
model = Model()
for name, t in model.state_dict().items():
    print(f"{name:28s} {t.shape!s:8s} {'parameter' if t.requires_grad else 'state'}")
print("parameters:", sum(p.numel() for p in model.parameters()))
model.eval()
print("eval() reaches the dropout in a dict of modules:", not model.blocks["second"].drop.training)
# --8<-- [end:module]
