"""Search on the C backend (uopc.lower's search.py): searched kernels against numpy, the winner kept in the
kernel cache per kernel and machine, and used again without timing; a candidate gcc refuses is dropped."""

from __future__ import annotations

import dataclasses
import gc
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import (
    C_BACKEND,
    CExecutable,
    CompileError,
    COptsStore,
    CPlanStore,
    CRenderer,
    CRuntime,
    Machine,
    choice_key,
    this_machine,
)
from uopc.backend.c.compiler import UNIT_BREAK, cflags, compile_units, compiler
from uopc.ir import DType, UOp, dtypes
from uopc.lower import (
    Backend,
    Binary,
    LinearProgram,
    Opts,
    Plan,
    Source,
    Step,
    compile_plan,
    make_plan,
    measure_on,
    normalize,
)

Array = npt.NDArray[Any]


def matmul(m: int, k: int, n: int, layout: str, dtype: DType = dtypes.float32) -> UOp:
    """C (m x n) = A @ B with A stored (m, k), or (k, m) for "atb"; B stored (k, n), or (n, k) for "abt"."""
    a = UOp.buffer(0, m * k, dtype).reshape((k, m) if layout == "atb" else (m, k))
    b = UOp.buffer(1, k * n, dtype).reshape((n, k) if layout == "abt" else (k, n))
    a = a.permute((1, 0)) if layout == "atb" else a
    b = b.permute((1, 0)) if layout == "abt" else b
    products = a.reshape((m, 1, k)).expand((m, n, k)) * b.permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return products.sum([2]).reshape((m, n))


class CountingRuntime(CRuntime):
    """The C runtime, counting the kernel runs of what it loads: a search times candidates by running them."""

    def __init__(self) -> None:
        self.runs = 0

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> CExecutable:
        executable = super().load(binary, programs, steps)
        run_kernel = executable.run_kernel

        def counted(index: int, buffers: Sequence[Any]) -> None:
            self.runs += 1
            run_kernel(index, buffers)

        executable.run_kernel = counted  # type: ignore[method-assign]
        return executable


def backend(runtime: CRuntime | None = None, renderer: CRenderer | None = None) -> Backend:
    """The C backend's parts, with the runtime and renderer given (for counting, or refusing)."""
    return dataclasses.replace(C_BACKEND, runtime=runtime or CRuntime(), renderer=renderer or CRenderer())


def run(plan: Plan, backend: Backend, beam: int | None, *inputs: Array) -> Array:
    buffers = [x.reshape(-1) for x in inputs]
    buffers += [np.full(s.size, 7, s.dtype.np_name) for s in plan.buffers[len(inputs) :]]
    compile_plan(plan, backend, beam=beam).executable.run(buffers)
    return buffers[plan.outputs[0]]


@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
def test_searched_float_matmuls_match_numpy(layout: str) -> None:
    """Other opts may sum in another order (an unroll splits the sum), so the bound is that of a sum of k
    products in any order; it holds for the heuristic's plan and the searched one."""
    m, k, n = 48, 64, 32
    rng = np.random.default_rng(5)
    a = rng.standard_normal((k, m) if layout == "atb" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "abt" else (k, n)).astype(np.float32)
    x, y = (a.T if layout == "atb" else a), (b.T if layout == "abt" else b)
    plan = make_plan(normalize([matmul(m, k, n, layout)])[0], pack=1)
    want = x.astype(np.float64) @ y.astype(np.float64)
    bound = k * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(y))
    for beam in (None, 2):
        got = run(plan, backend(), beam, a, b).reshape(m, n)
        assert np.all(np.abs(got - want) <= bound), (beam, np.abs(got - want).max())


def test_a_searched_int_matmul_is_bit_identical_to_the_heuristics() -> None:
    m, k, n = 24, 40, 16
    rng = np.random.default_rng(6)
    a, b = rng.integers(-(2**20), 2**20, (m, k), np.int32), rng.integers(-(2**20), 2**20, (k, n), np.int32)
    plan = make_plan(normalize([matmul(m, k, n, "ab", dtypes.int32)])[0], pack=1)
    heuristic, searched = run(plan, backend(), None, a, b), run(plan, backend(), 2, a, b)
    assert np.array_equal(searched, heuristic)
    assert np.array_equal(searched.reshape(m, n), a @ b)  # numpy's int32 matmul wraps as C does


