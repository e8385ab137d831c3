"""Exercise 1.1: how many nodes would the graph have if nothing were shared?"""

from uopc.ir import UOp, toposort


def tree_size(root: UOp) -> int:
    """The number of nodes in `root` written out as a tree: every use of a node counts as a copy of it.

    Sources come before their users in a topological order, so one pass can add up each node's sources.
    """
    size: dict[UOp, int] = {}
    for u in toposort(root):
        size[u] = 1 + sum(size[s] for s in u.src)
    return size[root]
