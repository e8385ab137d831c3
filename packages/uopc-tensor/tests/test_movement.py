"""Movement ops, indexing, cat/stack and matmul against numpy; random chains of movement ops with Hypothesis.

Each movement op is an index map that rangeify must get exactly right, and they compose: the property tests
apply a random chain of them in lockstep to a Tensor and to a numpy array (the oracle mirrors every step, so
there is no separate "expected answer" logic to get wrong) and compare the two at the end. Hypothesis runs
derandomized (see conftest.py), so a failing chain is printed and reruns identically.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.tensor import Tensor, dtypes

pytestmark = pytest.mark.sanitize  # rerun with kernels under ASan and UBSan (hatch env sanitize)

Array = npt.NDArray[Any]


def floats(shape: tuple[int, ...], seed: int) -> Array:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check_all(cases: list[tuple[Tensor, Array]], exact: bool = True) -> None:
    Tensor.realize(*(t for t, _ in cases))
    for k, (t, ref) in enumerate(cases):
        assert t.shape == ref.shape, f"case {k}: shape {t.shape}, numpy says {ref.shape}"
        if exact:  # a movement op moves values; it never changes one
            np.testing.assert_array_equal(t.numpy(), ref, err_msg=f"case {k}")
        else:
            np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-5, err_msg=f"case {k}")


def test_reshape() -> None:
    a = floats((2, 3, 5), 0)
    x = Tensor(a)
    check_all(
        [
            (x.reshape(6, 5), a.reshape(6, 5)),
            (x.reshape((5, 6)), a.reshape(5, 6)),
            (x.reshape(-1), a.reshape(-1)),
            (x.reshape(3, -1, 2), a.reshape(3, -1, 2)),
            (x.reshape(1, 30, 1), a.reshape(1, 30, 1)),
            (x.permute(2, 0, 1).reshape(10, 3), a.transpose(2, 0, 1).reshape(10, 3)),  # a reshape of a view
            (Tensor(a[:1, :, :1]).reshape(3), a[:1, :, :1].reshape(3)),
            (x[0, 0, 0].reshape(1, 1), a[0, 0, 0].reshape(1, 1)),
        ]
    )


def test_permute_transpose_T() -> None:
    a = floats((4, 1, 5), 1)
    x = Tensor(a)
    check_all(
        [
            (x.permute(2, 0, 1), a.transpose(2, 0, 1)),
            (x.permute((1, 2, 0)), a.transpose(1, 2, 0)),
            (x.permute(-1, 0, -2), a.transpose(2, 0, 1)),
            (x.transpose(), a.swapaxes(-2, -1)),
            (x.transpose(0, 2), a.swapaxes(0, 2)),
            (x.transpose(1, 1), a),
            (x.T, a.T),
            (Tensor(a[0]).T, a[0].T),
        ]
    )


def test_expand() -> None:
    a = floats((1, 3, 1), 2)
    x = Tensor(a)
    check_all(
        [
            (x.expand(4, 3, 5), np.broadcast_to(a, (4, 3, 5))),
            (x.expand((2, 1, 3, 5)), np.broadcast_to(a, (2, 1, 3, 5))),
            (x.expand(-1, -1, 2), np.broadcast_to(a, (1, 3, 2))),
            (x.expand(1, 3, 1), a),
            (Tensor(a[0, :, 0]).expand(2, 3), np.broadcast_to(a[0, :, 0], (2, 3))),
        ]
    )


def pad_ref(a: Array, widths: list[tuple[int, int]], value: float) -> Array:
    """numpy's pad, after cutting off what negative widths remove."""
    cut = a[tuple(slice(max(0, -b), s - max(0, -e)) for (b, e), s in zip(widths, a.shape, strict=True))]
    return np.pad(cut, [(max(0, b), max(0, e)) for b, e in widths], constant_values=value)


def test_pad() -> None:
    a = floats((2, 3, 5), 3)
    x = Tensor(a)
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    cases = [
        ([(1, 0), (0, 2), (1, 1)], 0.0),
        ([(0, 0), (2, 0), (0, 0)], 1.5),
        ([(-1, 1), (1, -1), (0, -3)], -2.0),  # negative widths shrink
        ([(0, -1), (-2, 0), (-1, -1)], 9.0),  # only shrinking
        ([(0, 0), (0, 0), (0, 0)], 3.0),
    ]
    check_all([(x.pad(w, v), pad_ref(a, w, v)) for w, v in cases])
    check_all(
        [
            (Tensor(i).pad([(1, 1), (0, 1)], 7), pad_ref(i, [(1, 1), (0, 1)], 7)),
            (Tensor(i).pad([(1, 0), (0, 0)]), pad_ref(i, [(1, 0), (0, 0)], 0)),
            (Tensor(i > 2).pad([(0, 1), (1, 0)], True), pad_ref(i > 2, [(0, 1), (1, 0)], True)),
        ]
    )
    promoted = Tensor(i).pad([(1, 0), (0, 0)], 0.5)  # a float fill makes an int tensor float, as arithmetic does
    assert promoted.dtype is dtypes.float32
    np.testing.assert_array_equal(promoted.numpy(), pad_ref(i.astype(np.float32), [(1, 0), (0, 0)], 0.5))


