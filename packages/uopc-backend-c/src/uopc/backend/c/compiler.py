"""Build C source into a shared library, once: a content-addressed cache on disk.

The cache key is the SHA-256 of the source, the compiler's identity (its path and `--version`) and the
flags, so changing any of them builds anew. An entry is the folder `<cache>/<key[:2]>/<key>/` holding
`lib-<digest>.so`, where digest is the first 16 hex digits of the library's own SHA-256: a file is only
trusted if its bytes hash to its name. A build writes to a temporary name and renames it into place, which
is atomic, so two processes building the same source at once, or a build killed halfway, never leave a
half-written library where a reader would load it; a damaged file fails its hash check and is rebuilt.

The hash proves that a file is undamaged, not who wrote it, and loading a library runs its code. So every
folder the cache makes is private (mode 0700), and a folder or library that belongs to another user, or
that group or others may write, is refused with a CacheError before anything in it is loaded. The cache
holds at most UOPC_CACHE_MAX_MB megabytes: each build evicts the least recently used libraries of its folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import math
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from uopc.backend.c.openmp import USABLE_CPUS
from uopc.ir import UopcError
from uopc.lower import Binary, Source

# -O3 and the host's instruction set; OpenMP for threaded loops and for `omp simd` reduce loops. Float
# arithmetic is IEEE, as numpy's is: gcc's default for GNU C fuses a*b + c (-ffp-contract=fast), so it is
# switched off, and nothing lets gcc reorder float math (-fassociative-math would fold x * 0.0 to 0 and
# (x + 1) - x to 1). The reorderings that speed needs are granted in the C source, per loop and per
# accumulation, where they are safe (render.py). -fno-math-errno and -fno-trapping-math change no value:
# math functions need not set errno, and float operations may be speculated. -fwrapv makes signed
# overflow wrap, as the IR's constant folding assumes.
DEFAULT_CFLAGS = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -ffp-contract=off -fwrapv"


class CompileError(UopcError, RuntimeError):
    """The compiler rejected a source; carries its message and the source with line numbers."""

    def __init__(self, message: str, source: str) -> None:
        numbered = "\n".join(f"{n:4d} | {line}" for n, line in enumerate(source.splitlines(), 1))
        super().__init__(f"{message.strip()}\n--- source ---\n{numbered}" if source else message.strip())
        self.compiler_message, self.source = message, source


class CacheError(UopcError, RuntimeError):
    """The kernel cache cannot be trusted or is set up wrong; the message says how to fix it."""


def compiler() -> str:
    """The C compiler command: $CC, else gcc. Part of the kernel cache key."""
    return os.environ.get("CC", "gcc")


def cflags() -> str:
    """The compiler flags: $CFLAGS, else DEFAULT_CFLAGS. Part of the kernel cache key."""
    return os.environ.get("CFLAGS", DEFAULT_CFLAGS)


def cache_dir() -> Path:
    """Where compiled kernel libraries are kept: $UOPC_CACHE, else ~/.cache/uopc (also when it is empty: an
    empty path would mean the current folder)."""
    return Path(os.environ.get("UOPC_CACHE") or Path.home() / ".cache" / "uopc")


def setting_words(name: str, value: str) -> list[str]:
    """The words of the setting `name` (CC or CFLAGS), split as a shell would; a CompileError if it cannot be."""
    try:
        return shlex.split(value)
    except ValueError as e:
        raise CompileError(f"${name}={value!r} cannot be split into words as a shell would: {e}", "") from None


@functools.cache
def compiler_identity(cc: str) -> str:
    """The compiler's resolved path and version line: a different gcc must not reuse another's builds.

    CC may carry a wrapper or arguments (CC="ccache gcc"); each word that names a program is resolved."""
    words = setting_words("CC", cc)
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
    cmd = [*setting_words("CC", cc), "-march=native", "-Q", "--help=target"]  # gcc's spelling; clang prints nothing
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return "\n".join(
        line.strip() for line in done.stdout.splitlines() if line.strip().startswith(("-march=", "-mtune="))
    )


@functools.cache
def native_exclusions(cc: str, flags: str) -> list[str]:
    """Flags that keep gcc away from what it cannot build after -march=native. With AVX512-FP16, gcc 12's
    if-conversion turns a float16 select stored to memory (`out = c ? x : 0`) into a zero-masked `vmovsh`
    store, an encoding that does not exist (binutils 2.40: "unsupported masking for `vmovsh'"). Turning
    AVX512-FP16 off would change float16 results (C would then keep _Float16 sums in float, rounding once
    instead of after each op), so the scalar if-conversion is turned off instead; vectorized loops keep
    their blends."""
    if "-march=native" not in flags:
        return []
    cmd = [*setting_words("CC", cc), "-march=native", "-Q", "--help=target"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    enabled = {words[0] for words in map(str.split, done.stdout.splitlines()) if words[1:2] == ["[enabled]"]}
    return ["-fno-if-conversion"] if "-mavx512fp16" in enabled else []


def cache_key(source: str, cc: str, flags: str) -> str:
    text = "\0".join([source, compiler_identity(cc), flags, native_target(cc, flags)])
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def check_private(st: os.stat_result, path: Path) -> None:
    """Refuse a cache folder or library that another user wrote, or could write: loading a library runs it."""
    kind = "folder" if stat.S_ISDIR(st.st_mode) else "file"
    if st.st_uid != os.geteuid():
        raise CacheError(
            f"kernel cache {kind} {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}): uopc runs "
            "the libraries in its cache, so it uses only a cache of your own. Set UOPC_CACHE to a folder of "
            "yours, or delete this one"
        )
    if st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("its group", 0o020), ("other users", 0o002)) if st.st_mode & bit)
        raise CacheError(
            f"kernel cache {kind} {path} can be written by {who} (mode {stat.S_IMODE(st.st_mode):o}), who could "
            "plant a library that runs in your process. Delete it (it holds only a cache), or, if nobody else "
            f"has written to it, run: chmod go-w {shlex.quote(str(path))}"
        )


def checked_entry(key: str, create: bool) -> Path | None:
    """The folder of `key`'s entry, every level checked by `check_private`; None if a level is missing.

    With `create`, missing levels are made with mode 0700: readable and writable by you alone."""
    root = cache_dir()
    levels = [root, root / key[:2], root / key[:2] / key]
    for level in levels:
        if create:
            level.mkdir(mode=0o700, parents=level is root, exist_ok=True)
        try:
            st = os.stat(level)
        except FileNotFoundError:
            return None
        check_private(st, level)
    return levels[-1]


def entry_folder(key: str) -> Path:
    return cache_dir() / key[:2] / key


def cached_library(key: str) -> Binary | None:
    """A verified library for `key`, or None; damaged files are deleted so the next build replaces them."""
    found = cached_file(key, "lib-", ".so")
    return None if found is None else Binary(key, *found)


def cached_file(key: str, prefix: str, suffix: str) -> tuple[Path, bytes] | None:
    """The path and bytes of a verified file `<prefix><digest><suffix>` in `key`'s entry, or None."""
    folder = checked_entry(key, create=False)
    try:
        names = sorted(os.listdir(folder)) if folder is not None else []
    except OSError:  # removed meanwhile
        return None
    for name in names:
        path = entry_folder(key) / name
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        try:
            data = _verified(path, prefix, suffix)
            if data is not None:
                os.utime(path)  # used now: eviction removes the least recently used first
                return path, data
            path.unlink()
        except OSError:
            continue  # removed by another process meanwhile
    return None


