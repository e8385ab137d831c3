"""Tensor in Python's protocols: truth, numbers, sequences, numpy, operators, copies and dtype names.

A tensor meets Python in places the library never calls itself: `if t:`, `for row in t`, `a, b = t`,
`np.asarray(t)`, `np.float32(2) * t`, `copy.deepcopy(model)`, `dtype="float32"`. Each of these once gave a
silently wrong answer or failed; the reference is what numpy and PyTorch do with their own arrays.
"""

from __future__ import annotations

import copy
import gc
import math
import operator
import pickle
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.tensor import Tensor, TensorError, TensorIndexError, dtypes
from uopc.tensor.nn import Linear

A = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5  # [[-2.5 -1.5 -0.5] [0.5 1.5 2.5]]
B = np.arange(4, dtype=np.float32).reshape(2, 2) * 10
C = np.arange(2, dtype=np.float32).reshape(2, 1) - 9


# ---- cat and stack: every piece, however the call is spelled ----


def test_cat_and_stack_as_methods_keep_the_first_tensor() -> None:
    """x.cat(y, z) used to be the staticmethod cat(y, z): x was dropped without a word."""
    x, y, z = Tensor(A), Tensor(B), Tensor(C)
    cases = [
        (x.cat(y, z, dim=1), np.concatenate([A, B, C], 1)),
        (x.cat([y, z], dim=-1), np.concatenate([A, B, C], -1)),
        (Tensor.cat(x, y, z, dim=1), np.concatenate([A, B, C], 1)),
        (Tensor.cat([x, y, z], 1), np.concatenate([A, B, C], 1)),  # torch.cat(tensors, dim)
        (x.cat(x), np.concatenate([A, A])),
        (x.stack(x * 2), np.stack([A, A * 2])),
        (x.stack(x * 2, -x, dim=1), np.stack([A, A * 2, -A], 1)),
        (Tensor.stack([x, x * 2], 2), np.stack([A, A * 2], 2)),  # torch.stack(tensors, dim)
        (Tensor.stack([x], dim=-1), np.stack([A], -1)),
    ]
    Tensor.realize(*(t for t, _ in cases))
    for t, want in cases:
        np.testing.assert_array_equal(t.numpy(), want)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda x: Tensor.cat([x, x], 1, dim=0), "axis is given twice"),
        (lambda x: x.cat(x, 1.0), "not a float"),
        (lambda x: Tensor.stack([x, cast(Any, "x")]), "not a str"),
        (lambda x: x.cat(np.zeros((2, 3), np.float32)), "not a ndarray"),
        (lambda x: Tensor.cat(Tensor(1.0), Tensor(2.0)), "0-d"),
        (lambda x: x.cat(Tensor.full((2, 3), 1.0, device="ELSEWHERE")), "different devices"),
    ],
)
def test_cat_and_stack_refuse_what_they_cannot_join(call: Callable[[Tensor], Any], fragment: str) -> None:
    with pytest.raises(TensorError, match=fragment):
        call(Tensor(A))


def test_cat_and_pad_keep_negative_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """cat added zero-padded pieces, and -0.0 + 0.0 is +0.0 under IEEE rules; pad(value=-0.0) padded +0.0.

    The flags keep signed zeros (the default ones let gcc drop them, which hid the bug)."""
    monkeypatch.setenv("CFLAGS", "-O2 -fwrapv")
    neg = np.array([-0.0, 1.0, -0.0], np.float32)
    joined = Tensor.cat(Tensor(neg), Tensor(neg[:1]), Tensor(neg))
    padded = Tensor(neg[1:2]).pad([(1, 2)], value=-0.0)
    Tensor.realize(joined, padded)
    assert np.signbit(joined.numpy()).tolist() == np.signbit(np.concatenate([neg, neg[:1], neg])).tolist()
    assert np.signbit(padded.numpy()).tolist() == [True, False, True, True]


# ---- truth and conversion to Python numbers ----


