"""Chapter 14: the C that the online and the tiled attention kernels become (tiny sizes, to read them)."""

from uopc.backend.c import CRenderer
from uopc.ir import dtypes
from uopc.lower import Step, linearize
from uopc.tensor.attention import online_attention_kernel, tiled_attention_kernel


def c_function(kernel_source: str, name: str) -> str:
    """The kernel's definition alone, without the declarations and the plan's entry point."""
    start = kernel_source.index(f"void {name}(", kernel_source.index("/* uopc: unit */"))
    start = kernel_source.rindex("\n", 0, start) + 1
    return kernel_source[start : kernel_source.index("\n}\n", start) + 3]


# --8<-- [start:online]
# one head, 6 queries and keys, head dim 2, value dim 2, causal, scale 1/sqrt(2)
online = online_attention_kernel(1, 6, 6, 2, 2, True, 2**-0.5, dtypes.float32)
source = CRenderer().render([linearize(online)], [Step(0, (0, 1, 2, 3, 4))]).text
print(c_function(source, online.name))
# --8<-- [end:online]
# --8<-- [start:tiled]
tiled = tiled_attention_kernel(1, 6, 6, 2, 2, True, 2**-0.5, dtypes.float32)
source = CRenderer().render([linearize(tiled)], [Step(0, (0, 1, 2, 3, 4))]).text
lines = c_function(source, tiled.name).splitlines()
print("\n".join(lines[:60]))  # the first query of the block; the other three repeat it with their own names
print(f"  ... {len(lines) - 60} more lines")
# --8<-- [end:tiled]
