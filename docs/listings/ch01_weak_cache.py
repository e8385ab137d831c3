"""Chapter 1: the hash-consing table holds its nodes weakly."""

import gc

from uopc.ir import UOp

# --8<-- [start:weak]
before = len(UOp._cache)
big = UOp.const(123_456_789)
print("entries added by one new constant:", len(UOp._cache) - before)
del big
gc.collect()
print("entries left after the last reference goes:", len(UOp._cache) - before)
# --8<-- [end:weak]
