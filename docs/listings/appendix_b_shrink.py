"""Appendix B: Hypothesis finds an input on which a wrong rewrite rule changes a value, and shrinks it."""

from hypothesis import find, settings
from hypothesis import strategies as st

from uopc.ir import Ops, PatternMatcher, UOp, UPat, graph_rewrite, range_, run, substitute, to_uir

Args = tuple[int, int, int, int]

# --8<-- [start:rule]
# A plausible rule, and a wrong one: floor division does not distribute over a sum ((1 + 1) // 2 is 1, 0 + 0 is 0)
distribute = PatternMatcher(
    [(UPat(Ops.IDIV, src=(UPat(Ops.ADD, name="s"), UPat.cvar("c"))), lambda s, c: s.src[0] // c + s.src[1] // c)]
)


def index(n: int, a: int, k: int, c: int) -> tuple[UOp, UOp]:
    """A loop index of n iterations, and an index made from it as rangeify makes them: scaled, offset, divided."""
    i = range_(n, 0)
    return i, (i * a + k) // c


def rule_changes_a_value(args: Args) -> bool:
    i, e = index(*args)
    rewritten = graph_rewrite(e, distribute)
    at = [{i: UOp.const(v)} for v in range(args[0])]  # every iteration of the loop
    return any(run(substitute(e, point)).arg != run(substitute(rewritten, point)).arg for point in at)


# --8<-- [end:rule]

# --8<-- [start:find]
first: list[Args] = []


def remember_first(args: Args) -> bool:
    failed = rule_changes_a_value(args)
    if failed and not first:
        first.append(args)
    return failed


inputs = st.tuples(st.integers(1, 12), st.integers(1, 5), st.integers(0, 20), st.integers(1, 9))
smallest = find(inputs, remember_first, settings=settings(derandomize=True, database=None, max_examples=500))
print("first failing (n, a, k, c):", first[0])
print("shrunk to (n, a, k, c):    ", smallest)
print(to_uir(index(*smallest)[1]))
print("rewritten by the rule:")
print(to_uir(graph_rewrite(index(*smallest)[1], distribute)))
# --8<-- [end:find]
