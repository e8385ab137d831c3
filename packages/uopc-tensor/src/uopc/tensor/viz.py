"""VIZ=1: a web page for each realize that builds a plan, with every kernel at every stage (uopc.lower's viewer).

The pages of one process go into one folder, $UOPC_VIZ_DIR/<date>-<time>-<process id>/ (UOPC_VIZ_DIR
defaults to uopc-viz/ in the current directory), as realize-001.html, realize-002.html, ..., with an
index.html that links them all; each page is announced by one line on stderr with its address. A realize
whose plan was compiled before (the second step of a training loop, say) writes no page: it would show the
same stages again.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

from uopc.lower import RealizeRecord, index_page, stage_page
from uopc.tensor.errors import TensorError


def viz_on() -> bool:
    """Whether VIZ asks for the stage viewer's pages: VIZ=1 yes, VIZ=0 or unset no; anything else is refused."""
    text = os.environ.get("VIZ", "0").strip() or "0"
    if text not in ("0", "1"):
        raise TensorError(f"VIZ must be 0 (no pages) or 1 (a page per realize that builds a plan), got {text!r}")
    return text == "1"


def viz_root() -> Path:
    """Where the stage viewer's folders go: $UOPC_VIZ_DIR, else uopc-viz/ in the current directory."""
    return Path(os.environ.get("UOPC_VIZ_DIR") or "uopc-viz").absolute()


class StagePages:
    """The pages this process wrote: their folder (made at the first page), and each page's file and title."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.pages: list[tuple[str, str]] = []

    def next_number(self) -> int:
        return len(self.pages) + 1

    def write(self, record: RealizeRecord) -> Path:
        """Write `record`'s page and the index, announce the page on stderr, and return its path."""
        if self.folder is None:
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            self.folder = viz_root() / f"{stamp}-{os.getpid()}"
            self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"realize-{record.number:03d}.html"
        path.write_text(stage_page(record), encoding="utf-8")
        names = [k.name for k in record.plan.kernels]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        self.pages.append((path.name, f"realize {record.number}: {', '.join(names)}"))
        (self.folder / "index.html").write_text(index_page(self.pages), encoding="utf-8")
        print(f"VIZ: realize {record.number} ({shown}): {path.as_uri()}", file=sys.stderr)
        return path
