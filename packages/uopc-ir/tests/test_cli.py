"""The uopc-ir command: every verb on every shipped example, files and stdin, messages and exit codes.

Exit codes: 0 success, 1 a bad program or an unreadable file, 2 a bad command line (argparse's own).
"""

import ast
import io
import math
import subprocess
import sys
from pathlib import Path

import pytest

from uopc.ir import fmt, parse, range_, sink, to_uir
from uopc.ir.cli import main

EXAMPLE_DIR = Path(__file__).resolve().parents[3] / "examples" / "uir"
EXAMPLES = sorted(EXAMPLE_DIR.glob("*.uir"))
OPEN = {"index_math.uir"}  # reads loop indices: everything but `run` applies


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


# ---- every verb on every example -------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_fmt_and_simplify_print_programs_that_parse(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    code, out, err = cli(capsys, "fmt", str(path))
    assert (code, err) == (0, "")
    assert out == fmt(path.read_text())
    assert parse(out) is parse(path.read_text())
    code, out, err = cli(capsys, "simplify", str(path))
    assert (code, err) == (0, "")
    parse(out)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt_name", ["dot", "mermaid"])
def test_graph_draws_every_example(capsys: pytest.CaptureFixture[str], path: Path, fmt_name: str) -> None:
    code, out, err = cli(capsys, "graph", "--format", fmt_name, str(path))
    assert (code, err) == (0, "")
    assert out.startswith("digraph uops {" if fmt_name == "dot" else "flowchart BT")


