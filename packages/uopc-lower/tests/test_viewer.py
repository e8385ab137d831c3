"""The stage viewer's page (uopc.lower.stage_page): its structure, its links, its escaping, and that it refers to
nothing outside itself.

The plan is compiled by compile_plan with a backend of three parts written here, whose renderer writes a
C-like function per program (a comment per node, so that a program's text is easy to find) and a function
that runs the steps. The page is parsed with the standard library's HTML parser.
"""

from __future__ import annotations

import dataclasses
import html.parser
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from uopc.ir import Ops, UOp, dtypes, uir_lines
from uopc.lower import (
    Backend,
    Binary,
    CompiledPlan,
    LinearProgram,
    Plan,
    RealizeRecord,
    Source,
    Step,
    compile_plan,
    index_page,
    make_plan,
    normalize,
    stage_page,
)
from uopc.lower.viewer import STAGES, kernel_source, program_listing


class SketchRenderer:
    """A function per program, its body one comment per node, then a function that calls them in step order."""

    def __init__(self, extra: str = "") -> None:
        self.extra = extra

    def render(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        functions = [
            f"void {p.name}(void) {{\n" + "".join(f"  /* {u.op.name} */\n" for u in p.uops) + "}\n" for p in programs
        ]
        calls = "".join(f"  {programs[s.kernel].name}();\n" for s in steps)
        return Source(self.extra + "\n".join(functions) + f"void run_plan(void) {{\n{calls}}}\n")


class NoCompiler:
    def compile(self, source: Source) -> Binary:
        return Binary("sketch", Path("/nonexistent"), source.text.encode())


class NoRuntime:
    def allocate(self, dtype: Any, size: int) -> Any:
        raise NotImplementedError

    def from_numpy(self, array: Any) -> Any:
        raise NotImplementedError

    def to_numpy(self, buffer: Any) -> Any:
        raise NotImplementedError

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Any:
        return None  # the page never runs anything


def softmax_rows(rows: int, cols: int) -> UOp:
    x = UOp.buffer(0, rows * cols, dtypes.float32).reshape((rows, cols))
    e = (x - x.reduce(Ops.MAX, [1]).expand((rows, cols))).exp()
    return e / e.sum([1]).expand((rows, cols))


def record_for(
    graph: UOp, run_seconds: tuple[float, ...] = (), extra: str = "", plan: Plan | None = None
) -> RealizeRecord:
    plan = plan or make_plan(graph)
    compiled: CompiledPlan = compile_plan(plan, Backend("SKETCH", SketchRenderer(extra), NoCompiler(), NoRuntime()))
    return RealizeRecord(1, "SKETCH", graph, plan, compiled, 0.001, run_seconds)


class Page(html.parser.HTMLParser):
    """What the tests look at in a page: ids, links, attributes that load things, and each element's text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.loads: list[str] = []  # src= and friends: anything that would fetch
        self.tags: list[str] = []
        self.open: list[tuple[str, str | None]] = []
        self.text_in: dict[str, list[str]] = {}  # element id -> text inside it
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
            self.text_in[str(found["id"])] = []
        if "href" in found:
            self.hrefs.append(str(found["href"]))
        self.loads += [f"{k}={v}" for k, v in attrs if k in ("src", "srcset", "action", "data", "poster", "xlink:href")]
        if tag not in ("meta", "input", "br", "rect", "path"):
            self.open.append((tag, found.get("id")))

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for _, element in self.open:
            if element is not None:
                self.text_in[element].append(data)

    def text(self, element: str) -> str:
        return "".join(self.text_in[element])


@pytest.fixture(scope="module")
def softmax_page() -> tuple[RealizeRecord, str]:
    graph, _ = normalize([softmax_rows(4, 16)])
    record = record_for(graph, run_seconds=(0.0011, 0.0022, 0.0033, 0.0044))
    return record, stage_page(record)


def test_every_kernel_has_every_stage(softmax_page: tuple[RealizeRecord, str]) -> None:
    record, text = softmax_page
    page = Page(text)
    assert len(record.plan.kernels) == 4  # the max, the exponentials, the sum, the output
    for i, program in enumerate(record.compiled.programs):
        assert f"k{i}" in page.ids
        assert [s for s in page.ids if s.startswith(f"k{i}-")] == [f"k{i}-{suffix}" for suffix, _ in STAGES]
        assert program.name in page.text(f"k{i}")
    assert text.count("<svg") == 1 + 2 * len(record.plan.kernels)  # the tensor graph, each kernel before and after
    assert len(page.ids) == len(set(page.ids))


def test_every_link_is_to_a_place_in_the_page_and_nothing_is_loaded(softmax_page: tuple[RealizeRecord, str]) -> None:
    _, text = softmax_page
    page = Page(text)
    assert page.hrefs and all(h.startswith("#") for h in page.hrefs)
    assert {h[1:] for h in page.hrefs} <= set(page.ids)
    assert not page.loads
    assert not re.search(r"https?:|//[a-z]", text, re.IGNORECASE)  # no address, not even an SVG namespace
    assert page.tags.count("script") == 1 and page.tags.count("style") == 1  # both inline


def test_the_stages_show_each_kernels_program_and_source(softmax_page: tuple[RealizeRecord, str]) -> None:
    record, text = softmax_page
    page = Page(text)
    for i, program in enumerate(record.compiled.programs):
        listing = page.text(f"k{i}-linear")
        assert all(line in listing for _, line in uir_lines(program.uops))
        source = page.text(f"k{i}-source")
        assert f"void {program.name}(void) {{" in source
        assert source.count("/* ") == len(program.uops)  # this program's function, and only it
        assert "run_plan" not in source
    assert page.text("whole-source").count("void ") == len(record.compiled.programs) + 1


def test_times_are_shown_where_measured(softmax_page: tuple[RealizeRecord, str]) -> None:
    record, text = softmax_page
    page = Page(text)
    for s, ms in enumerate(("1.100 ms", "2.200 ms", "3.300 ms", "4.400 ms")):
        assert ms in page.text(f"step-{s}")
        assert ms in page.text(f"k{record.plan.steps[s].kernel}-timing")
    assert "11.000 ms" in page.text("times")  # the run: every step
    assert f"{record.compiled.times.compile * 1e3:.3f} ms" in page.text("times")
    unmeasured = Page(stage_page(dataclasses.replace(record, run_seconds=())))
    assert "not measured" in unmeasured.text("k0-timing") and "not measured" in unmeasured.text("step-0")


def test_source_text_and_names_are_escaped() -> None:
    graph, _ = normalize([softmax_rows(2, 8)])
    plan = make_plan(graph)
    kernels = (dataclasses.replace(plan.kernels[0], name="k<b>&"), *plan.kernels[1:])
    named = dataclasses.replace(plan, make_kernels=lambda: kernels)
    hostile = "/* </pre><script>alert(1)</script> & <svg onload=alert(2)> */\n"
    text = stage_page(record_for(graph, extra=hostile, plan=named))
    page = Page(text)
    assert page.tags.count("script") == 1 and "<b>" not in text and "alert(1)</script>" not in text
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;svg onload" in text
    assert hostile in page.text("whole-source")  # shown as it was written
    assert "k<b>&" in page.text("k0")


def test_a_big_kernel_is_cut_and_the_page_says_so() -> None:
    # 24 columns: no whole vectors, so the tile is scalar, many copies of each statement
    a = UOp.buffer(0, 64 * 32, dtypes.float32).reshape((64, 1, 32)).expand((64, 24, 32))
    b = UOp.buffer(1, 24 * 32, dtypes.float32).reshape((24, 32)).reshape((1, 24, 32))
    graph, _ = normalize([(a * b.expand((64, 24, 32))).sum([2]).reshape((64, 24))])
    record = record_for(graph)
    assert record.plan.kernels[0].opts.upcast and record.plan.kernels[0].opts.vector is None
    page = Page(stage_page(record))
    assert "more not drawn" in page.text("k0-opt") and "more not drawn" not in page.text("k0-graph")


def test_a_packed_matmul_shows_its_copy_kernel_and_its_vector_axis() -> None:
    a = UOp.buffer(0, 128 * 128, dtypes.float32).reshape((128, 1, 128)).expand((128, 128, 128))
    b = UOp.buffer(1, 128 * 128, dtypes.float32).reshape((1, 128, 128)).expand((128, 128, 128))
    graph, _ = normalize([(a * b).sum([2]).reshape((128, 128))])
    page = Page(stage_page(record_for(graph, plan=make_plan(graph, pack=1))))
    assert "E_4_128_32" in page.text("plan") and "vector axis 3 in 16 lanes" in page.text("plan")


def test_program_listing_indents_the_loop_bodies() -> None:
    graph, _ = normalize([softmax_rows(2, 8)])
    program = record_for(graph).compiled.programs[0]
    lines = program_listing(program).splitlines()
    assert len(lines) == len(uir_lines(program.uops))
    depth = [len(line[6:]) - len(line[6:].lstrip()) for line in lines]  # after the position column
    opened = [k for k, line in enumerate(lines) if " = range " in line]
    closed = [k for k, line in enumerate(lines) if " = endrange " in line]
    assert len(opened) == len(closed) == 2
    assert depth[opened[0] + 1] == depth[opened[0]] + 2 and depth[closed[-1]] == depth[opened[0]] == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("void f(int a) {\n  if (a) { a++; }\n}\nvoid g(void) {\n}\n", "void f(int a) {\n  if (a) { a++; }\n}"),
        ("void g(void) {\n  f(1);\n}\nvoid f(void) {\n  x;\n}\n", "void f(void) {\n  x;\n}"),  # a call is no definition
        ("void ff(void) {\n}\n", None),  # another name that starts the same
        ("void f(void);\n", None),
    ],
)
def test_kernel_source_finds_the_definition(text: str, expected: str | None) -> None:
    assert kernel_source(text, "f") == expected


def test_the_index_links_every_page_escaped() -> None:
    page = Page(index_page([("realize-001.html", "realize 1: E_4"), ("realize-002.html", "realize 2: <x>")]))
    assert page.hrefs == ["realize-001.html", "realize-002.html"]
    assert "<x>" not in index_page([("a.html", "<x>")])
