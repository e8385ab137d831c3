"""Exercise 4.2: which ops does a .uir program use, and how often?"""

from collections import Counter

from uopc.ir import parse, toposort


def op_histogram(text: str) -> dict[str, int]:
    """Distinct nodes per op name (lower case, as the text spells them), constants included."""
    return dict(sorted(Counter(u.op.name.lower() for u in toposort(parse(text))).items()))
