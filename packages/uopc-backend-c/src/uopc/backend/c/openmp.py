"""The OpenMP threads of uopc's kernels: how many there are, how long they spin, and where they run.

libgomp, gcc's OpenMP runtime, reads its settings from the environment once, when the first kernel library
loads it. uopc chooses two of them before that moment; a value the user set always wins.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

BINDING = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}

# The cores this process may run on, read on import: libgomp may later bind the thread that loads it to one
USABLE_CORES = len(os.sched_getaffinity(0))
MASTER_CORES: set[int] = set()  # the place libgomp gave the thread that starts a parallel loop, once it has one


def threads() -> int:
    """The threads a parallel loop runs on: OMP_NUM_THREADS where it is a number, else the usable cores."""
    text = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(text) if text.isdigit() and int(text) > 0 else USABLE_CORES


def shorten_spin() -> None:
    """OpenMP threads that finish a parallel loop spin, waiting for the next one, for about 300,000
    iterations by default. When the machine is busy, a spinning thread holds a core that another thread of
    the same loop needs, and a training step ran ten times slower. A short spin keeps the fast hand-off when
    the machine is idle. A user's value wins."""
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")


def binds_workers() -> bool:
    """Whether a kernel library loads with its worker threads bound: only where the user set no binding or
    places of their own, and where the threads fill the cores. Processes that each run a few threads on a
    big machine would otherwise all bind theirs to the same first few cores."""
    return not BINDING.keys() & os.environ.keys() and threads() >= USABLE_CORES


@contextlib.contextmanager
def workers_bound() -> Iterator[None]:
    """Load kernel libraries inside this: the first that starts libgomp starts it with each worker thread
    bound to a core of its own, and the core libgomp binds the loading thread to is kept as the master's.
    The loading thread then gets its cores back, and the settings are removed again, so that the threads
    and compilers Python starts keep every core and other OpenMP runtimes loaded later keep their defaults."""
    if not binds_workers():
        yield
        return
    cores = os.sched_getaffinity(0)
    os.environ.update(BINDING)
    try:
        yield
    finally:
        for name in BINDING:
            del os.environ[name]
        bound = os.sched_getaffinity(0)
        if bound != cores and not MASTER_CORES:
            MASTER_CORES.update(bound)
        os.sched_setaffinity(0, cores)


def on_master_core(call: Callable[[], None]) -> None:
    """Make `call`, which may start parallel loops, from the master's core, then move back. A worker that
    slept after its short spin is woken where the scheduler likes, often on the core of the thread that
    woke it; and a Python thread that slept (between two steps, say) can wake on a worker's core. Either
    way two threads of one loop share a core while another idles, which Linux does not undo while the
    worker sleeps between loops: A @ B at 512 took 2.1 ms in such runs, against 0.85 ms with each thread
    on its own core (notes 151)."""
    if not MASTER_CORES:
        call()
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, MASTER_CORES)
    try:
        call()
    finally:
        os.sched_setaffinity(0, mine)
