"""Graphs drawn as SVG (uopc.ir.draw): the layout's promises, checked on random graphs, and what the boxes say.

A layout promise is checked on the Layout itself (the places of its boxes and waypoints), the text on the
SVG, parsed as XML: a picture that is not well-formed XML would be an escaping bug.
"""

import itertools
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uopc.ir import Ops, UOp, UOpError, call, draw, param, range_, sink, to_uir, toposort
from uopc.ir.svg import GAP_X, WAYPOINT_GAP, Layout, chosen_nodes, fit, hub_names, layer_numbers


def seeded(examples: int) -> settings:
    """Derandomized, as in test_properties.py (test modules do not import each other)."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


COMBINE = (lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a.maximum(b), lambda a, b: a - b * 3)


def random_graph(sizes: Sequence[int], steps: Sequence[tuple[int, int, int]], roots: int) -> UOp:
    """Loop indices combined step by step (operands counted back from the newest node); a SINK of the last few."""
    nodes = [range_(n, axis) for axis, n in enumerate(sizes)]
    for kind, i, j in steps:
        nodes.append(COMBINE[kind % len(COMBINE)](nodes[-1 - i % len(nodes)], nodes[-1 - j % len(nodes)]))
    return sink(*nodes[-roots:])


Recipe = tuple[list[int], list[tuple[int, int, int]], int]
recipes = st.tuples(
    st.lists(st.integers(1, 9), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(0, 6)), max_size=40),
    st.integers(1, 4),
)


def laid_out(root: UOp, max_nodes: int) -> Layout:
    drawn = chosen_nodes(root, max_nodes)
    layout = Layout(drawn, layer_numbers(root, set(drawn)), hub_names(root, drawn))
    layout.order()
    layout.place()
    return layout


@seeded(120)
@given(recipes, st.integers(1, 60))
def test_boxes_on_a_layer_never_overlap_and_arrows_point_up(recipe: Recipe, max_nodes: int) -> None:
    root = random_graph(*recipe)
    layout = laid_out(root, max_nodes)
    for layer in layout.layers:
        for a, b in itertools.pairwise(layer):
            both = layout.node[a] is not None and layout.node[b] is not None
            gap = GAP_X if both else WAYPOINT_GAP
            assert layout.x[b] - layout.x[a] >= (layout.width[a] + layout.width[b]) / 2 + gap - 1e-6
    for _, _, chain in layout.edges:  # user, waypoints, source: one layer down each time, and lower on the page
        layers = [layout.layer_of[i] for i in chain]
        assert layers == list(range(layers[0], layers[0] + len(chain)))
        ys = [layout.y[i] for i in chain]
        assert ys == sorted(ys) and len(set(ys)) == len(ys)
    bottoms = [layout.y[i] + layout.height[i] / 2 for i in layout.layers[0]]
    tops = [layout.y[i] - layout.height[i] / 2 for layer in layout.layers[1:] for i in layer]
    assert not tops or max(bottoms) < min(tops)  # the root's layer is above every other


@seeded(120)
@given(recipes, st.integers(1, 60))
def test_every_node_is_drawn_or_counted_as_cut(recipe: Recipe, max_nodes: int) -> None:
    root = random_graph(*recipe)
    picture = draw(root, max_nodes)
    boxes = ET.fromstring(picture.svg).findall("g[@class='node']")
    not_constants = [u for u in toposort(root) if u.op is not Ops.CONST]
    assert len(boxes) == picture.shown == min(max_nodes, len(not_constants))
    assert picture.shown + picture.hidden == len(not_constants)
    width, height = (float(v) for v in ET.fromstring(picture.svg).get("viewBox", "").split()[2:])
    for rect in ET.fromstring(picture.svg).iter("rect"):
        x, y, w, h = (float(rect.get(k, "nan")) for k in ("x", "y", "width", "height"))
        assert x >= 0 and x + w <= width and y >= 0 and y + h <= height


@seeded(300)
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=8), st.data())
def test_fit_is_the_least_squares_placement(want: list[float], data: st.DataObject) -> None:
    """Against the closed form of isotonic regression: with the spacings taken out, position k is
    max over i <= k of min over j >= k of the mean of the targets i..j."""
    spacing = data.draw(st.lists(st.floats(0, 100), min_size=len(want) - 1, max_size=len(want) - 1))
    got = fit(want, spacing)
    offset = list(itertools.accumulate([0.0, *spacing]))
    target = [w - o for w, o in zip(want, offset, strict=True)]
    n = len(want)
    for k in range(n):
        best = max(min(sum(target[i : j + 1]) / (j - i + 1) for j in range(k, n)) for i in range(k + 1))
        assert got[k] - offset[k] == pytest.approx(best, abs=1e-6)
    for k in range(1, n):
        assert got[k] - got[k - 1] >= spacing[k - 1] - 1e-6


def test_constants_are_written_in_their_users_boxes() -> None:
    i = range_(16, 0)
    picture = draw(sink(i * 8 + 3))
    texts = ["".join(g.itertext()) for g in ET.fromstring(picture.svg).findall("g[@class='node']")]
    assert any("mul i32 (·, 8)" in t for t in texts)
    assert any("add i32 (·, 3)" in t for t in texts)
    assert any("range i32 (16)" in t for t in texts)
    assert not any(t.startswith("const") for t in texts)


def test_a_node_with_many_users_is_named_as_in_the_text_format() -> None:
    i = range_(4, 0)
    root = sink(*(i * k + k for k in range(2, 9)))  # seven products of i
    picture = draw(root)
    texts = ["".join(g.itertext()) for g in ET.fromstring(picture.svg).findall("g[@class='node']")]
    (hub,) = [t for t in texts if " = range" in t]
    name = hub.split(" = ")[0]
    assert f"{name} = range 4 : axis=0 kind=loop" in to_uir(root)  # the same name the .uir text gives it
    assert sum(f"mul i32 ({name}, " in t for t in texts) == 7
    assert picture.svg.count("<path") == 2 * (7 + 7)  # arrows (and heads) from products to adds, adds to the sink


def test_a_cut_graph_shows_its_first_statements_whole_and_says_what_it_cut() -> None:
    stores = [(range_(8, 0) + k) * (k + 2) for k in range(30)]
    root = sink(*stores)
    picture = draw(root, max_nodes=10)
    texts = ["".join(g.itertext()) for g in ET.fromstring(picture.svg).findall("g[@class='node']")]
    assert picture.shown == 10 and picture.hidden == len([u for u in toposort(root) if u.op is not Ops.CONST]) - 10
    assert any("sink void" in t and "sources not drawn" in t for t in texts)
    first = [t for t in texts if "(·, 2)" in t]  # the first statement, (i + 0) * 2, is drawn whole
    assert first and any("range" in t for t in texts)


def test_labels_are_escaped() -> None:
    body = param(0) + param(1)
    root = call("a<b>&c", body, range_(3, 0), range_(4, 1))
    picture = draw(root)
    tree = ET.fromstring(picture.svg)  # well-formed, whatever the label holds
    assert any('"a<b>&c"' in "".join(t.itertext()) for t in tree.iter("text"))
    assert "<b>" not in picture.svg and "&lt;b&gt;&amp;c" in picture.svg


def test_emphasized_nodes_get_a_heavy_border() -> None:
    i = range_(4, 0)
    product = i * 2
    rects = ET.fromstring(draw(sink(product + 1), emphasize=[product]).svg).iter("rect")
    assert [r.get("stroke-width") for r in rects].count("2.5") == 1


def test_a_deep_chain_is_laid_out_without_recursion() -> None:
    x = param(0)
    for _ in range(3000):
        x = x + 1
    picture = draw(x, max_nodes=3001)
    assert picture.shown == 3001 and picture.hidden == 0


def test_max_nodes_must_be_positive() -> None:
    with pytest.raises(UOpError, match="max_nodes must be at least 1, got 0"):
        draw(param(0), max_nodes=0)
