"""Where the OpenMP threads of uopc's kernels run and how long they spin: libgomp's workers bound one to a
core, the thread that calls a kernel moved to the master's core for the call and back, the short spin set for
libgomp's start only, a user's own settings left alone, and a libgomp loaded before uopc's named in a warning.

libgomp reads its settings once per process, so each case runs in a fresh interpreter that loads a kernel
with a parallel region, which records for each of its threads the one CPU it may run on (-1 where it may
run on several), calls it twenty times with pauses in between, and prints that and where each of the
process's threads may run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from uopc.backend.c import openmp
from uopc.ir import UOp
from uopc.lower import compile_plan, get_backend, make_plan, normalize

REPORT = textwrap.dedent(
    """
    import json, os, threading, time, warnings
    import numpy as np
    from uopc.backend.c import Program, openmp

    source = (
        "#define _GNU_SOURCE\\n#include <omp.h>\\n#include <sched.h>\\n"
        "void where(int data0[restrict static 64]) {\\n"
        "  #pragma omp parallel\\n"
        "  {\\n"
        "    cpu_set_t allowed;\\n"
        "    int cpu = -1;\\n"
        "    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) == 1)\\n"
        "      for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &allowed)) cpu = c;\\n"
        "    data0[omp_get_thread_num() % 64] = cpu;\\n"
        "  }\\n"
        "}\\n"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        where = Program(source, "where")
    seen = []
    cores = os.sched_getaffinity(0)
    for _ in range(20):  # pauses long enough for the workers to sleep
        os.sched_setaffinity(0, {max(cores)})  # this thread moves to the last worker's core, as if woken there
        os.sched_setaffinity(0, cores)
        out = np.full(64, -1, np.int32)
        where(out)
        seen.append(out[: openmp.threads()].tolist())
        time.sleep(0.002)
    main = threading.get_native_id()
    others = [sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task") if int(t) != main]
    print(json.dumps({
        "seen": seen,
        "main": sorted(os.sched_getaffinity(0)),
        "others": others,
        "threads": openmp.threads(),
        "env": [name for name in (*openmp.BINDING, *openmp.SPIN) if name in os.environ],
        "warnings": [str(w.message) for w in caught],
    }))
    """
)

CORES = sorted(os.sched_getaffinity(0))
many_cores = pytest.mark.skipif(len(CORES) < 2, reason="binding workers needs two cores or more")


CHOSEN = ("OMP_PROC_BIND", "OMP_PLACES", "OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
LOAD_LIBGOMP = "import ctypes; ctypes.CDLL('libgomp.so.1')\n"  # as PyTorch's import does, with its own copy


def report(before: str = "", **settings: str) -> dict[str, Any]:
    """REPORT's findings, after the code `before`, in an environment with none of CHOSEN but `settings`. libgomp
    prints the settings it starts with (OMP_DISPLAY_ENV): their spin count is "spin"."""
    env = {k: v for k, v in os.environ.items() if k not in CHOSEN} | {"OMP_DISPLAY_ENV": "verbose"}
    command = [sys.executable, "-c", before + REPORT]
    done = subprocess.run(command, env={**env, **settings}, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    spins = re.findall(r"GOMP_SPINCOUNT = '(\d+)'", done.stderr)
    assert len(spins) == 1, done.stderr  # libgomp started once
    return result | {"spin": spins[0]}


@many_cores
def test_workers_are_bound_one_to_a_core_and_the_calling_thread_keeps_every_core() -> None:
    result = report()
    bound = [cores for cores in result["others"] if len(cores) == 1]
    # close binding puts worker i on the i-th core after the master's place, the first
    assert sorted(bound) == [[core] for core in CORES[1:]]
    assert result["main"] == CORES
    assert result["threads"] == len(CORES)
    assert result["env"] == []  # other OpenMP runtimes loaded later see the user's environment


@many_cores
def test_each_thread_of_a_parallel_region_runs_on_its_own_core_every_time() -> None:
    """During the region, the calling thread may run only on the first CPU, the master's place, and worker i
    only on CPU i: no two threads of one region can share a core, even where the calling thread was last on
    a worker's CPU."""
    assert report()["seen"] == [CORES] * 20


@many_cores
def test_a_users_binding_wins_and_the_thread_count_stays_the_cores() -> None:
    result = report(OMP_PROC_BIND="true")
    assert result["main"] == CORES[:1]  # libgomp bound the loading thread, as the user asked
    assert result["threads"] == len(CORES)
    assert result["env"] == ["OMP_PROC_BIND"]


@many_cores
def test_no_binding_where_the_user_turned_it_off() -> None:
    result = report(OMP_PROC_BIND="false")
    assert result["others"] and all(cores == CORES for cores in result["others"])
    assert result["main"] == CORES


@many_cores
def test_no_binding_where_the_threads_do_not_fill_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_PROC_BIND", raising=False)
    monkeypatch.delenv("OMP_PLACES", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", str(len(CORES) - 1))
    assert not openmp.binds_workers()
    monkeypatch.setenv("OMP_NUM_THREADS", str(len(CORES)))
    assert openmp.binds_workers()
    for name in ("OMP_PLACES", "GOMP_CPU_AFFINITY"):
        monkeypatch.setenv(name, "0")
        assert not openmp.binds_workers()
        monkeypatch.delenv(name)


def test_libgomp_starts_with_the_short_spin_which_then_leaves_the_environment() -> None:
    """The short spin is for uopc's libgomp alone: child processes, and OpenMP runtimes loaded later, must not
    inherit it."""
    result = report()
    assert result["spin"] == openmp.SPIN["GOMP_SPINCOUNT"]
    assert result["env"] == []
    assert result["warnings"] == []


@pytest.mark.parametrize(
    ("setting", "spin", "left"),
    [({"GOMP_SPINCOUNT": "5"}, "5", ["GOMP_SPINCOUNT"]), ({"OMP_WAIT_POLICY": "passive"}, "0", [])],
)
def test_a_users_spin_or_wait_policy_wins(setting: dict[str, str], spin: str, left: list[str]) -> None:
    result = report(**setting)
    assert result["spin"] == spin
    assert result["env"] == left  # the user's own GOMP_SPINCOUNT stays where they put it


def test_a_libgomp_loaded_before_uopcs_first_kernel_is_named_in_a_warning() -> None:
    result = report(LOAD_LIBGOMP)
    assert result["spin"] != openmp.SPIN["GOMP_SPINCOUNT"]  # started with the other library's settings
    assert len(result["warnings"]) == 1
    assert "/libgomp.so.1" in result["warnings"][0]  # the path of the one loaded
    assert "start_openmp()" in result["warnings"][0]


def test_start_openmp_before_another_library_keeps_uopcs_settings() -> None:
    result = report("from uopc.backend.c import start_openmp; start_openmp()\n" + LOAD_LIBGOMP)
    assert result["spin"] == openmp.SPIN["GOMP_SPINCOUNT"]
    assert result["warnings"] == []
    assert result["env"] == []
    if len(CORES) >= 2:
        assert result["seen"] == [CORES] * 20  # the workers bound, as when a kernel starts libgomp


def test_a_plan_and_each_kernel_are_called_through_the_move_to_the_master_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runtime's two ways into C, a whole plan and one kernel, both go through on_master_core (whose
    effect the tests above check through Program)."""
    calls: list[object] = []

    def recorded(call: Callable[[], None]) -> None:
        calls.append(call)
        call()

    monkeypatch.setattr("uopc.backend.c.runtime.on_master_core", recorded)
    graph, _ = normalize([UOp.buffer(0, 16) * 2.0])
    plan = make_plan(graph)
    executable = compile_plan(plan, get_backend("C")).executable
    x, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    executable.run([x, out])
    np.testing.assert_array_equal(out, x * 2)
    executable.run_kernel(0, [out, x])
    assert len(calls) == 2
