"""The stages of the pipeline, as plain immutable values: what each arrow of the compiler takes and returns.

    graph --make_plan--> Plan, whose Kernels each carry their Opts --linearize--> LinearProgram
          --Renderer.render--> Source --Compiler.compile--> Binary --Runtime.load--> Executable

A stage holds everything the next arrow needs, so no arrow reaches back into an earlier one: a renderer gets
a LinearProgram (the ordered nodes, and the facts about them a renderer needs), never a Kernel to linearize
itself. pipeline.py walks the arrows; backend.py says what a backend supplies.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uopc.ir import DType, Ops, UOp, dtypes, vmax
from uopc.lower.opt import Opts
from uopc.lower.rangeify import LowerError


@dataclass(frozen=True)
class Param:
    """One buffer parameter of a kernel. Kernels name their parameters data0, data1, ... by slot."""

    slot: int
    dtype: DType
    size: int

    @property
    def name(self) -> str:
        return f"data{self.slot}"


def kernel_params(kernel: UOp) -> tuple[Param, ...]:
    """The buffers a kernel reads or writes, in slot order; the slots are its argument positions."""
    found = {
        u.arg.slot: Param(u.arg.slot, u.scalar_dtype, u.arg.size)
        for u in kernel.toposort()
        if u.op is Ops.DEFINE_GLOBAL
    }
    if sorted(found) != list(range(len(found))):
        raise LowerError(f"kernel parameters must be numbered 0..n-1 with no gap, got slots {sorted(found)}")
    return tuple(found[s] for s in sorted(found))


@dataclass(frozen=True)
class Kernel:
    """One kernel of a plan: its name, its graph (loops over buffers, as rangeify made it) and the opts
    chosen for it. linearize applies the opts; the graph itself stays as it was, so that another choice of
    opts (a search over them, say) starts from the same kernel."""

    name: str
    ast: UOp
    opts: Opts = field(default_factory=Opts)

    @functools.cached_property
    def params(self) -> tuple[Param, ...]:
        return kernel_params(self.ast)

    @functools.cached_property
    def written(self) -> frozenset[int]:
        """The slots this kernel stores into."""
        return frozenset(u.src[0].arg.slot for u in self.ast.toposort() if u.op is Ops.STORE)


@dataclass(frozen=True)
class Step:
    """One kernel call of a plan: which kernel, and which of the plan's buffers fills each parameter."""

    kernel: int
    buffers: tuple[int, ...]


@dataclass(frozen=True)
class BufferSpec:
    dtype: DType
    size: int


@dataclass(frozen=True)
class Signature:
    """What a caller needs to know about a kernel: its name, its parameters, the slots it writes."""

    name: str
    params: tuple[Param, ...]
    written: frozenset[int]


@dataclass(frozen=True)
class Manifest:
    """A plan as a runtime sees it: each kernel's signature, the calls, the buffers, which are inputs and
    which hold the outputs. No graph: it is what a plan store keeps on disk beside the binary, and a warm
    start runs a plan from it without making the plan's kernels."""

    kernels: tuple[Signature, ...]
    steps: tuple[Step, ...]
    buffers: tuple[BufferSpec, ...]
    n_inputs: int
    outputs: tuple[int, ...]

    def to_json(self) -> str:
        def param(p: Param) -> list[Any]:
            return [p.slot, p.dtype.name, p.size]

        return json.dumps(
            {
                "kernels": [[k.name, [param(p) for p in k.params], sorted(k.written)] for k in self.kernels],
                "steps": [[s.kernel, list(s.buffers)] for s in self.steps],
                "buffers": [[b.dtype.name, b.size] for b in self.buffers],
                "n_inputs": self.n_inputs,
                "outputs": list(self.outputs),
            }
        )

    @staticmethod
    def from_json(text: str) -> Manifest:
        """The manifest `to_json` wrote; a ValueError (or KeyError, TypeError) for text it did not write."""
        d = json.loads(text)
        kernels = tuple(
            Signature(name, tuple(Param(slot, dtypes.by_name(t), size) for slot, t, size in params), frozenset(w))
            for name, params, w in d["kernels"]
        )
        steps = tuple(Step(k, tuple(b)) for k, b in d["steps"])
        buffers = tuple(BufferSpec(dtypes.by_name(t), size) for t, size in d["buffers"])
        return Manifest(kernels, steps, buffers, d["n_inputs"], tuple(d["outputs"]))


