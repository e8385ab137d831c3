"""The stage viewer: one realize as a web page, every kernel of its plan at every stage of the pipeline.

    tensor graph --make_plan--> Plan: Kernels --apply opts--> kernel graphs --linearize--> LinearPrograms
                 --render--> Source --compile--> Binary --load--> Executable --run--> numbers

Because the stages are values, the page is only a printout of them: the tensor graph the realize planned
(the nodes that get a buffer of their own drawn heavy), the plan's steps and buffers, and for each kernel its
graph as rangeify made it, its graph after opts, its linear program, its part of the source and its times.

One self-contained HTML file: styles, script and pictures (SVG, laid out by `uopc.ir.draw`) are inside it, and
it refers to nothing else, so it opens offline, from disk, and can be mailed. Big graphs are cut (MAX_BOXES,
the page says where); the linear program and the source are always whole.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from uopc.ir import Ops, UOp, draw, uir_lines
from uopc.lower.kernelize import materialized
from uopc.lower.opt import Opts, apply_opts
from uopc.lower.pipeline import CompiledPlan
from uopc.lower.stages import LinearProgram, Plan

MAX_BOXES = 100  # boxes per picture: beyond a hundred, a graph is arrows, and its text says more
STAGES = (  # each kernel's tabs: (id suffix, tab name)
    ("graph", "graph"),
    ("opt", "after opts"),
    ("linear", "linear program"),
    ("source", "source"),
    ("timing", "timing"),
)


@dataclass(frozen=True)
class RealizeRecord:
    """What one realize did, for its page: the graph it planned, the plan, the plan compiled on a device,
    and the times measured. run_seconds[s] is step s's kernel run alone; empty when that was not measured."""

    number: int  # the realize's number in its process, from 1
    device: str
    graph: UOp  # the normalized graph (a SINK of shaped roots)
    plan: Plan
    compiled: CompiledPlan
    plan_seconds: float  # normalize and kernelize (the plan cache's lookup, when the plan was cached)
    run_seconds: tuple[float, ...] = ()


def stage_page(record: RealizeRecord) -> str:
    """The page for `record`: a whole HTML document."""
    title = f"uopc realize {record.number}: {_count(len(record.plan.kernels), 'kernel')} on {record.device}"
    return "\n".join(
        [
            '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
            _navigation(record, title),
            f'<main>\n<h1 id="top">{html.escape(title)}</h1>',
            _times(record),
            _plan(record),
            _tensor_graph(record),
            *(_kernel(record, i) for i in range(len(record.plan.kernels))),
            _whole_source(record),
            f"</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        ]
    )


def index_page(pages: Sequence[tuple[str, str]]) -> str:
    """A page that links `pages`, given as (file name, title), in order."""
    items = "\n".join(f'<li><a href="{html.escape(name)}">{html.escape(title)}</a></li>' for name, title in pages)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>uopc stage viewer</title>\n'
        f'<style>{STYLE}</style>\n</head>\n<body>\n<main class="index">\n<h1>uopc stage viewer</h1>\n'
        f"<p>One page per realize that built a plan, in the order they ran.</p>\n<ol>\n{items}\n</ol>\n</main>"
        "\n</body>\n</html>\n"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _speed(flops: int, seconds: float) -> str:
    return f"{flops / seconds / 1e9:.2f} GFLOP/s" if seconds > 0 else ""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], row_ids: Sequence[str] = ()) -> str:
    """An HTML table; cells are HTML already (escape text before), and a cell starting with a digit is a number."""

    def cell(text: str) -> str:
        return f"<td class='num'>{text}</td>" if text[:1].isdigit() else f"<td>{text}</td>"

    ids = [f' id="{i}"' for i in row_ids] or [""] * len(rows)
    lines = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
    lines += [f"<tr{i}>" + "".join(cell(c) for c in row) + "</tr>" for i, row in zip(ids, rows, strict=True)]
    return "\n".join([*lines, "</table>"])


def _navigation(record: RealizeRecord, title: str) -> str:
    kernels = []
    for i, k in enumerate(record.plan.kernels):
        stages = " ".join(f'<a href="#k{i}-{suffix}">{name}</a>' for suffix, name in STAGES)
        kernels.append(f'<li><a href="#k{i}">{html.escape(k.name)}</a><span class="stages">{stages}</span></li>')
    return "\n".join(
        [
            f'<nav id="sidebar">\n<p class="brand"><a href="#top">{html.escape(title)}</a></p>',
            '<p><a href="#times">times</a> · <a href="#plan">plan</a> · <a href="#tensor-graph">tensor graph</a>'
            ' · <a href="#whole-source">whole source</a></p>',
            '<p class="kernels-head">kernels</p>\n<ol start="0">',
            *kernels,
            '</ol>\n<label><input type="checkbox" id="all-stages"> every stage at once</label>\n</nav>',
        ]
    )


