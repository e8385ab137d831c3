"""Fixtures for the uopc-backend-c tests: a private kernel cache, and the `o0` marker.

The tests import numpy, uopc.ir, uopc.lower and uopc.backend.c only. Tests marked `o0` are the
correctness subset that CI runs a second time with CFLAGS="-O0 -fopenmp -fwrapv": optimizers hide
undefined behavior (a data race on an accumulator shared by OpenMP threads) as often as they expose it.
The `o0` subset runs once more with kernels built under AddressSanitizer and UBSan (`hatch run
sanitize:test`), with the tests marked `sanitize`, which check that those sanitizers really report.
"""

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from uopc.backend.c import CCompiler, CExecutable, CRenderer, CRuntime
from uopc.lower import Kernel, Step, linearize


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "o0: correctness tests that CI reruns with CFLAGS='-O0 -fopenmp -fwrapv'")
    config.addinivalue_line("markers", "sanitize: run by the sanitize environment, with kernels under ASan and UBSan")


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh kernel cache for the session: the suite never reads or fills the user's ~/.cache/uopc,
    and every run measures (and tests) the cold path. Tests of the cache itself use their own folders."""
    folder = tmp_path_factory.mktemp("uopc-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UOPC_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="session")
def build_kernels() -> Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]:
    """Kernels built into one library and loaded, the way compile_plan builds a plan's: each kernel
    linearized, then the C backend's renderer, compiler and runtime in turn."""

    def build(kernels: Sequence[Kernel], steps: Sequence[Step]) -> CExecutable:
        programs = [linearize(k) for k in kernels]
        binary = CCompiler().compile(CRenderer().render(programs, steps))
        return CRuntime().load(binary, programs, steps)

    return build