def test_truth_of_a_tensor_is_its_value_or_ambiguous() -> None:
    """`if t:` was True for every tensor, Tensor([0.0]) included, and `t in [u]` for any u."""
    assert not Tensor([0.0]) and not Tensor(0) and not Tensor([[False]])
    assert Tensor([-0.5]) and Tensor(3) and Tensor(math.nan)
    with pytest.raises(TensorError, match=r"shape \(2, 3\) is ambiguous"):
        bool(Tensor(A))
    with pytest.raises(TensorError, match="ambiguous"):
        _ = Tensor(A) in [Tensor(A + 1)]
    assert Tensor([1.0]) in [Tensor([2.0]), Tensor([1.0])]
    assert Tensor([3.0]) not in [Tensor([2.0]), Tensor([1.0])]


def test_in_looks_for_an_equal_element() -> None:
    t = Tensor(A)
    assert 1.5 in t and -2.5 in t and np.float32(0.5) in t
    assert 2.0 not in t and math.inf not in t
    assert math.nan not in Tensor([math.nan])  # noqa: PLW0177 - NaN equals nothing, itself included
    assert Tensor([0.5, 1.5, 2.5]) in t and Tensor([0.5, 9.0, 2.5]) in t  # any element, as in numpy
    assert Tensor([9.0, 9.0, 9.0]) not in t
    with pytest.raises(TypeError, match="str"):
        _ = "a" in t


def test_int_float_and_index_of_one_element() -> None:
    assert int(Tensor([3.7])) == 3 and int(Tensor(-3.7)) == -3 and int(Tensor([[7]])) == 7
    assert float(Tensor([3])) == 3.0 and float(Tensor(np.array(2.5, np.float16))) == 2.5
    assert "abcd"[Tensor(2)] == "c" and list(range(Tensor([3]))) == [0, 1, 2]
    assert operator.index(Tensor(np.array(5, np.uint8))) == 5
    np.testing.assert_array_equal(Tensor(A)[Tensor(1) :].numpy(), A[1:])
    with pytest.raises(TensorError, match=r"int\(\) needs a tensor with one element"):
        int(Tensor(A))
    with pytest.raises(TensorError, match=r"float\(\) needs a tensor with one element"):
        float(Tensor(A))
    for not_an_index in (Tensor(2.0), Tensor([True]), Tensor([1, 2])):
        with pytest.raises(TypeError, match="only a one-element integer tensor"):
            operator.index(not_an_index)


# ---- a sequence of rows ----


def test_a_tensor_is_a_sequence_of_its_rows() -> None:
    """list(t), for loops and unpacking went on indexing past the end: the error was not an IndexError."""
    t = Tensor(A)
    rows = list(t)
    assert len(rows) == 2 and all(r.shape == (3,) for r in rows)
    first, second = t
    np.testing.assert_array_equal(np.stack([first.numpy(), second.numpy()]), A)
    assert [float(v) for v in Tensor(A[0])] == A[0].tolist()
    assert sum(1 for _ in Tensor(np.zeros((4, 2), np.float32))) == 4
    with pytest.raises(ValueError, match="too many values to unpack"):
        _a, _b = Tensor(np.zeros(3, np.float32))
    for zero_d in (lambda: iter(Tensor(1.0)), lambda: len(Tensor(1.0))):
        with pytest.raises(TypeError, match="0-d"):
            zero_d()


@pytest.mark.parametrize(
    "index", [2, -3, (0, 3), (slice(None), -4), (0, 0, 0), (None, 0, 1, 2), np.int64(2), np.intp(-3)]
)
def test_out_of_range_indices_are_index_errors(index: Any) -> None:
    with pytest.raises(IndexError) as info:
        Tensor(A)[index]
    error: Any = info.value
    assert isinstance(error, TensorIndexError) and isinstance(error, TensorError)
    with pytest.raises(IndexError):
        np.asarray(A)[index]  # numpy agrees


