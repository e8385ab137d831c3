"""No pass recurses over a graph: 200,000-node chains go through every graph walk at the default recursion limit.

A recursive walk would need one Python frame per node and die with RecursionError at depth 1000. The chains
are built once per module (building is a good part of the cost); each test checks one walk, with a value
known from arithmetic. Measured on a 2-core machine: about 17 s for the whole file, a third of it building.
"""

import gc
import sys
from collections.abc import Iterator

import pytest

from uopc.ir import Ops, UOp, draw, dtypes, param, parse, run, simplify, substitute, to_uir, toposort, vmax, vmin

N = 200_000  # ADD nodes in each chain; with the PARAM and the constant that is N + 2 nodes
DEFAULT_RECURSION_LIMIT = 1000  # CPython's


@pytest.fixture(autouse=True)
def _recursion_limit_is_the_default() -> None:
    assert sys.getrecursionlimit() == DEFAULT_RECURSION_LIMIT


@pytest.fixture(scope="module", autouse=True)
def _no_cyclic_gc() -> Iterator[None]:
    """Hundreds of thousands of live nodes, none in a reference cycle: the cyclic collector would only rescan
    them, again and again, as the chains grow (about a fifth of this file's time). Reference counting still
    frees everything."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture(scope="module")
def int_chain() -> UOp:
    """p + 1 + 1 + ... + 1 on an int32 PARAM p, N additions deep."""
    x, one = param(0), UOp.const(1)
    for _ in range(N):
        x = x + one  # a UOp operand: no constant is looked up per step
    return x


@pytest.fixture(scope="module")
def float_chain() -> UOp:
    """p + 1.0 + 1.0 + ... on a float32 PARAM p, N additions deep."""
    x, one = param(0, dtypes.float32), UOp.const(1.0)
    for _ in range(N):
        x = x + one
    return x


@pytest.fixture(scope="module")
def closed_chain(int_chain: UOp) -> UOp:
    """The int chain with p replaced by 5: a closed program whose value is N + 5."""
    return substitute(int_chain, {param(0): UOp.const(5)})


def test_toposort(int_chain: UOp) -> None:
    order = toposort(int_chain)
    assert len(order) == N + 2
    assert order[-1] is int_chain
    assert {order[0], order[1]} == {param(0), UOp.const(1)}


def test_substitute(closed_chain: UOp) -> None:
    depth, x = 0, closed_chain
    while x.src:  # walk the chain down to its bottom
        x, depth = x.src[0], depth + 1
    assert (x, depth) == (UOp.const(5), N)


def test_run(closed_chain: UOp) -> None:
    assert run(closed_chain) is UOp.const(N + 5)


def test_bounds(int_chain: UOp, closed_chain: UOp) -> None:
    assert (vmin(closed_chain), vmax(closed_chain)) == (N + 5, N + 5)
    assert (vmin(int_chain), vmax(int_chain)) == (dtypes.int32.min, dtypes.int32.max)  # p may be anything


def test_simplify_leaves_float_chains_alone(float_chain: UOp) -> None:
    # each + 1.0 rounds: (p + 1.0) + 1.0 is not p + 2.0 for every float32 p, so nothing may be folded
    assert simplify(float_chain) is float_chain


def test_simplify_sorts_sums_of_deep_integer_terms() -> None:
    # a canonical sum orders its terms: comparing two deep terms must not recurse through them
    a, b = param(0, dtypes.int32), param(1, dtypes.int32)
    for i in range(20_000):
        a, b = a ^ i, b ^ (i + 1)
    total = simplify(b + a + 1)
    assert total.op is Ops.ADD and {total.src[0].src[0], total.src[0].src[1]} == {a, b}


def test_text_round_trip(float_chain: UOp) -> None:
    text = to_uir(float_chain)
    assert text.count("\n") == N + 1  # the PARAM and every ADD; the constant 1.0 is written inline
    assert parse(text) is float_chain


def test_draw(int_chain: UOp) -> None:
    # the picture is cut near the root, but finding the cut and counting what it hid walks the whole chain
    picture = draw(int_chain, max_nodes=50)
    assert (picture.shown, picture.hidden) == (50, N + 1 - 50)  # the PARAM and every ADD; the constant is inline