def _verified(path: Path, prefix: str = "lib-", suffix: str = ".so") -> bytes | None:
    """The file's bytes if they hash to its name; checked to be yours alone before it is read."""
    with open(path, "rb") as f:
        check_private(os.fstat(f.fileno()), path)
        data = f.read()
    return data if _digest(data) == path.name[len(prefix) : -len(suffix)] else None


def store_file(key: str, prefix: str, suffix: str, data: bytes, mode: int = 0o600) -> Path:
    """Write `data` into `key`'s entry as `<prefix><digest><suffix>`, atomically, with `mode` (yours alone)."""
    folder, tmp = _build_folder(key)
    with tmp:
        written = Path(tmp.name, "file")
        written.write_bytes(data)
        written.chmod(mode)
        final = folder / f"{prefix}{_digest(data)}{suffix}"
        os.replace(written, final)
    evict(folder.parent, keep=final)
    return final


def build_binary(source: str, flags: str | None = None) -> Binary:
    """The shared library built from `source` with `flags` (default: cflags()), from the cache when it is
    there."""
    cc, flags = compiler(), cflags() if flags is None else flags
    key = cache_key(source, cc, flags)
    found = cached_library(key)
    if found is not None:
        return found
    folder, tmp = _build_folder(key)
    with tmp:
        built = compile_units(Path(tmp.name), source, cc, flags)
        data = check_built(built, cc, flags)
        final = folder / f"lib-{_digest(data)}.so"
        built.chmod(0o700)  # yours alone, whatever the umask made it
        os.replace(built, final)  # atomic: readers see no file or the whole file
    evict(folder.parent, keep=final)
    return Binary(key, final, data)