def _times(record: RealizeRecord) -> str:
    times = record.compiled.times
    rows = [
        ["plan", _ms(record.plan_seconds), "normalize the graph, cut it into kernels, choose opts (kernelize)"],
        ["linearize", _ms(times.linearize), "apply each kernel's opts, order it into a linear program"],
        ["render", _ms(times.render), "write every program as source text, in one file"],
        ["compile", _ms(times.compile), "build the binary (or find it in the compiler's cache)"],
        ["load", _ms(times.load), "load the binary, ready to run the plan's steps"],
    ]
    if record.run_seconds:
        rows.append(["run", _ms(sum(record.run_seconds)), "every step, each kernel run alone and timed"])
    return (
        f'<section id="times">\n<h2>Times</h2>\n{_table(["stage", "time", "what it did"], rows)}\n'
        "<p class='note'>The stage times are for all the plan's kernels together; each kernel's run time is in "
        "its timing tab.</p>\n</section>"
    )


def _opts_text(opts: Opts) -> str:
    parts = [f"upcast {opts.upcast}" if opts.upcast else "", f"unroll {opts.unroll}" if opts.unroll else ""]
    parts.append(f"thread axis {opts.thread}" if opts.thread is not None else "")
    parts.append(f"vector axis {opts.vector[0]} in {opts.vector[1]} lanes" if opts.vector is not None else "")
    return ", ".join(p for p in parts if p) or "none"


def _plan(record: RealizeRecord) -> str:
    plan, programs = record.plan, record.compiled.programs
    rows = []
    for s, step in enumerate(plan.steps):
        kernel, program = plan.kernels[step.kernel], programs[step.kernel]
        seconds = record.run_seconds[s] if record.run_seconds else None
        rows.append(
            [
                str(s),
                f'<a href="#k{step.kernel}">{html.escape(kernel.name)}</a>',
                ", ".join(f"b{b}" for b in step.buffers),
                html.escape(_opts_text(kernel.opts)),
                f"{program.flops:,}",
                "not measured" if seconds is None else _ms(seconds),
                "" if seconds is None else _speed(program.flops, seconds),
            ]
        )
    header = ["step", "kernel", "buffers", "opts", "FLOPs", "run", "speed"]
    return (
        f'<section id="plan">\n<h2>Plan</h2>\n<p>{_count(len(plan.steps), "step")}, run in this order; a step '
        "calls one kernel on plan buffers (its arguments, for parameter slots 0, 1, ... in order).</p>\n"
        f"{_table(header, rows, [f'step-{s}' for s in range(len(rows))])}\n{_buffers(plan)}\n</section>"
    )


def _buffers(plan: Plan) -> str:
    rows = []
    for b, spec in enumerate(plan.buffers):
        role = "input" if b < plan.n_inputs else "intermediate"
        if b in plan.outputs:
            role = ("input, " if b < plan.n_inputs else "") + f"output {plan.outputs.index(b)}"
        rows.append([f"b{b}", spec.dtype.short, f"{spec.size:,}", role])
    table = _table(["buffer", "dtype", "elements", "role"], rows)
    return f"<details>\n<summary>the plan's buffers</summary>\n{table}\n</details>"


WHOLE_GRAPH = "Each kernel's graph below holds the part of it that kernel computes."
WHOLE_KERNEL = "The linear program holds every node."
LEGEND = (
    '<p class="legend"><span class="key mem">memory</span><span class="key loop">loops and reductions</span>'
    '<span class="key move">movement</span><span class="key book">bookkeeping</span><span class="key alu">arithmetic'
    "</span> Arrows point from a value to the node that uses it; a user's operands are in order, left to right. "
    "Constants are written in their users' boxes, <code>mul i32 (·, 8)</code>, where <code>·</code> is an arrow; "
    "a node with many users is drawn once, named, and its users write its name, <code>(·, %3)</code>.</p>"
)


def _picture(root: UOp, whole: str, emphasize: Sequence[UOp] = ()) -> str:
    """A graph's picture with a note on what it holds; if it was cut, the note says so, and where to read the
    `whole` of it."""
    picture = draw(root, MAX_BOXES, emphasize)
    note = f"{_count(picture.shown, 'node')} drawn."
    if picture.hidden:
        note = (
            f"The graph is big: {_count(picture.shown, 'node')} drawn, the first ones found from the root "
            f"(depth first), and {picture.hidden} more not drawn; the boxes that lead to them say so. {whole}"
        )
    return (
        f'<p class="note">{note} <button type="button" class="fit">fit to width</button></p>\n'
        f'<div class="picture">\n{picture.svg}\n</div>'
    )


