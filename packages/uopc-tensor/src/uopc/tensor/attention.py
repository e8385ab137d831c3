"""Attention without the score matrix: the online-softmax kernel, written in UOps, and its backward pass.

The plain composition (`Tensor.scaled_dot_product_attention`) materializes the (L, S) scores of every head:
at 4096 positions that is 64 MiB per head in float32, written once and read twice. Online softmax keeps,
for each query, a running maximum m, a running sum l of exp(s - m) and a running weighted sum o of the
values, rescaling l and o by exp(m_old - m_new) whenever the maximum grows, so one pass over the keys
gives softmax(s) @ v with nothing of size L * S in memory.

That recurrence is no reduction of one value with one op, which is all that kernelize makes from a tensor
graph, so the kernel is written here directly in the IR of a lowered kernel (loops, loads, accumulators
that assign) and goes down the same arrows as every other kernel: opts, linearize, the backend's renderer,
compiler and runtime (`run_kernel`). Its gradient is attached with `custom_gradient`: the backward pass
recomputes the probabilities from the log-sum-exp that the forward kernel saves per query.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from uopc.ir import AxisType, DType, Ops, UOp, dtypes, range_, sink
from uopc.lower import BufferSpec, Kernel, Opts, Plan, Step, compile_plan, get_backend
from uopc.tensor.autodiff import CustomGradient
from uopc.tensor.errors import TensorError
from uopc.tensor.realize import realizer

if TYPE_CHECKING:
    from uopc.tensor.tensor import Tensor


def run_kernel(
    kernel: Kernel, inputs: Sequence[Tensor], outputs: Sequence[tuple[tuple[int, ...], DType]]
) -> list[Tensor]:
    """Run a kernel written in UOps on tensors: the custom-kernel entry of the tensor library.

    The kernel's buffer slots are its outputs first (0 .. len(outputs) - 1), then its inputs, in order; each
    input is computed into a buffer of its own first if it is not one already. The kernel is compiled once per
    device (kept in `realizer.kernels`) and returns one new, computed tensor per output."""
    if realizer.recording is not None:  # its launch is not in the recording: a replay would skip it
        raise TensorError(
            f"capture: {realizer.recording.name} runs the kernel {kernel.name} written in UOps (run_kernel, as "
            "the online and tiled attention do), which a replay cannot repeat yet: use kernel='plain' inside a "
            "captured step, or call the step without capture"
        )
    device = inputs[0].device
    arrays = [_buffer_of(t, p.dtype) for t, p in zip(inputs, kernel.params[len(outputs) :], strict=True)]
    specs = tuple(BufferSpec(dt, math.prod(shape)) for shape, dt in outputs)
    specs += tuple(BufferSpec(p.dtype, p.size) for p in kernel.params[len(outputs) :])
    backend = get_backend(device)
    compiled = realizer.kernels.get((kernel.ast, device))
    if compiled is None:
        n = len(specs)
        plan = Plan((Step(0, tuple(range(n))),), specs, 0, tuple(range(len(outputs))), lambda: (kernel,))
        compiled = realizer.kernels[(kernel.ast, device)] = compile_plan(plan, backend)
    results = [backend.runtime.allocate(spec.dtype, spec.size) for spec in specs[: len(outputs)]]
    compiled.executable.run([*results, *arrays])
    tensor = type(inputs[0])
    return [
        tensor(realizer.new_buffer(a, dt).reshape(shape), device=device)
        for a, (shape, dt) in zip(results, outputs, strict=True)
    ]


def _buffer_of(t: Tensor, dtype: DType) -> object:
    """The backend array holding t's elements in order, computing them into one if they are not."""
    if t.dtype is not dtype:
        raise TensorError(f"run_kernel: an input is {t.dtype.name}, the kernel reads {dtype.name}")
    value = computed(t).uop
    return realizer.buffers[value if value.op is Ops.BUFFER else value.src[0]]


def computed(t: Tensor) -> Tensor:
    """t's values as a tensor of a buffer (no graph, no gradient), computing them into one if they are not."""
    value = realizer.computed.get(t.uop, t.uop)
    if value.op is Ops.BUFFER or (value.op is Ops.RESHAPE and value.src[0].op is Ops.BUFFER):
        return type(t)(value, device=t.device)
    return t.detach().contiguous().realize()


# ---- the forward kernel ----