@pytest.mark.parametrize(
    ("index", "fragment"),
    [
        (True, "bool index"),
        (np.bool_(False), "bool index"),
        ((0, True), "bool index"),
        (Tensor([0.5]), "not a float32 tensor"),
        ((Tensor(1.0), ...), "not a float32 tensor"),
        (np.array([0.0, 1.0]), "not a float64 tensor"),
        ([0.5, 1], "not a float32 tensor"),
        (0.0, "not a float"),
        ("a", "not a str"),
    ],
)
def test_unsupported_indices_are_refused_by_kind(index: Any, fragment: str) -> None:
    """x[Tensor([0])] once failed inside `Ellipsis in items` with 'eq: cannot combine a tensor with a ellipsis';
    integer and bool tensors are indices now, and other kinds are refused by name."""
    with pytest.raises(TensorError, match=fragment):
        Tensor(A)[index]


# ---- numpy ----


def test_numpy_reads_a_tensor() -> None:
    t = Tensor(A)
    for got in (np.asarray(t), np.array(t), np.asarray(t, dtype=np.float64), np.asarray([t[0], t[1]])):
        np.testing.assert_array_equal(got, A)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.asarray(Tensor(np.array([1, 2], np.int8))).dtype == np.int8
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(t, copy=False)
    np.testing.assert_array_equal(Tensor([Tensor(1.5), Tensor(2.5)]).numpy(), [1.5, 2.5])


NUMPY_SCALARS = [np.float32(2.5), np.float64(-1.5), np.float16(0.5), np.int64(3), np.int8(-2), np.uint8(7), np.bool_(1)]
OPERATORS: list[Callable[[Any, Any], Any]] = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.lt,
    operator.gt,
    operator.le,
    operator.ge,
    operator.eq,
    operator.ne,
]


@pytest.mark.parametrize("scalar", NUMPY_SCALARS, ids=lambda s: type(s).__name__)
def test_numpy_scalars_on_either_side_act_as_python_numbers(scalar: Any) -> None:
    """np.float32(2) * t failed: numpy's scalar took t for an array. As in PyTorch, a numpy scalar is the
    Python number it holds (weakly typed): t's dtype wins unless a float meets an integer tensor."""
    tensors = [Tensor(A), Tensor(A.astype(np.float16)), Tensor(np.array([[1, -4]], np.int32))]
    cases = []
    for t in tensors:
        for op in OPERATORS:
            for flip in (False, True):
                got = op(scalar, t) if flip else op(t, scalar)
                want = op(scalar.item(), t) if flip else op(t, scalar.item())
                cases.append((got, want))
    Tensor.realize(*(g for g, _ in cases), *(w for _, w in cases))
    for got, want in cases:
        assert isinstance(got, Tensor) and got.dtype is want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_numpy_scalar_dtypes_follow_pytorch() -> None:
    """PyTorch 2.13's result dtypes for `numpy scalar * tensor` (bool tensors aside: a Python int makes a
    bool tensor int32 in uopc, where PyTorch takes int64)."""
    f32, f16, i32, i8 = (Tensor(np.ones(2, d)) for d in (np.float32, np.float16, np.int32, np.int8))
    for scalar in (np.float32(2), np.float64(2), np.float16(2)):
        assert [(scalar * t).dtype for t in (f32, f16, i32, i8)] == [dtypes.f32, dtypes.f16, dtypes.f32, dtypes.f32]
    for integer in (np.int64(2), np.int32(2), np.int8(2), np.uint8(2)):
        assert [(integer * t).dtype for t in (f32, f16, i32, i8)] == [dtypes.f32, dtypes.f16, dtypes.i32, dtypes.i8]


def test_numpy_arrays_and_ufuncs_do_not_silently_compute_eagerly() -> None:
    """numpy would turn the tensor into an array: the result would lose laziness and gradients."""
    t, a = Tensor(A), np.ones(3, np.float32)
    calls: list[Callable[[], Any]] = [lambda: a + t, lambda: t + a, lambda: a @ t.T]
    calls += [lambda: np.exp(t), lambda: np.add(t, 1)]
    for call in calls:
        with pytest.raises(TypeError):
            call()


# ---- operators with other types ----


