"""The OpenMP threads of uopc's kernels: how many there are, how long they spin, and where they run.

libgomp, gcc's OpenMP runtime, reads its settings from the environment once, when the first kernel library
loads it. uopc chooses two of them before that moment; a value the user set always wins.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator

BINDING = {"OMP_PROC_BIND": "close", "OMP_PLACES": "threads"}
USER_PLACEMENT = {*BINDING, "GOMP_CPU_AFFINITY"}  # any of these set by the user: uopc places no thread

# The CPUs this process may run on, read on import: libgomp may later bind the thread that loads it to one.
# Where the system cannot say (no sched_getaffinity), threads are never bound.
PLACEABLE = hasattr(os, "sched_getaffinity")
USABLE_CPUS = len(os.sched_getaffinity(0)) if PLACEABLE else os.cpu_count() or 1
MASTER_CPUS: set[int] = set()  # the place libgomp gave the thread that starts a parallel loop, once it has one
_LOADING = threading.Lock()  # one library load at a time sets and removes the settings


def threads() -> int:
    """The threads a parallel loop runs on: OMP_NUM_THREADS where it is a number, else the usable CPUs."""
    text = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(text) if text.isdigit() and int(text) > 0 else USABLE_CPUS


def shorten_spin() -> None:
    """OpenMP threads that finish a parallel loop spin, waiting for the next one, for about 300,000
    iterations by default. When the machine is busy, a spinning thread holds a core that another thread of
    the same loop needs, and a training step ran ten times slower. A short spin keeps the fast hand-off when
    the machine is idle. A user's value wins."""
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")


def binds_workers() -> bool:
    """Whether a kernel library loads with its worker threads bound: only where the user chose no placement
    of their own, and where the threads fill the CPUs. Processes that each run a few threads on a big machine
    would otherwise all bind theirs to the same first few."""
    return PLACEABLE and not USER_PLACEMENT & os.environ.keys() and threads() >= USABLE_CPUS


@contextlib.contextmanager
def workers_bound() -> Iterator[None]:
    """Load kernel libraries inside this: the first that starts libgomp starts it with each worker thread
    bound to a CPU of its own, and the CPU libgomp binds the loading thread to is kept as the master's.
    The loading thread then gets its CPUs back, and the settings are removed again, so that the threads
    and compilers Python starts keep every CPU and other OpenMP runtimes loaded later keep their defaults."""
    with _LOADING:
        if MASTER_CPUS or not binds_workers():
            yield
            return
        cpus = os.sched_getaffinity(0)
        os.environ.update(BINDING)
        try:
            yield
        finally:
            for name in BINDING:
                os.environ.pop(name, None)
            bound = os.sched_getaffinity(0)
            if bound != cpus:
                MASTER_CPUS.update(bound)
                os.sched_setaffinity(0, cpus)


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
