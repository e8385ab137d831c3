"""Pictures of graphs: one box per node, one arrow per (source, user) pair, labels that say what a node is."""

import re

from uopc.ir import UOp, call, param, range_, stack, to_dot, to_mermaid, toposort


def _graph() -> UOp:
    i = range_(4, 0)
    shared = i * 3
    return call("say_hi", param(0) + shared + shared, UOp.const(2))  # an edge drawn twice


def test_dot_has_a_box_per_node_and_an_arrow_per_source() -> None:
    g = _graph()
    dot = to_dot(g)
    assert dot.startswith("digraph uops {") and dot.rstrip().endswith("}")
    boxes = re.findall(r"^  n(\d+) \[label=", dot, re.M)
    arrows = re.findall(r"^  n(\d+) -> n(\d+);", dot, re.M)
    nodes = toposort(g)
    assert len(boxes) == len(nodes)
    assert len(arrows) == sum(len(u.src) for u in nodes)  # shared + shared draws two arrows
    assert "call i32\\nsay_hi" in dot
    assert "range i32\\naxis=0 kind=loop" in dot
    assert 'label="const 3", style=filled' in dot


def test_mermaid_has_a_box_per_node_and_an_arrow_per_source() -> None:
    g = stack(1.0, 2.0).reshape((2, 1))
    text = to_mermaid(g)
    assert text.startswith("flowchart BT\n")
    nodes = toposort(g)
    assert len(re.findall(r'^  n\d+\["', text, re.M)) == len(nodes)
    assert len(re.findall(r"^  n\d+ --> n\d+$", text, re.M)) == sum(len(u.src) for u in nodes)
    assert "reshape f32<br/>(2, 1)<br/>[2, 1]" in text  # op and dtype, the arg, the shape
    # every box is one quoted string, whatever its label holds
    boxes = [line for line in to_mermaid(_graph()).splitlines() if "[" in line]
    assert boxes and all(re.fullmatch(r'  n\d+\["[^"]*"\]', line) for line in boxes)
