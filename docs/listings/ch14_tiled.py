"""Chapter 14: the C that the tiled attention kernel becomes (tiny sizes; its first 60 lines)."""

from uopc.backend.c import CRenderer
from uopc.ir import dtypes
from uopc.lower import Step, linearize
from uopc.tensor.attention import tiled_attention_kernel


def c_function(kernel_source: str, name: str) -> str:
    """The kernel's definition alone, without the declarations and the plan's entry point."""
    start = kernel_source.index(f"void {name}(", kernel_source.index("/* uopc: unit */"))
    start = kernel_source.rindex("\n", 0, start) + 1
    return kernel_source[start : kernel_source.index("\n}\n", start) + 3]


# --8<-- [start:kernel]
tiled = tiled_attention_kernel(1, 6, 6, 2, 2, True, 2**-0.5, dtypes.float32)
source = CRenderer().render([linearize(tiled)], [Step(0, (0, 1, 2, 3, 4))]).text
lines = c_function(source, tiled.name).splitlines()
print("\n".join(lines[:60]))  # the block's accumulators, then the first pass
print(f"  ... {len(lines) - 60} more lines")
# --8<-- [end:kernel]
