"""What the browser tests share: Debian's Chromium, started headless with the network cut off.

Chromium is Debian's (`apt-get install chromium`); set CHROMIUM to use another binary. The flags keep it from
reaching the internet on its own at start-up (updates, sync, first-run), and resolve every host name but
127.0.0.1 to nothing, so a page that asks for anything from another host gets an error instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """One browser for the session, with a fresh profile."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"Chromium is not installed at {CHROMIUM}: the browser tests need it. On Debian, run "
            f"`apt-get update && apt-get install -y chromium`, or set CHROMIUM to the browser's path."
        )
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            user_data_dir=tmp_path_factory.mktemp("chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()