def test_operators_give_python_type_errors_for_other_types() -> None:
    t: Any = Tensor(A)
    calls: list[Callable[[], Any]] = [
        lambda: t + "a",
        lambda: "a" + t,
        lambda: t * [1, 2],
        lambda: t < None,
        lambda: t <= None,
        lambda: t @ [[1.0]],
        lambda: t ** "2",
        lambda: 1j * t,
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()
    assert (t == None) is False and (t != None) is True  # noqa: E711 - identity, as in PyTorch
    assert (t == "a") is False


def test_reflected_and_unary_operators() -> None:
    i = np.array([[-7, 3, 0, 5]], np.int32)
    u = np.array([0, 1, 200], np.uint8)
    b = np.array([True, False, True])
    ti, tu, tb = Tensor(i), Tensor(u), Tensor(b)
    cases = [
        (17 // Tensor(np.array([5, -5, 3], np.int32)), 17 // np.array([5, -5, 3], np.int32)),
        (17 % Tensor(np.array([5, -5, 3], np.int32)), 17 % np.array([5, -5, 3], np.int32)),
        (True & tb, True & b),
        (6 | ti, 6 | i),
        (6 ^ ti, 6 ^ i),
        (~tb, ~b),
        (~ti, ~i),
        (~tu, ~u),
        (abs(Tensor(A)), np.abs(A)),
        (abs(ti), np.abs(i)),
    ]
    Tensor.realize(*(t for t, _ in cases))
    for t, want in cases:
        assert t.numpy().dtype == want.dtype
        np.testing.assert_array_equal(t.numpy(), want)
    with pytest.raises(TensorError, match="invert"):
        ~Tensor(A)


# ---- dtypes by any name, and values that must fit them ----

SPELLINGS: list[Any] = [dtypes.float16, np.float16, np.dtype("float16"), "float16", "f16"]


@pytest.mark.parametrize("spelling", SPELLINGS, ids=repr)
def test_every_function_reads_a_dtype_the_same_way(spelling: Any) -> None:
    """Tensor([1.], dtype=np.float32) and dtype="float32" failed with AttributeError."""
    x = Tensor(A)
    made = [
        Tensor([1.0, 2.0], dtype=spelling),
        Tensor.full((2,), 1.5, spelling),
        Tensor.zeros(2, dtype=spelling),
        Tensor.ones(2, dtype=spelling),
        Tensor.arange(3, dtype=spelling),
        Tensor.eye(2, dtype=spelling),
        Tensor.rand(2, dtype=spelling),
        Tensor.randn(2, dtype=spelling),
        Tensor.uniform(2, dtype=spelling),
        x.cast(spelling),
        x.zeros_like(dtype=spelling),
        x.ones_like(spelling),
    ]
    assert [t.dtype for t in made] == [dtypes.float16] * len(made)


def test_dtype_spellings_of_numpy_and_python() -> None:
    assert Tensor([1], dtype=np.int64).dtype is dtypes.int64
    assert Tensor([1], dtype="u8").dtype is dtypes.uint8  # uopc's short names, as in .uir text
    assert Tensor([1], dtype=np.bool_).dtype is dtypes.bool and Tensor([1], dtype=bool).dtype is dtypes.bool
    assert Tensor([1], dtype=float).dtype is dtypes.float64  # Python's float is a double, as in numpy and torch
    assert Tensor([1.0]).cast("bfloat16").dtype is dtypes.bfloat16


NOT_DTYPES: list[Any] = ["float", "i4", "floatt", "void", dtypes.void, None, np.complex64, object, 4, [np.float32]]


@pytest.mark.parametrize("bad", NOT_DTYPES)
def test_things_that_are_not_dtypes_are_refused_by_name(bad: Any) -> None:
    with pytest.raises(TensorError, match="is not a dtype; give a uopc dtype") as info:
        Tensor(A).cast(bad)
    assert "float32" in str(info.value) and "bfloat16" in str(info.value)


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: Tensor.full((2,), 2**40, dtypes.int32), "1099511627776 does not fit int32"),
        (lambda: Tensor.full((2,), -1, dtypes.uint8), "-1 does not fit uint8"),
        (lambda: Tensor.full((2,), 256, "uint8"), "256 does not fit uint8"),
        (lambda: Tensor.full((2,), math.inf, dtypes.int64), "inf does not fit int64"),
        (lambda: Tensor.full((2,), 1e6, dtypes.float16), "beyond the range of float16"),
        (lambda: Tensor.full((2,), 1e39, dtypes.bfloat16), "beyond the range of bfloat16"),
        (lambda: Tensor.full((), 128, dtypes.int8), "128 does not fit int8"),
        (lambda: Tensor([2**40], dtype=dtypes.int32), "do not fit int32"),
        (lambda: Tensor(np.array([1, 2**40]), dtype=dtypes.int32), "do not fit int32"),  # numpy's astype wraps
        (lambda: Tensor(np.array([3e9]), dtype=dtypes.int32), "from 3000000000 to 3000000000 do not fit"),
        (lambda: Tensor([-1, 5], dtype=dtypes.uint8), "from -1 to 5 do not fit uint8"),
        (lambda: Tensor([math.nan], dtype=dtypes.int32), "NaN and inf have no int32 value"),
        (lambda: Tensor([1e6], dtype=dtypes.float16), "beyond the range of float16"),
        (lambda: Tensor(np.array([70000], np.int32), dtype=dtypes.float16), "beyond the range of float16"),
        (lambda: Tensor([1e300]), "beyond the range of float32"),  # the default float32 of Python floats
        (lambda: Tensor([2**63]), "do not fit int64"),
        (lambda: Tensor([2**64]), "numbers beyond 64 bits"),
        (lambda: Tensor.arange(2**31 - 1, 2**31 + 1, dtype=dtypes.int32), "do not fit int32"),
        (lambda: Tensor([True]).where(Tensor(np.ones(1, np.int8)), 300), "300 does not fit int8"),
        (lambda: Tensor.uniform(2, low=1e39, high=2e39), "beyond the range of float32"),
    ],
)
def test_values_a_dtype_cannot_hold_are_refused(make: Callable[[], Any], fragment: str) -> None:
    """Tensor.full((2,), 2**40, dtypes.int32) stored 0, and an int64 array given dtype=int32 wrapped."""
    with pytest.raises(TensorError, match=fragment):
        make()