UNIT_BREAK = "/* uopc: unit */"  # a line the renderer writes between parts of a source that compile apart


def join_parts(parts: Iterable[str]) -> str:
    """One source of a header and the parts that compile apart after it, as compile_units splits it again."""
    return f"\n\n{UNIT_BREAK}\n".join(parts) + "\n"


def compile_units(folder: Path, source: str, cc: str, flags: str) -> Path:
    """Build `source` into `folder`/kernel.so. A source made of units (a header, then parts separated by
    UNIT_BREAK lines: a plan's) is built as one translation unit per core, the header followed by a share
    of the parts, by as many compilers at once; then linked. gcc spends its time per function, so the
    shares balance the parts' lengths. The whole build has cc_timeout() seconds."""
    parts = source.split(f"\n{UNIT_BREAK}\n")
    jobs = min(len(parts) - 1, USABLE_CPUS)
    base = [*setting_words("CC", cc), *setting_words("CFLAGS", flags), *native_exclusions(cc, flags)]
    deadline = time.monotonic() + cc_timeout()
    if jobs <= 1:
        Path(folder, "kernel.c").write_text(source)
        _run_all([([*base, "-shared", "-fPIC", "-o", "kernel.so", "kernel.c", "-lm"], source)], folder, deadline)
        return folder / "kernel.so"
    units = ["\n\n".join([parts[0], *share]) + "\n" for share in shares(parts[1:], jobs)]
    for i, unit in enumerate(units):
        Path(folder, f"unit{i}.c").write_text(unit)
    objects = [([*base, "-fPIC", "-c", "-o", f"unit{i}.o", f"unit{i}.c"], unit) for i, unit in enumerate(units)]
    _run_all(objects, folder, deadline)
    link = [*base, "-shared", "-fPIC", "-o", "kernel.so", *(f"unit{i}.o" for i in range(jobs)), "-lm"]
    _run_all([(link, source)], folder, deadline)
    return folder / "kernel.so"


def shares(parts: list[str], jobs: int) -> list[list[str]]:
    """`parts` in `jobs` shares of about equal length: gcc spends its time per function, so per character."""
    out: list[list[str]] = [[] for _ in range(jobs)]
    for part in sorted(parts, key=len, reverse=True):  # each part to the share that is shortest so far
        min(out, key=lambda share: sum(map(len, share))).append(part)
    return [share for share in out if share]


def _run_all(commands: list[tuple[list[str], str]], folder: Path, deadline: float) -> None:
    """Run the compiler commands at once, each given with the C it builds; a CompileError if one fails or if
    they are not all done by `deadline`. Each runs in a session of its own, so that a compiler still running
    then, and the processes it started (gcc's cc1, which would run on), can all be killed."""
    running = [
        (cmd, text, subprocess.Popen(cmd, cwd=folder, stderr=subprocess.PIPE, text=True, start_new_session=True))
        for cmd, text in commands
    ]
    try:
        for cmd, text, process in running:
            try:
                _, stderr = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise CompileError(_too_long(cmd, text), "") from None
            if process.returncode != 0:
                raise CompileError(f"{shlex.join(cmd)} failed:\n{stderr}", text)
    finally:
        for _, _, process in running:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
            elif process.stderr is not None:  # done, but not waited for when another one failed first
                process.stderr.close()


def _too_long(cmd: list[str], text: str) -> str:
    names = re.findall(r"^[^;\n]*\bvoid (\w+)\([^;\n]*\{$", text, re.MULTILINE)
    what = f"kernel{'s' * (len(names) != 1)} {', '.join(names)}" if names else "its source"
    return (
        f"{shlex.join(cmd)} did not finish building {what} within UOPC_CC_TIMEOUT={cc_timeout():g} seconds, and "
        f"was stopped. Some kernels take a compiler minutes (notebook entry 72); set UOPC_CC_TIMEOUT to more "
        f"seconds (default {DEFAULT_CC_TIMEOUT}), or build with less optimization (CFLAGS with -O1)"
    )


