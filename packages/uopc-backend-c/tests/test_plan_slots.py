"""Plan buffers no step uses, and the cache key's view of the machine."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from uopc.backend.c import CExecutable, CRenderer, RenderError
from uopc.backend.c.compiler import cache_key, compiler, native_target
from uopc.ir import UOp
from uopc.lower import Kernel, Step, linearize, rangeify

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]


def test_unused_plan_slots_are_not_touched(build_kernels: Build) -> None:
    """A plan may hold an input no kernel reads (its reads were simplified away): anything may stand there."""
    x = UOp.buffer(1, 4)
    exe = build_kernels([Kernel("twice", rangeify([(UOp.buffer(0, 4), x * 2.0)]))], [Step(0, (2, 0))])
    src, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    exe.run([src, None, out])
    np.testing.assert_array_equal(out, np.arange(4) * 2)


def test_kernel_names_must_be_c_identifiers() -> None:
    kernel = rangeify([(UOp.buffer(0, 4), UOp.buffer(1, 4) * 2.0)])
    for name in ("double", "2x", "uopc_plan"):
        with pytest.raises(RenderError, match="C identifiers"):
            CRenderer().render([linearize(Kernel(name, kernel))], [Step(0, (0, 1))])


def test_march_native_builds_are_keyed_by_the_cpu() -> None:
    cc = compiler()
    native, portable = "-O2 -march=native", "-O2"
    assert "-march=" in native_target(cc, native)
    assert native_target(cc, portable) == ""
    assert cache_key("int x;", cc, native) != cache_key("int x;", cc, portable)
