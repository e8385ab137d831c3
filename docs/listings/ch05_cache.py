"""Chapter 5: the kernel cache. The key hashes source, compiler and flags; the file name hashes the library."""

import hashlib

from uopc.backend.c import build_library, render_c
from uopc.backend.c.compiler import cache_dir, cache_key, cached_library, cflags, compiler, compiler_identity
from uopc.ir import UOp
from uopc.lower import Kernel, rangeify

source = render_c(Kernel("plus_one", rangeify([(UOp.buffer(1, 8), UOp.buffer(0, 8) + 1.0)])))

# --8<-- [start:key]
print("compiler identity:", compiler_identity(compiler()).replace("\n", " | "))
key = cache_key(source, compiler(), cflags())
print("key:                   ", key)
print("same source and flags: ", cache_key(source, compiler(), cflags()))
print("other flags (-O0):     ", cache_key(source, compiler(), "-O0 -fopenmp -fwrapv"))
print("one more space:        ", cache_key(source + " ", compiler(), cflags()))
# --8<-- [end:key]
print()
# --8<-- [start:entry]
path = build_library(source)  # gcc runs only if no verified library is stored under the key
entry = path.relative_to(cache_dir())
print("entry:", f"{entry.parts[0]}/{entry.parts[1][:12]}.../{entry.name}")
print("folder is the key:        ", entry.parts[1] == key and entry.parts[0] == key[:2])
print("name is the file's digest:", path.name == f"lib-{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}.so")
print("found again:              ", cached_library(key) == path == build_library(source))
# --8<-- [end:entry]
