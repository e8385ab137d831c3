"""The stage viewer's page, read in a real browser: a matmul realized with VIZ=1, and every stage of its kernel.

A fresh Python process realizes a matmul with VIZ=1 (and a private kernel cache and page folder), checks the
numbers against numpy, and announces its page on stderr. The page is opened from disk, as a student opens
it, in the headless Chromium of conftest.py. It must load with no console error and no uncaught exception,
ask for nothing but itself, and show each stage of the matmul kernel when its tab is chosen: the graph before
and after opts as drawn SVG, the linear program's text, the C source of the kernel's function, its times.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Locator, Page, Request

REALIZE_MATMUL = """
import numpy as np
from uopc.tensor import Tensor
rng = np.random.default_rng(0)
a, b = rng.standard_normal((32, 48), dtype=np.float32), rng.standard_normal((48, 16), dtype=np.float32)
np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
"""
ANNOUNCED = re.compile(r"^VIZ: realize 1 \((\w+)\): (file://\S+)$", re.M)


@pytest.fixture(scope="module")
def matmul_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(the matmul kernel's name, the page's address)."""
    folder = tmp_path_factory.mktemp("viz")
    env = {**os.environ, "VIZ": "1", "UOPC_VIZ_DIR": str(folder / "pages"), "UOPC_CACHE": str(folder / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", REALIZE_MATMUL], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = ANNOUNCED.search(done.stderr)
    assert found, f"no page announced on stderr: {done.stderr[-2000:]!r}"
    return found.group(1), found.group(2)


class Opened:
    """The page in a tab, with every console error, uncaught exception and request for anything else kept."""

    def __init__(self, chromium: BrowserContext, address: str) -> None:
        self.problems: list[str] = []
        self.page: Page = chromium.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"uncaught exception: {e}"))
        self.page.on("request", lambda r: self._request(r, address))
        self.page.goto(address, wait_until="load")

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.problems.append(f"console error: {message.text}")

    def _request(self, request: Request, address: str) -> None:
        if request.url.split("#")[0] != address:
            self.problems.append(f"the page asked for {request.url}")


@pytest.fixture
def opened(chromium: BrowserContext, matmul_page: tuple[str, str]) -> Iterator[Opened]:
    tab = Opened(chromium, matmul_page[1])
    yield tab
    tab.page.close()


def kernel_section(opened: Opened, name: str) -> str:
    """The CSS selector of the kernel's section, found by its heading."""
    sections = opened.page.locator("section.kernel").filter(has=opened.page.locator("h2 code", has_text=name))
    assert sections.count() == 1
    return f"#{sections.get_attribute('id')}"


def shown_stage(opened: Opened, kernel: str, tab: str) -> Locator:
    """Choose the kernel's tab; the one stage it shows."""
    opened.page.locator(f"{kernel} .tabs a", has_text=tab).click()
    shown = [s for s in opened.page.locator(f"{kernel} section.stage").all() if s.is_visible()]
    assert len(shown) == 1, f"{tab}: {len(shown)} stages shown"
    return shown[0]


def test_every_stage_of_the_matmul_kernel_is_shown(opened: Opened, matmul_page: tuple[str, str]) -> None:
    name, _ = matmul_page
    kernel = kernel_section(opened, name)
    for tab in ("graph", "after opts"):
        svg = shown_stage(opened, kernel, tab).locator("svg")
        box = svg.bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 100, f"{tab}: {box}"
        assert svg.locator("g.node").count() >= 10
        assert "load f32" in (svg.text_content() or "") and "store void" in (svg.text_content() or "")
    program = shown_stage(opened, kernel, "linear program").locator("pre").inner_text()
    assert re.search(r"= range \d+ : axis=\d kind=reduce", program) and "= endrange" in program
    source = shown_stage(opened, kernel, "source").locator("pre").inner_text()
    assert re.search(rf"void {name}\(float data0\[", source) and source.rstrip().endswith("}")
    timing = shown_stage(opened, kernel, "timing").inner_text()
    assert re.search(r"run in step 0, alone\s+\d+\.\d{3} ms, \d+\.\d\d GFLOP/s", timing), timing
    assert not opened.problems, "\n".join(opened.problems)


def test_the_plan_and_the_sidebar_lead_to_the_kernels_stages(opened: Opened, matmul_page: tuple[str, str]) -> None:
    name, _ = matmul_page
    page, kernel = opened.page, kernel_section(opened, name)
    page.locator("#plan a", has_text=name).click()  # the plan's step names its kernel
    assert page.locator(kernel).is_visible()
    page.locator(f'#sidebar a[href="{kernel}-source"]').click()  # the sidebar opens a stage
    assert page.locator(f"{kernel}-source").is_visible() and not page.locator(f"{kernel}-graph").is_visible()
    page.locator("#all-stages").check()  # or every stage at once
    assert all(s.is_visible() for s in page.locator(f"{kernel} section.stage").all())
    assert page.locator("#tensor-graph svg").is_visible()
    assert not opened.problems, "\n".join(opened.problems)