def test_shrink_and_flip() -> None:
    a = floats((4, 1, 5), 4)
    x = Tensor(a)
    check_all(
        [
            (x.shrink([(1, 3), None, (2, 5)]), a[1:3, :, 2:5]),
            (x.shrink([(3, 4), (0, 1), (0, 1)]), a[3:4, 0:1, 0:1]),
            (x.flip(0), a[::-1]),
            (x.flip(-1), a[:, :, ::-1]),
            (x.flip((0, 2)), a[::-1, :, ::-1]),
            (x.flip(), a[::-1, ::-1, ::-1]),
            (x.flip(1), a),
        ]
    )


def test_squeeze_unsqueeze_flatten() -> None:
    a = floats((1, 3, 1), 5)
    b = floats((2, 3, 5), 6)
    x, y = Tensor(a), Tensor(b)
    check_all(
        [
            (x.squeeze(), a.squeeze()),
            (x.squeeze(0), a.squeeze(0)),
            (x.squeeze(-1), a.squeeze(-1)),
            (x.squeeze(1), a),  # not of size 1: unchanged, as in PyTorch
            (y.unsqueeze(0), b[None]),
            (y.unsqueeze(3), b[..., None]),
            (y.unsqueeze(-1), b[..., None]),
            (y.unsqueeze(-2), np.expand_dims(b, -2)),
            (y.flatten(), b.reshape(-1)),
            (y.flatten(1), b.reshape(2, 15)),
            (y.flatten(0, 1), b.reshape(6, 5)),
            (y.flatten(-2, -1), b.reshape(2, 15)),
            (Tensor(np.float32(2.0)).flatten(), np.array([2.0], np.float32)),
        ]
    )


def test_indexing() -> None:
    a = floats((4, 3, 5), 7)
    x = Tensor(a)
    indices: list[Any] = [
        1,
        -1,
        (2, 1),
        (-4, -3, -5),
        slice(1, 3),
        (slice(None), slice(None, None, -1)),
        (slice(None, None, 2), 0, slice(4, 0, -2)),
        (..., 2),
        (1, ...),
        (None, 1),
        (slice(None), None, slice(1, None), None),
        (..., None),
        (-1, ..., slice(None, None, -3)),
        (slice(-2, None), slice(-1, -4, -1), slice(1, -1, 3)),
        (slice(10, -10, -1),),  # bounds clamp, as in numpy
        (0, 0, 0),
    ]
    check_all([(x[i], a[i]) for i in indices])


def test_cat_and_stack() -> None:
    a, b, c = floats((2, 3, 5), 8), floats((2, 1, 5), 9), floats((2, 4, 5), 10)
    x, y, z = Tensor(a), Tensor(b), Tensor(c)
    i, j = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(3, dtype=np.int32).reshape(1, 3)
    check_all(
        [
            (Tensor.cat(x, y, z, dim=1), np.concatenate([a, b, c], 1)),
            (Tensor.cat([x, y, z], dim=-2), np.concatenate([a, b, c], -2)),
            (Tensor.cat(x, x, dim=0), np.concatenate([a, a], 0)),
            (Tensor.cat(x, x[:, :, :2], dim=2), np.concatenate([a, a[:, :, :2]], 2)),
            (Tensor.cat(x), a),
            (Tensor.stack([x, x * 2, -x]), np.stack([a, a * 2, -a])),
            (Tensor.stack([x, x * 2], dim=1), np.stack([a, a * 2], 1)),
            (Tensor.stack([x, x * 2], dim=-1), np.stack([a, a * 2], -1)),
            (Tensor.stack([y], dim=3), np.stack([b], 3)),
            (Tensor.cat(Tensor(i), Tensor(j)), np.concatenate([i, j])),
            (Tensor.stack([Tensor(i), Tensor(i) + 1], dim=2), np.stack([i, i + 1], 2)),
            (Tensor.cat(Tensor(i > 2), Tensor(j > 0)), np.concatenate([i > 2, j > 0])),
            (Tensor.stack([Tensor(i > 2), Tensor(i > 4)], dim=-1), np.stack([i > 2, i > 4], -1)),
        ]
    )


