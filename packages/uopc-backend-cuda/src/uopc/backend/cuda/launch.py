"""What a GPU launch is: the device's limits, the knobs of the mapping, the grid and block a program runs on,
and the GROUP and LOCAL ranges through which a thread's program reads its place in them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from uopc.ir import AxisType, UOp, range_
from uopc.lower import LinearProgram, LowerError


@dataclass(frozen=True)
class DeviceLimits:
    """What a CUDA device allows a launch (the same on every GPU since compute capability 3.0)."""

    max_threads: int = 1024  # threads per block
    max_block: tuple[int, int, int] = (1024, 1024, 64)  # threads along x, y, z
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)  # blocks along x, y, z
    warp: int = 32  # threads that run each instruction together, and can exchange registers
    max_shared_bytes: int = 48 * 1024  # static shared memory per block


LIMITS = DeviceLimits()


@dataclass(frozen=True)
class GPUOpts:
    """The knobs of the GPU mapping, chosen per kernel like the CPU's upcast and unroll.

    threads: how many threads a block aims for (each output axis gets a divisor of its size).
    reduce_threads: when above 0, the threads of one block share one output's reduction (cooperative).
    tile: for a matmul, the (rows, columns, depth) of the tiles a block stages in shared memory; 0 for none.
    thread_tile: the (rows, columns) of outputs each thread of a tiled matmul keeps in registers.
    tensor_cores: a tiled float16/bfloat16 matmul multiplies 16 x 16 by 16 x 8 tiles with mma.sync.
    """

    threads: int = 256
    reduce_threads: int = 0
    tile: tuple[int, int, int] = (0, 0, 0)
    thread_tile: tuple[int, int] = (4, 4)
    tensor_cores: bool = False


@dataclass(frozen=True)
class Launch:
    """How a GPU program is launched: blocks in the grid and threads in a block along x, y and z, and which
    GROUP or LOCAL range of the program reads which of `blockIdx` and `threadIdx` (by the range's axis)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dims: tuple[tuple[AxisType, int, str], ...]  # (kind, axis, "blockIdx.x") for each GPU range

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    def hardware(self, r: UOp) -> str:
        """What range `r` reads: blockIdx.x, threadIdx.y, ..."""
        return next(name for kind, axis, name in self.dims if (kind, axis) == (r.arg.kind, r.arg.axis))


@dataclass(frozen=True)
class GPUProgram(LinearProgram):
    """A linear program that runs on a GPU: the program of one thread, and how many threads run it."""

    launch: Launch


GPU_KINDS = (AxisType.GROUP, AxisType.LOCAL)


def axis_of(r: UOp) -> int:
    return int(r.arg.axis)


class Grid:
    """Makes the GROUP and LOCAL ranges of a mapping and records which hardware index each one reads."""

    def __init__(self) -> None:
        self.grid, self.block = [1, 1, 1], [1, 1, 1]
        self.dims: list[tuple[AxisType, int, str]] = []
        self.made: list[UOp] = []

    def group(self, size: int, axis: int, dim: int, like: UOp) -> UOp | None:
        if size == 1:
            return None
        if size > LIMITS.max_grid[dim]:
            limit = LIMITS.max_grid[dim]
            raise LowerError(f"GPU mapping: {size} blocks along {'xyz'[dim]} exceed the grid's {limit}")
        self.grid[dim] = size
        return self._make(size, axis, AxisType.GROUP, f"blockIdx.{'xyz'[dim]}", like)

    def local(self, size: int, axis: int, dim: int, like: UOp) -> UOp | None:
        if size == 1:
            return None
        self.block[dim] = size
        return self._make(size, axis, AxisType.LOCAL, f"threadIdx.{'xyz'[dim]}", like)

    def _make(self, size: int, axis: int, kind: AxisType, name: str, like: UOp) -> UOp:
        r = range_(UOp.const(size, like.scalar_dtype), axis, kind)
        self.dims.append((kind, axis, name))
        self.made.append(r)
        return r

    def launch(self) -> Launch:
        grid, block = self.grid, self.block
        return Launch((grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), tuple(self.dims))

    def ordered(self) -> list[UOp]:
        """Every GPU range, blocks before threads: the order in which each thread's program opens them."""
        return sorted(self.made, key=lambda r: (r.arg.kind is AxisType.LOCAL, axis_of(r)))