def test_values_a_dtype_can_hold_are_kept_as_numpy_keeps_them() -> None:
    cases: list[tuple[Tensor, Any]] = [
        (Tensor.full((2,), 2**31 - 1, dtypes.int32), np.full(2, 2**31 - 1, np.int32)),
        (Tensor.full((2,), -(2**63), dtypes.int64), np.full(2, -(2**63), np.int64)),
        (Tensor.full((2,), 2**64 - 1, dtypes.uint64), np.full(2, 2**64 - 1, np.uint64)),
        (Tensor.full((2,), 2.7, dtypes.int32), np.full(2, 2.7).astype(np.int32)),  # truncated
        (Tensor.full((2,), -math.inf, dtypes.float16), np.full(2, -np.inf, np.float16)),
        (Tensor.full((2,), 65504.0, dtypes.float16), np.full(2, 65504, np.float16)),
        (Tensor.full((2,), 2, dtypes.bool), np.full(2, True)),
        (Tensor.full((2,), np.int64(3)), np.full(2, 3, np.int32)),  # a numpy int is an int, not a float
        (Tensor([1.7, -1.7, 2.0**31 - 1], dtype=dtypes.int32), np.array([1.7, -1.7, 2.0**31 - 1]).astype(np.int32)),
        (Tensor([2**31]), np.array([2**31], np.int64)),
        (Tensor([math.nan, math.inf], dtype=dtypes.float16), np.array([np.nan, np.inf], np.float16)),
        (Tensor(np.array([3.4028235e38])), np.array([3.4028235e38])),  # float64 data stays float64
        (Tensor([3.4028235e38]), np.array([3.4028235e38], np.float32)),  # float32's largest value
        (Tensor.arange(2**31, 2**31 + 2), np.arange(2**31, 2**31 + 2)),  # int64 where int32 cannot hold them
    ]
    for t, want in cases:
        got = t.numpy()
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)


