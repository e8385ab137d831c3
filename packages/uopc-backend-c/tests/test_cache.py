"""The kernel cache: built once per (source, compiler, flags); damaged or half-written entries never load;
several processes can fill one cache at once.

The compiler is a wrapper script around gcc that logs each call, so "was the compiler run?" is counted,
not guessed from timings. Every test uses a cache folder of its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from uopc.backend.c import (
    DEFAULT_CFLAGS,
    CacheError,
    CompileError,
    Program,
    build_binary,
    build_cached,
    build_library,
    program,
)
from uopc.backend.c.compiler import (
    DEFAULT_CACHE_MAX_MB,
    cache_dir,
    cache_key,
    cache_max_bytes,
    cached_library,
    cflags,
    compiler,
    store_file,
)
from uopc.lower import Binary


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
    from uopc.backend.c import C_BACKEND
    from uopc.ir import UOp
    from uopc.lower import Kernel, linearize, rangeify

    go = Path(sys.argv[1])
    kernels = []
    for n in range(1, 6):  # five small kernels: out = x * n + n
        value = UOp.buffer(0, 8) * float(n) + float(n)
        kernels.append(Kernel(f"k{n}", rangeify([(UOp.buffer(1, 8), value)])))
    while not go.exists():  # start building together, to collide in the cache
        time.sleep(0.005)
    programs = [linearize(k) for k in kernels]
    binary = C_BACKEND.compiler.compile(C_BACKEND.renderer.render(programs, []))
    exe = C_BACKEND.runtime.load(binary, programs, [])
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


# ---- whose cache: a library is code, and loading it runs it ---------------------------------------------

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
OTHER = 4242  # a uid and gid that no one on this machine uses


def cache_levels(path: Path) -> dict[str, Path]:
    """The folders the cache made for library `path`, and the library."""
    return {"root": cache_dir(), "bucket": path.parent.parent, "entry": path.parent, "library": path}


def test_cache_folders_and_libraries_are_private_whatever_the_umask(cc_log: Path) -> None:
    source = source_for("private")
    old = os.umask(0o002)  # a common default: files and folders writable by the user's group
    try:
        path = build_library(source)
        assert build_library(source) == path and compiles(cc_log) == 1  # its own files pass its own checks
    finally:
        os.umask(old)
    for name, level in cache_levels(path).items():
        mode = stat.S_IMODE(level.stat().st_mode)
        assert mode & 0o022 == 0, (name, oct(mode))
        if name != "library":
            assert mode == 0o700, (name, oct(mode))


@ROOT_ONLY
@pytest.mark.parametrize("level", ["root", "bucket", "entry", "library"])
def test_a_cache_that_belongs_to_someone_else_is_refused(cc_log: Path, level: str) -> None:
    source = source_for(f"owner-{level}")
    target = cache_levels(build_library(source))[level]
    os.chown(target, OTHER, OTHER)
    with pytest.raises(CacheError) as e:
        build_library(source)
    message = str(e.value)
    assert f"{target} belongs to uid {OTHER}, not to you (uid 0)" in message and "UOPC_CACHE" in message
    assert compiles(cc_log) == 1


@pytest.mark.parametrize("level", ["root", "bucket", "entry", "library"])
@pytest.mark.parametrize(("bits", "who"), [(0o020, "its group"), (0o002, "other users")])
def test_a_cache_that_others_can_write_is_refused(cc_log: Path, level: str, bits: int, who: str) -> None:
    source = source_for(f"mode-{level}-{bits}")
    target = cache_levels(build_library(source))[level]
    target.chmod(stat.S_IMODE(target.stat().st_mode) | bits)
    with pytest.raises(CacheError) as e:
        build_library(source)
    message = str(e.value)
    assert f"{target} can be written by {who}" in message and f"chmod go-w {target}" in message
    assert compiles(cc_log) == 1


def test_a_shared_folder_like_tmp_is_refused_as_a_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # sticky and writable by all, as /tmp is
    monkeypatch.setenv("UOPC_CACHE", str(shared))
    with pytest.raises(CacheError, match="can be written by its group and other users"):
        build_library(source_for("shared"))
    assert not list(shared.iterdir())


@ROOT_ONLY
def test_a_library_planted_by_another_user_does_not_run(cc_log: Path, tmp_path: Path) -> None:
    # the attack: a library whose bytes hash to its name, with a constructor that runs when it is loaded
    source = source_for("planted")
    ran = tmp_path / "constructor-ran"
    evil = tmp_path / "evil.c"
    evil.write_text(
        "#include <stdio.h>\n"
        f'__attribute__((constructor)) static void plant(void) {{ fclose(fopen("{ran}", "w")); }}\n'
        "void twice(const float *a, float *b) { b[0] = a[0]; }\n"
    )
    built = tmp_path / "evil.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(built), str(evil)], check=True)
    key = cache_key(source, compiler(), cflags())
    entry = cache_dir() / key[:2] / key
    entry.mkdir(parents=True)
    planted = entry / f"lib-{hashlib.sha256(built.read_bytes()).hexdigest()[:16]}.so"
    shutil.copy(built, planted)
    os.chown(planted, OTHER, OTHER)
    assert verified(planted)  # the hash in the name proves nothing about who wrote it
    with pytest.raises(CacheError, match=f"belongs to uid {OTHER}"):
        Program(source, "twice")
    assert not ran.exists() and compiles(cc_log) == 0


def test_an_empty_cache_setting_means_the_default_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Path("") is the current folder: the cache was written wherever the program ran
    monkeypatch.setenv("UOPC_CACHE", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert cache_dir() == tmp_path / "home" / ".cache" / "uopc"
    path = build_library(source_for("empty-setting"))
    assert path.is_relative_to(tmp_path / "home" / ".cache" / "uopc") and not list(work.iterdir())


# ---- compiler settings that cannot make a library -------------------------------------------------------


@pytest.mark.parametrize(
    ("cc", "flags", "problem"),
    [
        ("true", DEFAULT_CFLAGS, "exited successfully but wrote no library"),
        ("gcc", "-E", "wrote a file that is not a shared library: b'# "),  # preprocessed C
        ("gcc", "-S", "wrote a file that is not a shared library"),
        ("gcc", "-O2 -c", "wrote a file that is not a shared library: b'\\x7fELF"),  # an object file
    ],
)
def test_a_compiler_that_makes_no_library_is_a_compile_error_naming_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cc: str, flags: str, problem: str
) -> None:
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", cc)
    monkeypatch.setenv("CFLAGS", flags)
    with pytest.raises(CompileError) as e:
        Program(source_for(f"no-library-{cc}-{flags}"), "twice")
    message = str(e.value)
    assert f"$CC={cc!r} with $CFLAGS={flags!r}" in message and problem in message
    assert not list((tmp_path / "cache").rglob("lib-*"))


@pytest.mark.parametrize(("name", "value"), [("CC", 'gcc "-O2'), ("CFLAGS", "-O2 -DNAME='x")])
def test_an_unbalanced_quote_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str
) -> None:
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(name, value)
    with pytest.raises(CompileError) as e:
        build_library(source_for(f"quote-{name}"))
    assert str(e.value) == f"${name}={value!r} cannot be split into words as a shell would: No closing quotation"


# ---- a bounded cache ------------------------------------------------------------------------------------


def same_folder_sources(n: int) -> list[str]:
    """`n` sources whose keys start with the same two hex digits: their entries share a folder."""
    by_folder: dict[str, list[str]] = {}
    for i in range(100_000):
        source = source_for(f"lru-{i}")
        group = by_folder.setdefault(cache_key(source, compiler(), cflags())[:2], [])
        group.append(source)
        if len(group) == n:
            return group
    raise AssertionError("no folder got n keys")


def test_least_recently_used_libraries_are_evicted_first(cc_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = same_folder_sources(3)
    lib_a = build_library(a)
    size = lib_a.stat().st_size
    monkeypatch.setenv("UOPC_CACHE_MAX_MB", str(2.5 * size * 256 / 2**20))  # room for two libraries a folder
    lib_b = build_library(b)
    time.sleep(0.05)  # file times have a granularity of a few milliseconds
    assert build_library(a) == lib_a  # used again: now b is the least recently used
    lib_c = build_library(c)
    assert lib_a.exists() and lib_c.exists() and not lib_b.exists() and not lib_b.parent.exists()
    assert compiles(cc_log) == 3
    assert build_library(a) == lib_a and compiles(cc_log) == 3
    assert build_library(b) == lib_b and compiles(cc_log) == 4  # evicted, so built again
    assert sum(p.stat().st_size for p in cache_dir().rglob("lib-*.so")) <= 2.5 * size


def test_kept_plans_and_searched_opts_count_toward_the_limit_and_are_evicted_too(
    cc_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache used only by search keeps only opts files: they must not grow past the limit either."""
    record = b'{"opts": []}' + b" " * 500
    monkeypatch.setenv("UOPC_CACHE_MAX_MB", str(2.5 * len(record) * 256 / 2**20))  # two files a folder
    kept = []
    for i, (prefix, suffix) in enumerate([("opts-", ".json"), ("plan-", ".json"), ("opts-", ".json")]):
        kept.append(store_file(f"ab{i:062x}", prefix, suffix, record + bytes([i])))
        time.sleep(0.05)  # file times have a granularity of a few milliseconds
    assert not kept[0].exists() and kept[1].exists() and kept[2].exists()


