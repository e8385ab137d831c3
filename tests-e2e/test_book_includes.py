"""The book includes code by qualified name (docs/bookgen/includes.py), and scripts/unmark.py turned the old
snippets sections into such includes: each is given cases it must show right and names it must refuse.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "docs"), str(ROOT / "scripts")]

import unmark  # noqa: E402
from bookgen import includes  # noqa: E402

MODULE = '''"""A module for the tests."""

import functools

# How each op reads.
TABLE = {
    "add": "+",
}
LIMIT: int = 3


class Outer:
    """An outer class."""

    size = 4

    class Inner:
        def method(self) -> int:
            """Four."""
            return 4

    # ---- properties ----
    @property
    def value(self) -> int:
        return 1

    @value.setter
    def value(self, v: int) -> None:
        pass

    def last(self) -> None:
        pass


# fmt: off
# the cache keeps every answer
@functools.cache
def cached(x: int) -> int:
    y = x + 1
    return y
# fmt: on


def helper() -> None:
    def inner() -> None:
        pass
'''


def test_a_method_of_a_nested_class_comes_dedented_with_its_docstring() -> None:
    assert includes.code(MODULE, "Outer.Inner.method", "m.py") == (
        'def method(self) -> int:\n    """Four."""\n    return 4'
    )


def test_a_decorated_function_brings_its_decorators_and_the_comment_above_but_no_pragma() -> None:
    assert includes.code(MODULE, "cached", "m.py") == (
        "# the cache keeps every answer\n@functools.cache\ndef cached(x: int) -> int:\n    y = x + 1\n    return y"
    )


def test_module_level_tables_and_docstrings_are_names() -> None:
    assert includes.code(MODULE, "TABLE", "m.py") == '# How each op reads.\nTABLE = {\n    "add": "+",\n}'
    assert includes.code(MODULE, "LIMIT", "m.py") == "LIMIT: int = 3"
    assert includes.code(MODULE, "__doc__", "m.py") == '"""A module for the tests."""'
    assert includes.code(MODULE, "Outer.size", "m.py") == "size = 4"


def test_a_range_runs_from_a_class_head_to_one_of_its_members() -> None:
    shown = includes.code(MODULE, "Outer..Outer.size", "m.py")
    assert shown == 'class Outer:\n    """An outer class."""\n\n    size = 4'
    assert includes.code(MODULE, "Outer.Inner..Outer.last", "m.py").startswith("class Inner:\n    def method")


def test_a_heading_comment_is_no_part_of_the_definition_below_it() -> None:
    assert includes.definitions(MODULE)["Outer.value"][0][0] == MODULE.split("\n").index("    @property") + 1


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("Outer.missing", "m.py defines no Outer.missing"),
        ("Outer.Inner.methd", "methd (close: Outer.Inner.method,"),
        ("Outer.value", "Outer.value is ambiguous: m.py defines it 2 times"),
        ("helper.x", "m.py defines no helper.x"),  # a function's local names are not definitions
        ("Outer.last..Outer.size", "Outer.size comes before Outer.last in m.py"),
    ],
)
def test_a_name_that_is_missing_or_ambiguous_is_refused_naming_it(names: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        includes.code(MODULE, names, "m.py")


def test_a_function_inside_a_function_is_a_name() -> None:
    assert includes.code(MODULE, "helper.inner", "m.py") == "def inner() -> None:\n    pass"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "packages/p/src/pkg").mkdir(parents=True)
    (tmp_path / "packages/p/src/pkg/mod.py").write_text(MODULE)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts/tool.py").write_text("def main() -> None:\n    pass\n")
    monkeypatch.setattr(includes, "ROOT", tmp_path)
    monkeypatch.setattr(unmark, "ROOT", tmp_path)
    return tmp_path


def test_a_page_include_becomes_the_code_indented_like_the_include(tree: Path) -> None:
    page = marked("??? example", "    ```python", '    --8<-- "@pkg.mod:Outer.Inner.method"', "    ```")
    page += '--8<-- "@scripts/tool.py:main"\n'
    expanded, problems = includes.expand(page)
    assert problems == []
    assert expanded == (
        '??? example\n    ```python\n    def method(self) -> int:\n        """Four."""\n        return 4\n    ```\n'
        "def main() -> None:\n    pass\n"
    )


def test_an_include_that_finds_nothing_is_reported_with_what_was_missing(tree: Path) -> None:
    page = '--8<-- "@pkg.mod:nothing"\n--8<-- "@pkg.gone:f"\n--8<-- "@scripts/gone.py:f"\n--8<-- "docs/x.py:s"\n'
    expanded, problems = includes.expand(page)
    assert problems == [
        '`--8<-- "@pkg.mod:nothing"`: pkg.mod defines no nothing',
        '`--8<-- "@pkg.gone:f"`: there is no module pkg.gone in packages/*/src',
        '`--8<-- "@scripts/gone.py:f"`: there is no file scripts/gone.py',
    ]
    assert expanded.split("\n")[3] == '--8<-- "docs/x.py:s"'  # snippets' own includes are left to snippets


def marked(*lines: str) -> str:
    return "\n".join(lines) + "\n"


SECTIONS = marked(
    "import os",
    "",
    "",
    "# --8<-- [start:two]",
    "def f() -> None:",
    "    pass",
    "",
    "",
    "def g() -> None:",
    "    pass",
    "",
    "",
    "# --8<-- [end:two]",
    "class C:",
    "    # --8<-- [start:head]",
    '    """C."""',
    "",
    "    x = 1",
    "    # --8<-- [end:head]",
    "",
    "    # --8<-- [start:method]",
    "    def m(self) -> None:",
    "        pass",
    "",
    "    # --8<-- [end:method]",
    "",
    "    def n(self) -> None:",
    "        pass",
    "",
    "",
    "# --8<-- [start:call]",
    'os.environ.setdefault("A", "1")',
    "# --8<-- [end:call]",
)


def test_the_converter_names_each_section_and_removes_the_markers_as_a_formatter_would() -> None:
    text, sections = unmark.convert("packages/p/src/pkg/mod.py", SECTIONS)
    assert {s.name: s.names for s in sections} == {"two": "f..g", "head": "C.__doc__..C.x", "method": "C.m", "call": ""}
    assert text == marked(
        "import os",
        "",
        "",
        "def f() -> None:",
        "    pass",
        "",
        "",
        "def g() -> None:",
        "    pass",
        "",
        "",
        "class C:",
        '    """C."""',
        "",
        "    x = 1",
        "",
        "    def m(self) -> None:",
        "        pass",
        "",
        "    def n(self) -> None:",
        "        pass",
        "",
        "",
        'os.environ.setdefault("A", "1")',
    )
    two = next(s for s in sections if s.name == "two")
    assert two.code == two.shown  # the book shows what it showed
    assert unmark.convert("m.py", text)[1] == []  # run again, it finds nothing to do


def test_a_section_from_a_class_line_into_its_body_becomes_a_range_from_the_class() -> None:
    head = marked("# --8<-- [start:head]", "class C:", '    """C."""', "", "    x = 1")
    head += marked("    # --8<-- [end:head]", "    y = 2")
    (section,) = unmark.convert("m.py", head)[1]
    assert section.names == "C..C.x"
    assert section.code == section.shown == 'class C:\n    """C."""\n\n    x = 1'


def test_pages_point_at_the_names_and_a_missing_section_is_reported(tree: Path) -> None:
    page = '```python\n--8<-- "packages/p/src/pkg/mod.py:two"\n--8<-- "packages/p/src/pkg/mod.py:gone"\n```\n'
    converted = {("packages/p/src/pkg/mod.py", "two"): "f..g"}
    text, missing = unmark.rewrite_page(page, "book/a.md", converted, kept=set())
    assert text == '```python\n--8<-- "@pkg.mod:f..g"\n--8<-- "packages/p/src/pkg/mod.py:gone"\n```\n'
    assert missing == ['book/a.md: --8<-- "packages/p/src/pkg/mod.py:gone" names no marked section']
    assert unmark.where("scripts/tool.py") == "scripts/tool.py"
    assert unmark.where("packages/p/src/pkg/__init__.py") == "pkg"


def test_a_marker_back_in_the_source_is_reported(tree: Path) -> None:
    assert includes.markers_in_source() == []
    (tree / "scripts/tool.py").write_text(marked("def main() -> None:", "    # --8<-- [start:x]", "    pass"))
    assert includes.markers_in_source() == [
        "scripts/tool.py:2 has a snippets marker (# --8<-- [start:x]); run `python scripts/unmark.py`"
    ]


def test_the_source_carries_no_markers() -> None:
    assert includes.markers_in_source() == []