def online_attention_kernel(
    heads: int, length: int, keys: int, dim: int, value_dim: int, causal: bool, scale: float, dtype: DType
) -> Kernel:
    """One pass over the keys per query, in UOps: out (heads * length, value_dim) and lse (heads * length).

    Slots: 0 out, 1 lse, 2 q (heads, length, dim), 3 k (heads, keys, dim), 4 v (heads, keys, value_dim).
    Row r is query i = r % length of head r // length; a causal query i sees keys 0 .. i."""
    out, lse = UOp.define_global(0, heads * length * value_dim, dtype), UOp.define_global(1, heads * length, dtype)
    q, k = UOp.define_global(2, heads * length * dim, dtype), UOp.define_global(3, heads * keys * dim, dtype)
    v = UOp.define_global(4, heads * keys * value_dim, dtype)
    row = range_(heads * length, 0)
    seen = (row % length + 1).minimum(keys) if causal else UOp.const(keys, dtypes.index)
    j, e = range_(seen, 1, AxisType.REDUCE), range_(dim, 2, AxisType.REDUCE)
    key = row // length * keys + j
    score = UOp(Ops.REDUCE, dtype, (q.load(row * dim + e) * k.load(key * dim + e), e), Ops.ADD) * scale
    m, total, *acc = (_accumulator(dtype, -math.inf if n == 0 else 0.0, row, n) for n in range(2 + value_dim))
    new_m = m.maximum(score)
    rescale, weight = (m - new_m).exp(), (score - new_m).exp()

    def assign(a: UOp, value: UOp) -> UOp:
        return UOp(Ops.ACCUMULATE, dtype, (a, value, j), None).end(j)

    m_end, total_end = assign(m, new_m), assign(total, total * rescale + weight)
    outs = [assign(a, a * rescale + weight * v.load(key * value_dim + c)) for c, a in enumerate(acc)]
    stores = [out.store(row * value_dim + c, o / total_end) for c, o in enumerate(outs)]
    stores.append(lse.store(row, m_end + total_end.log()))
    name = f"attention_online_{heads}_{length}_{keys}_{dim}" + ("_causal" if causal else "")
    return Kernel(name, sink(*(s.end(row) for s in stores)), Opts(thread=0))


