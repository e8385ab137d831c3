"""Exercise 2.1: a one-rule table that removes SUB, leaving ADD and NEG."""

from uopc.ir import Ops, PatternMatcher, UOp, UPat, graph_rewrite

# a - b is a + (-b) exactly, for integers (which wrap) and for IEEE floats alike
desugar = PatternMatcher([(UPat(Ops.SUB, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: a + (-b))])


def desugar_sub(u: UOp) -> UOp:
    return graph_rewrite(u, desugar)
