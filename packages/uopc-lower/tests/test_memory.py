"""plan_memory: which buffers of a plan share storage, checked by running random schedules on that storage.

The oracle is a simulation: each step writes a token naming the buffer into its buffer's storage slot,
and checks that every buffer it reads still holds its own token there; after the last step, every output
must still hold its own. A memory plan that lets two buffers share while both are needed fails it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.ir import UOp, dtypes
from uopc.lower import BufferSpec, MemoryPlan, Plan, Step, make_plan, normalize, plan_memory, step_spans

KINDS = [BufferSpec(dtypes.float32, 4), BufferSpec(dtypes.float32, 8), BufferSpec(dtypes.int32, 4)]


@st.composite
def schedules(draw: st.DrawFn) -> Plan:
    """A random DAG in a random valid order: each step writes one or two new buffers from earlier ones."""
    n_inputs = draw(st.integers(1, 3))
    n_steps = draw(st.integers(1, 12))
    kinds = [draw(st.sampled_from(KINDS)) for _ in range(n_inputs)]
    steps = []
    for _ in range(n_steps):
        reads = draw(st.lists(st.integers(0, len(kinds) - 1), min_size=1, max_size=3, unique=True))
        writes = list(range(len(kinds), len(kinds) + draw(st.integers(1, 2))))
        kinds += [draw(st.sampled_from(KINDS)) for _ in writes]
        steps.append(Step(0, (*writes, *reads)))
    made = range(n_inputs, len(kinds))
    outputs = draw(st.lists(st.sampled_from(made), min_size=1, max_size=3, unique=True))
    return Plan(tuple(steps), tuple(kinds), n_inputs, tuple(outputs), make_kernels=tuple)


def simulate(plan: Plan, memory: MemoryPlan) -> None:
    """Run the schedule on `memory`'s slots with tokens; assert every read sees the buffer it asks for, and
    no step sees two buffers in one slot (a kernel's parameters are restrict). A buffer other than an input
    is written by the first step that uses it, and read by the later ones."""
    first = {b: span[0] for b, span in step_spans(plan.steps).items()}
    holds: dict[int, int] = {memory.slot[b]: b for b in range(plan.n_inputs)}
    for i, step in enumerate(plan.steps):
        written = [b for b in step.buffers if b >= plan.n_inputs and first[b] == i]
        slots = {memory.slot[b] for b in step.buffers}
        assert len(slots) == len(step.buffers), f"step {i} would read and write one storage at once"
        for b in step.buffers:
            if b not in written:
                assert holds.get(memory.slot[b]) == b, f"buffer {b} was overwritten before step {i} read it"
        for b in written:
            holds[memory.slot[b]] = b
    for b in plan.outputs:
        assert holds.get(memory.slot[b]) == b, f"output {b} was overwritten before the plan ended"


@settings(max_examples=300, deadline=None)
@given(schedules())
def test_a_memory_plan_never_shares_storage_between_buffers_needed_at_once(plan: Plan) -> None:
    memory = plan_memory(plan)
    simulate(plan, memory)
    for b, slot in enumerate(memory.slot):
        assert memory.sizes[slot] == plan.buffers[b]  # a slot holds one dtype and size
    own = [*range(plan.n_inputs), *plan.outputs]
    assert len({memory.slot[b] for b in own}) == len(own)  # inputs and outputs are never shared
    assert all(memory.slot.count(memory.slot[b]) == 1 for b in own)


@settings(max_examples=100, deadline=None)
@given(schedules())
def test_sharing_uses_no_more_memory_than_one_slot_per_buffer(plan: Plan) -> None:
    shared, separate = plan_memory(plan), plan_memory(plan, share=False)
    simulate(plan, separate)
    assert separate.slot == tuple(range(len(plan.buffers)))
    assert shared.nbytes(plan.n_inputs) <= separate.nbytes(plan.n_inputs)


def test_a_chain_of_same_sized_intermediates_takes_turns_in_two_slots() -> None:
    # x -> a -> b -> c -> d -> out: each intermediate is needed by the next step only
    kind = BufferSpec(dtypes.float32, 4)
    steps = tuple(Step(0, (i + 1, i)) for i in range(5))
    plan = Plan(steps, (kind,) * 6, 1, (5,), make_kernels=tuple)
    memory = plan_memory(plan)
    assert memory.slot == (0, 2, 3, 2, 3, 1)  # out (buffer 5) has slot 1, a and c share, b and d share
    assert len(memory.sizes) == 4


def test_the_memory_plan_of_a_real_plan_passes_the_simulation() -> None:
    h = UOp.buffer(0, 64).reshape((8, 8))
    for _ in range(4):  # each row sum is an intermediate, read by every later step
        h = (h - h.sum([1]).reshape((8, 1)).expand((8, 8))).exp()
    graph, _ = normalize([h])
    plan = make_plan(graph)
    memory = plan_memory(plan)
    assert len(plan.buffers) - plan.n_inputs - len(plan.outputs) >= 2  # it has intermediates to place
    simulate(plan, memory)
