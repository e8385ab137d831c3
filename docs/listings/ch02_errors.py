"""Chapter 2: rewrites that never finish are stopped, and the error names the rule to blame."""

from uopc.ir import Ops, PatternMatcher, RewriteError, UOp, UPat, graph_rewrite, param

x = param(0)


# --8<-- [start:cycle]
def add_zero(x: UOp) -> UOp:
    """Wrong: the replacement contains the node it replaces, so it matches again, forever."""
    return x + 0


try:
    graph_rewrite(x + 1, PatternMatcher([(UPat(Ops.ADD, name="x"), add_zero)]))
except RewriteError as e:
    print(e)
# --8<-- [end:cycle]


# --8<-- [start:budget]
def count_up(c: UOp) -> UOp:
    """Wrong: every replacement is a new constant, so no node repeats, but the rewrite never ends."""
    return c.const_like(c.arg + 1)


try:
    graph_rewrite(x * 0, PatternMatcher([(UPat.cvar("c"), count_up)]))
except RewriteError as e:
    print(e)
# --8<-- [end:budget]
