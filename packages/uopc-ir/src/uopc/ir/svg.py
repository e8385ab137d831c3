"""Graphs drawn as SVG by a small layered layout in Python, for pages that must work with no tool and no network.

The picture reads like `to_mermaid`'s: the root on top, every arrow pointing up from a source to its user,
and an arrow's end on the user's box placed by operand order (the first operand's arrow ends on the left).
A node's layer is its longest path to the root. An arrow that skips layers passes through a waypoint on each
layer it crosses, so that ordering each layer by the mean position of its neighbours (a few sweeps down and
up) keeps arrows out of boxes and few of them crossing; then each layer's boxes are placed as near as they
may be to their neighbours, in that order, without overlapping (a least-squares fit, pool adjacent violators).

Constants get no box: a user's box lists them among its operands, `mul i32 (·, 8)`, where `·` is an arrow.
A node with many users (a loop's RANGE after an upcast, a buffer every store writes) would fill the picture
with arrows: it is drawn once, without them, under its name in the .uir text (`%3 = range i32 (2)`), and
its users' boxes name it among their operands, `end void (·, %1, %3)`.
A big graph is cut: `max_nodes` nodes are drawn, found depth first from the root (the first statements of
a kernel whole), and a box whose sources were not drawn says how many it has below the cut.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from uopc.ir.errors import UOpError
from uopc.ir.ops import Ops
from uopc.ir.uir import literal_text
from uopc.ir.uop import UOp, toposort
from uopc.ir.viz import node_label

CHAR_WIDTH = 7.4  # pixels per character of 12px monospace, a little more than common fonts need
LINE_HEIGHT = 15
PAD_X, PAD_Y = 8, 5  # text to box edge
GAP_X, GAP_Y = 18, 44  # between boxes on a layer, and between layers
WAYPOINT_GAP = 10  # between an arrow passing a layer and its neighbours there
MARGIN = 12
SWEEPS = 8  # rounds of ordering, and of placing, each one down the layers and back up
HUB_USERS = 4  # a node with this many users in the picture is named in their boxes instead of joined by arrows

# Box colours by what a node is about: memory, loops and reductions, movement, bookkeeping; arithmetic is white.
FILLS: dict[Ops, str] = {
    **dict.fromkeys((Ops.BUFFER, Ops.DEFINE_GLOBAL, Ops.LOAD, Ops.STORE), "#dbeafe"),
    **dict.fromkeys((Ops.RANGE, Ops.END, Ops.ENDRANGE, Ops.REDUCE, Ops.REDUCE_AXIS), "#fde7c8"),
    **dict.fromkeys((Ops.DEFINE_ACC, Ops.ACCUMULATE), "#fde7c8"),
    **dict.fromkeys(Ops.MOVEMENT, "#ede1fb"),
    **dict.fromkeys((Ops.SINK, Ops.CONTIGUOUS, Ops.DETACH, Ops.CALL, Ops.PARAM), "#e5e7eb"),
}


@dataclass(frozen=True)
class Picture:
    """A drawn graph: the SVG element's text (for an HTML page: it declares no namespace), how many nodes
    have a box, and how many were cut (constants count as shown: their users' boxes name them)."""

    svg: str
    shown: int
    hidden: int


def draw(root: UOp, max_nodes: int = 150, emphasize: Collection[UOp] = ()) -> Picture:
    """The graph under `root` as an SVG picture of at most `max_nodes` boxes; nodes in `emphasize` get a
    heavy border."""
    if max_nodes < 1:
        raise UOpError(f"draw: max_nodes must be at least 1, got {max_nodes}")
    drawn = chosen_nodes(root, max_nodes)
    layout = Layout(drawn, layer_numbers(root, set(drawn)), hub_names(root, drawn))
    layout.order()
    layout.place()
    hidden = sum(1 for u in toposort(root) if u.op is not Ops.CONST and u not in layout.item_of)
    return Picture(layout.svg(frozenset(emphasize)), len(drawn), hidden)


def chosen_nodes(root: UOp, max_nodes: int) -> list[UOp]:
    """The nodes that get a box: depth first from the root, first operands first, constants skipped, so that
    a cut graph shows its first statements whole rather than the top of every statement."""
    chosen: list[UOp] = []
    seen, stack = {root}, [root]
    while stack and len(chosen) < max_nodes:
        u = stack.pop()
        chosen.append(u)
        for s in reversed(u.src):
            if s not in seen and s.op is not Ops.CONST:
                seen.add(s)
                stack.append(s)
    return chosen


def layer_numbers(root: UOp, drawn: set[UOp]) -> dict[UOp, int]:
    """Each drawn node's layer: its longest path up to the root, which is layer 0."""
    layer = {root: 0}
    for u in reversed(toposort(root, lambda x: [s for s in x.src if s in drawn])):  # users before sources
        for s in u.src:
            if s in drawn:
                layer[s] = max(layer.get(s, 0), layer[u] + 1)
    return layer


def hub_names(root: UOp, drawn: list[UOp]) -> dict[UOp, str]:
    """The drawn nodes with HUB_USERS users or more among the drawn ones, each with its name in to_uir's text."""
    users: dict[UOp, int] = {}
    for u in drawn:
        for s in u.src:
            users[s] = users.get(s, 0) + 1
    numbered = (u for u in toposort(root) if u.op is not Ops.CONST)
    return {u: f"%{n}" for n, u in enumerate(numbered) if users.get(u, 0) >= HUB_USERS and u in users}


def _operand(s: UOp, hubs: dict[UOp, str]) -> str:
    return literal_text(s.arg, s.scalar_dtype) if s.op is Ops.CONST else hubs.get(s, "·")


def box_lines(u: UOp, drawn: Collection[UOp], hubs: dict[UOp, str]) -> list[str]:
    """What a box says: node_label's lines (after its name, for a hub), its constant and hub operands in the
    first, and what the cut hid."""
    lines = node_label(u).split("\n")
    if any(s.op is Ops.CONST or s in hubs for s in u.src):
        lines[0] += f" ({', '.join(_operand(s, hubs) for s in u.src)})"
    if u in hubs:
        lines[0] = f"{hubs[u]} = {lines[0]}"
    cut = sum(1 for s in u.src if s.op is not Ops.CONST and s not in drawn)
    if cut:
        lines.append(f"+{cut} source{'s' * (cut > 1)} not drawn")
    return lines


def fit(want: Sequence[float], spacing: Sequence[float]) -> list[float]:
    """Positions as near `want` as least squares allows, in order, item k at least spacing[k-1] after item
    k-1: with the spacings taken out, the positions must not decrease, and pooling adjacent violators finds
    the best such sequence."""
    offset = list(itertools.accumulate([0.0, *spacing]))
    blocks: list[tuple[float, int]] = []  # (sum of targets, count), each block one shared position
    for target in (w - o for w, o in zip(want, offset, strict=True)):
        total, count = target, 1
        while blocks and blocks[-1][0] / blocks[-1][1] > total / count:
            total, count = total + blocks[-1][0], count + blocks[-1][1]
            blocks.pop()
        blocks.append((total, count))
    flat = [total / count for total, count in blocks for _ in range(count)]
    return [y + o for y, o in zip(flat, offset, strict=True)]


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


class Layout:
    """Boxes and waypoints ("items") on layers. up[i] and down[i] are the items joined to item i on the layer
    above and below; each arrow is a chain of items from its user down to its source."""

    def __init__(self, drawn: list[UOp], layer: dict[UOp, int], hubs: dict[UOp, str]) -> None:
        self.node: list[UOp | None] = []  # the node of each item; None for a waypoint
        self.layer_of: list[int] = []
        self.layers: list[list[int]] = [[] for _ in range(max(layer.values()) + 1)]
        self.up: list[list[int]] = []
        self.down: list[list[int]] = []
        self.item_of = {u: self._add(u, layer[u]) for u in drawn}
        self.edges: list[tuple[int, int, list[int]]] = []  # (operand index, operand count, chain)
        for u in drawn:
            for i, s in enumerate(u.src):
                if s in self.item_of and s not in hubs:
                    ways = [self._add(None, d) for d in range(layer[u] + 1, layer[s])]
                    chain = [self.item_of[u], *ways, self.item_of[s]]
                    for a, b in itertools.pairwise(chain):
                        self.down[a].append(b)
                        self.up[b].append(a)
                    self.edges.append((i, len(u.src), chain))
        self.lines = [box_lines(u, self.item_of, hubs) if u is not None else [] for u in self.node]
        self.width = [len(max(t, key=len)) * CHAR_WIDTH + 2 * PAD_X if t else 0.0 for t in self.lines]
        self.height = [len(t) * LINE_HEIGHT + 2 * PAD_Y if t else 0.0 for t in self.lines]
        self.x = [0.0] * len(self.node)
        self.y = [0.0] * len(self.node)

    def _add(self, u: UOp | None, layer: int) -> int:
        self.node.append(u)
        self.layer_of.append(layer)
        self.layers[layer].append(len(self.node) - 1)
        self.up.append([])
        self.down.append([])
        return len(self.node) - 1

    def order(self) -> None:
        """Sort each layer by the mean place of its neighbours above (going down), then below (going up)."""
        pos = [0.0] * len(self.node)
        for layer in self.layers:
            for k, i in enumerate(layer):
                pos[i] = float(k)
        sweeps = [(range(1, len(self.layers)), self.up), (range(len(self.layers) - 2, -1, -1), self.down)]
        for _, (depths, near) in itertools.product(range(SWEEPS), sweeps):
            for d in depths:
                layer = self.layers[d]
                key = {i: _mean([pos[j] for j in near[i]], pos[i]) for i in layer}
                layer.sort(key=key.__getitem__)
                for k, i in enumerate(layer):
                    pos[i] = float(k)

    def _gap(self, a: int, b: int) -> float:
        """The least distance between the centres of neighbours a and b on one layer."""
        space = GAP_X if self.node[a] is not None and self.node[b] is not None else WAYPOINT_GAP
        return (self.width[a] + self.width[b]) / 2 + space

    def place(self) -> None:
        """x: each layer fitted to its neighbours' places, some rounds; y: layers stacked from the root down."""
        for layer in self.layers:
            spacing = [self._gap(a, b) for a, b in itertools.pairwise(layer)]
            for i, x in zip(layer, fit([0.0] * len(layer), spacing), strict=True):
                self.x[i] = x
        for _, near in itertools.product(range(SWEEPS), (self.up, self.down)):
            for layer in self.layers if near is self.up else reversed(self.layers):
                want = [_mean([self.x[j] for j in near[i]], self.x[i]) for i in layer]
                spacing = [self._gap(a, b) for a, b in itertools.pairwise(layer)]
                for i, x in zip(layer, fit(want, spacing), strict=True):
                    self.x[i] = x
        left = min(self.x[i] - self.width[i] / 2 for i in range(len(self.node)))
        self.x = [x - left + MARGIN for x in self.x]
        top = float(MARGIN)
        for layer in self.layers:
            tall = max([self.height[i] for i in layer] + [LINE_HEIGHT])
            for i in layer:
                self.y[i] = top + tall / 2
            top += tall + GAP_Y

    def svg(self, emphasize: frozenset[UOp]) -> str:
        width = max(self.x[i] + self.width[i] / 2 for i in range(len(self.node))) + MARGIN
        height = max(self.y[i] + self.height[i] / 2 for i in range(len(self.node))) + MARGIN
        parts = [
            f'<svg class="uopc-graph" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
            f'height="{height:.0f}" font-family="monospace" font-size="12">',
            '<g fill="none" stroke="#6b7280" stroke-width="1.2">',
            *(self._arrow(*edge) for edge in self.edges),
            '</g><g fill="#6b7280">',
            *(self._arrowhead(*edge) for edge in self.edges),
            "</g>",
            *(self._box(i, emphasize) for i, u in enumerate(self.node) if u is not None),
            "</svg>",
        ]
        return "\n".join(parts)

    def _end(self, operand: int, operands: int, user: int) -> tuple[float, float]:
        """Where the arrow for `operand` meets its user's box: on the bottom edge, by operand order."""
        left = self.x[user] - self.width[user] / 2
        return left + self.width[user] * (operand + 1) / (operands + 1), self.y[user] + self.height[user] / 2

    def _arrow(self, operand: int, operands: int, chain: list[int]) -> str:
        source = chain[-1]
        points = [(self.x[source], self.y[source] - self.height[source] / 2)]
        points += [(self.x[w], self.y[w]) for w in reversed(chain[1:-1])]
        end_x, end_y = self._end(operand, operands, chain[0])
        points.append((end_x, end_y + 6))  # the arrowhead covers the last 6 pixels
        path = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
        for (ax, ay), (bx, by) in itertools.pairwise(points):
            bend = (ay - by) / 2
            path.append(f"C{ax:.1f},{ay - bend:.1f} {bx:.1f},{by + bend:.1f} {bx:.1f},{by:.1f}")
        return f'<path d="{" ".join(path)}"/>'

    def _arrowhead(self, operand: int, operands: int, chain: list[int]) -> str:
        x, y = self._end(operand, operands, chain[0])
        return f'<path d="M{x:.1f},{y:.1f} l-4,7 h8 z"/>'

    def _box(self, i: int, emphasize: frozenset[UOp]) -> str:
        u = self.node[i]
        assert u is not None
        left, top = self.x[i] - self.width[i] / 2, self.y[i] - self.height[i] / 2
        stroke = 'stroke="#111827" stroke-width="2.5"' if u in emphasize else 'stroke="#4b5563" stroke-width="1"'
        lines = [html.escape(t) for t in self.lines[i]]
        spans = "".join(
            f'<tspan x="{left + PAD_X:.1f}" y="{top + PAD_Y + (k + 0.8) * LINE_HEIGHT:.1f}">{t}</tspan>'
            for k, t in enumerate(lines)
        )
        return (
            f'<g class="node"><title>{chr(10).join(lines)}</title>'
            f'<rect x="{left:.1f}" y="{top:.1f}" width="{self.width[i]:.1f}" height="{self.height[i]:.1f}" rx="4" '
            f'fill="{FILLS.get(u.op, "#ffffff")}" {stroke}/><text fill="#111827">{spans}</text></g>'
        )
