"""The tiered build: a large plan runs first on a library built at -O0, while the -O3 library builds in a
thread; the executable swaps it in when it is done, and the plan store keeps it, not the quick one."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pytest

from uopc.backend.c import C_BACKEND, DEFAULT_CFLAGS, CCompiler, CExecutable, CompileError, compiler
from uopc.ir import Ops, UOp
from uopc.lower import Binary, CompiledPlan, Plan, Source, compile_plan, make_plan, normalize, plan_key


def layers() -> tuple[UOp, list[Any]]:
    """Three dense layers with a softmax: a plan of several kernels, with sums that get lanes and fused tiles."""
    rng = np.random.default_rng(86)
    x = UOp.buffer(0, 8 * 64).reshape((8, 64))
    inputs: list[Any] = [rng.standard_normal(8 * 64).astype(np.float32)]
    for i in range(3):
        w = UOp.buffer(i + 1, 64 * 64).reshape((1, 64, 64)).expand((8, 64, 64))
        inputs.append(rng.standard_normal(64 * 64).astype(np.float32) / 8)
        x = (x.reshape((8, 1, 64)).expand((8, 64, 64)) * w).sum([2]).reshape((8, 64)).maximum(0.0)
    e = (x - x.reduce(Ops.MAX, [1]).expand(x.shape)).exp()
    return e / e.sum([1]).expand(x.shape), inputs


def run(plan: Plan, compiled: CompiledPlan, inputs: list[Any]) -> Any:
    buffers = [*inputs, *(C_BACKEND.runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :])]
    compiled.executable.run(buffers)
    return buffers[plan.outputs[0]].copy()


def finish_builds() -> None:
    """Wait for the threads of tiered builds to end."""
    for thread in threading.enumerate():
        if thread.name == "uopc-O3-build":
            thread.join(timeout=120)


@pytest.fixture
def tiered(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The default flags, a fresh cache, and every plan large enough to be built in tiers."""
    monkeypatch.delenv("CFLAGS", raising=False)
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path))
    monkeypatch.setattr(compiler, "TIERED_MIN_CHARS", 0)


@pytest.mark.usefixtures("tiered")
def test_a_plan_runs_on_the_quick_library_then_on_the_optimized_one_with_the_same_bits() -> None:
    value, inputs = layers()
    graph, _ = normalize([value])
    plan, key = make_plan(graph, True), plan_key(graph, True)
    compiled = compile_plan(plan, C_BACKEND, key)
    executable = compiled.executable
    assert isinstance(executable, CExecutable) and compiled.binary.later is not None
    quick = run(plan, compiled, inputs)
    optimized_binary = compiled.binary.later.result(timeout=120)
    assert optimized_binary.key != compiled.binary.key  # built with other flags: another cache entry
    optimized = run(plan, compiled, inputs)
    assert executable.later is None  # swapped in by the run
    assert quick.tobytes() == optimized.tobytes()
    assert C_BACKEND.store is not None
    finish_builds()  # the plan store keeps the plan in the build's thread, after the build's result is set
    found = C_BACKEND.store.find(key)
    assert found is not None and found[1].key == optimized_binary.key  # a warm start loads the -O3 library


@pytest.mark.usefixtures("tiered")
def test_a_source_found_in_the_cache_or_built_with_chosen_flags_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    value, _ = layers()
    plan = make_plan(normalize([value])[0], True)
    first = compile_plan(plan, C_BACKEND)
    assert first.binary.later is not None
    first.binary.later.result(timeout=120)
    again = compile_plan(plan, C_BACKEND)  # the -O3 library is in the cache now
    assert again.binary.later is None and again.binary.key == first.binary.later.result().key
    monkeypatch.setenv("CFLAGS", DEFAULT_CFLAGS.replace("-O3", "-O2"))
    assert compile_plan(plan, C_BACKEND).binary.later is None  # the user's flags, exactly as asked


@pytest.mark.usefixtures("tiered")
def test_a_failed_optimized_build_keeps_the_quick_library_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_build = compiler.build_binary

    def fail_at_o3(source: str, flags: str | None = None) -> Binary:
        if flags == DEFAULT_CFLAGS:
            raise CompileError("gcc stopped after UOPC_CC_TIMEOUT seconds", "")
        return quick_build(source, flags)

    monkeypatch.setattr(compiler, "build_binary", fail_at_o3)
    value, inputs = layers()
    graph, _ = normalize([value])
    plan, key = make_plan(graph, True), plan_key(graph, True)
    compiled = compile_plan(plan, C_BACKEND, key)
    assert compiled.binary.later is not None
    assert isinstance(compiled.binary.later.exception(timeout=120), CompileError)
    with pytest.warns(UserWarning, match="optimized build failed: gcc stopped"):
        first = run(plan, compiled, inputs)
    again = run(plan, compiled, inputs)  # warned once; the quick library keeps running
    assert first.tobytes() == again.tobytes()
    finish_builds()
    assert C_BACKEND.store is not None and C_BACKEND.store.find(key) is None  # nothing kept: next start is cold


