"""The emulator: a GPU program run on the CPU, every thread of a block in lockstep, as numpy vectors.

A thread's program has no branches that differ between threads (the mapping keeps every loop the same
length for all of them), so the threads of a block can run it together, one instruction at a time: each
value of the program is a vector with one entry per thread. Blocks are independent, so several run side by
side in the same vectors. Shared memory is an array per block, a barrier is a point where the emulator
forgets which thread touched which element, and a warp shuffle reads another entry of the vector.

What a real GPU would not report, the emulator does: a load or store outside its buffer, a shared-memory
element one thread reads or writes while another writes it with no barrier between (a race, which on a
GPU gives whatever the timing gives), threads storing different values to one global element, and a
shuffle from a lane that does not exist. Each is an EmulationError naming the kernel, the thread and the
block.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from uopc.backend.c import ArgumentError, CRuntime, build_cached, numpy_dtype
from uopc.backend.cuda.launch import GPU_KINDS, GPUProgram, Launch
from uopc.ir import AddrSpace, DType, Ops, PtrDType, UOp, UopcError, dtypes
from uopc.lower import Binary, LinearProgram, Source, Step

Vector = np.ndarray[Any, Any]


class EmulationError(UopcError, RuntimeError):
    """A GPU program did what a GPU would not report: an access out of bounds, a race, a bad shuffle."""


def value_dtype(dt: DType) -> np.dtype[Any]:
    """The numpy type a value computes in: numpy has no bfloat16, so a float32 that holds one exactly."""
    return np.dtype(np.float32) if dt is dtypes.bfloat16 else np.dtype(dt.np_name)


def round_bfloat16(x: Vector) -> Vector:
    """float32 values rounded to the nearest bfloat16 (ties to even); NaN stays NaN."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    rounded = np.where(np.isnan(x), bits | np.uint32(0x400000), rounded)
    return rounded.astype(np.uint32).view(np.float32)


def bfloat16_bits(x: Vector) -> Vector:
    return (round_bfloat16(x).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def bfloat16_value(bits: Vector) -> Vector:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _floordiv(a: Vector, b: Vector) -> Vector:
    if a.dtype.kind == "f":  # numpy's own float semantics are the IR's: by zero a / b
        with np.errstate(all="ignore"):
            return np.floor_divide(a, b)
    return np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b))).astype(a.dtype)


def _floormod(a: Vector, b: Vector) -> Vector:
    if a.dtype.kind == "f":  # the divisor's sign, fmod's exact remainder; by zero NaN
        with np.errstate(all="ignore"):
            return np.remainder(a, b)
    return np.where(b == 0, 0, np.remainder(a, np.where(b == 0, 1, b))).astype(a.dtype)


# Each op on numpy vectors, with the IR's meaning (floor division, division by zero giving 0, NaN-propagating
# max and min, integers wrapping at their width). numpy computes float16 ops in float32 and rounds back, as
# the IR and the CUDA renderer do; bfloat16 results are rounded by the caller.
ALU: dict[Ops, Callable[..., Vector]] = {
    Ops.NEG: np.negative,
    Ops.EXP: np.exp,
    Ops.LOG: np.log,
    Ops.SQRT: np.sqrt,
    Ops.SIN: np.sin,
    Ops.COS: np.cos,
    Ops.POW: np.power,
    Ops.ADD: np.add,
    Ops.SUB: np.subtract,
    Ops.MUL: np.multiply,
    Ops.DIV: np.true_divide,
    Ops.IDIV: _floordiv,
    Ops.MOD: _floormod,
    Ops.MAX: np.maximum,
    Ops.MIN: np.minimum,
    Ops.CMPLT: np.less,
    Ops.CMPEQ: np.equal,
    Ops.CMPNE: np.not_equal,
    Ops.AND: np.bitwise_and,
    Ops.OR: np.bitwise_or,
    Ops.XOR: np.bitwise_xor,
    Ops.WHERE: np.where,
}
_EXACT = (Ops.NEG, Ops.MAX, Ops.MIN, Ops.WHERE)


def alu(op: Ops, dtype: DType, operands: Sequence[Vector]) -> Vector:
    out = np.asarray(ALU[op](*operands))
    if op not in (*Ops.COMPARISON, Ops.WHERE):
        out = out.astype(value_dtype(dtype), copy=False)
    return round_bfloat16(out) if dtype is dtypes.bfloat16 and op not in _EXACT else out


def cast(x: Vector, to: DType) -> Vector:
    if to.is_bool:
        return np.asarray(x != 0)
    if to is dtypes.bfloat16:
        return round_bfloat16(np.asarray(x).astype(np.float32))
    return np.asarray(x).astype(value_dtype(to))


