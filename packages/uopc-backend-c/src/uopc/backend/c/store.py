"""The C backend's plan store: compiled plans kept on disk, so that a new process starts warm.

An entry is a file `plan-<digest>.json` in the kernel cache (compiler.py), under the same rules as a
library: private folders, a file trusted only if its bytes hash to its name, the least recently used
evicted first. It holds the plan's manifest and the cache key of its library, which stays where the
compiler put it. A warm start reads the entry, finds the library, loads it and runs the plan from the
manifest: no kernel is made, simplified, linearized or rendered, and gcc does not run.

The entry's key is the plan key (a digest of the graph and of the lowering code) with this backend's
settings added: the code of uopc-backend-c (which renders the C), the compiler's identity, the flags and
what -march=native means here. A change to any of them is another key, so a stale plan or a library built
by another compiler is never loaded.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from concurrent.futures import Future
from pathlib import Path

from uopc.backend.c.compiler import cached_file, cached_library, cflags, compiler, compiler_identity, native_target
from uopc.backend.c.compiler import store_file as _store_file
from uopc.backend.c.program import load_binary
from uopc.backend.c.runtime import CExecutable
from uopc.lower import Binary, Manifest

PREFIX, SUFFIX = "plan-", ".json"


@functools.cache
def backend_code() -> str:
    """A digest of this package's source, by path and content: the renderer's output depends on it."""
    digest = hashlib.sha256()
    folder = Path(__file__).parent
    for path in sorted(folder.rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def entry_key(plan_key: str) -> str:
    cc, flags = compiler(), cflags()
    text = "\0".join(["plan", plan_key, backend_code(), compiler_identity(cc), flags, native_target(cc, flags)])
    return hashlib.sha256(text.encode()).hexdigest()


def _keep(key: str, manifest: Manifest, binary: Binary) -> None:
    """Keep the plan's entry, replacing one kept before under the same key: a plan compiled again with
    searched opts (search.py) must be the one a warm start finds, not the one it replaces."""
    record = {"library": binary.key, "manifest": manifest.to_json()}
    kept = _store_file(entry_key(key), PREFIX, SUFFIX, json.dumps(record).encode())
    for old in kept.parent.glob(f"{PREFIX}*{SUFFIX}"):
        if old != kept:
            with contextlib.suppress(OSError):  # removed by another process meanwhile
                old.unlink()


def _keep_built(key: str, manifest: Manifest, build: Future[Binary]) -> None:
    """Keep the plan with the binary `build` made; a failed build keeps nothing (the runtime warns of it)."""
    if build.exception() is None:
        _keep(key, manifest, build.result())


class CPlanStore:
    """Plans by key in the kernel cache: the manifest and the library key, for `restore_plan`."""

    def keep(self, key: str, manifest: Manifest, binary: Binary) -> None:
        """Keep the plan's entry; for the quick tier of a tiered build, once the optimized build is done (in
        its thread), so that a warm start loads the optimized library."""
        if binary.later is None:
            _keep(key, manifest, binary)
        else:
            binary.later.add_done_callback(lambda done: _keep_built(key, manifest, done))

    def find(self, key: str) -> tuple[Manifest, Binary] | None:
        found = cached_file(entry_key(key), PREFIX, SUFFIX)
        if found is None:
            return None
        try:
            record = json.loads(found[1])
            manifest, library = Manifest.from_json(record["manifest"]), record["library"]
        except (ValueError, KeyError, TypeError):  # not written by keep: a miss, and the next keep replaces it
            return None
        binary = cached_library(library) if isinstance(library, str) else None
        return None if binary is None else (manifest, binary)

    def load(self, binary: Binary, manifest: Manifest) -> CExecutable:
        return CExecutable(load_binary(binary), manifest.kernels, manifest.steps)
