"""Shared set-up for the end-to-end tests: a private kernel cache and data folder for the session.

Kernels are compiled into a fresh folder, so a run never reads or fills the user's ~/.cache/uopc and always
measures the cold path; a data set a test needs is fetched into a fresh $UOPC_DATA the same way. libgomp
starts here, with uopc's settings, before any test module imports PyTorch, which brings a libgomp of its own
(uopc warns where that one was loaded first).
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from uopc.backend.c import start_openmp

start_openmp()


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("uopc-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UOPC_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("uopc-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UOPC_DATA", str(folder))
        yield folder
