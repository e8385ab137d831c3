"""Screenshots of the stage viewer (VIZ=1) for the book: a small matmul's page, opened in headless Chromium.

    .tools/bin/hatch run docs:screenshots                  # writes docs/outputs/viz_*.png
    .tools/bin/hatch run docs:screenshots --out-dir /tmp   # somewhere else

The matmul is realized in this process with VIZ=1, a fresh kernel cache and a temporary page folder; its page
is opened from disk in Debian's Chromium (CHROMIUM names another), with the network cut off as in the browser
tests. Each picture is a PNG stamped with the commit it shows (scripts/stamp.py):

    viz_page.png          the top of the page: the list of kernels, the stage times, the plan
    viz_tensor_graph.png  the tensor graph: two buffers, reshape, permute, expand, a product and a sum
    viz_kernel_graph.png  the kernel as rangeify made it: loops, index arithmetic, two loads, a reduce, a store
    viz_after_opts.png    the kernel after its opts: a 2x2 register tile, the statement four times
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import stamp
from arguments import output_folder
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
FLAGS = [  # as in tests-browser/conftest.py: nothing reached on the network, every other host unresolvable
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# what the pictures show depends on every stage of the compiler, and on the viewer
MEASURES: list[str | Path] = [
    *(f"packages/{p}/src" for p in ("uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor")),
    __file__,
]
# the pictures in full (a picture box scrolls at 80% of the window's height), with no sidebar over them
UNCLIPPED = """
.picture { max-height: none !important; overflow: visible !important; border: none !important; }
#sidebar { display: none; } main { margin-left: 0; max-width: none; }
"""


def matmul_page(folder: Path) -> Path:
    """Realize a 4x8 by 8x4 matmul with VIZ=1 into `folder`; the page's path."""
    os.environ.update(VIZ="1", UOPC_VIZ_DIR=str(folder / "pages"), UOPC_CACHE=str(folder / "cache"))
    from uopc.tensor import Tensor, realizer

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8), dtype=np.float32), rng.standard_normal((8, 4), dtype=np.float32)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert realizer.pages.folder is not None, "VIZ=1 wrote no page"
    return realizer.pages.folder / "realize-001.html"


def shots(page: Page) -> dict[str, bytes]:
    """The four pictures, by file name."""
    pictures = {"viz_page.png": page.screenshot()}
    page.add_style_tag(content=UNCLIPPED)
    pictures["viz_tensor_graph.png"] = page.locator("#tensor-graph svg").screenshot()
    pictures["viz_kernel_graph.png"] = page.locator("#k0-graph svg").screenshot()
    page.locator("#k0 .tabs a", has_text="after opts").click()
    pictures["viz_after_opts.png"] = page.locator("#k0-opt svg").screenshot()
    return pictures


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Screenshots of the stage viewer's page of a small matmul, for the book.")
    p.add_argument(
        "--out-dir", type=output_folder, default=ROOT / "docs" / "outputs", help="where to write (docs/outputs)"
    )
    args = p.parse_args(argv)
    if not CHROMIUM.is_file():
        sys.exit(f"Chromium is not installed at {CHROMIUM}: apt-get install chromium, or set CHROMIUM")
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as pw:
        address = matmul_page(Path(scratch)).as_uri()
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 760})
        page.goto(address, wait_until="load")
        pictures = shots(page)
        browser.close()
    line = stamp.make(MEASURES).line()
    for name, data in pictures.items():
        (args.out_dir / name).write_bytes(stamp.png_with_stamp(data, line))
        print(f"wrote {args.out_dir / name}")


if __name__ == "__main__":
    main()
