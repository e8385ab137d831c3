"""Program: a compiled C function callable on numpy arrays, with every array checked against its parameter
before C could read or write out of bounds; and CompileError, which shows gcc's message beside the source."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from uopc.backend.c import ArgumentError, CompileError, Program, build_library

SOURCE = """
void axpy(const float data0[restrict static 4], const int data1[restrict static 2], float data2[restrict static 4]) {
  for (int i = 0; i < 4; i++) data2[i] = data0[i] * 2.0f + (float)data1[i % 2];
}
"""


@pytest.fixture(scope="module")
def axpy() -> Program:
    return Program(SOURCE, "axpy")


def arrays() -> list[Any]:
    return [np.arange(4, dtype=np.float32), np.array([10, 20], np.int32), np.zeros(4, np.float32)]


def test_program_computes(axpy: Program) -> None:
    args = arrays()
    axpy(*args)
    np.testing.assert_array_equal(args[2], [10.0, 22.0, 14.0, 26.0])
    assert [(p.name, p.dtype.name, p.size, p.const) for p in axpy.params] == [
        ("data0", "float32", 4, True),
        ("data1", "int32", 2, True),
        ("data2", "float32", 4, False),
    ]


def read_only(a: Any) -> Any:
    a.flags.writeable = False
    return a


@pytest.mark.parametrize(
    ("position", "make", "message"),
    [
        (0, lambda: np.arange(4, dtype=np.float64), r"axpy: data0 is dtype float64, expected float32"),
        (1, lambda: np.array([1, 2], np.int64), r"data1 is dtype int64, expected int32"),
        (0, lambda: np.zeros(5, np.float32), r"data0 is 5 elements \(shape \(5,\)\), expected 4"),
        (2, lambda: np.zeros((2, 2), np.float32).T, r"data2 is not C-contiguous"),
        (0, lambda: np.zeros(8, np.float32)[::2], r"data0 is not C-contiguous"),
        (2, lambda: read_only(np.zeros(4, np.float32)), r"data2 is read-only, but the kernel writes it"),
        (1, lambda: [1, 2], r"data1 must be a numpy array, got list"),
    ],
    ids=["dtype", "dtype-int", "size", "transposed", "strided", "read-only-output", "not-an-array"],
)
def test_bad_argument_is_refused_naming_the_parameter(axpy: Program, position: int, make: Any, message: str) -> None:
    args = arrays()
    args[position] = make()
    with pytest.raises(ArgumentError, match=message):
        axpy(*args)
    if position != 2:  # nothing was written: the check comes before the call
        assert not args[2].any()


def test_read_only_input_is_accepted(axpy: Program) -> None:
    # const parameters are never written, so a read-only array is fine there
    args = arrays()
    args[0] = read_only(args[0])
    axpy(*args)
    assert args[2][1] == 22.0


def test_output_sharing_memory_with_an_input_is_refused(axpy: Program) -> None:
    # the parameters are declared restrict: C may assume a written array aliases nothing else
    buf = np.arange(8, dtype=np.float32)
    with pytest.raises(ArgumentError, match="data2 shares memory with data0"):
        axpy(buf[:4], np.array([1, 2], np.int32), buf[:4])
    axpy(buf[:4], np.array([1, 2], np.int32), buf[4:])  # two halves of one array do not overlap
    np.testing.assert_array_equal(buf[4:], [1.0, 4.0, 5.0, 8.0])


def test_overlap_with_an_array_that_is_not_the_next_one_is_refused(axpy: Program) -> None:
    # in address order data0 [0, 16), data1 [4, 12), data2 [12, 28): data2 overlaps data0, though data1 lies
    # between their starts (and overlaps neither the written array nor, being read-only, matters with data0)
    base = np.zeros(8, np.float32)
    x, idx, out = base[0:4], base[1:3].view(np.int32), base[3:7]
    with pytest.raises(ArgumentError, match="data2 shares memory with data0"):
        axpy(x, idx, out)


@pytest.mark.parametrize("count", [2, 4])
def test_wrong_number_of_arrays_is_refused(axpy: Program, count: int) -> None:
    args = [*arrays(), np.zeros(4, np.float32)][:count]
    with pytest.raises(ArgumentError, match=rf"axpy takes 3 arrays \(data0, data1, data2\), got {count}"):
        axpy(*args)


@pytest.mark.parametrize(
    "signature",
    ["float* data0", "float data0[4]", "float data0[restrict 4]", "struct s data0[restrict static 4]"],
)
def test_signature_without_restrict_static_size_is_refused(signature: str) -> None:
    # without the size in the signature there is nothing to check an array against
    source = f"void f({signature}) {{ }}\n"
    with pytest.raises(ArgumentError, match="must be declared 'T name\\[restrict static N\\]'"):
        Program(source, "f")


def test_missing_function_is_refused() -> None:
    with pytest.raises(ArgumentError, match="no function 'void g"):
        Program("void f(float data0[restrict static 1]) { }\n", "g")


def test_compile_error_carries_gcc_message_and_numbered_source() -> None:
    source = "void broken(float data0[restrict static 1]) {\n  data0[0] = undefined_name;\n}\n"
    with pytest.raises(CompileError) as info:
        build_library(source)
    err = info.value
    assert "undefined_name" in err.compiler_message and "error" in err.compiler_message
    assert err.source == source
    text = str(err)
    assert "   2 |   data0[0] = undefined_name;" in text  # the source, numbered, beside gcc's message
    assert text.index("undefined_name") < text.index("--- source ---")