def test_the_winner_is_kept_and_a_later_search_times_nothing() -> None:
    plan = make_plan(normalize([matmul(32, 48, 16, "abt")])[0], pack=1)
    first = CountingRuntime()
    searched = compile_plan(plan, backend(first), beam=1)
    assert first.runs > 0
    for beam in (1, 0):  # a later process, with BEAM on or off, reads the choice from the kernel cache
        later = CountingRuntime()
        again = compile_plan(make_plan(normalize([matmul(32, 48, 16, "abt")])[0], pack=1), backend(later), beam=beam)
        assert later.runs == 0
        assert again.source == searched.source  # the same opts, so the same C


def test_the_key_of_a_choice_changes_with_every_field_of_the_machine() -> None:
    here = this_machine()
    assert here.threads >= 1 and here.cpu and here.compiler and here.flags
    others = [
        dataclasses.replace(here, cpu="another CPU"),
        dataclasses.replace(here, threads=here.threads + 1),
        dataclasses.replace(here, compiler="clang"),
        dataclasses.replace(here, flags="-O2"),
        dataclasses.replace(here, target="-march=znver9"),
        dataclasses.replace(here, renderer="another renderer"),
    ]
    keys = {choice_key("k", machine) for machine in others}
    assert len(keys | {choice_key("k", here)}) == len(dataclasses.fields(Machine)) + 1
    assert choice_key("k", here) != choice_key("l", here)


def test_the_thread_count_is_part_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    three = this_machine()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert (three.threads, this_machine().threads) == (3, 1)
    store = COptsStore()
    store.keep("kernel", Opts(upcast={0: 4}, thread=0))
    assert store.find("kernel") == Opts(upcast={0: 4}, thread=0)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert store.find("kernel") is None  # measured with one thread: not a choice for three


class RefusingRenderer(CRenderer):
    """Writes a C error into the source of any program with a 2-wide tile on axis 0, as if gcc could not
    build that candidate."""

    def render(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        source = super().render(programs, steps)
        return (
            Source(source.text.replace("/* uopc: unit */", "#error refused\n/* uopc: unit */", 1))
            if any(p.name.endswith("_beam1") for p in programs)
            else source
        )


def test_a_candidate_gcc_refuses_is_dropped_and_the_others_are_timed() -> None:
    plan = make_plan(normalize([matmul(16, 32, 16, "ab")])[0], pack=1)
    (kernel,) = plan.kernels
    runtime = CountingRuntime()
    candidates = [Opts(), Opts(upcast={0: 2}), Opts(upcast={1: 4})]
    seconds = measure_on(backend(runtime, RefusingRenderer()), kernel)(candidates)
    assert seconds[1] is None and all(isinstance(s, float) for s in (seconds[0], seconds[2]))
    assert runtime.runs > 0


def test_a_plan_kept_again_under_its_key_replaces_the_one_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A searching process compiles a plan again, with searched opts, and keeps it under the key of the plan
    it did not restore: a warm start must find the new plan (the stored one was chosen by file name)."""
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path))
    store = CPlanStore()
    plans = [make_plan(normalize([matmul(8, 8, 8, layout)])[0]) for layout in ("ab", "abt")]
    binaries = [compile_plan(p, backend()).binary for p in plans]
    for order in ([0, 1], [1, 0]):  # one of the two orders puts the older file first by name
        key = f"plan-{order}"
        for i in order:
            store.keep(key, plans[i].manifest, binaries[i])
        found = store.find(key)
        assert found is not None and found[1].key == binaries[order[-1]].key


def test_a_failed_build_of_several_units_leaves_no_compiler_pipe_open(tmp_path: Path) -> None:
    """A search builds one step's candidates as one source of several units, and one that gcc refuses
    fails its unit: the compilers of the other units, done by then, must not leave their error pipes open.
    Each unit here fails, the first (the longest part) last, after parsing thousands of functions."""
    body = "void k{0}(float a[restrict static 1]) {{ a[0] = {0}; }}"
    slow = "\n".join(["#error refused", *(body.format(i) for i in range(20_000))])
    parts = ["#include <math.h>", slow, "#error refused too"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            compile_units(tmp_path, f"\n{UNIT_BREAK}\n".join(parts), compiler(), cflags())
        except CompileError as e:
            assert "refused" in str(e)
        else:
            raise AssertionError("the unit with #error built")
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)], [str(w.message) for w in seen]
