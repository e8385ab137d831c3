"""Shared set-up for the uopc-tensor tests: a private kernel cache and data folder, derandomized Hypothesis.

Every kernel these tests build is compiled into a fresh cache folder for the session, so a run never reads
or fills the user's ~/.cache/uopc and always measures the cold path. Hypothesis runs derandomized and
without its example database: a failure reruns identically and a test run never writes to the repository.
Tests marked `sanitize` are the correctness subset that CI reruns with kernels built under AddressSanitizer
and UBSan, so that an out-of-bounds load fails instead of reading a lucky neighbour.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "uopc-tensor",
    derandomize=True,
    database=None,
    deadline=None,  # the first example of a test compiles kernels: slow, not wrong
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("uopc-tensor")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sanitize: correctness tests that CI reruns with kernels under ASan and UBSan (hatch env sanitize)"
    )
    config.addinivalue_line(
        "markers", "c_backend: tests of what the C backend prints or builds; the emu environment leaves them out"
    )
    config.addinivalue_line(
        "markers", "large: sizes the GPU emulator cannot run in time (billions of steps); the emu env skips them"
    )


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("uopc-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UOPC_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """$UOPC_DATA for the session: a data set that a test fetches lands here, never in ~/.cache/uopc."""
    folder = tmp_path_factory.mktemp("uopc-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UOPC_DATA", str(folder))
        yield folder
