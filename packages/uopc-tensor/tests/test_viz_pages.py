"""VIZ=1: a stage viewer page per realize that builds a plan, announced on stderr; nothing at all without it.

Each test starts from an empty plan cache and page list (the `fresh` fixture), so that which realizes build
a plan does not depend on the tests that ran before. Values are checked against numpy: timing each kernel
alone, as VIZ does, must not change what the plan computes.
"""

from __future__ import annotations

import re
import weakref
from pathlib import Path

import numpy as np
import pytest

import uopc.tensor.realize
from uopc.lower import PlanCache
from uopc.tensor import Tensor, TensorError, realizer
from uopc.tensor.viz import StagePages

KERNEL_TABS = ("graph", "opt", "linear", "source", "timing")  # each kernel's stages on a page
ANNOUNCED = re.compile(r"^VIZ: realize (\d+) \(([^)]*)\): (file://\S+)$", re.M)


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(realizer, "plans", PlanCache())
    monkeypatch.setattr(realizer, "compiled", weakref.WeakKeyDictionary())
    monkeypatch.setattr(realizer, "pages", StagePages())
    monkeypatch.setenv("UOPC_VIZ_DIR", str(tmp_path / "pages"))
    return tmp_path / "pages"


def matmul_relu(rng: np.random.Generator) -> tuple[Tensor, np.ndarray]:
    a, b = rng.standard_normal((24, 40), dtype=np.float32), rng.standard_normal((40, 16), dtype=np.float32)
    return (Tensor(a) @ Tensor(b)).relu(), np.maximum(a @ b, 0)


def test_without_viz_nothing_is_written_and_kernels_run_as_one_plan(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VIZ", raising=False)

    def refuse(*args: object) -> None:
        raise AssertionError("work done for VIZ while VIZ is unset")

    monkeypatch.setattr(uopc.tensor.realize, "_run_each", refuse)  # no kernel is timed alone
    monkeypatch.setattr(realizer.pages, "write", refuse)
    t, expected = matmul_relu(np.random.default_rng(0))
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert not fresh.exists() and "VIZ" not in capsys.readouterr().err


def test_a_page_per_plan_announced_on_stderr(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VIZ", "1")
    rng = np.random.default_rng(1)
    for _ in range(2):  # the same plan on new data: one page
        t, expected = matmul_relu(rng)
        np.testing.assert_allclose(t.numpy(), expected, rtol=1e-5, atol=1e-5)
    x = rng.standard_normal((8, 16), dtype=np.float32)
    np.testing.assert_allclose(Tensor(x).exp().sum(1).numpy(), np.exp(x).sum(1), rtol=1e-5)
    announced = ANNOUNCED.findall(capsys.readouterr().err)
    assert [n for n, _, _ in announced] == ["1", "2"]
    (folder,) = fresh.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["index.html", "realize-001.html", "realize-002.html"]
    for number, names, uri in announced:
        page = folder / f"realize-{int(number):03d}.html"
        assert uri == page.as_uri()
        text = page.read_text()
        assert all(f"<code>{name}</code>" in text for name in names.split(", "))
    index = (folder / "index.html").read_text()
    assert 'href="realize-001.html"' in index and 'href="realize-002.html"' in index


def test_the_page_shows_the_run_times_it_measured(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIZ", "1")
    t, _ = matmul_relu(np.random.default_rng(2))
    t.numpy()
    (page,) = fresh.glob("*/realize-001.html")
    text = page.read_text()
    assert "not measured" not in text
    assert re.search(r"<td>run in step 0, alone</td><td class='num'>\d+\.\d{3} ms, \d+\.\d\d GFLOP/s</td>", text)


def test_pages_go_to_uopc_viz_in_the_current_directory_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VIZ", "1")
    monkeypatch.delenv("UOPC_VIZ_DIR")
    monkeypatch.chdir(tmp_path)
    Tensor(np.ones(5, np.float32)).exp().numpy()
    assert len(list((tmp_path / "uopc-viz").glob("*/realize-001.html"))) == 1


def test_a_bad_viz_value_is_refused_when_the_plan_was_cached_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """VIZ was read only for a plan compiled just now, so a misspelt value passed unnoticed on every realize
    whose plan was cached: a training loop's second step on. It is read on every realize, as DEBUG is."""
    monkeypatch.delenv("VIZ", raising=False)
    Tensor(np.ones(3, np.float32)).exp().numpy()
    monkeypatch.setenv("VIZ", "yes")
    with pytest.raises(TensorError, match="VIZ must be 0"):
        Tensor(np.ones(3, np.float32)).exp().numpy()  # the same plan, from the cache


@pytest.mark.parametrize("value", ["2", "yes", "true"])
def test_a_viz_value_that_means_nothing_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("VIZ", value)
    with pytest.raises(TensorError, match=f"VIZ must be 0 .* or 1 .*, got '{value}'"):
        Tensor(np.ones(3, np.float32)).exp().numpy()


def as_a_new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the plans and what was built from them, as a new process starts; the kernel cache and its plan
    store stay. Building anything from now on is refused: a warm start restores its plan."""
    monkeypatch.setattr(realizer, "plans", PlanCache())
    monkeypatch.setattr(realizer, "compiled", weakref.WeakKeyDictionary())

    def refuse(*args: object) -> None:
        raise AssertionError("a warm start ran the C compiler")

    monkeypatch.setattr("uopc.backend.c.compiler.compile_units", refuse)


@pytest.mark.c_backend  # the plan store is the C backend's
def test_a_plan_restored_from_the_plan_store_still_shows_every_stage(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A warm start runs a plan from its stored manifest and library; the page asks for the kernels, their
    programs and the source, which are made again then, and only then."""
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VIZ", raising=False)
    rng = np.random.default_rng(3)
    t, _ = matmul_relu(rng)
    t.numpy()  # cold: planned, built, kept in the plan store
    as_a_new_process(monkeypatch)
    monkeypatch.setenv("VIZ", "1")
    t, expected = matmul_relu(rng)
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert (realizer.plans.made, realizer.plans.restored) == (0, 1)
    (page,) = fresh.glob("*/realize-001.html")
    text = page.read_text()
    (plan,) = realizer.compiled
    assert plan.kernels and all(f'id="k{i}-{stage}"' in text for i in range(len(plan.kernels)) for stage in KERNEL_TABS)
    assert "uopc_plan" in text and all(k.name in text for k in plan.kernels)  # the source, rendered again


@pytest.mark.c_backend  # the plan store is the C backend's
def test_a_warm_start_makes_no_kernel_at_debug_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DEBUG=1's line counts the plan's steps: counting its kernels would make them, for a number."""
    monkeypatch.setenv("UOPC_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("VIZ", raising=False)
    rng = np.random.default_rng(4)
    matmul_relu(rng)[0].numpy()
    as_a_new_process(monkeypatch)
    monkeypatch.setenv("DEBUG", "1")
    t, expected = matmul_relu(rng)
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-5, atol=1e-5)
    (plan,) = realizer.compiled
    assert realizer.plans.restored == 1 and "kernels" not in vars(plan)  # never asked for
    assert re.search(rf"^realize: {len(plan.steps)} kernels, schedule", capsys.readouterr().out, re.M)
