"""Chapter 5: the kernel cache's key hashes the source, the compiler's identity and the flags."""

from uopc.backend.c import render_c
from uopc.backend.c.compiler import cache_key, cflags, compiler, compiler_identity
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

source = render_c(linearize(Kernel("plus_one", rangeify([(UOp.buffer(1, 8), UOp.buffer(0, 8) + 1.0)]))))

# --8<-- [start:key]
print("compiler identity:", compiler_identity(compiler()).replace("\n", " | "))
key = cache_key(source, compiler(), cflags())
print("key:                   ", key)
print("same source and flags: ", cache_key(source, compiler(), cflags()))
print("other flags (-O0):     ", cache_key(source, compiler(), "-O0 -fopenmp -fwrapv"))
print("one more space:        ", cache_key(source + " ", compiler(), cflags()))
# --8<-- [end:key]