def test_a_library_larger_than_the_limit_is_kept_until_the_next_build(
    cc_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UOPC_CACHE_MAX_MB", "0.001")  # 4 bytes a folder: smaller than any library
    a, b = same_folder_sources(2)
    lib_a = build_library(a)
    assert lib_a.exists() and run_twice(a) == [2.0, 4.0, 6.0]
    lib_b = build_library(b)
    assert lib_b.exists() and not lib_a.exists()


@pytest.mark.parametrize("value", ["lots", "0", "-1", "nan", "inf"])
def test_a_bad_cache_limit_is_named(cc_log: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("UOPC_CACHE_MAX_MB", value)
    with pytest.raises(CacheError, match=f"UOPC_CACHE_MAX_MB={value!r} is not a positive number of megabytes"):
        build_library(source_for(f"limit-{value}"))


def test_a_library_evicted_between_lookup_and_load_still_loads(cc_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # another process's build may evict the library this one just found, before it is loaded: the bytes the
    # lookup verified are loaded from a private copy, with no second build
    def evicted(source: str) -> Binary:
        binary = build_binary(source)
        binary.path.unlink()
        return binary

    monkeypatch.setattr(program, "build_binary", evicted)
    assert run_twice(source_for("evicted")) == [2.0, 4.0, 6.0]
    assert compiles(cc_log) == 1


def test_the_default_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UOPC_CACHE_MAX_MB", raising=False)
    assert cache_max_bytes() == DEFAULT_CACHE_MAX_MB * 2**20 == 512 * 2**20


# ---- a time limit on the compiler ------------------------------------------------------------------------


def test_a_build_past_the_time_limit_is_a_compile_error_naming_kernel_limit_and_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UOPC_CC_TIMEOUT", "0.001")  # gcc does not even start in a millisecond
    with pytest.raises(CompileError) as e:
        Program(source_for("time-limit"), "twice")
    message = str(e.value)
    assert "did not finish building kernel twice within UOPC_CC_TIMEOUT=0.001 seconds" in message
    assert "set UOPC_CC_TIMEOUT to more seconds (default 300)" in message
    assert not list((tmp_path / "cache").rglob("lib-*"))


def test_a_compiler_past_the_time_limit_is_stopped_with_what_it_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A compiler that hangs in a child process (as gcc's cc1 would) is killed with that child, in time."""
    child = tmp_path / "child.pid"
    hanging = tmp_path / "hanging-cc"
    hanging.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--version*|*--help=target*) echo "hanging-cc 1.0"; exit 0;; esac\n'
        f'sleep 120 & echo $! > "{child}"\nwait\n'
    )
    hanging.chmod(0o755)
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(hanging))
    monkeypatch.setenv("UOPC_CC_TIMEOUT", "1")
    start = time.monotonic()
    with pytest.raises(CompileError, match=r"building kernel twice within UOPC_CC_TIMEOUT=1 seconds"):
        build_library(source_for("hanging"))
    assert time.monotonic() - start < 30
    pid = int(child.read_text())
    for _ in range(100):  # killed, then reaped by init: gone within moments
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the compiler's child process {pid} still runs after the time limit")


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_a_time_limit_that_is_not_a_positive_number_of_seconds_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("UOPC_CC_TIMEOUT", value)
    with pytest.raises(CompileError) as e:
        build_library(source_for(f"bad-limit-{value}"))
    assert str(e.value) == f"UOPC_CC_TIMEOUT={value!r} is not a positive number of seconds"


def test_another_backends_build_is_cached_once_with_the_same_checks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """build_cached keeps what another backend's compiler built (a cubin, say) as a library is kept: built
    once per key, named by the digest of its bytes, private, and rebuilt when the file is damaged."""
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    builds: list[Path] = []

    def build(folder: Path) -> bytes:
        builds.append(folder)
        assert folder.is_dir() and not list(folder.iterdir())  # a fresh folder to build in
        return b"not a shared library: bytes another compiler made"

    key = hashlib.sha256(b"nvcc -cubin k.cu").hexdigest()
    first = build_cached(key, build)
    assert first.data == b"not a shared library: bytes another compiler made" and len(builds) == 1
    assert first.path.name == f"lib-{hashlib.sha256(first.data).hexdigest()[:16]}.so"
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o700
    assert build_cached(key, build) == first and len(builds) == 1
    first.path.write_bytes(b"damaged")
    assert build_cached(key, build).data == first.data and len(builds) == 2
