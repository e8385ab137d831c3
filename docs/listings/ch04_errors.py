"""Chapter 4: a .uir text that does not parse is reported with its line, its column and what was expected."""

from uopc.ir import UIRSyntaxError, parse

# --8<-- [start:errors]
bad_programs = [
    "%0 = frob 1, 2",
    "%0 = add %1, 2",
    "%0 = add 1, 2.0",
    "%0 = cast 1",
    "%0 = const 1\n%1 = add %0, 2 $",
    "%0 = stack 1.0, 2.0, 3.0\n%1 = reshape %0 : (2, 2)",
    "%0 = stack 1.0, 2.0\n%1 = reduce_axis %0 : op=max",
    "%0 = const 1\n%0 = const 2",
    "# nothing but a comment",
]
for text in bad_programs:
    try:
        parse(text)
    except UIRSyntaxError as e:
        print(f"{text.splitlines()[e.line - 1]!r:<40} {e}")
# --8<-- [end:errors]