def test_matmul_and_dot() -> None:
    shapes = [
        ((3, 5), (5, 4)),
        ((5,), (5, 4)),
        ((3, 5), (5,)),
        ((5,), (5,)),
        ((2, 3, 5), (5, 4)),
        ((5,), (2, 5, 4)),
        ((2, 3, 5), (5,)),
        ((2, 3, 5), (2, 5, 4)),
        ((4, 1, 3, 5), (2, 5, 6)),  # batch axes broadcast: (4, 2, 3, 6)
        ((1, 3, 5), (4, 5, 1)),
        ((1, 1), (1, 1)),
    ]
    cases = []
    for k, (sa, sb) in enumerate(shapes):
        a, b = floats(sa, 20 + k), floats(sb, 40 + k)
        cases.append((Tensor(a) @ Tensor(b), a @ b))
        cases.append((Tensor(a).matmul(Tensor(b)), a @ b))
    v, w = floats((7,), 60), floats((7,), 61)
    cases.append((Tensor(v).dot(Tensor(w)), np.asarray(v @ w)))
    i, j = np.arange(6, dtype=np.int32).reshape(2, 3) - 2, np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    ij = Tensor(i) @ Tensor(j)
    assert ij.dtype is dtypes.int32
    cases.append((ij, i @ j))
    check_all(cases, exact=False)


# ---- property tests: random chains of movement ops ----


def draw_shape(data: st.DataObject, max_dims: int = 4) -> tuple[int, ...]:
    return tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=max_dims), label="shape"))


