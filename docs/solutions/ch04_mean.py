"""Exercise 4.1: the mean of a row, written by hand in .uir and evaluated."""

from uopc.ir import parse, run, to_python

MEAN = """
# the mean of the row 2, 4, 9
%row  = stack 2.0, 4.0, 9.0
%sum  = reduce_axis %row : op=add axes=(0,)
%mean = div %sum, 3.0
"""


def mean_value() -> object:
    return to_python(run(parse(MEAN)))
