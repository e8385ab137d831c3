"""Chapter 4: the uopc-ir command on the shipped examples, run in-process so the book shows its real output."""

import contextlib
import io
import os
import sys

from uopc.ir.cli import main

os.environ["COLUMNS"] = "100"  # argparse wraps its messages to the terminal width


# --8<-- [start:shell]
def shell(argv: list[str], stdin: str = "") -> None:
    """Print a command line as a shell session would show it, then what the command writes and its exit status."""
    shown = f"echo {stdin.strip()!r} | " if stdin else ""
    print(f"$ {shown}uopc-ir {' '.join(argv)}")
    out, err = io.StringIO(), io.StringIO()
    saved, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
    except SystemExit as e:  # argparse exits on a wrong command line
        status = int(e.code or 0)
    finally:
        sys.stdin = saved
    print(out.getvalue() + err.getvalue(), end="")
    if status:
        print(f"(exit status {status})")
    print()


# --8<-- [end:shell]

# --8<-- [start:session]
shell(["fmt", "examples/uir/softmax_row.uir"])
shell(["run", "examples/uir/softmax_row.uir"])
shell(["run", "examples/uir/call.uir"])
shell(["simplify", "examples/uir/index_math.uir"])
shell(["graph", "--format", "dot", "-"], stdin="%0 = mul 2, 3\n")
# --8<-- [end:session]
# --8<-- [start:failures]
shell(["run", "-"], stdin="%0 = add 1, 2.0\n")
shell(["run", "-"], stdin="%0 = param i32 : 0\n")
shell(["run", "examples/uir/no_such_file.uir"])
shell(["frob", "examples/uir/call.uir"])
# --8<-- [end:failures]
