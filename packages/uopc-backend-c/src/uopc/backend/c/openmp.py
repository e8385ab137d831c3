"""The OpenMP threads of uopc's kernels: how many there are, how long they spin, and where they run.

libgomp, gcc's OpenMP runtime, reads its settings from the environment once, when the first kernel library
loads it. uopc puts two of its own there for that moment only, and takes them away again; a value the user
set always wins. A libgomp that another library loaded first (PyTorch brings one) keeps its own settings.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

RUNTIME = "libgomp.so.1"  # the name kernel libraries built with -fopenmp ask the dynamic loader for
SPIN = {"GOMP_SPINCOUNT": "10000"}  # libgomp's default is about 300,000 iterations
WAIT_CHOICES = {*SPIN, "OMP_WAIT_POLICY"}  # either set by the user: uopc leaves the spin alone
BINDING = {"OMP_PROC_BIND": "close", "OMP_PLACES": "threads"}
USER_PLACEMENT = {*BINDING, "GOMP_CPU_AFFINITY"}  # any of these set by the user: uopc places no thread

# The CPUs this process may run on, read on import: libgomp may later bind the thread that loads it to one.
# Where the system cannot say (no sched_getaffinity), threads are never bound.
PLACEABLE = hasattr(os, "sched_getaffinity")
USABLE_CPUS = len(os.sched_getaffinity(0)) if PLACEABLE else os.cpu_count() or 1
MASTER_CPUS: set[int] = set()  # the place libgomp gave the thread that starts a parallel loop, once it has one
_LOADING = threading.Lock()  # one library load at a time sets and removes the settings
_STARTED = threading.Event()  # libgomp is loaded: with uopc's settings, or before uopc asked for it


def threads() -> int:
    """The threads a parallel loop runs on: OMP_NUM_THREADS where it is a number, else the usable CPUs."""
    text = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(text) if text.isdigit() and int(text) > 0 else USABLE_CPUS


def spins_short() -> bool:
    """Whether libgomp starts with uopc's short spin (SPIN). OpenMP threads that finish a parallel loop spin,
    waiting for the next one, for about 300,000 iterations by default. When the machine is busy, a spinning
    thread holds a core that another thread of the same loop needs, and a training step ran ten times slower.
    A short spin keeps the fast hand-off when the machine is idle. A user's choice wins: GOMP_SPINCOUNT, or
    OMP_WAIT_POLICY, which sets the spin its own way."""
    return not WAIT_CHOICES & os.environ.keys()


def binds_workers() -> bool:
    """Whether a kernel library loads with its worker threads bound: only where the user chose no placement
    of their own, and where the threads fill the CPUs. Processes that each run a few threads on a big machine
    would otherwise all bind theirs to the same first few."""
    return PLACEABLE and not USER_PLACEMENT & os.environ.keys() and threads() >= USABLE_CPUS


@contextlib.contextmanager
def starting_runtime() -> Iterator[None]:
    """Load kernel libraries inside this. The first that starts libgomp starts it with uopc's settings: the
    short spin (spins_short) and, where binds_workers says so, each worker thread bound to a CPU of its own,
    the CPU libgomp binds the loading thread to kept as the master's. The loading thread then gets its CPUs
    back, and the settings leave the environment again, so that the threads, compilers and child processes
    Python starts keep every CPU and other OpenMP runtimes keep their defaults."""
    with _LOADING:
        if _STARTED.is_set() or foreign_runtime_warned():
            yield
            return
        binds = binds_workers()
        cpus = os.sched_getaffinity(0) if binds else set()
        # written inline, not through a local: appendix A's scanner finds SPIN and BINDING in this argument
        os.environ.update(settings := (SPIN if spins_short() else {}) | (BINDING if binds else {}))
        try:
            yield
        finally:
            for name in settings:
                os.environ.pop(name, None)
            if runtime_loaded():
                _STARTED.set()
            if binds:
                keep_master_cpus(cpus)


def keep_master_cpus(cpus: set[int]) -> None:
    """Where libgomp bound the loading thread, keep the CPUs it chose as the master's, and give the thread
    back `cpus`, all it had before."""
    bound = os.sched_getaffinity(0)
    if bound != cpus:
        MASTER_CPUS.update(bound)
        os.sched_setaffinity(0, cpus)


def runtime_loaded() -> bool:
    """Whether this process has loaded a libgomp, which the next kernel library will share; False where the
    system cannot say (no RTLD_NOLOAD)."""
    if not hasattr(os, "RTLD_NOLOAD"):
        return False
    try:
        ctypes.CDLL(RUNTIME, mode=os.RTLD_NOLOAD)
    except OSError:
        return False
    return True


def loaded_runtime() -> str | None:
    """The libgomp this process has loaded (runtime_loaded): its path where /proc says, else its name; None
    where none is loaded."""
    if not runtime_loaded():
        return None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            if Path(line.split()[-1]).name.startswith(RUNTIME):  # libgomp.so.1, or the file it links to
                return line.split()[-1]
    return RUNTIME


def foreign_runtime_warned() -> bool:
    """Whether another library loaded a libgomp before uopc asked for one. uopc's kernels then run on it
    without uopc's spin and binding (its plans at 256 ran about three times slower so, notes 161): warn, once."""
    other = loaded_runtime()
    if other is None:
        return False
    _STARTED.set()
    warnings.warn(
        f"uopc's kernels will run on {other}, an OpenMP runtime that another library loaded before uopc's "
        "first kernel, without uopc's short spin and thread binding: they can run several times slower. "
        "Call uopc.backend.c.start_openmp() before importing that library (PyTorch, for one).",
        RuntimeWarning,
        stacklevel=2,
    )
    return True


def start_openmp() -> ctypes.CDLL:
    """libgomp, loaded now, with uopc's settings if nothing has loaded it yet: call this before importing a
    library that brings a libgomp of its own (PyTorch), and uopc's kernels and that library share this one."""
    with starting_runtime():
        return ctypes.CDLL(RUNTIME)


def on_master_core(call: Callable[[], None]) -> None:
    """Make `call`, which may start parallel loops, from the master's CPU, then move back. A Python thread
    that slept (between two steps, say) can wake on a worker's CPU; the woken worker cannot leave it, and
    the two threads of one loop then take turns on one core while another idles: A @ B at 512 took 2.1 ms
    in such runs, against 0.85 ms with each thread on its own core (notes 151). Where the process may no
    longer run on the master's CPU (its CPU set shrank), the call is made where the thread is."""
    mine = os.sched_getaffinity(0) if MASTER_CPUS else set()
    if not MASTER_CPUS or not mine >= MASTER_CPUS:
        call()
        return
    os.sched_setaffinity(0, MASTER_CPUS)
    try:
        call()
    finally:
        os.sched_setaffinity(0, mine)
