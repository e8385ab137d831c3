"""UPat, PatternMatcher and graph_rewrite: matching, rule dispatch, traversal order, fixed points, cycles.

The rule tables here are tiny and written for the test, so each behaviour of the engine is seen in
isolation; what the rules compute is checked by evaluating with Python, not with uopc's own algebra.
"""

from typing import Any

import pytest

from uopc.ir import (
    Ops,
    PatternMatcher,
    RewriteError,
    UOp,
    UPat,
    dtypes,
    graph_rewrite,
    param,
    range_,
    run,
    sink,
    toposort,
)

X, Y = param(0), param(1)


def neg(u: UOp) -> UOp:
    return u.alu(Ops.NEG)


def matches(pat: UPat, u: UOp) -> list[dict[str, UOp]]:
    return pat.match(u, {})


# ---- UPat -----------------------------------------------------------------------------------------------


def test_op_and_dtype_may_be_one_or_a_collection() -> None:
    add = X + Y
    assert matches(UPat(Ops.ADD), add) == [{}]
    assert matches(UPat((Ops.MUL, Ops.ADD)), add) == [{}]
    assert matches(UPat(Ops.MUL), add) == []
    assert matches(UPat(dtype=dtypes.int32), add) == [{}]
    assert matches(UPat(dtype=(dtypes.int8, dtypes.int32)), add) == [{}]
    assert matches(UPat(dtype=dtypes.float32), add) == []
    ptr = UOp.define_global(0, 4)
    assert matches(UPat(dtype=dtypes.float32.ptr()), ptr) == [{}]  # pointer dtypes match by value


def test_arg_matches_exactly_and_by_type() -> None:
    assert matches(UPat(Ops.PARAM, arg=1), Y) == [{}]
    assert matches(UPat(Ops.PARAM, arg=0), Y) == []
    # 1, 1.0 and True are equal in Python; as args they are three different things
    assert matches(UPat.const(1), UOp.const(1)) == [{}]
    assert matches(UPat.const(1.0), UOp.const(1)) == []
    assert matches(UPat.const(True), UOp.const(1)) == []
    assert matches(UPat.const(1), UOp.const(True)) == []
    assert matches(UPat.const(0.0), UOp.const(-0.0)) == []
    assert matches(UPat.const(float("nan")), UOp.const(float("nan"))) == [{}]


def test_src_patterns_match_each_source_in_order() -> None:
    sub = X - 3
    pat = UPat(Ops.SUB, src=(UPat.var("a"), UPat.cvar("c")))
    assert matches(pat, sub) == [{"a": X, "c": UOp.const(3)}]
    assert matches(UPat(Ops.SUB, src=(UPat.cvar("c"), UPat.var("a"))), sub) == []  # SUB does not commute
    assert matches(UPat(Ops.SUB, src=(UPat.var("a"),)), sub) == []  # a source count that differs


def test_commutative_ops_match_in_both_orders() -> None:
    pat = UPat(Ops.ADD, src=(UPat.cvar("c"), UPat.var("a")))
    assert matches(pat, X + 3) == [{"c": UOp.const(3), "a": X}]
    assert matches(pat, UOp.const(3) + X) == [{"c": UOp.const(3), "a": X}]
    # with two free sources both assignments are found, so a rule sees every reading of the node
    both = matches(UPat(Ops.MUL, src=(UPat.var("a"), UPat.var("b"))), X * Y)
    assert {(m["a"], m["b"]) for m in both} == {(X, Y), (Y, X)}


def test_a_name_used_twice_must_capture_the_same_node() -> None:
    twice = UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a")))
    assert matches(twice, X + X) != []
    assert matches(twice, X + Y) == []
    nested = UPat(Ops.ADD, src=(UPat.var("a"), UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("k")))))
    assert matches(nested, X + X * 2) != []
    assert matches(nested, X + Y * 2) == []


def test_any_len_matches_a_prefix_of_the_sources() -> None:
    s = sink(X, Y, X + Y)
    assert matches(UPat(Ops.SINK, src=(UPat.var("first"),)), s) == []
    assert matches(UPat(Ops.SINK, src=(UPat.var("first"),), any_len=True), s) == [{"first": X}]