DEFAULT_CC_TIMEOUT = 300  # seconds for one build: a plan's kernels build in seconds, a blow-up takes minutes


def cc_timeout() -> float:
    """How long one build may take: UOPC_CC_TIMEOUT seconds (fractions allowed), or DEFAULT_CC_TIMEOUT."""
    text = os.environ.get("UOPC_CC_TIMEOUT") or str(DEFAULT_CC_TIMEOUT)
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise CompileError(f"UOPC_CC_TIMEOUT={text!r} is not a positive number of seconds", "")
    return seconds


def build_cached(key: str, build: Callable[[Path], bytes]) -> Binary:
    """The binary cached under `key`, or built by `build` and cached, with build_binary's guarantees.

    For another backend's compiler (nvcc, for CUDA): `key` is the SHA-256 of everything that determines the
    output, and `build(folder)` builds in a fresh temporary folder and returns the bytes it built. They are
    kept as a library is (private folders, a name that is the digest of the bytes, an atomic rename,
    eviction), whatever they are: the cache names every file it keeps `lib-<digest>.so`."""
    found = cached_library(key)
    if found is not None:
        return found
    folder, tmp = _build_folder(key)
    with tmp:
        data = build(Path(tmp.name))
        built = Path(tmp.name, "built.bin")
        built.write_bytes(data)
        built.chmod(0o700)
        final = folder / f"lib-{_digest(data)}.so"
        os.replace(built, final)
    evict(folder.parent, keep=final)
    return Binary(key, final, data)


def build_library(source: str) -> Path:
    """The path of a shared library built from `source`, from the cache when it is there."""
    return build_binary(source).path


# The tiered build. gcc at -O3 needs about 10 CPU seconds for a GPT training step's 150 kernels (700 kB of
# C), at -O0 under one, and the renderer writes every reordering of float arithmetic into the C (render.py), so both
# libraries compute the same bits. A large source is therefore built at -O0 first, which runs the first
# steps, while a thread waits on gcc building it at -O3; the runtime swaps the -O3 library in when it is
# done (runtime.py), and the plan store keeps it for the next process (store.py). The thread is not a
# daemon: a process that ends sooner waits for it, so that the cache holds the -O3 library.
QUICK_LEVEL = "-O0"
# The quick build's hot kernels (render.HOT_FLOPS) at -O1: they are most of a step's time at -O0.
HOT_ATTRIBUTE = '-DUOPC_HOT=__attribute__((optimize("O1")))'
TIERED_MIN_CHARS = 50_000  # below this, -O3 builds in under a CPU second and one build is enough
BACKGROUND_NICE = 10  # the -O3 build's priority: below the process's own work


def tiered_build_on() -> bool:
    """Whether a large source is built in two tiers (quick_flags): UOPC_TIERED=0 builds it once, at the
    flags' level, so that the first step already runs the optimized kernels (a short run, a benchmark)."""
    return os.environ.get("UOPC_TIERED", "1") != "0"


def quick_flags(chars: int, flags: str) -> str | None:
    """The flags of a quick first build of a source of `chars` characters, or None when one build is
    enough: a small source, flags the user chose ($CFLAGS), which are built exactly as asked, or tiers
    turned off (tiered_build_on)."""
    if flags != DEFAULT_CFLAGS or chars < TIERED_MIN_CHARS or not tiered_build_on():
        return None
    return f"{flags.replace('-O3', QUICK_LEVEL)} {shlex.quote(HOT_ATTRIBUTE)}"


