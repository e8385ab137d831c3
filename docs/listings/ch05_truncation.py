"""Chapter 5: C's / and % truncate toward zero; the IR's IDIV and MOD floor, as Python and numpy do."""

import math

# --8<-- [start:c-truncates]
print("C:      -7 / 2 =", int(-7 / 2), "  -7 % 2 =", int(math.fmod(-7, 2)))  # what C computes
print("the IR: -7 // 2 =", -7 // 2, "  -7 % 2 =", -7 % 2)  # floor division, as in Python and numpy
# --8<-- [end:c-truncates]