def test_operator_sugar_builds_patterns() -> None:
    pat = (UPat.var("x") * 4 + UPat.cvar("c")) // 2
    assert matches(pat, (X * 4 + 1) // 2) == [{"x": X, "c": UOp.const(1)}]
    assert matches(UPat.var("x") < 3, X < 3) == [{"x": X}]
    assert matches(UPat.var("x").ne(True), (X < 3).ne(True)) == [{"x": X < 3}]
    assert "ADD" in repr(UPat.var("x") + 1)


# ---- PatternMatcher -------------------------------------------------------------------------------------


def test_first_rule_in_table_order_wins_and_none_declines() -> None:
    calls: list[str] = []

    def declines(x: UOp) -> None:
        calls.append("declines")

    def first(x: UOp) -> UOp:
        calls.append("first")
        return UOp.const(1)

    def second(x: UOp) -> UOp:
        calls.append("second")
        return UOp.const(2)

    pm = PatternMatcher(
        [(UPat.var("x", dtypes.int32), declines), (UPat(Ops.PARAM, name="x"), first), (UPat(name="x"), second)]
    )
    hit = pm.rewrite(X)
    assert hit is not None and hit[0] is UOp.const(1)
    assert calls == ["declines", "first"]


def test_rules_are_only_tried_on_their_ops() -> None:
    seen: list[Ops] = []

    def record(x: UOp) -> None:
        seen.append(x.op)

    pm = PatternMatcher([(UPat((Ops.MUL, Ops.CONST), name="x"), record)])
    graph_rewrite((X + 1) * Y - 3, pm)
    assert sorted(seen, key=str) == [Ops.CONST, Ops.CONST, Ops.MUL]


def test_a_rule_returning_its_input_is_no_rewrite() -> None:
    pm = PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x: x)])
    assert pm.rewrite(X + 1) is None
    assert graph_rewrite(X + 1, pm) is X + 1


def test_ctx_goes_only_to_rules_that_ask_for_it() -> None:
    def with_ctx(x: UOp, ctx: dict[UOp, UOp]) -> UOp | None:
        return ctx.get(x)

    pm = PatternMatcher([(UPat(Ops.PARAM, name="x"), with_ctx), (UPat(Ops.RANGE, name="x"), lambda x: UOp.const(0))])
    i = range_(4, 0)
    out = graph_rewrite(X + i, pm, ctx={X: UOp.const(5)})
    assert out is UOp.const(5) + UOp.const(0)


def test_adding_tables_keeps_their_order() -> None:
    a = PatternMatcher([(UPat(Ops.PARAM), lambda: UOp.const(1))])
    b = PatternMatcher([(UPat(Ops.PARAM), lambda: UOp.const(2))])
    hit_ab, hit_ba = (a + b).rewrite(X), (b + a).rewrite(X)
    assert hit_ab is not None and hit_ab[0] is UOp.const(1)
    assert hit_ba is not None and hit_ba[0] is UOp.const(2)


# ---- graph_rewrite --------------------------------------------------------------------------------------

# x + 0 -> x and x * 1 -> x, and constants fold: enough algebra to see traversal order and fixed points
_fold = PatternMatcher(
    [
        (UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0))), lambda x: x),
        (UPat(Ops.MUL, src=(UPat.var("x"), UPat.const(1))), lambda x: x),
        (
            UPat((Ops.ADD, Ops.MUL), src=(UPat.cvar("a"), UPat.cvar("b")), name="n"),
            lambda n, a, b: UOp.const(a.arg + b.arg if n.op is Ops.ADD else a.arg * b.arg),
        ),
    ]
)


def test_bottom_up_reaches_a_fixed_point() -> None:
    # X * 1 and the + 0 only appear once (0 + 1) and 3 * 0 fold: one pass over the nodes would stop early
    g = (X * (UOp.const(0) + 1) + (UOp.const(3) * 0)) * 1
    assert graph_rewrite(g, _fold) is X
    assert graph_rewrite((X + 0) * (UOp.const(1) + 0), _fold) is X


@pytest.mark.parametrize("bottom_up", [True, False])
def test_both_orders_reach_the_same_fixed_point_here(bottom_up: bool) -> None:
    g = ((X + (UOp.const(2) * 0)) * (UOp.const(0) + 1)) + 0
    assert graph_rewrite(g, _fold, bottom_up=bottom_up) is X


def _tracing_rules() -> tuple[PatternMatcher, list[str]]:
    """NEG(NEG(x)) -> x, and NEG(CONST c) -> CONST(-c); records which rule fired, in order."""
    fired: list[str] = []

    def double_neg(x: UOp) -> UOp:
        fired.append("double_neg")
        return x

    def neg_const(c: UOp) -> UOp:
        fired.append("neg_const")
        return UOp.const(-c.arg)

    pm = PatternMatcher(
        [
            (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("x"),)),)), double_neg),
            (UPat(Ops.NEG, src=(UPat.cvar("c"),)), neg_const),
        ]
    )
    return pm, fired


