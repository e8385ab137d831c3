"""Chapter 1: Python's own equality is too coarse for a hash-consing key."""

import math

# --8<-- [start:python-keys]
keys = [1, 1.0, True]
print("equal:", keys[0] == keys[1] == keys[2], "  distinct values in a set:", len(set(keys)))
print("hash(1), hash(1.0), hash(True):", hash(1), hash(1.0), hash(True))
print("one dict key for all three:", dict(zip(keys, ["int", "float", "bool"], strict=True)))
zeros, nans = [0.0, -0.0], [math.nan, math.nan]
print("0.0 == -0.0:", zeros[0] == zeros[1], "  nan == nan:", nans[0] == nans[1])
# --8<-- [end:python-keys]
