"""The C backend's opts store: the opts a search found for each kernel, kept in the kernel cache per machine.

An entry is a file `opts-<digest>.json` in the kernel cache (compiler.py), under the same rules as a
library. Its key is the kernel's key (search.kernel_key: its graph and the lowering code) with the machine
added: what is fastest depends on the CPU, on how many threads share the work, and on what the compiler
makes of the C, so a choice measured with another CPU, thread count, compiler, set of flags or renderer
is not used.
"""

from __future__ import annotations

import functools
import hashlib
import platform
from dataclasses import astuple, dataclass
from pathlib import Path

from uopc.backend.c.compiler import cached_file, cflags, compiler, compiler_identity, native_target, store_file
from uopc.backend.c.openmp import threads
from uopc.backend.c.store import backend_code
from uopc.lower import Opts

PREFIX, SUFFIX = "opts-", ".json"


@dataclass(frozen=True)
class Machine:
    """What a searched choice was measured on: the CPU model, the threads an OpenMP loop runs on, the
    compiler (its path and version), its flags and what -march=native means here, and this backend's code
    (which writes the C)."""

    cpu: str
    threads: int
    compiler: str
    flags: str
    target: str
    renderer: str


def this_machine() -> Machine:
    cc, flags = compiler(), cflags()
    return Machine(cpu_model(), threads(), compiler_identity(cc), flags, native_target(cc, flags), backend_code())


@functools.cache
def cpu_model() -> str:
    """The CPU's model name as Linux reports it, else what the platform module knows."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else f"{platform.machine()} {platform.processor()}"


def choice_key(kernel_key: str, machine: Machine) -> str:
    text = "\0".join(["opts", kernel_key, *map(str, astuple(machine))])
    return hashlib.sha256(text.encode()).hexdigest()


class COptsStore:
    """Searched opts by kernel key and machine, in the kernel cache."""

    def keep(self, key: str, opts: Opts) -> None:
        store_file(choice_key(key, this_machine()), PREFIX, SUFFIX, opts.to_json().encode())

    def find(self, key: str) -> Opts | None:
        found = cached_file(choice_key(key, this_machine()), PREFIX, SUFFIX)
        if found is None:
            return None
        try:
            return Opts.from_json(found[1].decode())
        except (ValueError, KeyError, TypeError, IndexError):  # not written by keep: a miss, searched again
            return None