class Threads:
    """The threads of some blocks, one vector entry each: thread t of block b is entry b*threads + t
    (x fastest, as CUDA numbers the threads of a block when it forms warps)."""

    def __init__(self, launch: Launch, blocks: range) -> None:
        self.launch, self.blocks = launch, blocks
        n = launch.threads
        self.thread = np.tile(np.arange(n), len(blocks))
        self.block = np.repeat(np.arange(blocks.start, blocks.stop), n)
        self.slot = np.repeat(np.arange(len(blocks)), n)  # which block of this group: its shared memory
        self.count = n * len(blocks)

    def index(self, name: str) -> Vector:
        """blockIdx.x, threadIdx.y, ... of every thread."""
        (bx, by, _), (gx, gy, _) = self.launch.block, self.launch.grid
        which, axis = name.split(".")
        linear, (sx, sy) = (self.thread, (bx, by)) if which == "threadIdx" else (self.block, (gx, gy))
        return {"x": linear % sx, "y": linear // sx % sy, "z": linear // (sx * sy)}[axis]

    def name(self, entry: int) -> str:
        """Which thread entry `entry` is, as CUDA numbers it: thread (3, 0, 0) of block (1, 0, 0)."""
        (bx, by, _), (gx, gy, _) = self.launch.block, self.launch.grid
        t, b = int(self.thread[entry]), int(self.block[entry])
        thread, block = (t % bx, t // bx % by, t // (bx * by)), (b % gx, b // gx % gy, b // (gx * gy))
        return f"thread {thread} of block {block}"


class SharedArray:
    """One shared-memory array for each block, and who touched each element since the last barrier:
    the thread that wrote it, and the thread that read it (-1: nobody; -2: several threads)."""

    NOBODY, SEVERAL = -1, -2

    def __init__(self, name: str, blocks: int, size: int, dtype: np.dtype[Any]) -> None:
        self.name, self.size = name, size
        self.data = np.zeros((blocks, size), dtype)
        self.writer = np.full((blocks, size), self.NOBODY)
        self.reader = np.full((blocks, size), self.NOBODY)

    def barrier(self) -> None:
        self.writer.fill(self.NOBODY)
        self.reader.fill(self.NOBODY)

    def load(self, kernel: str, threads: Threads, at: tuple[Vector, Vector], lanes: Vector) -> Vector:
        writer = self.writer[at]
        race = (writer != self.NOBODY) & (writer != threads.thread[lanes])
        _report(
            race,
            kernel,
            threads,
            lanes,
            lambda e: (
                f"reads {self.name}[{at[1][e]}], which thread {writer[e]} of its block wrote with no barrier between"
            ),
        )
        reader = self.reader[at]
        me = threads.thread[lanes]
        self.reader[at] = np.where((reader == self.NOBODY) | (reader == me), me, self.SEVERAL)
        return self.data[at]

    def _conflict(self, index: Vector, who: Vector, what: str) -> Callable[[int], str]:
        def message(e: int) -> str:
            other = "several threads" if who[e] == self.SEVERAL else f"thread {who[e]}"
            return f"writes {self.name}[{index[e]}], which {other} of its block {what} with no barrier between"

        return message

    def store(self, kernel: str, threads: Threads, at: tuple[Vector, Vector], lanes: Vector, value: Vector) -> None:
        me = threads.thread[lanes]
        writer, reader = self.writer[at], self.reader[at]
        for who, what in ((writer, "wrote"), (reader, "read")):
            race = (who != self.NOBODY) & (who != me)
            _report(race, kernel, threads, lanes, self._conflict(at[1], who, what))
        _report(
            _repeated(at[0] * self.size + at[1]),
            kernel,
            threads,
            lanes,
            lambda e: f"writes {self.name}[{at[1][e]}] in the same instruction as another thread of its block",
        )
        self.data[at] = value
        self.writer[at] = me


def _report(bad: Vector, kernel: str, threads: Threads, lanes: Vector, what: Callable[[int], str]) -> None:
    """Raise an EmulationError for the first lane where `bad` holds, naming the kernel and the thread."""
    if np.any(bad):
        e = int(np.flatnonzero(bad)[0])
        raise EmulationError(f"{kernel}: {threads.name(int(lanes[e]))} {what(e)}")


def _repeated(index: Vector, value: Vector | None = None) -> Vector:
    """Which entries access an index an earlier entry accesses too (with a different value, if given)."""
    order = np.argsort(index, kind="stable")
    same = index[order][1:] == index[order][:-1]
    if value is not None:
        a, b = value[order][1:], value[order][:-1]
        same &= (a != b) & ~(_is_nan(a) & _is_nan(b))  # NaN stored twice is the same value
    out = np.zeros(len(index), bool)
    out[order[1:][same]] = True
    return out


def _is_nan(x: Vector) -> Vector:
    return np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)


def _vector(x: Vector, count: int) -> Vector:
    return np.broadcast_to(x, (count,))


def _shared(u: UOp) -> bool:
    return isinstance(u.dtype, PtrDType) and u.dtype.addrspace is AddrSpace.SHARED


class _Run:
    """One group of blocks running one program: the value of every node, as a vector over the threads."""

    def __init__(self, program: GPUProgram, buffers: Sequence[Vector], threads: Threads) -> None:
        self.program, self.buffers, self.threads = program, buffers, threads
        self.values: dict[UOp, Any] = {}
        self.lanes = np.arange(threads.count)
        self.products: dict[tuple[UOp, ...], tuple[list[Any], list[Vector]]] = {}

    def run(self) -> None:
        uops = self.program.uops
        ends = _loop_ends(uops)
        loops: list[tuple[int, int, int]] = []  # (pc of the RANGE, next index, trip count)
        pc = 0
        with np.errstate(all="ignore"):
            while pc < len(uops):
                u = uops[pc]
                if u.op is Ops.RANGE and u.arg.kind not in GPU_KINDS:
                    trips = int(u.src[0].arg)
                    if trips == 0:
                        pc = ends[pc] + 1
                        continue
                    self.values[u] = np.asarray(0, value_dtype(u.scalar_dtype))
                    loops.append((pc, 1, trips))
                elif u.op is Ops.ENDRANGE and u.src[0].arg.kind not in GPU_KINDS:
                    start, i, trips = loops.pop()
                    if i < trips:
                        self.values[uops[start]] = np.asarray(i, value_dtype(uops[start].scalar_dtype))
                        loops.append((start, i + 1, trips))
                        pc = start
                else:
                    self.step(u)
                pc += 1

    def step(self, u: UOp) -> None:
        v = self.values
        if u.op is Ops.CONST:
            v[u] = np.asarray(u.arg, value_dtype(u.scalar_dtype))
        elif u.op is Ops.DEFINE_GLOBAL:
            v[u] = self.define(u)
        elif u.op is Ops.RANGE:
            v[u] = self.threads.index(self.program.launch.hardware(u)).astype(value_dtype(u.scalar_dtype))
        elif u.op is Ops.LOAD:
            v[u] = self.load(u)
        elif u.op is Ops.STORE and len(u.src) == 4:  # only the C backend's packed matmuls make them (pack.py)
            raise EmulationError(f"{self.program.name}: the emulator has no rule for a gated STORE")
        elif u.op is Ops.STORE:
            self.store(u)
        elif u.op is Ops.BARRIER:
            for s in v.values():
                if isinstance(s, SharedArray):
                    s.barrier()
            v[u] = v[u.src[0]]
        elif u.op is Ops.SHUFFLE:
            v[u] = self.shuffle(u)
        elif u.op is Ops.MMA:
            v[u] = self.mma(u)
        elif u.op is Ops.DEFINE_ACC:
            v[u] = v[u.src[0]]
        elif u.op is Ops.ACCUMULATE:
            value = v[u.src[1]] if u.arg is None else alu(u.arg, u.scalar_dtype, [v[u.src[0]], v[u.src[1]]])
            v[u] = v[u.src[0]] = value
        elif u.op is Ops.END:
            if u.src[0].op is not Ops.STORE:
                v[u] = v[u.src[0].src[0]] if u.src[0].op is Ops.ACCUMULATE else v[u.src[0]]
        elif u.op is Ops.CAST:
            v[u] = cast(v[u.src[0]], u.scalar_dtype)
        elif u.op in ALU:
            v[u] = alu(u.op, u.scalar_dtype, [v[s] for s in u.src])
        elif u.op is not Ops.ENDRANGE:
            raise EmulationError(f"{self.program.name}: the emulator has no rule for {u.op.name}")

    def define(self, u: UOp) -> Any:
        if _shared(u):
            dt = value_dtype(u.scalar_dtype)
            return SharedArray(f"smem{u.arg.slot}", len(self.threads.blocks), u.arg.size, dt)
        return self.buffers[u.arg.slot]

    def where(self, u: UOp, verb: str) -> tuple[Vector | None, Vector]:
        """Which threads access memory in `u` (None: all of them; a gated load skips those whose gate is
        false), and the index each accesses (one for all, when it is the same for all); an index outside
        the buffer is an error naming the thread."""
        index, lanes = np.asarray(self.values[u.src[1]]), None
        if u.op is Ops.LOAD and len(u.src) == 3:
            lanes = np.flatnonzero(_vector(self.values[u.src[2]], self.threads.count))
            index = _vector(index, self.threads.count)[lanes]
        size = u.src[0].arg.size if u.src[0].op is Ops.DEFINE_GLOBAL else u.src[0].src[0].arg.size
        if index.size and (index.min() < 0 or index.max() >= size):
            every = self.lanes if lanes is None else lanes
            at = _vector(index, len(every))
            name = self.name(u.src[0])
            bad = (at < 0) | (at >= size)
            outside = f"outside its {size} elements"
            _report(bad, self.program.name, self.threads, every, lambda e: f"{verb} {name}[{at[e]}], {outside}")
        return lanes, index

    def name(self, ptr: UOp) -> str:
        base = ptr if ptr.op is Ops.DEFINE_GLOBAL else ptr.src[0]
        return f"smem{base.arg.slot}" if _shared(base) else f"data{base.arg.slot}"

    def load(self, u: UOp) -> Vector:
        lanes, index = self.where(u, "loads")
        memory = self.values[u.src[0]]
        if isinstance(memory, SharedArray):
            every = self.lanes if lanes is None else lanes
            at = (self.threads.slot[every], _vector(index, len(every)))
            read = memory.load(self.program.name, self.threads, at, every)
        else:
            read = memory[index]
            read = bfloat16_value(read) if u.dtype is dtypes.bfloat16 else read
        if lanes is None:
            return np.asarray(read)
        out = np.zeros(self.threads.count, value_dtype(u.scalar_dtype))
        out[lanes] = read
        return out

    def store(self, u: UOp) -> None:
        _, index = self.where(u, "stores to")
        value = np.asarray(self.values[u.src[2]])
        memory = self.values[u.src[0]]
        if isinstance(memory, SharedArray):
            where = (self.threads.slot, _vector(index, self.threads.count))
            memory.store(self.program.name, self.threads, where, self.lanes, _vector(value, self.threads.count))
            return
        if index.ndim or value.ndim:  # one element written by several threads: they must agree
            at, values = _vector(index, self.threads.count), _vector(value, self.threads.count)
            _report(
                _repeated(at, values),
                self.program.name,
                self.threads,
                self.lanes,
                lambda e: (
                    f"stores to {self.name(u.src[0])}[{at[e]}], which another thread of the same "
                    "instruction stores a different value to"
                ),
            )
            value = value if index.ndim else value.reshape(-1)[0]  # one element, one value: they agree
        memory[index] = bfloat16_bits(value) if u.src[2].dtype is dtypes.bfloat16 else value

    def shuffle(self, u: UOp) -> Vector:
        """Each thread reads `value` from lane `lane` mod 32 of its own warp (CUDA's __shfl_sync)."""
        value = _vector(self.values[u.src[0]], self.threads.count)
        lane = _vector(self.values[u.src[1]], self.threads.count) % 32
        me = self.threads.thread
        source = me - me % 32 + lane
        missing = source >= self.threads.launch.threads
        _report(
            missing,
            self.program.name,
            self.threads,
            self.lanes,
            lambda e: f"shuffles from lane {lane[e]}, which its warp does not have",
        )
        return np.asarray(value[self.lanes - me + source])

    def mma(self, u: UOp) -> Vector:
        """Element u.arg of each lane's share of its warp's product (mma.sync m16n8k16): the four MMA nodes of
        one instruction share their sources, so the warps' products are computed once for all four."""
        sources = [self.values[s] for s in u.src]
        done = self.products.get(u.src)
        if done is None or any(a is not b for a, b in zip(done[0], sources, strict=True)):
            if self.threads.launch.threads % 32:
                raise EmulationError(
                    f"{self.program.name}: mma.sync needs whole warps, the block has "
                    f"{self.threads.launch.threads} threads"
                )
            done = (sources, warp_products(sources, self.threads.thread))
            self.products[u.src] = done
        element: Vector = done[1][u.arg]
        return element


def warp_products(values: Sequence[Any], thread: Vector) -> list[Vector]:
    """mma.sync m16n8k16 as PTX documents it, for every warp at once: lane l of a warp holds elements of A
    (16 x 16), B (16 x 8) and D = A*B (16 x 8) at the places fragment_rows_cols lists, with group l // 4 and
    quad l % 4. The 16-bit inputs multiply exactly in float32; the sums of 16 products are rounded in
    float32 (the hardware's order of addition is not documented, and may differ in the last bit)."""
    count = len(thread)
    lane, warp = thread % 32, np.arange(count) // 32
    group, quad = lane // 4, lane % 4
    a = np.zeros((count // 32, 16, 16), np.float32)
    b = np.zeros((count // 32, 16, 8), np.float32)
    for i in range(8):
        a[warp, group + 8 * ((i // 2) % 2), quad * 2 + i % 2 + 8 * (i // 4)] = _vector(values[i], count)
    for i in range(4):
        b[warp, quad * 2 + i % 2 + 8 * (i // 2), group] = _vector(values[8 + i], count)
    d = np.matmul(a, b)
    return [d[warp, group + 8 * (i // 2), quad * 2 + i % 2] for i in range(4)]


def _loop_ends(uops: Sequence[UOp]) -> dict[int, int]:
    """For each loop's RANGE, the position of its ENDRANGE."""
    ends, opened = {}, []
    for pc, u in enumerate(uops):
        if u.op is Ops.RANGE and u.arg.kind not in GPU_KINDS:
            opened.append(pc)
        elif u.op is Ops.ENDRANGE and u.src[0].arg.kind not in GPU_KINDS:
            ends[opened.pop()] = pc
    return ends


MAX_THREADS_AT_ONCE = 1 << 16  # entries per vector: blocks run in groups of at most this many threads


def emulate(program: GPUProgram, buffers: Sequence[Any]) -> None:
    """Run `program` on `buffers` (numpy arrays, indexed by slot): every block of its grid, in groups."""
    launch = program.launch
    check_buffers(program, buffers)
    blocks = math.prod(launch.grid)
    per_group = max(1, MAX_THREADS_AT_ONCE // launch.threads)
    for first in range(0, blocks, per_group):
        group = range(first, min(blocks, first + per_group))
        _Run(program, buffers, Threads(launch, group)).run()


def check_buffers(program: GPUProgram, buffers: Sequence[Any]) -> None:
    """Each buffer a flat numpy array of its parameter's dtype, with at least its elements (and writeable if
    the kernel writes it): the emulator indexes numpy arrays, and a wrong one would give wrong numbers."""
    if len(buffers) != len(program.params):
        raise ArgumentError(f"{program.name} takes {len(program.params)} buffers, got {len(buffers)}")
    for p, b in zip(program.params, buffers, strict=True):
        want = numpy_dtype(p.dtype)
        if not isinstance(b, np.ndarray) or b.dtype != want or b.ndim != 1 or b.size < p.size:
            got = f"{b.dtype}{list(b.shape)}" if isinstance(b, np.ndarray) else type(b).__name__
            raise ArgumentError(f"{program.name}: {p.name} must be a flat {want} array of {p.size} elements, got {got}")
        if p.slot in program.written and not b.flags.writeable:
            raise ArgumentError(f"{program.name}: {p.name} is written by the kernel, but the array is read-only")


class EmuCompiler:
    """The emulator builds nothing: a plan's binary is its CUDA source, kept in the kernel cache by its hash
    (so that a plan compiles once, and DEBUG=4 shows exactly the file a GPU would build)."""

    def compile(self, source: Source) -> Binary:
        key = hashlib.sha256(b"uopc-emu\0" + source.text.encode()).hexdigest()
        return build_cached(key, lambda folder: source.text.encode())


class EmuExecutable:
    """A plan's GPU programs, each launched by emulation in the order of the plan's steps."""

    def __init__(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> None:
        self.programs = [p for p in programs if isinstance(p, GPUProgram)]
        if len(self.programs) != len(programs):
            raise ArgumentError("the emulator runs GPU programs (mapped by lower_gpu), not C programs")
        self.steps = list(steps)

    def run(self, buffers: Sequence[Any]) -> None:
        for s in self.steps:
            self.run_kernel(s.kernel, [buffers[b] for b in s.buffers])

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        emulate(self.programs[index], buffers)


class EmuRuntime:
    """The emulator's memory is the C backend's: flat numpy arrays (bfloat16 as uint16 bit patterns)."""

    def __init__(self) -> None:
        self.memory = CRuntime()

    def allocate(self, dtype: DType, size: int) -> Vector:
        return self.memory.allocate(dtype, size)

    def from_numpy(self, array: Any) -> Vector:
        return self.memory.from_numpy(array)

    def to_numpy(self, buffer: Any) -> Vector:
        return self.memory.to_numpy(buffer)

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> EmuExecutable:
        return EmuExecutable(programs, steps)
