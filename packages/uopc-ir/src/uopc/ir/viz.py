"""Pictures of graphs: Graphviz dot and Mermaid text, one box per node, arrows from sources to users."""

from __future__ import annotations

from uopc.ir.ops import Ops
from uopc.ir.uir import ARG_CODECS, dtype_text, literal_text
from uopc.ir.uop import UOp, toposort


def node_label(u: UOp) -> str:
    """What a box says: the op, the dtype, and the arg or constant value."""
    if u.op is Ops.CONST:
        return f"const {literal_text(u.arg, u.scalar_dtype)}"
    label = f"{u.op.name.lower()} {dtype_text(u.dtype)}"
    if u.arg is not None and u.op in ARG_CODECS:
        label += f"\n{ARG_CODECS[u.op][0](u.arg)}"
    if u.shape:
        label += f"\n{list(u.shape)}"
    return label


# Each picture's quoting, in the order applied: a character that an escape introduces is escaped first.
DOT_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"))  # a label is a quoted dot string
MERMAID_ESCAPES = (("#", "#35;"), ('"', "#quot;"), ("&", "#amp;"), ("<", "#lt;"), (">", "#gt;"), ("\n", "<br/>"))


def escape(text: str, escapes: tuple[tuple[str, str], ...]) -> str:
    for char, code in escapes:
        text = text.replace(char, code)
    return text


def to_dot(root: UOp) -> str:
    """Graphviz: `uopc-ir graph prog.uir | dot -Tsvg > prog.svg`."""
    order = toposort(root)
    ids = {u: i for i, u in enumerate(order)}
    lines = ["digraph uops {", "  rankdir=BT;", '  node [shape=box, fontname="monospace"];']
    for u in order:
        text = escape(node_label(u), DOT_ESCAPES)
        style = ', style=filled, fillcolor="#eeeeee"' if u.op is Ops.CONST else ""
        lines.append(f'  n{ids[u]} [label="{text}"{style}];')
    lines += [f"  n{ids[s]} -> n{ids[u]};" for u in order for s in u.src]
    return "\n".join([*lines, "}"]) + "\n"


def to_mermaid(root: UOp) -> str:
    """Mermaid, which Markdown renderers such as the docs site draw in place."""
    order = toposort(root)
    ids = {u: i for i, u in enumerate(order)}
    lines = ["flowchart BT"]
    for u in order:
        text = escape(node_label(u), MERMAID_ESCAPES)
        lines.append(f'  n{ids[u]}["{text}"]')
    lines += [f"  n{ids[s]} --> n{ids[u]}" for u in order for s in u.src]
    return "\n".join(lines) + "\n"