def test_graph_defaults_to_dot(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "graph", str(EXAMPLE_DIR / "call.uir"))[1].startswith("digraph")


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.name not in OPEN], ids=lambda p: p.name)
def test_run_evaluates_every_closed_example(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    code, out, err = cli(capsys, "run", str(path))
    assert (code, err) == (0, "")
    assert out.endswith("\n") and out.strip()


def test_run_values_of_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    softmax = [math.exp(x - 4.0) / sum(math.exp(y - 4.0) for y in xs) for x in xs]
    got = ast.literal_eval(cli(capsys, "run", str(EXAMPLE_DIR / "softmax_row.uir"))[1])  # a Python literal
    assert all(abs(g - w) < 1e-6 for g, w in zip(got, softmax, strict=True))
    assert cli(capsys, "run", str(EXAMPLE_DIR / "call.uir"))[1] == f"{(3 + 1) ** 2 + 3}\n"
    assert cli(capsys, "run", str(EXAMPLE_DIR / "matrix.uir"))[1] == "[5.0, 7.0, 9.0]\n"


def test_simplify_shortens_the_index_example(capsys: pytest.CaptureFixture[str]) -> None:
    # row (i*3 + j) // 3 % 4 is i and column (i*3 + j) % 3 is j, for i < 4 and j < 3
    out = cli(capsys, "simplify", str(EXAMPLE_DIR / "index_math.uir"))[1]
    assert out == to_uir(sink(range_(4, 0), range_(3, 1)))
    assert len(out.splitlines()) < len(fmt((EXAMPLE_DIR / "index_math.uir").read_text()).splitlines())


def test_run_of_an_open_program_fails_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(EXAMPLE_DIR / "index_math.uir")
    code, out, err = cli(capsys, "run", path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{path}: ") and "loop index" in err


HUGE = """%0 = const 1.0
%1 = reshape %0 : (1, 1)
%2 = expand %1 : (100000, 100000)
%3 = reduce_axis %2 : op=add axes=(0, 1)
"""


def test_run_refuses_a_program_too_large_to_evaluate(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # four lines that expand to 10^10 elements ran until killed
    stdin(monkeypatch, HUGE)
    code, out, err = cli(capsys, "run")
    assert (code, out) == (1, "")
    assert err.startswith("<stdin>: the program has 10,000,000,00") and "UOPC_IR_MAX_ELEMENTS" in err


def test_run_limit_is_an_option(capsys: pytest.CaptureFixture[str]) -> None:
    softmax = str(EXAMPLE_DIR / "softmax_row.uir")
    code, _, err = cli(capsys, "run", "--max-elements", "5", softmax)
    assert code == 1 and "at most 5 element by element" in err
    assert cli(capsys, "run", "--max-elements", "1000", softmax)[0] == 0
    with pytest.raises(SystemExit) as e:
        cli(capsys, "run", "--max-elements", "0", softmax)
    assert e.value.code == 2 and "--max-elements: '0' is not a positive integer" in capsys.readouterr().err


# ---- standard input -------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["run"], ["run", "-"]])
def test_reads_stdin_when_file_is_missing_or_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    stdin(monkeypatch, "%a = const 20\n%b = mul %a, 2\n%c = add %b, 2\n")
    assert cli(capsys, *argv) == (0, "42\n", "")


def test_fmt_and_graph_on_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    stdin(monkeypatch, "%x = const 1\n%dead = add %x, 1\n%y = add %x, 2\n")
    assert cli(capsys, "fmt") == (0, "%0 = add 1, 2\n", "")
    stdin(monkeypatch, "%x = stack 1, 2\n")
    code, out, _ = cli(capsys, "graph", "--format", "mermaid")
    assert code == 0 and out.startswith("flowchart BT")


# ---- errors ---------------------------------------------------------------------------------------------


def test_syntax_error_is_file_line_col_message(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.uir"
    bad.write_text("%0 = const 1\n%1 = add %0 %0\n")
    code, out, err = cli(capsys, "fmt", str(bad))
    assert (code, out) == (1, "")
    assert err.startswith(f"{bad}:2:13: expected ',' between operands")
    assert err.endswith("\n") and err.count("\n") == 1  # one line, no traceback


def test_syntax_error_on_stdin_names_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    stdin(monkeypatch, "%0 = frob 1\n")
    code, _, err = cli(capsys, "run")
    assert code == 1 and err == "<stdin>:1:6: unknown op 'frob'\n"


def test_invalid_node_is_reported_where_it_is_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "types.uir"
    bad.write_text("%0 = const 1\n%1 = add %0, 1.0\n")
    code, _, err = cli(capsys, "run", str(bad))
    assert code == 1
    assert err.startswith(f"{bad}:2:6: ADD: dtype mismatch int32 vs float32")


def test_undefined_value_is_a_bad_program(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    stdin(monkeypatch, "%0 = cast i32 inf\n")
    code, _, err = cli(capsys, "run")
    assert code == 1 and "CAST node has no defined value" in err


@pytest.mark.parametrize("what", ["missing", "directory", "not_utf8"])
def test_unreadable_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, what: str) -> None:
    path = tmp_path / "prog.uir"
    if what == "directory":
        path.mkdir()
    elif what == "not_utf8":
        path.write_bytes(b"%0 = const 1  # \xff\xfe\n")
    code, out, err = cli(capsys, "fmt", str(path))
    assert (code, out) == (1, "")
    assert err.startswith(f"uopc-ir: cannot read {path}: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["graph", "--format", "svg", "-"], ["fmt", "--format", "dot", "-"], ["run", "a", "b"]],
)
def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "usage: uopc-ir" in capsys.readouterr().err


def test_help_lists_the_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert all(verb in out for verb in ("fmt", "simplify", "run", "graph"))


# ---- as a separate process ------------------------------------------------------------------------------


def _module(*args: str, stdin_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uopc.ir.cli", *args],
        input=stdin_text,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_python_dash_m_runs_the_readme_demo() -> None:
    proc = _module("run", str(EXAMPLE_DIR / "softmax_row.uir"))
    assert proc.returncode == 0, proc.stderr
    values = ast.literal_eval(proc.stdout)
    assert len(values) == 4 and abs(sum(values) - 1.0) < 1e-6


def test_python_dash_m_exit_codes() -> None:
    assert _module("fmt", "-", stdin_text="%0 = add 1, 2\n").stdout == "%0 = add 1, 2\n"
    bad = _module("fmt", stdin_text="%0 = add 1,\n")
    assert bad.returncode == 1 and bad.stderr.startswith("<stdin>:1:12: expected an operand")
    assert _module("frobnicate").returncode == 2
