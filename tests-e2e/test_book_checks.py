"""The checks the book's build makes (docs/bookgen/, scripts/stamp.py): each one catches what it is for.

The build runs them on the real book; here each is given a small case it must pass and one it must refuse.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "docs"), str(ROOT / "scripts")]

import hooks  # noqa: E402
import stamp  # noqa: E402
from bookgen import glossary, notebook, outputs, source, vendor  # noqa: E402


def git(repo: Path, *args: str, when: str | None = None) -> str:
    env = {**os.environ, **({"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when} if when else {})}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def commit_file(repo: Path, path: str, text: str, message: str, when: str | None = None) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message, when=when)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "book@example.com")
    git(tmp_path, "config", "user.name", "book")
    commit_file(tmp_path, "packages/p/src/code.py", "x = 1\n", "code", when="2026-01-01T00:00:00Z")
    commit_file(tmp_path, "README.md", "hello\n", "readme", when="2026-01-02T00:00:00Z")
    monkeypatch.setattr(stamp, "ROOT", tmp_path)
    return tmp_path


def test_a_stamp_line_reads_back_as_the_same_stamp(repo: Path) -> None:
    made = stamp.make(["packages/p/src"])
    assert stamp.parse(made.line()) == made
    assert made.committed == datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    assert not made.dirty and made.measures == ("packages/p/src",) and made.threads >= 1


def test_an_output_goes_stale_when_the_code_it_measures_changes(repo: Path) -> None:
    out = repo / "docs" / "outputs" / "bench.txt"
    stamp.write(out, "| a | b |\n", ["packages/p/src"])
    git(repo, "add", "docs")
    git(repo, "commit", "-q", "-m", "output")
    assert stamp.stale_reason(out) is None
    commit_file(repo, "README.md", "changed\n", "other code")
    assert stamp.stale_reason(out) is None
    commit_file(repo, "packages/p/src/code.py", "x = 2\n", "faster code")
    reason = stamp.stale_reason(out)
    assert reason is not None and "faster code" in reason and "packages/p/src" in reason


def test_a_measurement_of_uncommitted_code_is_refused(repo: Path) -> None:
    (repo / "packages/p/src/code.py").write_text("x = 3\n")
    out = repo / "out.txt"
    stamp.write(out, "", ["packages/p/src"])
    assert "uncommitted" in (stamp.stale_reason(out) or "")


def test_without_the_stamped_commit_the_dates_decide(repo: Path) -> None:
    old = stamp.make(["packages/p/src"])
    gone = stamp.Stamp(**{**old.__dict__, "commit": "0123456789ab"})  # as after a rewritten history
    out = repo / "out.txt"
    out.write_text(gone.line() + "\n")
    assert stamp.stale_reason(out) is None
    commit_file(repo, "packages/p/src/code.py", "x = 4\n", "later change", when="2026-02-01T00:00:00Z")
    assert "later change" in (stamp.stale_reason(out) or "")


def test_an_output_without_a_stamp_is_stale(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("| a | b |\n")
    assert "no stamp" in (stamp.stale_reason(out) or "")


def png_with_text(key: str, text: str) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"tEXt", key.encode() + b"\0" + text.encode())
        + chunk(b"IDAT", zlib.compress(b"\0\0"))
        + chunk(b"IEND", b"")
    )


def test_a_picture_carries_its_stamp_in_a_text_chunk(repo: Path) -> None:
    made = stamp.make(["packages/p/src"])
    picture = repo / "plot.png"
    picture.write_bytes(png_with_text(stamp.PNG_KEY, made.line()))
    assert stamp.read(picture) == made
    picture.write_bytes(png_with_text("Software", "matplotlib"))
    assert stamp.read(picture) is None


def test_a_screenshot_gets_its_stamp_in_a_valid_text_chunk(repo: Path) -> None:
    made = stamp.make(["packages/p/src"])
    plain = png_with_text("Software", "Chromium")
    stamped = stamp.png_with_stamp(plain, made.line())
    assert stamp.png_text(stamped) == {"Software": "Chromium", stamp.PNG_KEY: made.line()}
    pos, kinds = 8, []
    while pos < len(stamped):  # every chunk whole, with a right CRC, and the new one after the header
        length, kind = struct.unpack(">I4s", stamped[pos : pos + 8])
        end = pos + 8 + length
        data, (crc,) = stamped[pos + 8 : end], struct.unpack(">I", stamped[end : end + 4])
        assert crc == zlib.crc32(kind + data)
        kinds.append(kind)
        pos += 12 + length
    assert kinds == [b"IHDR", b"tEXt", b"tEXt", b"IDAT", b"IEND"]
    with pytest.raises(ValueError, match="not a PNG file"):
        stamp.png_with_stamp(b"GIF89a", made.line())


TABLE = """stamp: ...

