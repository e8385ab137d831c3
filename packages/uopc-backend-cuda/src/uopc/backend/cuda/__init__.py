"""uopc.backend.cuda: the CUDA backend (GPU mapping, CUDA rendering, CPU emulation of GPU kernels).

This release holds the package's place in the workspace: its metadata, its dependencies and its import
path. It defines no backend yet and registers none, so `DEVICE=CUDA` reports that no such backend is
installed rather than pretending to run anything.
"""

__version__ = "0.1.0"