NUMPY_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "float16", "float32", "float64"]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(NUMPY_DTYPES),
    st.sampled_from(NUMPY_DTYPES),
    st.lists(st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([math.inf, -math.inf, math.nan]), max_size=5),
)
def test_an_array_becomes_a_tensor_as_numpy_casts_it_or_is_refused(
    source: str, target: str, values: list[float]
) -> None:
    """A cast numpy calls safe skips the checks (_fitted); every other cast is checked. Either way a tensor
    holds numpy's astype of the array exactly, or, where numpy would wrap or overflow, is refused."""
    with np.errstate(all="ignore"):
        arr = np.array(values, np.float64).astype(source)
        want = arr.astype(target)
    is_int = target != "bool" and np.dtype(target).kind in "iu"
    wraps = is_int and not np.array_equal(want, np.trunc(arr), equal_nan=True)
    overflows = bool((np.isinf(want) & np.isfinite(arr)).any()) if np.dtype(target).kind == "f" else False
    try:
        got = Tensor(arr, dtype=target).numpy()
    except TensorError:
        assert wraps or overflows, f"{arr!r} as {target} was refused, and numpy's cast keeps it"
        return
    assert not (wraps or overflows), f"{arr!r} as {target} was not refused: {got!r}"
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# ---- shapes, axes and the creation functions ----


def test_sizes_and_axes_must_be_integers() -> None:
    """zeros(2.7) made 2 elements; sum(True) summed axis 1; sum(np.int64(1)) failed; zeros(0) failed in the IR."""
    x = Tensor(A)
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        Tensor.zeros(2.7)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        x.reshape(3.0, 2)  # type: ignore[arg-type]
    negatives: list[Callable[[], Tensor]] = [lambda: Tensor.ones(3, -1), lambda: Tensor.rand(-2)]
    for negative in negatives:
        with pytest.raises(TensorError, match=r"must be >= 0"):
            negative()
    with pytest.raises(TensorError, match="axis True is not an integer"):
        x.sum(cast(Any, True))
    with pytest.raises(TensorError, match=r"axis 1\.0 is not an integer"):
        x.max(cast(Any, 1.0))
    with pytest.raises(TensorError, match="argmax: axis must be one integer or None"):
        x.argmax(cast(Any, (0, 1)))
    numpy_int: Any = np.int64  # numpy integers work where ints do, though the signatures say int
    cases = [
        (x.sum(numpy_int(1)), A.sum(1)),
        (x.max((numpy_int(0), -1)), A.max((0, 1))),
        (x.reshape(numpy_int(3), 2), A.reshape(3, 2)),
        (Tensor.zeros(numpy_int(2), dtype=dtypes.int8), np.zeros(2, np.int8)),
        (x.argmax(keepdim=True), np.argmax(A, keepdims=True)),  # keepdim was dropped without an axis
        (x.argmin(keepdim=True), np.argmin(A, keepdims=True)),
        (Tensor(np.zeros((1, 2, 1, 1), np.float32)).squeeze((0, 1, -1)), np.zeros((2, 1), np.float32)),
    ]
    Tensor.realize(*(t for t, _ in cases))
    for t, want in cases:
        assert t.shape == want.shape
        np.testing.assert_array_equal(t.numpy(), want)


def test_random_tensors_are_floats_in_their_ranges() -> None:
    """rand(dtype=int32) was all zeros; rand in float16 rounded draws near 1 up to 1.0, outside [0, 1)."""
    Tensor.manual_seed(0)
    for dt in (dtypes.float16, dtypes.float32, dtypes.float64):
        r = Tensor.rand(100_000, dtype=dt).numpy()
        assert r.dtype == dt.np_name and r.min() >= 0.0 and r.max() < 1.0 and r.max() > 0.99
    for make in (Tensor.rand, Tensor.randn, Tensor.uniform):
        with pytest.raises(TensorError, match="needs a float dtype, not int32"):
            make(3, dtype=dtypes.int32)


def test_like_constructors_are_methods_that_take_a_dtype() -> None:
    x = Tensor(np.ones((2, 3), np.int8))
    for t in (x.zeros_like(), Tensor.zeros_like(x), x.ones_like(), x.ones_like(dtype="float32")):
        assert t.shape == (2, 3) and t.device == x.device
    assert x.zeros_like().dtype is dtypes.int8 and x.ones_like(dtype="float32").dtype is dtypes.float32
    with pytest.raises(TensorError, match="is not a dtype"):
        x.zeros_like(cast(Any, Tensor(A)))  # x.zeros_like(y) cannot silently mean y.zeros_like()