| setting | GFLOP/s | vs numpy |
| --- | ---: | ---: |
| plain loops | 2.5 | 0.02x |
| tiled | 39.8 | 0.26x |
"""


def test_a_figure_is_the_cell_its_reference_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outputs, "OUTPUTS", tmp_path)
    (tmp_path / "gemm.txt").write_text(TABLE)
    text = 'at {{ out gemm.txt "tiled" "GFLOP/s" }} GFLOP/s, {{ out gemm.txt "plain loops" }} of numpy'
    assert outputs.insert_figures(text) == "at 39.8 GFLOP/s, 0.02x of numpy"
    with pytest.raises(ValueError, match=r"no row 'tiles'; its rows: \['plain loops', 'tiled'\]"):
        outputs.insert_figures('{{ out gemm.txt "tiles" }}')
    with pytest.raises(ValueError, match="no column 'ms'"):
        outputs.insert_figures('{{ out gemm.txt "tiled" "ms" }}')
    with pytest.raises(ValueError, match=r"there is no docs/outputs/other\.txt"):
        outputs.insert_figures('{{ out other.txt "tiled" }}')


def test_a_figure_is_found_in_any_of_an_outputs_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tables of different widths in one file: the second once broke the reader of the first."""
    monkeypatch.setattr(outputs, "OUTPUTS", tmp_path)
    second = """
The slowest kernels:

| kernel | ms | GFLOP/s | share |
| --- | ---: | ---: | ---: |
| r_8 | 3.5 | 0.6 | 1% |
"""
    (tmp_path / "two.txt").write_text(TABLE + second)
    text = '{{ out two.txt "tiled" "GFLOP/s" }} and {{ out two.txt "r_8" "share" }}'
    assert outputs.insert_figures(text) == "39.8 and 1%"


def test_measurements_typed_into_the_prose_are_reported() -> None:
    page = """A step takes 10.9 ms here, and {{ out b.txt "step" }} there.

    A pitfall's history: it went from 25 ms to 12 ms.

```text
12 ms in a listing
```
"""
    assert outputs.typed_figures(page) == ["'10.9 ms' is typed by hand; quote the stamped output with {{ out ... }}"]


NOTES = """# Lab notebook

## 1. Linked both ways

- **Test.** [`test_x.py::test_y`](appendix/d1-uopc-ir.md#packages-uopc-ir-tests-test-x-py).
- **Chapter.** [1. One](book/01-one.md#pitfalls).

## 2. Linked nowhere

- **Test.** None.
"""


def test_notebook_entries_must_name_their_chapter_and_their_test() -> None:
    problems = notebook.check_entries(NOTES)
    assert len(problems) == 2
    assert all("entry 2" in p for p in problems)
    assert "## 1. Linked both ways { #entry-1 }" in notebook.add_entry_anchors(NOTES)
    assert notebook.entries("") == {} and notebook.check_back_links("", [("book/01-one.md", "text")]) == []


def test_a_chapter_an_entry_names_must_link_it_back() -> None:
    forgets = notebook.check_back_links(NOTES, [("book/01-one.md", "a pitfall without its entry")])
    assert forgets == ["book/01-one.md does not link notebook entry 1, whose Chapter line names it"]
    links = "[notebook entry 1](../notes.md#entry-1)"
    assert notebook.check_back_links(NOTES, [("book/01-one.md", links)]) == []
    mentions = notebook.check_back_links(NOTES, [("book/01-one.md", f"{links}, and see notebook entry 2")])
    assert mentions == ["book/01-one.md: 'notebook entry 2' is not a link to the notebook"]


def test_test_and_script_references_resolve_or_are_reported() -> None:
    assert source.resolve("test_uop.py::test_nan_constants_are_one_node") == "packages/uopc-ir/tests/test_uop.py"
    assert source.resolve("test_nan_constants_are_one_node") == "packages/uopc-ir/tests/test_uop.py"
    assert source.resolve("scripts/bench_gemm.py") == "scripts/bench_gemm.py"
    assert source.resolve("uopc.ir") is None
    for dead in ["test_uop.py::test_that_was_renamed", "test_nothing_has_this_name", "test_gone.py"]:
        assert isinstance(source.resolve(dead), ValueError), dead


def test_a_full_path_names_its_own_file_when_two_test_files_share_a_name() -> None:
    """packages/uopc-backend-c/tests and packages/uopc-tensor/tests both hold a test_half_precision.py."""
    tensor = "packages/uopc-tensor/tests/test_half_precision.py"
    assert source.resolve(f"{tensor}::test_float16_sums_and_matmuls_count_past_2048") == tensor
    backend = "packages/uopc-backend-c/tests/test_half_precision.py"
    assert source.resolve(backend) == backend
    assert isinstance(source.resolve(f"{backend}::test_float16_sums_and_matmuls_count_past_2048"), ValueError)


def test_references_become_links_except_in_code_blocks() -> None:
    text = "See `test_uop.py`.\n\n```python\n`test_uop.py`\n```\n\nAnd `test_gone.py::test_x`."
    linked, problems = source.link_references(text, "book/01-uop-graph.md")
    assert "[`test_uop.py`](../appendix/d1-uopc-ir.md#packages-uopc-ir-tests-test-uop-py)" in linked
    assert "```python\n`test_uop.py`\n```" in linked
    assert problems == ["`test_gone.py::test_x` names test_gone.py, which does not exist"]


