"""The `uopc-ir` command: format, simplify, run and draw .uir programs.

Exit status: 0 on success, 1 when the program is wrong (a syntax error, an invalid node, a program that
cannot be evaluated) or a file cannot be read, 2 for a wrong command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from uopc.ir.errors import UIRSyntaxError, UopcError
from uopc.ir.interpret import run, to_python
from uopc.ir.symbolic import simplify
from uopc.ir.uir import fmt, parse, to_uir
from uopc.ir.viz import to_dot, to_mermaid


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uopc-ir",
        description="Work with uopc IR programs written in the .uir text format.",
        epilog="Each command reads FILE, or standard input when FILE is '-' or missing. "
        "Example: uopc-ir run examples/uir/softmax_row.uir",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    for verb, text in [
        ("fmt", "print the program in canonical form (renumbered, constants inline, dead lines dropped)"),
        ("simplify", "fold constants and simplify integer arithmetic, then print the program"),
        ("run", "evaluate a closed program and print its value"),
        ("graph", "print a picture of the graph as Graphviz dot or Mermaid text"),
    ]:
        sub = verbs.add_parser(verb, help=text, description=text)
        sub.add_argument("file", nargs="?", default="-", metavar="FILE", help="a .uir file, or - for stdin")
        if verb == "graph":
            sub.add_argument("--format", choices=("dot", "mermaid"), default="dot", help="default: dot")
        if verb == "run":
            sub.add_argument(
                "--max-elements",
                type=_positive_int,
                metavar="N",
                help="refuse programs whose nodes hold more than N elements together "
                "(default: $UOPC_IR_MAX_ELEMENTS, or 1,000,000)",
            )
    return parser


def _positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def _execute(args: argparse.Namespace, text: str) -> str:
    if args.verb == "fmt":
        return fmt(text)
    program = parse(text)
    if args.verb == "simplify":
        return to_uir(simplify(program))
    if args.verb == "run":
        return f"{to_python(run(program, args.max_elements))}\n"
    return to_dot(program) if args.format == "dot" else to_mermaid(program)


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    name = "<stdin>" if args.file == "-" else args.file
    try:
        text = _read(args.file)
        sys.stdout.write(_execute(args, text))
    except OSError as e:
        print(f"uopc-ir: cannot read {name}: {e.strerror}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as e:
        print(f"uopc-ir: cannot read {name}: not UTF-8 text (byte {e.start})", file=sys.stderr)
        return 1
    except UIRSyntaxError as e:
        print(f"{name}:{e.line}:{e.col}: {str(e).split(': ', 1)[1]}", file=sys.stderr)
        return 1
    except UopcError as e:  # a node, a rewrite or an evaluation the program asks for that cannot be
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
