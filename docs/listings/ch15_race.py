"""Chapter 15: a block rotates an array through shared memory; without the barrier the lockstep emulator
computes the right numbers, and reports the race that a real GPU would turn into wrong ones now and then."""

import numpy as np

from uopc.backend.cuda import EmulationError, GPUProgram, Launch, emulate
from uopc.ir import AddrSpace, AxisType, BufferArg, Ops, UOp, dtypes, range_
from uopc.lower import Param

# --8<-- [start:race]
T = 64
lane = range_(T, 0, AxisType.LOCAL)  # threadIdx.x
data, out = UOp.define_global(0, T), UOp.define_global(1, T)
smem = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(AddrSpace.SHARED), (), BufferArg(0, T))


def rotate(barrier: bool) -> GPUProgram:
    """Each thread stores its element into shared memory, then reads its right neighbour's."""
    stored = smem.store(lane, data.load(lane))
    synced = UOp(Ops.BARRIER, smem.dtype, (smem, stored)) if barrier else smem
    result = out.store(lane, synced.load((lane + 1) % T))
    uops: list[UOp] = []
    for u in [*stored.toposort(), *result.toposort()]:  # the store's nodes first, then the load's
        if u not in uops:
            uops.append(u)
    launch = Launch((1, 1, 1), (T, 1, 1), ((AxisType.LOCAL, 0, "threadIdx.x"),))
    params = (Param(0, dtypes.float32, T), Param(1, dtypes.float32, T))
    return GPUProgram("rotate", params, frozenset({1}), tuple(uops), frozenset(), launch)


values = np.arange(T, dtype=np.float32)
for barrier in (True, False):
    result = np.zeros(T, np.float32)
    try:
        emulate(rotate(barrier), [values, result])
        print(f"barrier={barrier}: out[:4] = {result[:4]}")
    except EmulationError as e:
        print(f"barrier={barrier}: EmulationError: {e}")
# --8<-- [end:race]
