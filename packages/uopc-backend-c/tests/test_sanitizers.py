"""The sanitizer run really catches what it is for: a kernel that reads past its buffer, or shifts an int by
its width, stops the process with AddressSanitizer's or UBSan's report instead of returning a number.

These run only where kernels are built with -fsanitize=address,undefined (`hatch run sanitize:test`,
which also preloads libasan); elsewhere the same kernels would run, read garbage and pass by luck. Each
kernel runs in a child process, since a report ends the process that hits it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from uopc.backend.c.compiler import cflags

SANITIZED = "-fsanitize=address" in cflags() and "undefined" in cflags()

# One float past the end of a 4-float input: the kind of read a missing gate on a padded load makes.
PAST_THE_END = """
void past_the_end(const float data0[restrict static 4], float data1[restrict static 1]) {
  float acc0 = 0.0f;
  for (int ridx0 = 0; ridx0 <= 4; ridx0++) acc0 += data0[ridx0];
  data1[0] = acc0;
}
"""
# A shift by the type's width is undefined in C; -fwrapv does not cover it.
TOO_WIDE_SHIFT = """
void too_wide_shift(const int data0[restrict static 1], int data1[restrict static 1]) {
  data1[0] = 1 << data0[0];
}
"""

CHILD = """
import sys
import numpy as np
from uopc.backend.c import Program
source, name, value = sys.argv[1], sys.argv[2], int(sys.argv[3])
dtype = np.float32 if name == "past_the_end" else np.int32
out = np.zeros(1, dtype)
Program(source, name)(np.full(4 if dtype == np.float32 else 1, value, dtype), out)
print("finished with", out[0])
"""


@pytest.mark.sanitize
@pytest.mark.skipif(not SANITIZED, reason="kernels are not built with -fsanitize=address,undefined here")
@pytest.mark.parametrize(
    ("source", "name", "value", "report"),
    [
        (PAST_THE_END, "past_the_end", 1, "heap-buffer-overflow"),
        (TOO_WIDE_SHIFT, "too_wide_shift", 32, "shift exponent 32 is too large"),
    ],
    ids=["address", "undefined"],
)
def test_a_kernel_that_breaks_memory_or_c_rules_is_stopped(source: str, name: str, value: int, report: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, source, name, str(value)],
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0, f"the kernel ran to the end: {done.stdout}"
    assert "finished with" not in done.stdout
    assert report in done.stderr, done.stderr[-2000:]
    assert name in done.stderr, "the report should name the kernel function"
