"""Run the book's listings before the pages are read, so every output shown is real.

Each `docs/listings/<name>.py` is run with the Python that runs mkdocs; what it prints becomes
`docs/generated/<name>.txt`, which the chapters include with snippets. A listing that fails stops the build.
The listings are independent processes, most of whose time is Python starting and importing, so they run
one per core at once (the kernel cache they share is safe for concurrent builders: compiler.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent


def run_listing(listing: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(
        [sys.executable, str(listing)], capture_output=True, text=True, cwd=DOCS.parent, env=env, check=False
    )


def run_listings() -> None:
    out = DOCS / "generated"
    out.mkdir(exist_ok=True)
    listings = sorted((DOCS / "listings").glob("*.py"))
    with ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
        runs = list(pool.map(run_listing, listings))
    for listing, done in zip(listings, runs, strict=True):
        if done.returncode != 0:
            raise RuntimeError(f"docs listing {listing.name} failed:\n{done.stdout}\n{done.stderr}")
        target = out / f"{listing.stem}.txt"
        if not target.exists() or target.read_text() != done.stdout:  # unchanged files keep `mkdocs serve` calm
            target.write_text(done.stdout)
