"""The kernel cache: built once per (source, compiler, flags); damaged or half-written entries never load;
several processes can fill one cache at once.

The compiler is a wrapper script around gcc that logs each call, so "was the compiler run?" is counted,
not guessed from timings. Every test uses a cache folder of its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from uopc.backend.c import DEFAULT_CFLAGS, Program, build_library
from uopc.backend.c.compiler import cache_dir, cache_key, cached_library, cflags, compiler


def source_for(tag: str) -> str:
    """A small valid kernel; `tag` makes the source, and so the cache key, unique to a test."""
    return (
        f"// {tag}\n"
        "void twice(const float data0[restrict static 3], float data1[restrict static 3]) {\n"
        "  for (int i = 0; i < 3; i++) data1[i] = 2.0f * data0[i];\n"
        "}\n"
    )


@pytest.fixture
def cc_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point CC at a gcc wrapper that appends its arguments to a log, and UOPC_CACHE at a fresh folder."""
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "cc-wrapper"
    gcc = shutil.which("gcc")
    assert gcc is not None
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{gcc}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    log.touch()
    return log


def compiles(log: Path) -> int:
    """How many times the wrapper compiled something (its --version calls are not builds)."""
    return sum("-shared" in line for line in log.read_text().splitlines())


def verified(path: Path) -> bool:
    return path.name == f"lib-{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}.so"


def run_twice(path_source: str) -> list[float]:
    out = np.zeros(3, np.float32)
    Program(path_source, "twice")(np.array([1.0, 2.0, 3.0], np.float32), out)
    return [float(v) for v in out]


def test_cache_location_and_flags_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path))
    monkeypatch.delenv("CFLAGS", raising=False)
    monkeypatch.delenv("CC", raising=False)
    assert cache_dir() == tmp_path and cflags() == DEFAULT_CFLAGS and compiler() == "gcc"
    path = build_library(source_for("location"))
    assert path.parent.parent.parent == tmp_path and verified(path)


def test_second_build_does_not_run_the_compiler(cc_log: Path) -> None:
    source = source_for("second-build")
    first = build_library(source)
    assert compiles(cc_log) == 1
    second = build_library(source)
    assert second == first and compiles(cc_log) == 1
    assert run_twice(source) == [2.0, 4.0, 6.0] and compiles(cc_log) == 1  # Program uses the cache too


def test_flags_and_compiler_are_part_of_the_key(cc_log: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    source = source_for("key")
    gcc = shutil.which("gcc")
    assert gcc is not None
    assert cache_key(source, gcc, "-O2") != cache_key(source, gcc, "-O3")
    assert cache_key(source, gcc, "-O2") != cache_key(source, os.environ["CC"], "-O2")  # another compiler
    assert cache_key(source + " ", gcc, "-O2") != cache_key(source, gcc, "-O2")
    # end to end: a change of CFLAGS builds again, into another entry; changing back finds the old one
    first = build_library(source)
    monkeypatch.setenv("CFLAGS", "-O1 -fopenmp")
    second = build_library(source)
    assert compiles(cc_log) == 2 and first.parent != second.parent
    monkeypatch.delenv("CFLAGS")
    assert build_library(source) == first and compiles(cc_log) == 2


def test_truncated_library_is_detected_and_rebuilt(cc_log: Path) -> None:
    source = source_for("truncated")
    path = build_library(source)  # built, never loaded in this process: it is safe to damage
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert not verified(path)
    rebuilt = build_library(source)
    assert compiles(cc_log) == 2  # the damaged file was not trusted
    assert verified(rebuilt) and rebuilt.read_bytes() == data
    assert run_twice(source) == [2.0, 4.0, 6.0]


def test_misnamed_library_is_deleted(cc_log: Path) -> None:
    # a file whose bytes do not hash to its name is never loaded, whatever it claims to be
    source = source_for("misnamed")
    key = cache_key(source, compiler(), cflags())
    folder = cache_dir() / key[:2] / key
    folder.mkdir(parents=True)
    impostor = folder / "lib-0000000000000000.so"
    impostor.write_bytes(b"not a library")
    assert cached_library(key) is None and not impostor.exists()
    assert verified(build_library(source))


def test_leftover_temporary_build_folder_does_not_break_lookups(cc_log: Path) -> None:
    # a build killed halfway leaves its temporary folder behind, with a partial library inside
    source = source_for("leftover")
    key = cache_key(source, compiler(), cflags())
    leftover = cache_dir() / key[:2] / key / "build-killed"
    leftover.mkdir(parents=True)
    (leftover / "kernel.c").write_text(source)
    (leftover / "kernel.so").write_bytes(b"\x7fELF half")
    assert cached_library(key) is None
    path = build_library(source)
    assert verified(path) and path.parent == leftover.parent
    assert build_library(source) == path and compiles(cc_log) == 1
    assert run_twice(source) == [2.0, 4.0, 6.0]


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import numpy as np
    from uopc.backend.c import CExecutable
    from uopc.ir import UOp
    from uopc.lower import Kernel, rangeify

    go = Path(sys.argv[1])
    kernels = []
    for n in range(1, 6):  # five small kernels: out = x * n + n
        value = UOp.buffer(0, 8) * float(n) + float(n)
        kernels.append(Kernel(f"k{n}", rangeify([(UOp.buffer(1, 8), value)])))
    while not go.exists():  # start building together, to collide in the cache
        time.sleep(0.005)
    exe = CExecutable(kernels, [])
    x = np.arange(8, dtype=np.float32)
    for n in range(1, 6):
        out = np.zeros(8, np.float32)
        exe.run_kernel(n - 1, [x, out])
        assert (out == x * n + n).all(), (n, out)
    print("ok")
    """
)


def test_processes_building_the_same_kernels_at_once_all_succeed(tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    go = tmp_path / "go"
    env = {**os.environ, "UOPC_CACHE": str(cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(go)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    time.sleep(0.5)  # let the interpreters import; any that are late still find a complete entry
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0 and out.strip() == "ok", err
    libraries = list(cache.rglob("*.so"))
    assert libraries and all(verified(p) for p in libraries)
    assert not list(cache.rglob("build-*"))  # every temporary build folder was cleaned up
