"""Build C source into a shared library, once: a content-addressed cache on disk.

The cache key is the SHA-256 of the source, the compiler's identity (its path and `--version`) and the
flags, so changing any of them builds anew. An entry is the folder `<cache>/<key[:2]>/<key>/` holding
`lib-<digest>.so`, where digest is the first 16 hex digits of the library's own SHA-256: a file is only
trusted if its bytes hash to its name. A build writes to a temporary name and renames it into place, which
is atomic, so two processes building the same source at once, or a build killed halfway, never leave a
half-written library where a reader would load it; a damaged file fails its hash check and is rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

# --8<-- [start:default-cflags]
# -O3 and the host's instruction set; OpenMP for threaded loops and for `omp simd` reduce loops. Float
# arithmetic is IEEE, as numpy's is: gcc's default for GNU C fuses a*b + c (-ffp-contract=fast), so it is
# switched off, and nothing lets gcc reorder float math (-fassociative-math would fold x * 0.0 to 0 and
# (x + 1) - x to 1). The reorderings that speed needs are granted in the C source, per loop and per
# accumulation, where they are safe (render.py). -fno-math-errno and -fno-trapping-math change no value:
# math functions need not set errno, and float operations may be speculated. -fwrapv makes signed
# overflow wrap, as the IR's constant folding assumes.
DEFAULT_CFLAGS = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -ffp-contract=off -fwrapv"
# --8<-- [end:default-cflags]


# --8<-- [start:compile-error]
class CompileError(RuntimeError):
    """The compiler rejected a source; carries its message and the source with line numbers."""

    def __init__(self, message: str, source: str) -> None:
        numbered = "\n".join(f"{n:4d} | {line}" for n, line in enumerate(source.splitlines(), 1))
        super().__init__(f"{message.strip()}\n--- source ---\n{numbered}" if source else message.strip())
        self.compiler_message, self.source = message, source


# --8<-- [end:compile-error]


# --8<-- [start:cache-key]
def compiler() -> str:
    return os.environ.get("CC", "gcc")


def cflags() -> str:
    return os.environ.get("CFLAGS", DEFAULT_CFLAGS)


def cache_dir() -> Path:
    return Path(os.environ.get("UOPC_CACHE", Path.home() / ".cache" / "uopc"))


@functools.cache
def compiler_identity(cc: str) -> str:
    """The compiler's resolved path and version line: a different gcc must not reuse another's builds.

    CC may carry a wrapper or arguments (CC="ccache gcc"); each word that names a program is resolved."""
    words = shlex.split(cc)
    path = shutil.which(words[0]) if words else None
    if path is None:
        raise CompileError(f"C compiler {cc!r} not found; install gcc or set CC", "")
    version = subprocess.run([*words, "--version"], capture_output=True, text=True, check=False).stdout
    resolved = [os.path.realpath(shutil.which(w) or w) for w in words]
    return f"{' '.join(resolved)}\n{version.splitlines()[0] if version else ''}"


@functools.cache
def native_target(cc: str, flags: str) -> str:
    """What -march=native means on this machine: a cache shared with another CPU must not reuse its builds."""
    if "-march=native" not in flags:
        return ""
    cmd = [*shlex.split(cc), "-march=native", "-Q", "--help=target"]  # gcc's spelling; clang prints nothing
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return "\n".join(
        line.strip() for line in done.stdout.splitlines() if line.strip().startswith(("-march=", "-mtune="))
    )


def cache_key(source: str, cc: str, flags: str) -> str:
    text = "\0".join([source, compiler_identity(cc), flags, native_target(cc, flags)])
    return hashlib.sha256(text.encode()).hexdigest()


# --8<-- [end:cache-key]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# --8<-- [start:cached-library]
def entry_folder(key: str) -> Path:
    return cache_dir() / key[:2] / key


def cached_library(key: str) -> Path | None:
    """A verified library for `key`, or None; damaged files are deleted so the next build replaces them."""
    try:
        names = sorted(os.listdir(entry_folder(key)))
    except OSError:  # no entry yet, or removed meanwhile
        return None
    for name in names:
        path = entry_folder(key) / name
        if not (name.startswith("lib-") and name.endswith(".so")):
            continue
        try:
            if _digest(path) == name[4:-3]:
                return path
            path.unlink()
        except OSError:
            continue  # removed by another process meanwhile
    return None


def build_library(source: str) -> Path:
    """The path of a shared library built from `source`, from the cache when it is there."""
    cc, flags = compiler(), cflags()
    key = cache_key(source, cc, flags)
    found = cached_library(key)
    if found is not None:
        return found
    folder = entry_folder(key)
    folder.mkdir(parents=True, exist_ok=True)
    _sweep_abandoned_builds(folder)
    with tempfile.TemporaryDirectory(dir=folder, prefix="build-") as tmp:
        Path(tmp, "kernel.c").write_text(source)
        cmd = [*shlex.split(cc), *shlex.split(flags), "-shared", "-fPIC", "-o", "kernel.so", "kernel.c", "-lm"]
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise CompileError(f"{shlex.join(cmd)} failed:\n{done.stderr}", source)
        built = Path(tmp, "kernel.so")
        final = folder / f"lib-{_digest(built)}.so"
        os.replace(built, final)  # atomic: readers see no file or the whole file
    return final


# --8<-- [end:cached-library]


ABANDONED_AFTER_SECONDS = 3600  # no build takes an hour: a build folder this old belongs to a killed process


def _sweep_abandoned_builds(folder: Path) -> None:
    """Remove build folders left behind by processes killed mid-build; a live build's folder is young."""
    now = time.time()
    for old in folder.glob("build-*"):
        try:
            if now - old.stat().st_mtime > ABANDONED_AFTER_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue
