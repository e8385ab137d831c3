"""How tensors are computed: plans reused across training steps, DEBUG output, and OPT=0.

These are structural tests: they assert on how the answer was computed (how many plans were made, which
lines were printed, what the generated C looks like), next to a numpy check that the answer is right.
"""

from __future__ import annotations

import gc
import os
import re
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import CRenderer
from uopc.lower import LinearProgram, PlanCache, Source, Step
from uopc.tensor import Tensor, realizer

Array = npt.NDArray[Any]

SUMMARY = re.compile(r"^realize: (\d+) kernels, schedule (\d+\.\d) ms, run (\d+\.\d) ms$")
KERNEL = re.compile(r"^  (\w+)\s+(\d+\.\d{3}) ms\s+(\d+\.\d{2}) GFLOP/s(  \(again: (\d+\.\d{3}) ms\))?$")


# ---- plan reuse ----


def mlp_step_numpy(
    params: list[Array], x: Array, y: Array, lr: float
) -> tuple[list[Array], float]:  # the same step written out by hand, in float64
    w1, b1, w2, b2 = (p.astype(np.float64) for p in params)
    h_pre = x @ w1 + b1
    h = np.maximum(h_pre, 0)
    z = h @ w2 + b2
    z = z - z.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    loss = -np.log(p[np.arange(len(y)), y]).mean()
    dz = (p - np.eye(z.shape[1])[y]) / len(y)
    dh = dz @ w2.T * (h_pre > 0)
    grads = [x.T @ dh, dh.sum(0), h.T @ dz, dz.sum(0)]
    return [w - lr * g for w, g in zip((w1, b1, w2, b2), grads, strict=True)], float(loss)


def test_training_steps_after_the_first_build_nothing(kernel_cache: Path) -> None:
    """Forward, backward and an SGD update, realized together: five steps, new data each, one plan."""
    rng = np.random.default_rng(0)
    init = [
        rng.standard_normal((12, 16)).astype(np.float32) * 0.3,
        np.zeros(16, np.float32),
        rng.standard_normal((16, 5)).astype(np.float32) * 0.3,
        np.zeros(5, np.float32),
    ]
    params = [Tensor(p, requires_grad=True) for p in init]
    ref = [p.astype(np.float64) for p in init]
    lr = 0.5
    made, libraries = [], []
    for _ in range(5):
        x = rng.standard_normal((24, 12)).astype(np.float32)
        y = rng.integers(0, 5, 24).astype(np.int32)
        w1, b1, w2, b2 = params
        loss = ((Tensor(x) @ w1 + b1).relu() @ w2 + b2).cross_entropy(Tensor(y))
        loss.backward()
        with Tensor.no_grad():
            new = [p - lr * p.grad for p in params if p.grad is not None]
        Tensor.realize(loss, *new)
        params = [p.requires_grad_() for p in new]
        ref, ref_loss = mlp_step_numpy(ref, x, y, lr)
        assert loss.item() == pytest.approx(ref_loss, rel=1e-4)
        made.append(realizer.plans.made)
        libraries.append(len(list(kernel_cache.rglob("*.so"))))
    for p, r in zip(params, ref, strict=True):
        np.testing.assert_allclose(p.numpy(), r, rtol=1e-3, atol=1e-4)
    assert made[1:] == [made[0]] * 4, f"plans made after each step: {made}"
    assert libraries[1:] == [libraries[0]] * 4, f"compiled libraries after each step: {libraries}"


def test_the_same_graph_on_new_data_reuses_its_plan() -> None:
    def run(seed: int) -> tuple[Array, Array]:
        a = np.random.default_rng(seed).standard_normal((7, 9)).astype(np.float32)
        return (Tensor(a).softmax(0) * 3).numpy(), a

    run(0)
    before = realizer.plans.made
    for seed in (1, 2, 3):
        got, a = run(seed)
        e = np.exp(a - a.max(0))
        np.testing.assert_allclose(got, e / e.sum(0) * 3, rtol=1e-5)
    assert realizer.plans.made == before
    Tensor(np.zeros((9, 7), np.float32)).softmax(0).numpy()  # another shape is another plan
    assert realizer.plans.made == before + 1


