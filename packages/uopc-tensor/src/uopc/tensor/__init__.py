"""uopc.tensor: a lazy Tensor with reverse-mode autodiff, compiled to kernels by uopc.

`realizer` holds what computing tensors keeps between calls (their arrays, the plans, what each backend
built): see `Realizer` for how long each part lives.
"""

from uopc.ir import DType, dtypes
from uopc.tensor.realize import Realizer, realizer
from uopc.tensor.tensor import Tensor, TensorError

__version__ = "0.1.0"

__all__ = ["DType", "Realizer", "Tensor", "TensorError", "dtypes", "realizer"]
