"""Chapter 5: a cache entry. A folder named by the key, holding a library named by its own digest."""

import hashlib

from uopc.backend.c import build_library, render_c
from uopc.backend.c.compiler import cache_dir, cache_key, cached_library, cflags, compiler
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

source = render_c(linearize(Kernel("plus_one", rangeify([(UOp.buffer(1, 8), UOp.buffer(0, 8) + 1.0)]))))

key = cache_key(source, compiler(), cflags())

# --8<-- [start:entry]
path = build_library(source)  # gcc runs only if no verified library is stored under the key
entry = path.relative_to(cache_dir())
print("entry:", f"{entry.parts[0]}/{entry.parts[1][:12]}.../{entry.name}")
print("folder is the key:        ", entry.parts[1] == key and entry.parts[0] == key[:2])
print("name is the file's digest:", path.name == f"lib-{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}.so")
found = cached_library(key)
print("found again:              ", found is not None and found.path == path == build_library(source))
# --8<-- [end:entry]