def test_where_refuses_tensors_on_other_devices() -> None:
    """The graph was built, and realized on the condition's device with the other device's buffer."""
    with pytest.raises(TensorError, match="where: tensors on different devices"):
        Tensor([True]).where(Tensor([1.0]), Tensor.full((1,), 2.0, device="ELSEWHERE"))


def test_numpy_integer_exponents_keep_integer_tensors_integer() -> None:
    t = Tensor(np.array([2, -3], np.int32))
    assert (t ** np.int64(3)).dtype is dtypes.int32
    np.testing.assert_array_equal((t ** np.int64(3)).numpy(), [8, -27])


# ---- copies and pickles ----


def test_a_deep_copy_is_a_leaf_of_its_own() -> None:
    """deepcopy shared the graph: the copy's gradient went to the original, and the copy got none."""
    w = Tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    w2 = copy.deepcopy(w)
    (w2 * 3).sum().backward()
    assert w.grad is None and w2.grad is not None
    np.testing.assert_array_equal(w2.grad.numpy(), [3.0, 3.0])
    model = Linear(3, 2)
    twin = copy.deepcopy(model)
    twin(Tensor(np.ones((1, 3), np.float32))).sum().backward()
    assert model.weight.grad is None and twin.weight.grad is not None
    np.testing.assert_array_equal(twin.weight.numpy(), model.weight.numpy())
    shared = [w, w]
    copied = copy.deepcopy(shared)
    assert copied[0] is copied[1] and copied[0] is not w


def test_a_pickled_tensor_holds_its_values() -> None:
    """The pickle held the graph only: once the original buffer was freed (or in another process), the
    loaded tensor had no data."""
    t = Tensor(np.array([[1.5, -2.0]], np.float32)) * 2
    data = pickle.dumps(t)
    del t
    gc.collect()
    loaded = pickle.loads(data)
    assert loaded.dtype is dtypes.float32 and not loaded.requires_grad
    np.testing.assert_array_equal(loaded.numpy(), [[3.0, -4.0]])
    leaf = pickle.loads(pickle.dumps(Tensor(np.ones(2, np.float16), requires_grad=True)))
    assert leaf.requires_grad and leaf.dtype is dtypes.float16


# ---- augmented assignment ----


