"""Chapter 5: a CompileError shows the compiler's message and the source with line numbers."""

from uopc.backend.c import CompileError, build_library

# --8<-- [start:error]
SOURCE = """void clamp(float data0[restrict static 4]) {
  for (int i = 0; i < 4; i++) {
    data0[i] = data0[i] > 1e30f ? INFINITY : data0[i];
  }
}
"""
try:
    build_library(SOURCE)  # no #include <math.h>: INFINITY is not defined
except CompileError as e:
    print(e)
# --8<-- [end:error]