def _tensor_graph(record: RealizeRecord) -> str:
    return (
        '<section id="tensor-graph">\n<h2>Tensor graph</h2>\n<p>The graph this realize computes, as the Tensor '
        "library built it (shapes, movement ops, reductions), with every buffer renumbered by first use. The "
        "nodes with a heavy border get a buffer of their own (kernelize's <em>materialized</em> nodes); "
        "each kernel stores one or more of them. Every other node is computed inside the kernel that reads "
        f"it.</p>\n{LEGEND}\n{_picture(record.graph, WHOLE_GRAPH, materialized(record.graph))}\n</section>"
    )


def _kernel(record: RealizeRecord, i: int) -> str:
    kernel, program = record.plan.kernels[i], record.compiled.programs[i]
    steps = [s for s, step in enumerate(record.plan.steps) if step.kernel == i]
    called = ", ".join(f'<a href="#step-{s}">step {s}</a>' for s in steps) or "no step"
    params = ", ".join(
        f"{p.name}: {p.dtype.short}[{p.size:,}]" + (" (written)" if p.slot in program.written else "")
        for p in program.params
    )
    opts = html.escape(_opts_text(kernel.opts))
    panels = {
        "graph": f"<p>The kernel as rangeify made it: loops over flat buffers, and index math.</p>\n{LEGEND}\n"
        + _picture(kernel.ast, WHOLE_KERNEL),
        "opt": f"<p>After its opts ({opts}): the graph that linearize orders.</p>\n"
        + _picture(apply_opts(kernel.ast, kernel.opts), WHOLE_KERNEL),
        "linear": f"<p>{_count(len(program.uops), 'node')} in program order; a range opens a loop, and its "
        f"endrange closes it.</p>\n<pre class='code'>{html.escape(program_listing(program))}</pre>",
        "source": _kernel_source(record, program.name),
        "timing": _kernel_times(record, steps, program),
    }
    tabs = "".join(f'<a href="#k{i}-{suffix}">{name}</a>' for suffix, name in STAGES)
    return "\n".join(
        [
            f'<section class="kernel" id="k{i}">\n<h2>Kernel {i}: <code>{html.escape(kernel.name)}</code></h2>',
            f"<p class='facts'>Called by {called}. Parameters {html.escape(params)}. Opts: {opts}.</p>",
            f'<div class="tabs">{tabs}</div>',
            *(
                f'<section class="stage" id="k{i}-{suffix}">\n<h3>{name}</h3>\n{panels[suffix]}\n</section>'
                for suffix, name in STAGES
            ),
            "</section>",
        ]
    )


def program_listing(program: LinearProgram) -> str:
    """A linear program as text: each node's position, then its .uir line, indented by the loops open there."""
    depth, lines = 0, []
    for position, (u, line) in enumerate(uir_lines(program.uops)):
        depth -= u.op is Ops.ENDRANGE
        lines.append(f"{position:4d}  {'  ' * depth}{line}")
        depth += u.op is Ops.RANGE
    return "\n".join(lines)


def kernel_source(text: str, name: str) -> str | None:
    """The part of a plan's source that defines kernel `name`, in a language with braces (C, CUDA): from the
    line that names it and opens a brace to the brace that closes it. None when no line defines it."""
    lines = text.splitlines()
    named = re.compile(rf"\b{re.escape(name)}\s*\(")
    start = next((k for k, line in enumerate(lines) if named.search(line) and line.rstrip().endswith("{")), None)
    if start is None:
        return None
    depth = 0
    for k in range(start, len(lines)):
        depth += lines[k].count("{") - lines[k].count("}")
        if depth <= 0:
            return "\n".join(lines[start : k + 1])
    return "\n".join(lines[start:])


def _kernel_source(record: RealizeRecord, name: str) -> str:
    found = kernel_source(record.compiled.source.text, name)
    if found is None:
        return (
            f"<p>No function named <code>{html.escape(name)}</code> was found in the source: see the "
            '<a href="#whole-source">whole source</a>.</p>'
        )
    return (
        "<p>The function the renderer wrote for this kernel; helpers, and the function that runs the plan's "
        f'steps, are in the <a href="#whole-source">whole source</a>.</p>\n<pre class="code">{html.escape(found)}</pre>'
    )


def _kernel_times(record: RealizeRecord, steps: list[int], program: LinearProgram) -> str:
    rows = [["floating-point operations per run", f"{program.flops:,}"]]
    for s in steps:
        if record.run_seconds:
            seconds = record.run_seconds[s]
            rows.append([f"run in step {s}, alone", f"{_ms(seconds)}, {_speed(program.flops, seconds)}"])
        else:
            rows.append([f"run in step {s}", "not measured"])
    return (
        f"{_table(['measure', 'value'], rows)}\n<p class='note'>A kernel's first run includes first-touch costs "
        '(page faults on new arrays, cold caches). The plan\'s stage times are at the <a href="#times">top</a>: '
        "linearize, render, compile and load work on all its kernels at once.</p>"
    )