def draw_reshape(data: st.DataObject, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A random shape with the same number of elements: the prime factors regrouped, with some 1s, maybe a -1."""
    n, factors, f = math.prod(shape), [], 2
    while n > 1:
        while n % f == 0:
            factors.append(f)
            n //= f
        f += 1
    factors += [1] * data.draw(st.integers(0, 2), label="ones")
    order = data.draw(st.permutations(factors), label="order")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=3), label="cuts"))
    groups = [order[a:b] for a, b in zip([0, *cuts], [*cuts, len(order)], strict=True) if b > a]
    new = [math.prod(g) for g in groups] or [1]
    if data.draw(st.booleans(), label="infer"):
        new[data.draw(st.integers(0, len(new) - 1), label="which")] = -1
    return tuple(new)


def draw_slice(data: st.DataObject, size: int) -> slice:
    """A slice that selects at least one element: any start, stop and step, negative ones included."""
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    return data.draw(
        st.builds(slice, bound, bound, st.sampled_from([None, 1, 2, 3, -1, -2, -3])).filter(
            lambda s: len(range(*s.indices(size))) > 0
        ),
        label="slice",
    )


def draw_index(data: st.DataObject, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """An index for `shape`: per axis an int or a slice, a None here and there; then either the trailing axes
    are left out, or a run of axes is replaced by `...` (which then stands for exactly those axes)."""
    per_axis: list[list[Any]] = []
    for size in shape:
        item = data.draw(st.one_of(st.integers(-size, size - 1), st.builds(draw_slice, st.just(data), st.just(size))))
        per_axis.append([None, item] if data.draw(st.integers(0, 4), label="new axis") == 0 else [item])
    if data.draw(st.booleans(), label="ellipsis"):
        i = data.draw(st.integers(0, len(shape)), label="from")
        j = data.draw(st.integers(i, len(shape)), label="to")
        per_axis[i:j] = [[Ellipsis]]
    else:
        per_axis = per_axis[: data.draw(st.integers(0, len(shape)), label="kept")]
    return tuple(item for items in per_axis for item in items)


def apply_step(data: st.DataObject, t: Tensor, a: Array) -> tuple[Tensor, Array, str]:
    """One random movement op, applied to both the tensor and the array."""
    step = data.draw(
        st.sampled_from(
            [
                "reshape",
                "permute",
                "transpose",
                "T",
                "expand",
                "pad",
                "shrink",
                "flip",
                "squeeze",
                "unsqueeze",
                "flatten",
                "index",
            ]
        ),
        label="op",
    )
    nd = a.ndim
    if step == "reshape":
        new = draw_reshape(data, a.shape)
        return t.reshape(new), a.reshape(new), f"reshape{new}"
    if step == "permute" and nd:
        order = data.draw(st.permutations(range(nd)), label="order")
        return t.permute(order), a.transpose(order), f"permute{tuple(order)}"
    if step == "transpose" and nd:
        d0, d1 = data.draw(st.integers(-nd, nd - 1), label="d0"), data.draw(st.integers(-nd, nd - 1), label="d1")
        return t.transpose(d0, d1), a.swapaxes(d0, d1), f"transpose({d0}, {d1})"
    if step == "T":
        return t.T, a.T, "T"
    if step == "expand":
        new = tuple(data.draw(st.integers(1, 3), label="grow") if s == 1 else s for s in a.shape)
        lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=1), label="lead"))
        return t.expand(lead + new), np.broadcast_to(a, lead + new), f"expand{lead + new}"
    if step == "pad" and nd:
        widths = [
            (data.draw(st.integers(-(s - 1), 2), label="before"), data.draw(st.integers(-(s - 1), 2), label="after"))
            for s in a.shape
        ]
        widths = [(b, max(e, -(s - 1 - max(0, -b)))) for (b, e), s in zip(widths, a.shape, strict=True)]
        value = data.draw(st.sampled_from([0.0, 1.5, -3.0]), label="value")
        return t.pad(widths, value), pad_ref(a, widths, value), f"pad({widths}, {value})"
    if step == "shrink" and nd:
        bounds = []
        for s in a.shape:
            b = data.draw(st.integers(0, s - 1), label="begin")
            bounds.append((b, data.draw(st.integers(b + 1, s), label="end")))
        return t.shrink(bounds), a[tuple(slice(b, e) for b, e in bounds)], f"shrink({bounds})"
    if step == "flip" and nd:
        axes = tuple(data.draw(st.sets(st.integers(0, nd - 1), min_size=1), label="axes"))
        return t.flip(axes), np.flip(a, axes), f"flip({axes})"
    if step == "squeeze":
        return t.squeeze(), a.squeeze(), "squeeze()"
    if step == "unsqueeze":
        d = data.draw(st.integers(-nd - 1, nd), label="dim")
        return t.unsqueeze(d), np.expand_dims(a, d), f"unsqueeze({d})"
    if step == "flatten" and nd:
        s = data.draw(st.integers(0, nd - 1), label="start")
        e = data.draw(st.integers(s, nd - 1), label="end")
        return t.flatten(s, e), a.reshape((*a.shape[:s], -1, *a.shape[e + 1 :])), f"flatten({s}, {e})"
    if step == "index" and nd:
        index = draw_index(data, a.shape)
        return t[index], a[index], f"[{index}]"
    return t, a, "nothing (0-d)"


@settings(max_examples=60)
@given(st.data())
def test_random_movement_chains(data: st.DataObject) -> None:
    shape = draw_shape(data)
    a = np.arange(math.prod(shape), dtype=np.float32).reshape(shape) * 0.5 - 3  # distinct values
    t, ref, done = Tensor(a), a, []
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        t, ref, what = apply_step(data, t, ref)
        done.append(what)
        assert t.shape == ref.shape, f"after {' -> '.join(done)}: shape {t.shape}, numpy says {ref.shape}"
    np.testing.assert_array_equal(t.numpy(), ref, err_msg=" -> ".join(done))


@settings(max_examples=40)
@given(st.data())
def test_random_indexing(data: st.DataObject) -> None:
    shape = draw_shape(data)
    a = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    index = draw_index(data, shape)
    np.testing.assert_array_equal(Tensor(a)[index].numpy(), a[index], err_msg=f"index {index} of shape {shape}")


@settings(max_examples=20)
@given(st.data())
def test_random_chains_then_reduce_and_compute(data: st.DataObject) -> None:
    """A chain, then arithmetic and a reduction over the moved view: movement inside a fused kernel."""
    shape = draw_shape(data, 3)
    a = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    t, ref = Tensor(a), a
    for _ in range(data.draw(st.integers(1, 3), label="steps")):
        t, ref, _ = apply_step(data, t, ref)
    axis = data.draw(st.integers(-ref.ndim, ref.ndim - 1), label="axis") if ref.ndim else None
    out = (t * 2 + 1).sum(axis)
    want = (ref.astype(np.float64) * 2 + 1).sum(axis)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_movement_of_computed_values(seed: int) -> None:
    """Movement ops on computed (not loaded) values: the kernel boundary falls in different places."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    x, y = Tensor(a), Tensor(b)
    s = x.sum(0, keepdim=True)  # a reduction, then moved and broadcast
    check_all(
        [
            ((x.exp() + 1).permute(2, 1, 0) * y.unsqueeze(-1), (np.exp(a) + 1).transpose(2, 1, 0) * b[..., None]),
            (s.expand(4, 3, 5).flip(1)[1:, ::2], np.broadcast_to(a.sum(0, keepdims=True), (4, 3, 5))[:, ::-1][1:, ::2]),
            (
                (x - s).pad([(0, 1), (1, 0), (0, 0)], 2.0).T,
                pad_ref(a - a.sum(0, keepdims=True), [(0, 1), (1, 0), (0, 0)], 2.0).T,
            ),
            ((x * 3).reshape(6, 5) @ y, (a * 3).reshape(6, 5) @ b),
        ],
        exact=False,
    )
