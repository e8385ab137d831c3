"""Exercise 8.1: which kernels write and read each plan buffer, in call order."""

from uopc.lower import Plan


def buffer_uses(plan: Plan) -> dict[int, tuple[list[str], list[str]]]:
    """Plan buffer -> (names of the kernels that write it, names of those that read it), in step order.

    A parameter is written when its slot is in `Kernel.written`; every other parameter is only read.
    """
    uses: dict[int, tuple[list[str], list[str]]] = {}
    for step in plan.steps:
        kernel = plan.kernels[step.kernel]
        for param, buffer in zip(kernel.params, step.buffers, strict=True):
            writers, readers = uses.setdefault(buffer, ([], []))
            (writers if param.slot in kernel.written else readers).append(kernel.name)
    return dict(sorted(uses.items()))
