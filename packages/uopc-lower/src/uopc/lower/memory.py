"""Memory planning: which of a plan's buffers may share one allocation.

A plan's intermediates live only while the plan runs, and most only for a few of its steps: written by one
kernel, read by the next few, then dead. Two intermediates whose lifetimes do not overlap can use the same
memory. A buffer's lifetime is the steps from the first that uses it to the last (`step_spans`); an input
is alive from before the first step (the caller filled it), an output until after the last (the caller
reads it), so only intermediates ever share. So is a buffer that one step writes and no step reads (its
reads simplified away): nothing says it is dead, and the C runtime, which checks every sharing against
the plan's steps, counts it as a result.

`plan_memory` assigns each intermediate a storage slot, greedily by first use: a slot whose last user
finished before this buffer's first use is free again. Slots hold buffers of one dtype and size only, so
that sharing needs nothing from a backend but passing the same buffer twice. Assigning intervals to free
slots in order of their start uses as few slots as any assignment can (an interval graph's colouring),
within each dtype and size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from uopc.lower.stages import BufferSpec, Plan, Step


def step_spans(steps: Sequence[Step]) -> dict[int, tuple[int, int]]:
    """Plan buffer -> (first, last) index of the steps that use it, for each buffer some step uses."""
    spans: dict[int, tuple[int, int]] = {}
    for i, step in enumerate(steps):
        for b in step.buffers:
            spans[b] = (spans[b][0], i) if b in spans else (i, i)
    return spans


@dataclass(frozen=True)
class MemoryPlan:
    """Where each plan buffer lives: `slot[b]` is b's storage; buffers with the same slot share it. Slots
    0..n_inputs-1 are the inputs', then come those of buffers that share with nothing (the outputs), then
    the intermediates' storage."""

    slot: tuple[int, ...]
    sizes: tuple[BufferSpec, ...]  # the buffer each slot holds

    def nbytes(self, first: int) -> int:
        """Bytes of the slots from `first` on (the allocations a run makes, from the first non-input)."""
        return sum(s.size * s.dtype.itemsize for s in self.sizes[first:])


def plan_memory(plan: Plan, share: bool = True) -> MemoryPlan:
    """Storage slots for a plan's buffers; with `share` off, every buffer gets its own (to compare)."""
    spans = step_spans(plan.steps)
    results = set(plan.outputs)
    slot: dict[int, int] = {b: b for b in range(plan.n_inputs)}
    sizes: list[BufferSpec] = list(plan.buffers[: plan.n_inputs])
    for b in range(plan.n_inputs, len(plan.buffers)):
        if b in results or b not in spans or spans[b][0] == spans[b][1] or not share:
            slot[b] = len(sizes)
            sizes.append(plan.buffers[b])
    free_after: dict[BufferSpec, list[tuple[int, int]]] = {}  # per kind: (last step of its user, slot)
    shared = sorted((spans[b][0], b) for b in range(len(plan.buffers)) if b not in slot)
    for first, b in shared:
        kind = plan.buffers[b]
        slots = free_after.setdefault(kind, [])
        reusable = [(end, s) for end, s in slots if end < first]
        if reusable:
            end, s = min(reusable)
            slots.remove((end, s))
        else:
            s = len(sizes)
            sizes.append(kind)
        slot[b] = s
        slots.append((spans[b][1], s))
    return MemoryPlan(tuple(slot[b] for b in range(len(plan.buffers))), tuple(sizes))