class CCompiler:
    """The C backend's compiler: C source to a shared library, through the cache; a large source that is
    not in the cache yet is built in two tiers (quick_flags). Given as parts while a renderer still makes
    them (compile_parts), the quick tier starts before the last part is written."""

    def compile(self, source: Source) -> Binary:
        flags = cflags()
        quick = quick_flags(len(source.text), flags)
        if quick is None:
            return build_binary(source.text, flags)
        found = cached_library(cache_key(source.text, compiler(), flags))
        if found is not None:
            return found
        return _optimized_later(build_binary(source.text, quick), source.text, flags)

    def compile_parts(self, parts: Iterable[Source]) -> Binary:
        """The binary of the source that `parts` make (a header, then parts that compile apart: join_parts).
        Once they add up to a source large enough for tiers, the quick build starts on units of the parts
        that have arrived (UnitBuild), while the caller makes the next ones; a smaller source, or one whose
        optimized library is in the cache already, is built or found as `compile` would."""
        flags, texts, chars = cflags(), [], 0
        with contextlib.ExitStack() as stack:
            build: UnitBuild | None = None
            for part in parts:
                texts.append(part.text)
                chars += len(part.text)
                quick = quick_flags(chars, flags)
                if build is not None:
                    build.add(part.text)
                elif quick is not None:
                    build = stack.enter_context(UnitBuild(texts[0], quick))
                    for text in texts[1:]:
                        build.add(text)
            source = join_parts(texts)
            if build is None:
                return self.compile(Source(source))
            found = cached_library(cache_key(source, compiler(), flags))
            return found if found is not None else _optimized_later(build.finish(source), source, flags)


UNIT_CHARS = 100_000  # characters of C per unit of a build made as its source arrives: gcc starts in 25 ms


class UnitBuild:
    """A build whose source arrives part by part, the header first: once the parts since the last unit hold
    UNIT_CHARS characters, the next part's arrival makes the header and them a translation unit that gcc
    builds in a thread of its own, while the caller makes the next parts (the thread waits on gcc, which runs
    on another core).
    `finish` builds the rest and links the units. Leaving the context waits for the compilers still running
    and removes the build's folder; the whole build has cc_timeout() seconds."""

    def __init__(self, header: str, flags: str) -> None:
        self.cc, self.flags, self.header = compiler(), flags, header
        self.base = [*setting_words("CC", self.cc), *setting_words("CFLAGS", flags), *native_exclusions(self.cc, flags)]
        self.deadline = time.monotonic() + cc_timeout()
        self.tmp = tempfile.TemporaryDirectory(prefix="uopc-build-")  # made 0700: yours alone
        self.pool = ThreadPoolExecutor(USABLE_CPUS, thread_name_prefix="uopc-cc")
        self.units: list[Future[None]] = []
        self.objects: list[str] = []
        self.waiting: list[str] = []
        self.chars = 0

    def add(self, part: str) -> None:
        """Queue `part`; the parts before it go to gcc first if they fill a unit. The part that arrives
        last thus always waits for `finish`, which shares it out with the others waiting over the cores: a
        unit started by the last part would be one gcc on one core while the other idles (the GPT step's
        last part is its 57,000-character uopc_plan)."""
        if self.chars >= UNIT_CHARS:
            unit = self._unit(self.waiting)
            self.units.append(self.pool.submit(_run_all, [unit], Path(self.tmp.name), self.deadline))
            self.waiting, self.chars = [], 0
        self.waiting.append(part)
        self.chars += len(part)

    def _unit(self, parts: list[str]) -> tuple[list[str], str]:
        """The gcc command that builds the header and `parts` into an object of their own, and its C."""
        name, unit = f"unit{len(self.objects)}", "\n\n".join([self.header, *parts]) + "\n"
        Path(self.tmp.name, f"{name}.c").write_text(unit)
        self.objects.append(f"{name}.o")
        return [*self.base, "-fPIC", "-c", "-o", f"{name}.o", f"{name}.c"], unit

    def finish(self, source: str) -> Binary:
        """The library of all the parts, kept in the cache under `source` (their join) and the flags. The
        parts still waiting are split over the cores and built at once, beside the units still running: a
        share queued behind a running unit would leave a core idle at the end."""
        last = [self._unit(share) for share in shares(self.waiting, USABLE_CPUS)]
        self.waiting = []
        _run_all(last, Path(self.tmp.name), self.deadline)
        for unit in self.units:
            unit.result()
        link = [*self.base, "-shared", "-fPIC", "-o", "kernel.so", *self.objects, "-lm"]
        _run_all([(link, source)], Path(self.tmp.name), self.deadline)
        data = check_built(Path(self.tmp.name, "kernel.so"), self.cc, self.flags)
        key = cache_key(source, self.cc, self.flags)
        return Binary(key, store_file(key, "lib-", ".so", data, mode=0o700), data)

    def __enter__(self) -> UnitBuild:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.tmp.cleanup()