@pytest.mark.usefixtures("tiered")
def test_the_quick_build_starts_on_the_first_parts_while_later_ones_are_still_being_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """compile_plan hands the C compiler each part of the source when it asks for it, and only then
    linearizes and renders that part's kernel; with tiny units, a unit goes to gcc before the last part is
    made, and the library the units make computes the bits of the -O3 library built from the whole source."""
    monkeypatch.setattr(compiler, "UNIT_CHARS", 1)
    events: list[str] = []
    make_unit = compiler.UnitBuild._unit

    def recorded_unit(build: compiler.UnitBuild, parts: list[str]) -> tuple[list[str], str]:
        events.append("unit")
        return make_unit(build, parts)

    class RecordingCompiler(CCompiler):
        def compile_parts(self, parts: Iterable[Source]) -> Binary:
            def recorded() -> Iterator[Source]:
                for part in parts:
                    events.append("part")
                    yield part

            return super().compile_parts(recorded())

    monkeypatch.setattr(compiler.UnitBuild, "_unit", recorded_unit)
    value, inputs = layers()
    plan = make_plan(normalize([value])[0], True)
    compiled = compile_plan(plan, dataclasses.replace(C_BACKEND, compiler=RecordingCompiler(), store=None))
    last_part = len(events) - 1 - events[::-1].index("part")
    assert events.count("unit") > 2 and events.index("unit") < last_part
    assert compiled.binary.later is not None
    quick = run(plan, compiled, inputs)
    compiled.binary.later.result(timeout=120)
    assert quick.tobytes() == run(plan, compiled, inputs).tobytes()
    finish_builds()


@pytest.mark.usefixtures("tiered")
def test_the_last_part_is_shared_out_over_the_cores_with_the_parts_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two parts that fill a unit only together: the second one is the last, and rather than one unit of
    both on one core, finish builds one unit of each, on two cores (the GPT step's last part, uopc_plan,
    is 57,000 characters, and was built after all the others with the parts before it, alone)."""
    monkeypatch.setattr(compiler, "UNIT_CHARS", 150)
    monkeypatch.setattr(compiler, "USABLE_CPUS", 2)
    units: list[list[str]] = []
    make_unit = compiler.UnitBuild._unit

    def recorded_unit(build: compiler.UnitBuild, parts: list[str]) -> tuple[list[str], str]:
        units.append(list(parts))
        return make_unit(build, parts)

    monkeypatch.setattr(compiler.UnitBuild, "_unit", recorded_unit)
    parts = [f"void kernel{i}(float* x) {{ x[{i}] = 1.0f; }}{' ' * 20}/* {'.' * 40} */" for i in range(2)]
    assert all(len(p) < 150 <= len(parts[0] + parts[1]) for p in parts)
    with compiler.UnitBuild("#include <math.h>\n", DEFAULT_CFLAGS) as build:
        for part in parts:
            build.add(part)
        build.finish("\n".join(parts))
    assert units == [[parts[0]], [parts[1]]]


@pytest.mark.usefixtures("tiered")
def test_the_last_units_start_while_the_earlier_ones_still_hold_every_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """finish builds the parts still waiting at once, beside the units still running: queued behind them, a
    share waited for a worker while a core idled. Here the two workers' units do not end before the last
    unit has started (and wait at most 5 s for it, so that a queued share does not hang the test)."""
    monkeypatch.setattr(compiler, "UNIT_CHARS", 1)
    monkeypatch.setattr(compiler, "USABLE_CPUS", 2)
    last_started, waited = threading.Event(), []
    run_all = compiler._run_all

    def held_run_all(commands: list[tuple[list[str], str]], folder: Any, deadline: float) -> None:
        files = {command[-1] for command, _ in commands}
        if "unit2.c" in files:
            last_started.set()
        elif files & {"unit0.c", "unit1.c"}:
            waited.append(last_started.wait(timeout=5))
        run_all(commands, folder, deadline)

    monkeypatch.setattr(compiler, "_run_all", held_run_all)
    parts = [f"void kernel{i}(float* x) {{ x[0] = {i}.0f; }}" for i in range(3)]
    with compiler.UnitBuild("#include <math.h>\n", DEFAULT_CFLAGS) as build:
        for part in parts:
            build.add(part)
        build.finish("\n".join(parts))
    assert waited == [True, True]


@pytest.mark.usefixtures("tiered")
def test_a_unit_that_gcc_rejects_is_a_compile_error_with_that_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler, "UNIT_CHARS", 1)
    parts = ["#include <math.h>\n", "void fine(float* x) { x[0] = 1.0f; }", "void broken(float* x) { x[0] = ; }"]
    with pytest.raises(CompileError, match=r"(?s)expected expression.*void broken"):
        CCompiler().compile_parts(Source(p) for p in parts)


@pytest.mark.usefixtures("tiered")
def test_uopc_tiered_0_builds_a_large_source_once_at_the_flags_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPC_TIERED", "0")
    value, _ = layers()
    compiled = compile_plan(make_plan(normalize([value])[0], True), C_BACKEND)
    assert compiled.binary.later is None
    assert compiled.binary.key == compiler.cache_key(compiled.source.text, compiler.compiler(), DEFAULT_CFLAGS)