def test_bottom_up_rewrites_sources_first() -> None:
    pm, fired = _tracing_rules()
    assert graph_rewrite(neg(neg(UOp.const(3))), pm) is UOp.const(3)
    assert fired == ["neg_const", "neg_const"]  # the inner NEG folded first, then the outer one


def test_top_down_tries_a_node_before_its_sources() -> None:
    pm, fired = _tracing_rules()
    assert graph_rewrite(neg(neg(UOp.const(3))), pm, bottom_up=False) is UOp.const(3)
    assert fired == ["double_neg"]  # the outer pattern saw the NEG(NEG(...)) before the inner one folded


def test_rewrite_is_memoized_on_shared_nodes() -> None:
    # 40 levels of x = x + x: 2**40 paths from the root to the leaf, 41 distinct nodes
    g = X
    for _ in range(40):
        g = g + g
    calls: list[UOp] = []

    def record(x: UOp) -> None:
        calls.append(x)

    graph_rewrite(g, PatternMatcher([(UPat(Ops.ADD, name="x"), record)]))
    assert len(calls) == 40 and len(set(calls)) == 40


def test_replacements_are_rewritten_too() -> None:
    # MUL(x, 2) -> ADD(x, x), and ADD(x, x) of a constant folds: the replacement must be visited again
    pm = PatternMatcher(
        [
            (UPat(Ops.MUL, src=(UPat.var("x"), UPat.const(2))), lambda x: x + x),
            (UPat(Ops.ADD, src=(UPat.cvar("a"), UPat.cvar("a"))), lambda a: UOp.const(2 * a.arg)),
        ]
    )
    assert graph_rewrite(UOp.const(21) * 2, pm) is UOp.const(42)


def test_a_rewrite_cycle_raises_and_names_the_rule() -> None:
    def grow(x: UOp) -> UOp:  # x + 1 -> (x + 1) + 0: the node being rewritten comes back
        return x + 1 + 0

    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(1))), grow)])
    with pytest.raises(RewriteError, match="rewrite cycle: grow"):
        graph_rewrite(X + 1, pm)


def test_a_cycle_through_a_lambda_names_its_line() -> None:
    pm = PatternMatcher([(UPat(Ops.NEG, name="x"), lambda x: neg(neg(x)))])
    with pytest.raises(RewriteError, match=r"rule at test_rewrite\.py:\d+ for UPat\(NEG"):
        graph_rewrite(-X, pm)


def test_endless_growth_raises_after_a_budget() -> None:
    # x + c -> x + (c + 1): always a new node, never a cycle, never a fixed point
    def bump(x: UOp, c: UOp) -> UOp:
        return x + UOp.const(c.arg + 1)

    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat(Ops.PARAM, name="x"), UPat.cvar("c"))), bump)])
    with pytest.raises(RewriteError, match=r"does not reach a fixed point .* most fired: bump"):
        graph_rewrite(X + 0, pm)


def test_a_rewrite_that_fires_few_rules_does_not_walk_the_graph_to_size_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The budget grows with the graph, but counting the graph's nodes is a walk over all of it: a kernel's
    opts run hundreds of small rewrites, and the walks cost as much as the rewrites (notebook entry 96)."""

    def no_walk(self: UOp) -> list[UOp]:
        raise AssertionError("graph_rewrite walked the whole graph to size its budget")

    monkeypatch.setattr(UOp, "toposort", no_walk)
    g = (UOp.const(4) * 1 + 0) * (UOp.const(5) + 0) + UOp.const(2) * 3
    assert graph_rewrite(g, _fold) is UOp.const(26)


def test_rewrite_keeps_the_value_of_a_closed_program() -> None:
    # rewriting with _fold and evaluating with the interpreter agree with Python on a small closed graph
    g = (UOp.const(4) * 1 + 0) * (UOp.const(5) + 0) + UOp.const(2) * 3
    assert run(graph_rewrite(g, _fold)).arg == (4 * 1 + 0) * (5 + 0) + 2 * 3
    assert graph_rewrite(g, _fold) is UOp.const(26)


def test_ctx_is_shared_across_the_whole_rewrite() -> None:
    seen: list[Any] = []

    def count(x: UOp, ctx: list[Any]) -> None:
        ctx.append(x.arg)

    graph_rewrite(sink(X, Y, X + Y), PatternMatcher([(UPat(Ops.PARAM, name="x"), count)]), ctx=seen)
    assert sorted(seen) == [0, 1]
    assert len(toposort(sink(X, Y, X + Y))) == 4