def _optimized_later(first: Binary, source: str, flags: str) -> Binary:
    """The quick binary `first`, with the build of `source` at `flags` started in a thread as its `later`."""
    later: Future[Binary] = Future()
    threading.Thread(target=_build_later, args=(later, source, flags), name="uopc-O3-build").start()
    return dataclasses.replace(first, later=later)


def _build_later(later: Future[Binary], source: str, flags: str) -> None:
    """Build `source` with `flags`, for the thread of a tiered build: its result or its error goes to `later`.

    The compilers run at a lower priority, so that the steps running on the quick library meanwhile keep the
    cores they need. On Linux a thread has its own nice value, and the processes it starts inherit it."""
    with contextlib.suppress(OSError):  # a system where a thread's id names no process: full priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    try:
        later.set_result(build_binary(source, flags))
    except Exception as e:  # the runtime that waits on `later` reports it
        later.set_exception(e)


def _build_folder(key: str) -> tuple[Path, tempfile.TemporaryDirectory[str]]:
    """The entry's folder, made if need be, and a temporary folder in it to build in.

    Another process's eviction can remove the entry between the two steps; then both are done again."""
    while True:
        folder = checked_entry(key, create=True)
        assert folder is not None  # made just now
        _sweep_abandoned_builds(folder)
        with contextlib.suppress(FileNotFoundError):
            return folder, tempfile.TemporaryDirectory(dir=folder, prefix="build-")


ELF_MAGIC, ET_DYN = b"\x7fELF", 3  # ET_DYN: the e_type of a shared object


def check_built(path: Path, cc: str, flags: str) -> bytes:
    """The bytes of the library the compiler wrote, or a CompileError naming CC and CFLAGS if it wrote none.

    A compiler that exits 0 without a shared library (CC=true, or -E, -S, -c in CFLAGS) would otherwise
    fail later, at load time, with a message about a missing file or an invalid ELF header."""
    settings = f"$CC={cc!r} with $CFLAGS={flags!r}"
    hint = "CC must name a C compiler, and CFLAGS must not stop it early (-E, -S, -c, -M) or redirect it (-o)"
    if not path.exists():
        raise CompileError(f"{settings} exited successfully but wrote no library. {hint}", "")
    data = path.read_bytes()
    e_type = int.from_bytes(data[16:18], "big" if data[5:6] == b"\x02" else "little")  # EI_DATA: byte order
    if data[:4] != ELF_MAGIC or e_type != ET_DYN:
        raise CompileError(f"{settings} wrote a file that is not a shared library: {data[:16]!r}... {hint}", "")
    return data


DEFAULT_CACHE_MAX_MB = 512


def cache_max_bytes() -> int:
    """The cache's size limit: UOPC_CACHE_MAX_MB megabytes (fractions allowed), or DEFAULT_CACHE_MAX_MB."""
    text = os.environ.get("UOPC_CACHE_MAX_MB") or str(DEFAULT_CACHE_MAX_MB)
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = math.nan
    if not (math.isfinite(megabytes) and megabytes > 0):
        raise CacheError(f"UOPC_CACHE_MAX_MB={text!r} is not a positive number of megabytes")
    return int(megabytes * 2**20)


CACHED_KINDS = ("lib-*.so", "plan-*.json", "opts-*.json")  # libraries, plans (store.py), searched opts (choices.py)


def evict(bucket: Path, keep: Path) -> None:
    """Delete the least recently used files of `bucket` (every one of CACHED_KINDS), one of the 256 folders
    `<cache>/<xx>/`, until it holds at most 1/256 of the limit; the file just stored (`keep`) stays whatever
    its size.

    Keys are uniform hashes, so each folder gets its share of the entries, and with every folder within its
    share the whole cache is within the limit; each build reads only its own folder (as ccache does)."""
    libraries = []
    for lib in [path for kind in CACHED_KINDS for path in bucket.glob(f"*/{kind}")]:
        with contextlib.suppress(OSError):  # removed by another process meanwhile
            st = lib.stat()
            libraries.append((st.st_mtime_ns, st.st_size, lib))
    budget, total = cache_max_bytes() // 256, sum(size for _, size, _ in libraries)
    for _, size, lib in sorted(libraries):
        if total <= budget:
            break
        if lib != keep:
            with contextlib.suppress(OSError):
                lib.unlink()
                lib.parent.rmdir()  # fails, and the folder stays, while another process builds in it
            total -= size


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