# ---- DEBUG levels ----


def realize_twice(shape: tuple[int, int]) -> tuple[Array, Array]:
    """Compute one graph twice (the second time the plan and library are ready): a matmul, then a reduction."""
    rng = np.random.default_rng(shape[0])
    a, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape[::-1]).astype(np.float32)
    outs = [((Tensor(a) @ Tensor(b)).relu().sum(1) - Tensor(a).mean()).numpy() for _ in range(2)]
    want = np.maximum(a @ b, 0).sum(1) - a.mean()
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    return outs[0], outs[1]


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_debug_0_prints_nothing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG", "0")
    realize_twice((11, 6))
    assert lines(capsys) == []


def test_debug_1_prints_one_summary_per_realize(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBUG", "1")
    realize_twice((12, 6))
    out = lines(capsys)
    assert len(out) == 2, out
    counts = []
    for line in out:
        m = SUMMARY.match(line)
        assert m is not None, line
        counts.append(int(m.group(1)))
    assert counts[0] == counts[1] >= 2  # the mean is a reduction read by every output: its own kernel
    x = Tensor(np.ones((2, 3), np.float32)) + 1
    x.numpy()
    m = SUMMARY.match(lines(capsys)[0])
    assert m is not None and m.group(1) == "1"  # elementwise work is one kernel


def test_debug_2_adds_a_line_per_kernel(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG", "2")
    realize_twice((13, 6))
    out = lines(capsys)
    summaries = [i for i, line in enumerate(out) if SUMMARY.match(line)]
    assert len(summaries) == 2
    start = 0
    for end in summaries:  # each summary follows the lines of its own kernels
        m = SUMMARY.match(out[end])
        assert m is not None
        kernels = out[start:end]
        assert len(kernels) == int(m.group(1)), out
        for line in kernels:
            k = KERNEL.match(line)
            assert k is not None and k.group(4) is None, line  # no "(again: ...)" below DEBUG=3
        start = end + 1


def test_debug_2_gflops_is_flops_over_time(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two float ops per element of a 2**18-element a * b + a: GFLOP/s times the time is 2 * 2**18 flops."""
    a, b = (np.random.default_rng(s).standard_normal(1 << 18).astype(np.float32) for s in (1, 2))
    monkeypatch.setenv("DEBUG", "2")
    monkeypatch.setenv("OPT", "0")  # one thread: a steadier time, and no split loops to count
    out = (Tensor(a) * Tensor(b) + Tensor(a)).numpy()
    np.testing.assert_allclose(out, a * b + a, rtol=1e-6, atol=1e-6)
    k = KERNEL.match(lines(capsys)[0])
    assert k is not None
    ms, gflops = float(k.group(2)), float(k.group(3))
    assert ms > 0
    if gflops >= 0.1:  # enough printed digits (0.01 GFLOP/s) to check the product to 10%
        assert gflops * 1e9 * ms * 1e-3 == pytest.approx(2 << 18, rel=0.1)


def test_debug_3_runs_each_kernel_again(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG", "3")
    realize_twice((14, 6))
    out = lines(capsys)
    kernel_lines = [line for line in out if not SUMMARY.match(line)]
    assert kernel_lines and len(out) - len(kernel_lines) == 2
    for line in kernel_lines:
        k = KERNEL.match(line)
        assert k is not None and k.group(5) is not None, line


@pytest.mark.c_backend
def test_debug_4_prints_the_source_the_first_time(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEBUG", "4")
    realize_twice((15, 6))
    out = capsys.readouterr().out
    first, second = out.split("realize:", 1)[0], out.split("realize:", 2)[1]
    names = [k.group(1) for line in first.splitlines() if (k := KERNEL.match(line))]
    assert names
    for name in names:  # every kernel that ran was printed first, as C
        assert re.search(rf"^(__attribute__\S* )?void {name}\(", first, re.M), name
    assert "void " not in second and "{" not in second  # the second realize compiled nothing, printed no source
    assert all(KERNEL.match(line) for line in second.splitlines()[1:])


@pytest.mark.c_backend
def test_debug_4_prints_the_source_stage_it_rendered_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The printed source is the Source the plan was compiled from: rendered once, not rendered again to print."""
    renders: list[str] = []
    render = CRenderer.render

    def counting(self: CRenderer, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        source = render(self, programs, steps)
        renders.append(source.text)
        return source

    monkeypatch.setattr(CRenderer, "render", counting)
    monkeypatch.setenv("DEBUG", "4")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(2):
        np.testing.assert_allclose((Tensor(a).exp() * 3).sum(0).numpy(), (np.exp(a) * 3).sum(0), rtol=1e-6)
    assert len(renders) == 1
    assert capsys.readouterr().out.startswith(renders[0])


def test_what_a_backend_built_lives_as_long_as_its_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """realizer.compiled is kept by plan: when the plan cache drops a plan, its compiled stages go with it."""
    monkeypatch.setattr(realizer, "plans", PlanCache(size=1))
    monkeypatch.setattr(realizer, "compiled", weakref.WeakKeyDictionary())
    a = np.arange(6, dtype=np.float32)
    (Tensor(a) * 2).numpy()
    (first,) = realizer.plans.plans.values()
    held = weakref.ref(first)
    assert set(realizer.compiled[first]) == {os.environ.get("DEVICE", "C").upper()}
    del first
    (Tensor(a) + 5).numpy()  # another structure: the plan cache, of size 1, drops the first plan
    gc.collect()
    assert held() is None and len(realizer.compiled) == 1


def test_a_buffer_lives_as_long_as_a_graph_refers_to_it() -> None:
    t = Tensor(np.arange(6, dtype=np.float32))
    node = weakref.ref(t.uop)
    assert t.uop in realizer.buffers
    del t
    gc.collect()
    assert node() is None  # and with the node, its entry in the weak dictionary of buffers


def source_of(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, opt: str) -> str:
    """The C for a 96x80 @ 80x64 matmul, printed by DEBUG=4, with the optimizer on (OPT=1) or off."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((96, 80)).astype(np.float32), rng.standard_normal((80, 64)).astype(np.float32)
    monkeypatch.setenv("DEBUG", "4")
    monkeypatch.setenv("OPT", opt)
    out = (Tensor(a) @ Tensor(b)).numpy()
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    return capsys.readouterr().out


@pytest.mark.c_backend
def test_opt_0_makes_plain_loops(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    optimized = source_of(capsys, monkeypatch, "1")
    plain = source_of(capsys, monkeypatch, "0")
    assert "#pragma omp" in optimized  # big enough to thread, and a reduction: upcast accumulators
    assert len(set(re.findall(r"\bacc\d+\b", optimized))) > 1
    assert "#pragma omp" not in plain
    assert len(set(re.findall(r"\bacc\d+\b", plain))) == 1  # one accumulator: no upcast
    assert plain.count("for (") == 3  # i, j and the reduction over k: nothing split or unrolled


@pytest.mark.c_backend
def test_waiting_for_optimized_builds_makes_the_next_run_use_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plan built in tiers first runs its quick library; after wait_for_optimized_builds, its -O3 build has
    ended and the next run swaps it in, with the same values."""
    from uopc.backend.c import CExecutable, compiler

    monkeypatch.delenv("CFLAGS", raising=False)
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path))
    monkeypatch.setattr(compiler, "TIERED_MIN_CHARS", 0)  # every plan is built in tiers
    monkeypatch.setattr(realizer, "compiled", weakref.WeakKeyDictionary())
    rng = np.random.default_rng(117)
    x, w = rng.standard_normal((16, 48)).astype(np.float32), rng.standard_normal((48, 40)).astype(np.float32)
    quick = (Tensor(x) @ Tensor(w)).relu().numpy()
    ((_, on_device),) = realizer.compiled.items()
    compiled = on_device["C"]
    later = compiled.binary.later
    assert later is not None and isinstance(compiled.executable, CExecutable)
    realizer.wait_for_optimized_builds()
    assert later.done() and later.exception() is None
    optimized = (Tensor(x) @ Tensor(w)).relu().numpy()
    assert compiled.executable.later is None  # the run swapped the optimized library in
    assert quick.tobytes() == optimized.tobytes()
    np.testing.assert_allclose(optimized, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
