"""Chapter 14: the C that the online attention kernel becomes (tiny sizes, to read it)."""

from uopc.backend.c import CRenderer
from uopc.ir import dtypes
from uopc.lower import Step, linearize
from uopc.tensor.attention import online_attention_kernel


def c_function(kernel_source: str, name: str) -> str:
    """The kernel's definition alone, without the declarations and the plan's entry point."""
    start = kernel_source.index(f"void {name}(", kernel_source.index("/* uopc: unit */"))
    start = kernel_source.rindex("\n", 0, start) + 1
    return kernel_source[start : kernel_source.index("\n}\n", start) + 3]


# --8<-- [start:kernel]
# one head, 6 queries and keys, head dim 2, value dim 2, causal, scale 1/sqrt(2)
online = online_attention_kernel(1, 6, 6, 2, 2, True, 2**-0.5, dtypes.float32)
source = CRenderer().render([linearize(online)], [Step(0, (0, 1, 2, 3, 4))]).text
print(c_function(source, online.name))
# --8<-- [end:kernel]