def test_a_file_that_appendix_d_shows_nowhere_is_reported_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Naming a browser test by its path stopped the build with a bare StopIteration: tests-browser/ was shown
    on no page of Appendix D, and the link had nowhere to point. D.6 shows it now, and any other such file is a
    problem in the list, like a file that does not exist."""
    text = "The browser test `tests-browser/test_site.py` opens every page."
    linked, problems = source.link_references(text, "book/08-kernels-and-plans.md")
    assert not problems
    assert "[`tests-browser/test_site.py`](../appendix/d6-tests-and-scripts.md#tests-browser-test-site-py)" in linked
    monkeypatch.setattr(source, "PAGES", {k: v for k, v in source.PAGES.items() if k != "tests-browser/"})
    linked, problems = source.link_references(text, "book/08-kernels-and-plans.md")
    assert linked == text
    shown_nowhere = "which no page of Appendix D shows"
    assert problems == [f"`tests-browser/test_site.py` names tests-browser/test_site.py, {shown_nowhere}"]


def test_every_definition_has_a_glossary_entry_and_every_entry_a_definition() -> None:
    pages = [
        ("book/01-a.md", "a *node*{ #def-node } and a *graph*{ #def-graph }"),
        (glossary.GLOSSARY, "**node**\n:   one vertex ([1](../book/01-a.md#def-node)) ([x](../book/01-a.md#def-edge))"),
    ]
    assert glossary.check_glossary(pages) == [
        "book/01-a.md defines #def-graph, which the glossary does not list",
        "the glossary links #def-edge, which no page defines",
    ]
    assert glossary.terms(pages[1][1]) == ["node"]


def test_a_vendored_file_must_have_its_recorded_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vendor, "VENDOR", tmp_path / "vendor")
    folder = tmp_path / "vendor" / "lib"
    folder.mkdir(parents=True)
    (folder / "lib.js").write_text("let x = 1;\n")
    digest = hashlib.sha256(b"let x = 1;\n").hexdigest()
    (folder / "SOURCE.txt").write_text(f"lib 1.0\nsha256        {digest}  lib.js\n")
    assert vendor.check_vendored() == []
    (folder / "lib.js").write_text("let x = 2;\n")
    assert len(vendor.check_vendored()) == 1


def test_a_page_showing_a_stale_output_says_so_and_others_do_not() -> None:
    stale = {"bench_gemm.txt": "it measured commit abc, and a later commit changed packages/uopc-lower/src"}
    pages = [
        '# 7. Shapes\n\n--8<-- "docs/outputs/bench_gemm.txt"\n',
        '# 12. MNIST\n\nIt ran at {{ out bench_gemm.txt "none" }}.\n',
        "# 3. Algebra\n\nNo measurements here.\n",
    ]
    shown, quoted, other = (outputs.flag_stale(page, outputs.stale_shown(page, stale)) for page in pages)
    for page in (shown, quoted):
        assert page.startswith("# ")
        assert '!!! warning "Measured on older code: bench_gemm.txt"' in page
        assert "commit abc" in page
    assert "warning" not in other


def test_a_stale_warning_that_quotes_a_commit_naming_notebook_entries_passes_the_notebook_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reason = "it measured commit abc, and commit def Merge branch 'viz'; notebook entries 73-74 changed packages"
    monkeypatch.setattr(hooks, "STALE", {"bench_gemm.txt": reason})
    monkeypatch.setattr(hooks, "PAGES", {})
    page = SimpleNamespace(file=SimpleNamespace(src_uri="book/07-shapes-to-loops.md"))
    shown = hooks.on_page_markdown('# 7. Shapes\n\n--8<-- "docs/outputs/bench_gemm.txt"\n', page, None, None)
    assert "notebook entries 73-74" in shown  # the reader still sees which commit changed the code
    notes = "## 1. An entry\n\n- **Chapter.** [B](appendix/b-testing.md#pitfalls)\n"
    assert notebook.check_back_links(notes, hooks.PAGES.items()) == []


def test_the_test_files_the_book_names_by_file_name_alone_are_unique() -> None:
    """The prose names a test as `test_render.py::test_x`, and the link looks the file up by that name; a
    second package with a file of the same name took the lookup over, and nine links of chapters 5 to 7 became
    errors naming the wrong file (notebook). A name two packages share must be written with its path."""
    names: dict[str, list[str]] = {}
    for path in sorted(ROOT.glob("packages/*/tests/test_*.py")):
        names.setdefault(path.name, []).append(path.parts[-3])
    shared = {name: packages for name, packages in names.items() if len(packages) > 1}
    spans = "".join(p.read_text() for p in sorted((ROOT / "docs").rglob("*.md")))
    named_alone = {name for name in shared if f"`{name}::" in spans or f"`{name}`" in spans}
    assert not named_alone, f"test files the book names without a path, in several packages: {shared}"
