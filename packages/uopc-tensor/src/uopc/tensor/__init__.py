"""uopc.tensor: a lazy Tensor with reverse-mode autodiff, compiled to kernels by uopc."""

from uopc.ir import DType, dtypes
from uopc.tensor.tensor import Tensor, TensorError

__version__ = "0.1.0"

__all__ = ["DType", "Tensor", "TensorError", "dtypes"]
