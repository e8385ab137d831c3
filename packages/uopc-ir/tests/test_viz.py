"""Pictures of graphs: one box per node, one arrow per (source, user) pair, labels that say what a node is."""

import re

import pytest

from uopc.ir import UOp, call, param, range_, stack, to_dot, to_mermaid, toposort
from uopc.ir.viz import node_label


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


# ---- quoting: every label reads back as node_label wrote it ---------------------------------------------
# The decoders follow the formats' own rules, not viz.py's tables: in a dot label, `\\` is a backslash, `\"`
# a quote and `\n`, `\l`, `\r` end a line; in Mermaid, `#name;` and `#123;` are character entities and `<br/>`
# ends a line.

DOT_LABEL = re.compile(r'^  n\d+ \[label="((?:[^"\\]|\\.)*)"', re.M)
HTML_NAMES = {"quot": '"', "amp": "&", "lt": "<", "gt": ">"}


def _dot_unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) in "nlr" else m.group(1), text)


def _mermaid_unescape(text: str) -> str:
    def entity(m: re.Match[str]) -> str:
        code = m.group(1)
        return chr(int(code)) if code.isdigit() else HTML_NAMES[code]

    return re.sub(r"#(\w+);", entity, text.replace("<br/>", "\n"))


# printable ASCII without '"' and '#' is what a CALL's name may hold
ODD_NAMES = ["back\\slash", "ends\\", "x\\n", "a<b>&c;", "l\\lr\\r", "amp&amp;", "35;"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_dot_labels_read_back_exactly(name: str) -> None:
    g = call(name, param(0) + 1, UOp.const(2))
    dot = to_dot(g)
    labels = [_dot_unescape(t) for t in DOT_LABEL.findall(dot)]
    assert labels == [node_label(u) for u in toposort(g)]
    assert len(re.findall(r"^  n\d+ \[label=", dot, re.M)) == len(labels)  # no box was cut short by a quote


@pytest.mark.parametrize("name", ODD_NAMES)
def test_mermaid_labels_read_back_exactly(name: str) -> None:
    g = call(name, param(0) + 1, UOp.const(2))
    boxes = re.findall(r'^  n\d+\["([^"]*)"\]$', to_mermaid(g), re.M)
    assert [_mermaid_unescape(t) for t in boxes] == [node_label(u) for u in toposort(g)]
    assert all(re.sub(r"<br/>", "", t).count("<") == 0 and "&" not in t for t in boxes)  # the name adds no markup
