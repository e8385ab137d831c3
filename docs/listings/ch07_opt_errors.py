"""Chapter 7: opts that cannot apply raise LowerError, naming the axis and what would be valid."""

from uopc.ir import UOp
from uopc.lower import LowerError, Opts, apply_opts, rangeify

# --8<-- [start:errors]
x = UOp.buffer(0, 4 * 8).reshape((4, 1, 8)).expand((4, 6, 8))
kernel = rangeify([(UOp.buffer(1, 24), x.sum([2]).reshape((4, 6)))])  # axes: 0 (4), 1 (6), 2 (reduce, 8)
for opts in [
    Opts(upcast={0: 3}),
    Opts(upcast={2: 2}),
    Opts(unroll={2: 3}),
    Opts(unroll={0: 2}),
    Opts(thread=2),
    Opts(thread=7),
    Opts(upcast={0: 4}, thread=0),
]:
    try:
        apply_opts(kernel, opts)
    except LowerError as e:
        print(f"{opts}:\n    {e}")
# --8<-- [end:errors]
