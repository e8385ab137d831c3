"""Exercise B.2: shrink a graph that makes a check fail, while it keeps failing."""

from collections.abc import Callable

from uopc.ir import UOp, substitute


def smaller_versions(root: UOp) -> list[UOp]:
    """Each graph made from root by replacing one node with one of its own sources of the same shape and
    dtype, or with a constant zero of its dtype and shape: the smallest moves first (nearest the root)."""
    out = []
    for node in reversed(root.toposort()):  # the root first: replacing it removes the most
        candidates = [s for s in node.src if s.shape == node.shape and s.dtype is node.dtype]
        if node.scalar_dtype is node.dtype:  # a value, not a pointer
            dt = node.scalar_dtype
            zero = node.const_like(False if dt.is_bool else 0.0 if dt.is_float else 0)
            candidates.append(zero.reshape((1,) * len(node.shape)).expand(node.shape) if node.shape else zero)
        out += [substitute(root, {node: c}) for c in candidates if c is not node]
    return out


def shrink(root: UOp, fails: Callable[[UOp], bool]) -> UOp:
    """The smallest graph found, greedily, for which fails() still holds; fails(root) must hold.

    Iterative (graphs get deep): take the first smaller version that still fails and start again from it,
    until none does. Every accepted move removes at least one node, so it ends."""
    if not fails(root):
        raise ValueError("the graph does not fail: nothing to shrink")
    size = len(root.toposort())
    while True:
        for candidate in smaller_versions(root):
            if len(candidate.toposort()) < size and fails(candidate):
                root, size = candidate, len(candidate.toposort())
                break
        else:
            return root
