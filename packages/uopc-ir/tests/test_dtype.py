"""dtypes: sizes, spellings, limits, promotion and pointer types.

The oracles are outside uopc: `struct` knows the size and range of every C scalar type, and the C and
numpy spellings are written out here as the C standard and numpy spell them.
"""

import struct
from itertools import product

import pytest

from uopc.ir import AddrSpace, DType, PtrDType, dtypes, promote

# name -> (struct format code, C spelling, numpy spelling)
SCALARS = {
    "bool": ("?", "bool", "bool_"),
    "int8": ("b", "signed char", "int8"),
    "int16": ("h", "short", "int16"),
    "int32": ("i", "int", "int32"),
    "int64": ("q", "long long", "int64"),
    "uint8": ("B", "unsigned char", "uint8"),
    "uint16": ("H", "unsigned short", "uint16"),
    "uint32": ("I", "unsigned int", "uint32"),
    "uint64": ("Q", "unsigned long long", "uint64"),
    "float16": ("e", "_Float16", "float16"),
    "float32": ("f", "float", "float32"),
    "float64": ("d", "double", "float64"),
}
INTS = [d for d in dtypes.all() if d.is_int]
FLOATS = [d for d in dtypes.all() if d.is_float]


@pytest.mark.parametrize("name", SCALARS)
def test_itemsize_and_spellings_match_c_and_numpy(name: str) -> None:
    code, c_name, np_name = SCALARS[name]
    d = dtypes.by_name(name)
    assert d.itemsize == struct.calcsize("<" + code)
    assert d.bits == 8 * d.itemsize
    assert (d.c_name, d.np_name) == (c_name, np_name)


def test_bfloat16_is_the_top_half_of_a_float32() -> None:
    # struct has no bfloat16; it is defined as the upper 16 bits of an IEEE float32
    assert dtypes.bfloat16.itemsize == 2
    assert dtypes.bfloat16.is_float
    assert dtypes.bfloat16.c_name == "__bf16"


@pytest.mark.parametrize("d", INTS, ids=str)
def test_integer_limits_are_what_struct_can_pack(d: DType) -> None:
    code = SCALARS[d.name][0]
    lo, hi = d.min, d.max
    assert isinstance(lo, int) and isinstance(hi, int)
    struct.pack("<" + code, lo)
    struct.pack("<" + code, hi)
    with pytest.raises(struct.error):
        struct.pack("<" + code, lo - 1)
    with pytest.raises(struct.error):
        struct.pack("<" + code, hi + 1)


def test_kinds() -> None:
    assert [d.name for d in dtypes.all() if d.is_bool] == ["bool"]
    assert {d.name for d in INTS} == {f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}
    assert {d.name for d in FLOATS} == {"float16", "bfloat16", "float32", "float64"}
    assert not dtypes.bool.is_int  # bool is its own kind: AND of bools is logic, not arithmetic
    assert all(d.min == float("-inf") and d.max == float("inf") for d in FLOATS)
    assert (dtypes.bool.min, dtypes.bool.max) == (0, 1)


def test_short_and_long_names_are_one_object() -> None:
    for d in dtypes.all():
        assert dtypes.by_name(d.name) is d
        assert dtypes.by_name(d.short) is d
    assert dtypes.f32 is dtypes.float32
    assert dtypes.index is dtypes.int32
    assert dtypes.by_name("void") is dtypes.void


def test_unknown_dtype_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown dtype 'float8'.*f32"):
        dtypes.by_name("float8")


def test_from_numpy_names() -> None:
    for name, (_, _, np_name) in SCALARS.items():
        assert dtypes.from_numpy(np_name) is dtypes.by_name(name)
    with pytest.raises(ValueError, match="complex64"):
        dtypes.from_numpy("complex64")


# ---- promotion ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ("bool", "int8", "int8"),  # bool < integers
        ("bool", "float16", "float16"),  # bool < floats
        ("int64", "float16", "float16"),  # integers < floats, whatever their width
        ("uint64", "float32", "float32"),
        ("int8", "int32", "int32"),  # same signedness: the wider
        ("uint8", "uint64", "uint64"),
        ("uint8", "int8", "int16"),  # mixed: the narrowest signed type holding both
        ("uint16", "int8", "int32"),
        ("uint32", "int32", "int64"),
        ("uint8", "int32", "int32"),  # the signed one already holds the unsigned one
        ("uint64", "int64", "float64"),  # no integer holds both: float64, as numpy does
        ("float16", "bfloat16", "float32"),  # neither holds the other
        ("float16", "float32", "float32"),
        ("bfloat16", "float64", "float64"),
    ],
)
def test_documented_promotions(a: str, b: str, want: str) -> None:
    da, db = dtypes.by_name(a), dtypes.by_name(b)
    assert promote(da, db) is dtypes.by_name(want)
    assert promote(db, da) is dtypes.by_name(want)


def _narrowest_int_holding(a: DType, b: DType) -> DType:
    """The oracle for integer promotion, from the limits alone: the narrowest integer type whose range
    contains both ranges, of their kind if they share one, else signed; float64 when there is none."""
    kinds = {a.kind} if a.kind == b.kind else {"int"}
    fits = [d for d in INTS if d.kind in kinds and d.min <= min(a.min, b.min) and d.max >= max(a.max, b.max)]
    return min(fits, key=lambda d: d.itemsize) if fits else dtypes.float64


@pytest.mark.parametrize(("a", "b"), list(product(INTS, INTS)), ids=str)
def test_integer_promotion_is_the_narrowest_type_holding_both(a: DType, b: DType) -> None:
    assert promote(a, b) is _narrowest_int_holding(a, b)


@pytest.mark.parametrize(("a", "b"), list(product(dtypes.all(), dtypes.all())), ids=str)
def test_promotion_is_symmetric_and_never_narrows(a: DType, b: DType) -> None:
    p = promote(a, b)
    assert p is promote(b, a)
    assert promote(a, a) is a
    # a float operand makes the result a float at least as wide as every float operand (the other operand
    # may be a wider integer: integers < floats, as documented)
    floats = [d for d in (a, b) if d.is_float]
    if floats:
        assert p.is_float and p.itemsize >= max(d.itemsize for d in floats)
    elif a.is_bool or b.is_bool:
        assert p is (b if a.is_bool else a)


# ---- pointers -------------------------------------------------------------------------------------------


def test_pointer_defaults_to_global_memory() -> None:
    p = dtypes.float32.ptr()
    assert isinstance(p, PtrDType)
    assert (p.base, p.addrspace) == (dtypes.float32, AddrSpace.GLOBAL)
    assert p.name == "ptr[f32, global]"


def test_pointers_compare_by_base_and_address_space() -> None:
    shared = dtypes.float32.ptr(AddrSpace.SHARED)
    assert shared == dtypes.float32.ptr(AddrSpace.SHARED)
    assert hash(shared) == hash(dtypes.float32.ptr(AddrSpace.SHARED))
    assert shared != dtypes.float32.ptr()
    assert shared != dtypes.int32.ptr(AddrSpace.SHARED)
    assert dtypes.int8.ptr(AddrSpace.REGISTER).name == "ptr[i8, register]"
    assert len({dtypes.f32.ptr(a) for a in AddrSpace}) == len(AddrSpace)


def test_repr_is_the_expression_that_names_the_type() -> None:
    assert repr(dtypes.int64) == "dtypes.int64"
    assert "dtypes.float16" in repr(dtypes.float16.ptr(AddrSpace.SHARED))