@dataclass(frozen=True, eq=False)
class Plan:
    """How to compute a normalized graph: kernels, the buffers they use, and the order of calls.

    Plan buffers are numbered: the graph's inputs first (in the order the normalized graph numbers them),
    then one buffer per output, then intermediates. `outputs[i]` is the plan buffer holding root i.
    A plan is made once per graph structure (PlanCache), so it is compared and hashed by identity: what a
    backend builds from it can be kept by plan.

    The kernels come from `make_kernels`, called the first time they are asked for: make_plan has them
    already, but a plan read back from a plan store (a warm start, pipeline.py) runs from its manifest
    alone, and makes its kernels again only for whoever looks at them (DEBUG=4, the stage viewer).
    """

    steps: tuple[Step, ...]
    buffers: tuple[BufferSpec, ...]
    n_inputs: int
    outputs: tuple[int, ...]
    make_kernels: Callable[[], tuple[Kernel, ...]] = field(repr=False)

    @functools.cached_property
    def kernels(self) -> tuple[Kernel, ...]:
        return self.make_kernels()

    @property
    def manifest(self) -> Manifest:
        """What running the plan needs, without the kernels' graphs."""
        signatures = tuple(Signature(k.name, k.params, k.written) for k in self.kernels)
        return Manifest(signatures, self.steps, self.buffers, self.n_inputs, self.outputs)


@dataclass(frozen=True)
class LinearProgram:
    """A kernel as a renderer gets it: its nodes in program order (a RANGE opens a loop, an ENDRANGE closes
    it), its parameters, and what lowering knows about the program that a renderer may use.

    `strided_axes` are the reduce axes along which some load moves by more than one element per iteration
    (a weight gradient's reduce loop, say): a vector unit would gather those elements one by one.
    `streamed` are the slots it may write with streaming stores, around the cache (opt.streamed_slots): each
    stored once, at the index of the threaded loop, and never loaded. A renderer may ignore it."""

    name: str
    params: tuple[Param, ...]
    written: frozenset[int]  # the slots the program stores into
    uops: tuple[UOp, ...]
    strided_axes: frozenset[int]
    streamed: frozenset[int] = field(default=frozenset(), kw_only=True)  # a GPU's program adds fields after it

    @property
    def signature(self) -> Signature:
        return Signature(self.name, self.params, self.written)

    @functools.cached_property
    def flops(self) -> int:
        """Floating-point operations per run: each float ALU op or accumulation, times its loops' trip counts.
        A loop whose bound varies (a causal attention's, up to the query's index) counts its largest trip
        count: then the flops are an upper bound."""
        trips, total = [1], 0
        for u in self.uops:
            if u.op is Ops.RANGE:
                trips.append(trips[-1] * int(vmax(u.src[0])))
            elif u.op is Ops.ENDRANGE:
                trips.pop()
            elif (u.op in Ops.ALU or u.op is Ops.ACCUMULATE) and u.scalar_dtype.is_float:
                total += trips[-1]
        return total


@dataclass(frozen=True)
class Source:
    """What a renderer wrote: the text of every program of a plan, in the backend's language."""

    text: str


@dataclass(frozen=True)
class Binary:
    """What a compiler built from a source (a shared library, for C): the key its cache stores it under, the
    cached file, and the file's bytes, which a runtime can load from, or store again if the file is gone.

    A compiler that builds in tiers returns a quick build at once, with `later`: the optimized build of the
    same source, still under way. It computes the same values (the source fixes them); a runtime swaps it
    in when it is done, and a plan store keeps it rather than the quick one."""

    key: str
    path: Path
    data: bytes = field(repr=False)
    later: Future[Binary] | None = field(default=None, repr=False, compare=False)