def test_augmented_assignment_changes_the_tensor_itself() -> None:
    """`p -= lr * g` rebound the loop variable only: the model's parameter never changed."""
    x = Tensor(A)
    alias = x
    x += 1.0
    x *= Tensor(np.array([2.0, 1.0, -1.0], np.float32))
    i = Tensor(np.array([7, -7], np.int32))
    same_i = i
    i //= 2
    i **= 2
    i ^= 1
    b = Tensor(np.array([True, False]))
    same_b = b
    b |= Tensor(np.array([False, True]))
    b &= True
    np.testing.assert_array_equal(alias.numpy(), (A + 1) * [2.0, 1.0, -1.0])
    np.testing.assert_array_equal(same_i.numpy(), ((np.array([7, -7], np.int32) // 2) ** 2) ^ 1)
    np.testing.assert_array_equal(same_b.numpy(), [True, True])


def test_a_manual_sgd_step_updates_the_model() -> None:
    Tensor.manual_seed(0)
    model = Linear(3, 2)
    before = model.weight.numpy()
    model(Tensor(np.ones((4, 3), np.float32))).sum().backward()
    for p in model.parameters():
        with pytest.raises(TensorError, match="on a leaf that requires grad"):
            p -= 0.1 * cast(Tensor, p.grad)  # noqa: PLW2901 - in place, as in PyTorch, and refused outside no_grad
    with Tensor.no_grad():
        for p in model.parameters():
            p -= 0.1 * cast(Tensor, p.grad)  # noqa: PLW2901 - changes the parameter itself
    assert model.weight.requires_grad and model.weight.dtype is dtypes.float32
    np.testing.assert_allclose(model.weight.numpy(), before - 0.1 * 4.0, rtol=1e-6)  # d sum / d w = 4 (batch)
    model(Tensor(np.ones((1, 3), np.float32))).sum().backward()  # still a leaf that backward reaches
    assert model.weight.grad is not None


def test_augmented_assignment_keeps_shape_dtype_and_gradients() -> None:
    x = Tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    h = x * 3.0
    h += x  # an intermediate may change: the gradient goes through both terms
    h.sum().backward()
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    i = Tensor(np.array([1, 2], np.int32))
    with pytest.raises(TensorError, match=r"/=: the result, float32 of shape \(2,\), would not fit the tensor, int32"):
        i /= 2
    row = Tensor(np.ones(3, np.float32))
    with pytest.raises(TensorError, match=r"\(2, 3\), would not fit"):
        row += Tensor(A)
    with pytest.raises(TypeError):
        row += "a"


def test_a_leaf_can_be_marked_twice() -> None:
    """The leaves were a WeakSet, which compares two weak references by the tensors' ==: elementwise, so
    marking a tensor again raised 'ambiguous' once bool() of a tensor stopped being always True."""
    t = Tensor(np.ones(3, np.float32), requires_grad=True)
    t.requires_grad_().requires_grad_()
    (t * 2).sum().backward()
    assert t.grad is not None
    np.testing.assert_array_equal(t.grad.numpy(), [2.0, 2.0, 2.0])


# ---- arguments that were read as something else ----


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda x: x.shrink([(0, 2), (0.5, 2)]), r"shrink: \(0.5, 2\) is not a pair of integers"),  # kept [0, 2)
        (lambda x: x.shrink([(0, True), None]), r"shrink: \(0, True\) is not a pair of integers"),
        (lambda x: x.pad([(0, 0), (0.5, 1)]), r"pad: \(0.5, 1\) is not a pair of integers"),  # padded 0 before
        (lambda x: x.unsqueeze(cast(Any, True)), "unsqueeze: dim True is not an integer"),  # was dim 1
        (lambda x: x.cast(dtypes.int32).one_hot(cast(Any, 2.5)), "num_classes must be a positive integer, got 2.5"),
        (lambda x: x.cast(dtypes.int32).one_hot(cast(Any, True)), "num_classes must be a positive integer, got True"),
        (lambda x: x.sum().backward(), "depends on no tensor that requires grad"),  # torch raises too
        (lambda x: x.matmul(cast(Any, [[1.0]])), "matmul: needs a tensor, got a list"),
        (lambda x: x.cross_entropy(cast(Any, [0, 1])), "cross_entropy: needs a tensor, got a list"),
    ],
)
def test_arguments_of_the_wrong_kind_are_refused(call: Callable[[Tensor], Any], fragment: str) -> None:
    """Each of these once did something else without a word (the comment says what), or failed with an
    AttributeError."""
    with pytest.raises(TensorError, match=fragment):
        call(Tensor(np.abs(A)))


def test_backward_in_no_grad_is_refused() -> None:
    w = Tensor(np.ones(2, np.float32), requires_grad=True)
    with Tensor.no_grad():
        loss = (w * 2).sum()
    with pytest.raises(TensorError, match="made in no_grad"):
        loss.backward()
    assert w.grad is None


def test_a_float_constant_beyond_the_tensors_float_type_is_refused() -> None:
    """f16 * 1e6 rounded the constant to inf first (numpy does so too, with an overflow warning): the
    product of 0.001 and 1e6 was inf. Integers out of range were refused already."""
    h = Tensor(np.array([1e-3, 2.0], np.float16))
    calls: list[Callable[[], Any]] = [lambda: h * 1e6, lambda: 1e6 * h, lambda: h < 7e4, lambda: h.maximum(-1e5)]
    for call in calls:
        with pytest.raises(TensorError, match="beyond the range of float16"):
            call()
    np.testing.assert_array_equal((h + math.inf).numpy(), [np.inf, np.inf])  # inf itself is a float16 value
    small = np.array([1e-3, 0.5], np.float16)
    np.testing.assert_array_equal((Tensor(small) * 65504.0).numpy(), small * np.float16(65504))  # the largest
