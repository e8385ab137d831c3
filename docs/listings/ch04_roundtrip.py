"""Chapter 4: to_uir and parse are inverses, and fmt puts hand-written text in canonical form."""

from uopc.ir import Ops, fmt, parse, stack, to_uir

# --8<-- [start:roundtrip]
row = stack(1.0, 2.0, 3.0)
g = (row - row.reduce(Ops.MAX, (0,)).expand((3,))).exp()
text = to_uir(g)
print(text, end="")
print("parse(to_uir(g)) is g:", parse(text) is g)
# --8<-- [end:roundtrip]
print()

# --8<-- [start:fmt]
messy = """
# a hand-written program: odd names, a dead line, a typed literal, a constant on a line of its own
%x     = const i64(40)
%unused = add %x, %x
%two   = const i64(2)
%sum   = add %x, %two     # the answer
"""
print(fmt(messy), end="")
print("fmt is idempotent:", fmt(fmt(messy)) == fmt(messy))
# --8<-- [end:fmt]