def tiled_attention_kernel(
    heads: int, length: int, keys: int, dim: int, value_dim: int, causal: bool, scale: float, dtype: DType
) -> Kernel:
    """The flash-attention algorithm, in UOps: a block of QUERY_BLOCK queries walks the keys a block of
    KEY_BLOCK at a time. Per key block, a first pass finds each query's new maximum, a second adds up
    exp(s - max) and exp(s - max) * v; the running sums are rescaled once per key block, not once per key.
    The queries of a block share every load of k and v. Slots as in `online_attention_kernel`.

    A block that runs past the last query repeats it (the same values, stored twice); keys past the last,
    and a causal query's future keys, get a score of -inf. The scores are computed twice (once per pass)
    rather than kept: nothing of size QUERY_BLOCK * KEY_BLOCK is held between the passes."""
    out, lse = UOp.define_global(0, heads * length * value_dim, dtype), UOp.define_global(1, heads * length, dtype)
    q, k = UOp.define_global(2, heads * length * dim, dtype), UOp.define_global(3, heads * keys * dim, dtype)
    v = UOp.define_global(4, heads * keys * value_dim, dtype)
    query_blocks = -(-length // QUERY_BLOCK)
    block = range_(heads * query_blocks, 0)
    head, first = block // query_blocks, block % query_blocks * QUERY_BLOCK
    queries = [(first + t).minimum(length - 1) for t in range(QUERY_BLOCK)]
    seen = (queries[-1] + 1).minimum(keys) if causal else UOp.const(keys, dtypes.index)
    key_block = range_((seen + KEY_BLOCK - 1) // KEY_BLOCK, 1, AxisType.REDUCE)

    def score(i: UOp, jj: UOp, e: UOp) -> tuple[UOp, UOp]:
        """q_i . k_j * scale, -inf where query i may not see key j; and j's row of k and v."""
        j = key_block * KEY_BLOCK + jj
        visible = (j < keys) & (j <= i) if causal else j < keys
        row = head * keys + j.minimum(keys - 1)
        dot = UOp(Ops.REDUCE, dtype, (q.load((head * length + i) * dim + e) * k.load(row * dim + e), e), Ops.ADD)
        return visible.where(dot * scale, -math.inf), row

    first_pass = (range_(KEY_BLOCK, 2, AxisType.REDUCE), range_(dim, 3, AxisType.REDUCE))
    second_pass = (range_(KEY_BLOCK, 4, AxisType.REDUCE), range_(dim, 5, AxisType.REDUCE))
    stores = []
    for t, i in enumerate(queries):
        numbers = range(t * (2 + value_dim), (t + 1) * (2 + value_dim))  # the first is the running maximum
        m, total, *acc = (_accumulator(dtype, 0.0 if n % (2 + value_dim) else -math.inf, block, n) for n in numbers)
        block_max = UOp(Ops.REDUCE, dtype, (score(i, *first_pass)[0], first_pass[0]), Ops.MAX)
        new_m = m.maximum(block_max)
        s, row = score(i, *second_pass)
        weight = (s - new_m).exp()
        rescale = (m - new_m).exp()

        def summed(x: UOp) -> UOp:
            return UOp(Ops.REDUCE, dtype, (x, second_pass[0]), Ops.ADD)

        def assign(a: UOp, value: UOp) -> UOp:
            return UOp(Ops.ACCUMULATE, dtype, (a, value, key_block), None).end(key_block)

        m_end, total_end = assign(m, new_m), assign(total, total * rescale + summed(weight))
        outs = [assign(a, a * rescale + summed(weight * v.load(row * value_dim + c))) for c, a in enumerate(acc)]
        r = head * length + i
        stores += [out.store(r * value_dim + c, o / total_end) for c, o in enumerate(outs)]
        stores.append(lse.store(r, m_end + total_end.log()))
    name = f"attention_tiled_{heads}_{length}_{keys}_{dim}" + ("_causal" if causal else "")
    return Kernel(name, sink(*(st.end(block) for st in stores)), Opts(thread=0))


QUERY_BLOCK = 4  # queries that share each load of a key and a value
KEY_BLOCK = 16  # keys between two rescalings of the running sums
KEY_TILE = 4  # keys of the backward pass that share each load of a query and its output gradient


# ---- the tiled backward: two kernels, in the order of FlashAttention-2 ----


class _Grads:
    """The buffers of a backward kernel (slots after its outputs: q, k, v, d out, lse, D) and the
    recomputed numbers of one (query i, key j) pair of a head, read from them."""

    def __init__(self, first_slot: int, heads: int, length: int, keys: int, dim: int, value_dim: int, dtype: DType):
        sizes = [length * dim, keys * dim, keys * value_dim, length * value_dim, length, length]
        self.q, self.k, self.v, self.d_out, self.lse, self.delta = (
            UOp.define_global(first_slot + n, heads * size, dtype) for n, size in enumerate(sizes)
        )
        self.length, self.keys, self.dim, self.value_dim, self.dtype = length, keys, dim, value_dim, dtype

    def pair(self, head: UOp, i: UOp, j: UOp, dots: tuple[UOp, UOp], causal: bool, scale: float) -> tuple[UOp, UOp]:
        """P_ij = exp(q_i . k_j scale - lse_i), 0 where i may not see j, and dS_ij = P_ij (dO_i . v_j - D_i)
        scale: the probability and the score's gradient, recomputed from what the forward pass saved."""
        e, c = dots
        qi, kj = head * self.length + i, head * self.keys + j
        dot = self.q.load(qi * self.dim + e) * self.k.load(kj * self.dim + e)
        score = UOp(Ops.REDUCE, self.dtype, (dot, e), Ops.ADD)
        p = (score * scale - self.lse.load(qi)).exp()
        if causal:
            p = (j <= i).where(p, 0.0)
        products = self.d_out.load(qi * self.value_dim + c) * self.v.load(kj * self.value_dim + c)
        d_p = UOp(Ops.REDUCE, self.dtype, (products, c), Ops.ADD)
        return p, p * (d_p - self.delta.load(qi)) * scale


def tiled_key_grads_kernel(
    heads: int, length: int, keys: int, dim: int, value_dim: int, causal: bool, scale: float, dtype: DType
) -> Kernel:
    """dK and dV, a block of KEY_TILE keys at a time: the block walks the queries that can see it, recomputing
    P and dS per (query, key) from lse and D, and sums dV_j = sum_i P_ij dO_i and dK_j = sum_i dS_ij q_i. The
    keys of a block share every load of q and dO. Slots: 0 dk (heads, keys, dim), 1 dv (heads, keys,
    value_dim), then those of `_Grads`. A block that runs past the last key repeats it, as the forward does."""
    dk, dv = UOp.define_global(0, heads * keys * dim, dtype), UOp.define_global(1, heads * keys * value_dim, dtype)
    b = _Grads(2, heads, length, keys, dim, value_dim, dtype)
    key_blocks = -(-keys // KEY_TILE)
    block = range_(heads * key_blocks, 0)
    head, first = block // key_blocks, block % key_blocks * KEY_TILE
    start = first.minimum(length) if causal else UOp.const(0, dtypes.index)  # a causal key j is seen from query j
    walk = range_(UOp.const(length, dtypes.index) - start, 1, AxisType.REDUCE)
    i = start + walk
    dots = (range_(dim, 2, AxisType.REDUCE), range_(value_dim, 3, AxisType.REDUCE))
    stores = []
    for t in range(KEY_TILE):
        j = (first + t).minimum(keys - 1)
        p, d_s = b.pair(head, i, j, dots, causal, scale)
        row = head * keys + j
        for c in range(value_dim):
            total = UOp(Ops.REDUCE, dtype, (p * b.d_out.load((head * length + i) * value_dim + c), walk), Ops.ADD)
            stores.append(dv.store(row * value_dim + c, total))
        for e in range(dim):
            total = UOp(Ops.REDUCE, dtype, (d_s * b.q.load((head * length + i) * dim + e), walk), Ops.ADD)
            stores.append(dk.store(row * dim + e, total))
    name = f"attention_key_grads_{heads}_{length}_{keys}_{dim}" + ("_causal" if causal else "")
    return Kernel(name, sink(*(st.end(block) for st in stores)), Opts(thread=0))


def tiled_query_grads_kernel(
    heads: int, length: int, keys: int, dim: int, value_dim: int, causal: bool, scale: float, dtype: DType
) -> Kernel:
    """dQ, a block of QUERY_BLOCK queries at a time: dQ_i = sum_j dS_ij k_j over the keys query i sees, with
    P and dS recomputed as in `tiled_key_grads_kernel`; the queries of a block share every load of k and v.
    Slots: 0 dq (heads, length, dim), then those of `_Grads`."""
    dq = UOp.define_global(0, heads * length * dim, dtype)
    b = _Grads(1, heads, length, keys, dim, value_dim, dtype)
    query_blocks = -(-length // QUERY_BLOCK)
    block = range_(heads * query_blocks, 0)
    head, first = block // query_blocks, block % query_blocks * QUERY_BLOCK
    queries = [(first + t).minimum(length - 1) for t in range(QUERY_BLOCK)]
    seen = (queries[-1] + 1).minimum(keys) if causal else UOp.const(keys, dtypes.index)
    j = range_(seen, 1, AxisType.REDUCE)
    dots = (range_(dim, 2, AxisType.REDUCE), range_(value_dim, 3, AxisType.REDUCE))
    stores = []
    for i in queries:
        _, d_s = b.pair(head, i, j, dots, causal, scale)
        for e in range(dim):
            total = UOp(Ops.REDUCE, dtype, (d_s * b.k.load((head * keys + j) * dim + e), j), Ops.ADD)
            stores.append(dq.store((head * length + i) * dim + e, total))
    name = f"attention_query_grads_{heads}_{length}_{keys}_{dim}" + ("_causal" if causal else "")
    return Kernel(name, sink(*(st.end(block) for st in stores)), Opts(thread=0))


def _accumulator(dtype: DType, start: float, row: UOp, number: int) -> UOp:
    """A running value of query `row`, declared in its loop: number tells apart those that start alike."""
    return UOp(Ops.DEFINE_ACC, dtype, (UOp.const(start, dtype), row), number)


# ---- the function, with its gradient ----


def kernel_attention(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, scale: float, kernel: str) -> Tensor:
    """softmax(q k^T scale) v over the last two axes, by the "online" or the "tiled" kernel; the gradient
    recomputes the probabilities from the log-sum-exp the kernel saves."""
    lead, (length, dim), (keys, value_dim) = q.shape[:-2], q.shape[-2:], v.shape[-2:]
    heads = math.prod(lead)
    if q.dtype not in (dtypes.float32, dtypes.float64) or not q.dtype is k.dtype is v.dtype:
        raise TensorError(
            f"attention ({kernel}): q, k and v must all be float32 or all float64, got "
            f"{q.dtype.name}, {k.dtype.name} and {v.dtype.name}"
        )
    if get_backend(q.device).linearize is not None:
        raise TensorError(
            f"attention ({kernel}): runs on backends that run loops as written (C); {q.device} maps loops onto GPU "
            "threads in lockstep, and a causal query's loop over the keys has a length of its own"
        )
    build = {"online": online_attention_kernel, "tiled": tiled_attention_kernel}[kernel]
    program = build(heads, length, keys, dim, value_dim, is_causal, scale, q.dtype)
    flat_q, flat_k = q.reshape(heads, length, dim), k.reshape(heads, keys, dim)
    flat_v = v.reshape(heads, keys, value_dim)
    buffers = computed(flat_q), computed(flat_k), computed(flat_v)  # once, for the forward and backward kernels
    out, lse = run_kernel(program, buffers, [((heads, length, value_dim), q.dtype), ((heads, length, 1), q.dtype)])
    if any(t.requires_grad for t in (q, k, v)) and type(q)._grad_enabled:
        # the tiled kernels read the buffers q, k and v are in; the composed backward reads them as graphs,
        # which kernelize fuses into its products (measured: faster than reading the buffers, in the GPT)
        if kernel == "tiled":
            backward = _tiled_backward(*buffers, out, lse, is_causal, scale)
        else:
            backward = _backward(flat_q, flat_k, flat_v, out, lse, is_causal, scale)
        realizer.custom_gradients[out.uop] = CustomGradient((flat_q.uop, flat_k.uop, flat_v.uop), backward)
        out.requires_grad = True
    return out.reshape(*lead, length, value_dim)


def _backward(
    q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, causal: bool, scale: float
) -> Callable[[UOp], tuple[UOp | None, ...]]:
    """d q, d k, d v from d out: the probabilities recomputed as exp(scores - lse), so the forward pass kept
    no (L, S) matrix; D = rowsum(d out * out) stands for the softmax's sum over the keys."""
    q, k, v, out, lse = (t.detach() for t in (q, k, v, out, lse))

    def rule(g: UOp) -> tuple[UOp | None, ...]:
        grad = type(q)(g, device=q.device)
        scores = (q @ k.transpose(-2, -1)) * scale
        p = (scores - lse).exp()
        if causal:
            seen = type(q).ones(*scores.shape[-2:], dtype=dtypes.bool, device=q.device).tril()
            p = seen.where(p, 0.0)
        d_v = p.transpose(-2, -1) @ grad
        d_p = grad @ v.transpose(-2, -1)
        d_scores = p * (d_p - (grad * out).sum(-1, keepdim=True)) * scale
        return ((d_scores @ k).uop, (d_scores.transpose(-2, -1) @ q).uop, d_v.uop)

    return rule


def _tiled_backward(
    q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, causal: bool, scale: float
) -> Callable[[UOp], tuple[UOp | None, ...]]:
    """d q, d k, d v from d out by the two tiled kernels: D = rowsum(d out * out) is the only tensor op, one
    number per query; no buffer of the backward pass holds L * S numbers."""
    q, k, v, out, lse = (t.detach() for t in (q, k, v, out, lse))
    (heads, length, dim), (keys, value_dim) = q.shape, v.shape[1:]
    shape = (heads, length, keys, dim, value_dim, causal, scale, q.dtype)

    def rule(g: UOp) -> tuple[UOp | None, ...]:
        # computed once, here: each kernel's inputs would compute a graph again (and D's reads d out's graph)
        grad = type(q)(g, device=q.device).reshape(heads, length, value_dim).contiguous().realize()
        saved = [q, k, v, grad, lse, (grad * out).sum(-1).realize()]
        d_k, d_v = run_kernel(
            tiled_key_grads_kernel(*shape), saved, [((heads, keys, dim), q.dtype), ((heads, keys, value_dim), q.dtype)]
        )
        (d_q,) = run_kernel(tiled_query_grads_kernel(*shape), saved, [((heads, length, dim), q.dtype)])
        return (d_q.uop, d_k.uop, d_v.uop)

    return rule
