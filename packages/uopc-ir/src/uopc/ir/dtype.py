"""Scalar and pointer types of the IR, and the rules that promote one scalar type to another.

A `DType` names a scalar type once, with everything each stage of the compiler needs to know about it:
its size, its kind (bool, signed, unsigned, float), how C spells it and how numpy spells it. Pointer types
(`PtrDType`) add an address space: where the memory they point to lives.
"""

from __future__ import annotations

import builtins
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from uopc.ir.errors import UOpError

Kind = Literal["void", "bool", "int", "uint", "float"]


@dataclass(frozen=True, eq=False)
class DType:
    """A scalar type. There is exactly one object per type, so `is` compares types."""

    name: str  # the canonical long name: "float32"
    short: str  # the name the .uir text uses: "f32"
    itemsize: int  # bytes
    kind: Kind
    c_name: str  # how C spells it
    np_name: str  # how numpy spells it

    @property
    def bits(self) -> int:
        return 8 * self.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for signed and unsigned integers, not for bool."""
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def min(self) -> int | float:
        """The smallest value of the type (-inf for floats)."""
        if self.kind == "float":
            return -math.inf
        if self.kind == "int":
            return -(1 << (self.bits - 1))
        return 0

    @property
    def max(self) -> int | float:
        """The largest value of the type (inf for floats)."""
        if self.kind == "float":
            return math.inf
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1
        if self.kind == "bool":
            return 1
        return (1 << self.bits) - 1

    def ptr(self, addrspace: AddrSpace | None = None) -> PtrDType:
        """A pointer to this type, in global memory unless told otherwise."""
        return PtrDType(self, AddrSpace.GLOBAL if addrspace is None else addrspace)

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    def __reduce__(self) -> tuple[Callable[[str], DType], tuple[str]]:
        """Pickle and copy by name, so the one object per type stays one (and `is` keeps comparing types)."""
        return (dtypes.by_name, (self.name,))


class AddrSpace(enum.Enum):
    """Where the memory behind a pointer lives."""

    GLOBAL = "global"  # device memory every thread can read: kernel arguments
    SHARED = "shared"  # memory shared by the threads of one GPU block ("local" in OpenCL)
    REGISTER = "register"  # private to one thread: accumulators and register tiles


@dataclass(frozen=True)
class PtrDType:
    """A pointer to `base` elements in the address space `addrspace`."""

    base: DType
    addrspace: AddrSpace

    @property
    def name(self) -> str:
        return f"ptr[{self.base.short}, {self.addrspace.value}]"

    @property
    def short(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{self.base!r}.ptr({self.addrspace})"


AnyDType = DType | PtrDType


class dtypes:
    """Every scalar type, by long and short name: `dtypes.float32 is dtypes.f32`."""

    void = DType("void", "void", 0, "void", "void", "void")
    """The type of nodes that make no value: STORE, SINK, a loop's END."""
    bool = DType("bool", "bool", 1, "bool", "bool", "bool_")
    int8 = DType("int8", "i8", 1, "int", "signed char", "int8")
    int16 = DType("int16", "i16", 2, "int", "short", "int16")
    int32 = DType("int32", "i32", 4, "int", "int", "int32")
    int64 = DType("int64", "i64", 8, "int", "long long", "int64")
    uint8 = DType("uint8", "u8", 1, "uint", "unsigned char", "uint8")
    uint16 = DType("uint16", "u16", 2, "uint", "unsigned short", "uint16")
    uint32 = DType("uint32", "u32", 4, "uint", "unsigned int", "uint32")
    uint64 = DType("uint64", "u64", 8, "uint", "unsigned long long", "uint64")
    float16 = DType("float16", "f16", 2, "float", "_Float16", "float16")
    bfloat16 = DType("bfloat16", "bf16", 2, "float", "__bf16", "bfloat16")
    float32 = DType("float32", "f32", 4, "float", "float", "float32")
    float64 = DType("float64", "f64", 8, "float", "double", "float64")
    i8, i16, i32, i64 = int8, int16, int32, int64
    u8, u16, u32, u64 = uint8, uint16, uint32, uint64
    f16, bf16, f32, f64 = float16, bfloat16, float32, float64

    index = int32
    """The type of loop indices and buffer offsets that `range_` gives by default. rangeify builds a kernel's
    index arithmetic in int64 and narrows it to int32 only where bounds prove every value fits."""

    default_int = int32
    default_float = float32

    @staticmethod
    def all() -> tuple[DType, ...]:
        return ALL_DTYPES

    @staticmethod
    def by_name(name: str) -> DType:
        """Look a type up by its long or short name ("float32" or "f32")."""
        found = _BY_NAME.get(name)
        if found is None:
            known = ", ".join(d.short for d in ALL_DTYPES)
            raise UOpError(f"unknown dtype {name!r}; known dtypes: {known}")
        return found

    @staticmethod
    def from_python(value: builtins.bool | int | float) -> DType:
        """The type a Python constant takes by default: bool, default_int (int32) or default_float (float32)."""
        if isinstance(value, bool):
            return dtypes.bool
        return dtypes.default_int if isinstance(value, int) else dtypes.default_float

    @staticmethod
    def from_numpy(np_name: str) -> DType:
        """The type numpy calls `np_name` (the `str` of a numpy dtype, such as "float32")."""
        for d in ALL_DTYPES:
            if np_name in (d.np_name, d.name):
                return d
        raise UOpError(f"numpy dtype {np_name!r} has no uopc equivalent")


ALL_DTYPES: tuple[DType, ...] = (
    dtypes.bool,
    dtypes.int8,
    dtypes.int16,
    dtypes.int32,
    dtypes.int64,
    dtypes.uint8,
    dtypes.uint16,
    dtypes.uint32,
    dtypes.uint64,
    dtypes.float16,
    dtypes.bfloat16,
    dtypes.float32,
    dtypes.float64,
)
_BY_NAME = {d.name: d for d in ALL_DTYPES} | {d.short: d for d in ALL_DTYPES} | {"void": dtypes.void}


def promote(a: DType, b: DType) -> DType:
    """The type two operands of different types are both cast to before a binary op.

    bool < integers < floats. Two integers of the same signedness give the wider one; a signed and an
    unsigned integer give the narrowest signed integer holding both, or float64 when none does (as in
    numpy). Two floats give the wider one; float16 with bfloat16 gives float32, since neither holds the other.
    """
    if a is b:
        return a
    if a.is_bool or b.is_bool:
        return b if a.is_bool else a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_float:
        if a.itemsize == b.itemsize:  # float16 and bfloat16
            return dtypes.float32
        return a if a.itemsize > b.itemsize else b
    if a.kind == b.kind:
        return a if a.itemsize > b.itemsize else b
    signed, unsigned = (a, b) if a.kind == "int" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    wider = {1: dtypes.int16, 2: dtypes.int32, 4: dtypes.int64}
    return wider.get(unsigned.itemsize, dtypes.float64)