def _whole_source(record: RealizeRecord) -> str:
    return (
        '<section id="whole-source">\n<h2>Whole source</h2>\n<p>The source the renderer wrote for the whole plan, '
        "as the compiler got it.</p>\n<details>\n<summary>show the source</summary>\n"
        f'<pre class="code">{html.escape(record.compiled.source.text)}</pre>\n</details>\n</section>'
    )


# The page's look: a sidebar of kernels, tables and code in the main column, pictures that scroll (or fit).
STYLE = """
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: #1f2937; background: #fff; }
#sidebar { position: fixed; top: 0; bottom: 0; left: 0; width: 250px; overflow-y: auto; padding: 12px 14px;
  background: #f3f4f6; border-right: 1px solid #d1d5db; font-size: 13px; box-sizing: border-box; }
#sidebar ol { padding-left: 22px; margin: 4px 0 12px; }
#sidebar li { margin-bottom: 6px; }
#sidebar li > a { word-break: break-all; }
#sidebar .stages { display: block; font-size: 12px; }
#sidebar .stages a { margin-right: 6px; }
.brand { font-weight: 600; }
.kernels-head { margin-bottom: 0; font-weight: 600; }
main.index { margin-left: 0; }
main { margin-left: 250px; padding: 8px 28px 60px; max-width: 1400px; }
h1 { font-size: 22px; }
h2 { font-size: 19px; margin-top: 34px; border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 14px 0 6px; }
a { color: #1d4ed8; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d1d5db; padding: 3px 9px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { color: #4b5563; font-size: 14px; }
pre.code { background: #f8fafc; border: 1px solid #e5e7eb; padding: 10px; overflow: auto; max-height: 75vh;
  font-size: 13px; line-height: 1.35; }
.picture { overflow: auto; max-height: 80vh; border: 1px solid #e5e7eb; background: #fff; }
.picture.fitted svg { width: 100%; height: auto; }
button.fit { font-size: 12px; margin-left: 8px; }
.tabs { display: flex; gap: 4px; border-bottom: 2px solid #d1d5db; margin-top: 10px; }
.tabs a { padding: 5px 12px; border: 1px solid #d1d5db; border-bottom: none; border-radius: 6px 6px 0 0;
  text-decoration: none; color: #374151; background: #f9fafb; }
.tabs a.active { background: #1d4ed8; color: #fff; border-color: #1d4ed8; }
.js .kernel .stage { display: none; }
.js .kernel .stage.active, .js.all .kernel .stage { display: block; }
.legend { font-size: 13px; color: #4b5563; }
.key { display: inline-block; padding: 0 6px; margin-right: 6px; border: 1px solid #4b5563; border-radius: 3px;
  color: #111827; }
.key.mem { background: #dbeafe; } .key.loop { background: #fde7c8; } .key.move { background: #ede1fb; }
.key.book { background: #e5e7eb; } .key.alu { background: #ffffff; }
"""

# Tabs: each kernel shows one stage at a time (all of them without script, or with "every stage at once").
# A tab click changes the address without a jump, so a stage can be linked; following a link opens its stage.
SCRIPT = """
(() => {
  document.body.classList.add("js");
  const show = (id) => {
    const panel = document.getElementById(id);
    if (!panel || !panel.classList.contains("stage")) return;
    const kernel = panel.closest(".kernel");
    for (const p of kernel.querySelectorAll(".stage")) p.classList.toggle("active", p === panel);
    for (const a of kernel.querySelectorAll(".tabs a")) a.classList.toggle("active", a.hash === "#" + id);
  };
  for (const kernel of document.querySelectorAll(".kernel")) show(kernel.querySelector(".stage").id);
  for (const tab of document.querySelectorAll(".tabs a")) {
    tab.addEventListener("click", (event) => {
      event.preventDefault();
      history.replaceState(null, "", tab.hash);
      show(tab.hash.slice(1));
    });
  }
  const follow = () => { if (location.hash) show(decodeURIComponent(location.hash.slice(1))); };
  window.addEventListener("hashchange", follow);
  follow();
  for (const button of document.querySelectorAll("button.fit")) {
    button.addEventListener("click", () => {
      const box = button.parentElement.nextElementSibling;
      box.classList.toggle("fitted");
      button.textContent = box.classList.contains("fitted") ? "actual size" : "fit to width";
    });
  }
  document.getElementById("all-stages").addEventListener("change", (event) => {
    document.body.classList.toggle("all", event.target.checked);
  });
})();
"""
