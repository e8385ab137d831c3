"""uopc.tensor: a lazy Tensor with reverse-mode autodiff, compiled to kernels by uopc.

The names below, and the modules `uopc.tensor.nn` (layers, checkpoints), `uopc.tensor.optim` (optimizers)
and `uopc.tensor.datasets` (MNIST and text data), are the package's public interface. `realizer` holds what
computing tensors keeps between calls (their arrays, the plans, what each backend built): see `Realizer` for
how long each part lives. `capture` turns a training step into one that replays its kernels (capture.py).
"""

from uopc.ir import DType, dtypes
from uopc.tensor.capture import Captured, capture
from uopc.tensor.errors import TensorError, TensorIndexError
from uopc.tensor.realize import Realizer, realizer
from uopc.tensor.tensor import Tensor

__version__ = "0.1.0"

__all__ = [
    "Captured",
    "DType",
    "Realizer",
    "Tensor",
    "TensorError",
    "TensorIndexError",
    "capture",
    "dtypes",
    "realizer",
]
