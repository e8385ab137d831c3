"""Chapter 10: the windows of an image as a view built by movement ops, and conv2d as a matrix product with
the windows copied into columns (im2col); checked against a direct loop in numpy."""

import numpy as np

from uopc.lower import make_plan, normalize
from uopc.tensor import Tensor
from uopc.tensor.tensor import _windows

# --8<-- [start:windows]
row = Tensor(np.arange(7, dtype=np.float32))
view = _windows(row, (3,), (2,), (1,), "windows")  # windows of 3, every 2nd position
print("ops:", " <- ".join(u.op.name for u in reversed(view.uop.toposort())))
print("windows of 3, stride 2:", view.numpy().tolist())
tiles = _windows(row, (3,), (1,), (2,), "windows")  # overlapping: windows of 3 spread out by 2, every position
print("windows of 3, dilation 2:", tiles.numpy().tolist())
# --8<-- [end:windows]

# --8<-- [start:conv]
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
out = Tensor(x).conv2d(Tensor(w), stride=2, padding=1)

padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
want = np.zeros((2, 4, 4, 4), np.float32)
for i in range(4):
    for j in range(4):
        want[:, :, i, j] = np.einsum("nchw,ochw->no", padded[:, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3], w)
graph, _ = normalize([out.uop])
print(
    "output",
    out.shape,
    "in",
    len(make_plan(graph).kernels),
    "kernels; largest difference from the loop:",
    float(np.abs(out.numpy() - want).max()),
)
# --8<-- [end:conv]
