"""The .uir text format: parsing, printing, the round trip, and error messages that point at the mistake.

Columns in expected errors are the length of the text before the offending token, plus one.
"""

import math
from pathlib import Path

import pytest

from uopc.ir import (
    AddrSpace,
    AxisType,
    BufferArg,
    Ops,
    UIRSyntaxError,
    UOp,
    call,
    dtypes,
    fmt,
    param,
    parse,
    range_,
    run,
    sink,
    stack,
    to_python,
    to_uir,
    toposort,
)

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "uir").glob("*.uir"))


# ---- parsing --------------------------------------------------------------------------------------------


def test_parse_builds_the_graph_of_the_last_line() -> None:
    text = """
    # a comment line, then a blank one

    %i = range 4 : axis=0 kind=loop   # trailing comments too
    %j = range 3 : axis=1 kind=reduce
    %a = mul %i, 3
    %b = add %a, %j
    """
    i, j = range_(4, 0), range_(3, 1, AxisType.REDUCE)
    assert parse(text) is i * 3 + j


def test_literals_and_their_default_types() -> None:
    assert parse("%0 = const 3") is UOp.const(3)
    assert parse("%0 = const -3") is UOp.const(-3)
    assert parse("%0 = const 3.0") is UOp.const(3.0)
    assert parse("%0 = const 1e-3") is UOp.const(0.001)
    assert parse("%0 = const true") is UOp.const(True)
    assert parse("%0 = const 3000000000") is UOp.const(3_000_000_000, dtypes.int64)  # too big for int32
    assert parse("%0 = const i8(-5)") is UOp.const(-5, dtypes.int8)
    assert parse("%0 = const inf") is UOp.const(math.inf)
    assert parse("%0 = const -inf") is UOp.const(-math.inf)
    assert parse("%0 = const nan") is UOp.const(math.nan)
    assert math.copysign(1.0, parse("%0 = const -0.0").arg) == -1.0


def test_typed_literals_keep_their_own_precision() -> None:
    # the value inside f64(...) must not pass through a float32 first, nor an int inside u64(...) through int64
    assert parse("%0 = const f64(0.1)").arg == 0.1
    assert parse("%0 = const f64(1e300)").arg == 1e300
    assert parse("%0 = const u64(18446744073709551615)").arg == 2**64 - 1
    assert parse("%0 = const f16(0.1)").arg == 0.0999755859375  # the float16 nearest 0.1


def test_dtypes_written_after_the_op() -> None:
    assert parse("%0 = param f16 : 2") is param(2, dtypes.float16)
    assert parse("%0 = const 3\n%1 = cast u8 %0") is UOp.const(3).cast(dtypes.uint8)
    g = parse("%0 = define_global f32*shared : slot=1 size=8")
    assert g.dtype == dtypes.float32.ptr(AddrSpace.SHARED) and g.arg == (1, 8)
    assert parse("%0 = define_global i32* : slot=0 size=4").dtype == dtypes.int32.ptr()


def test_operands_may_be_literals() -> None:
    assert parse("%0 = stack 1.5, 2.5") is stack(1.5, 2.5)
    assert parse("%0 = where true, i64(1), i64(2)") is UOp.const(True).where(UOp.const(1, dtypes.int64), 2)


# ---- printing -------------------------------------------------------------------------------------------


def test_to_uir_writes_each_node_once_sources_first_constants_inline() -> None:
    i = range_(4, 0)
    shared = i * 3
    g = sink(shared + 1, shared // 2)
    assert to_uir(g) == (
        "%0 = range 4 : axis=0 kind=loop\n%1 = mul %0, 3\n%2 = add %1, 1\n%3 = idiv %1, 2\n%4 = sink %2, %3\n"
    )


def test_to_uir_writes_a_dtype_only_where_sources_do_not_fix_it() -> None:
    text = to_uir(param(0, dtypes.f16).cast(dtypes.f32) + UOp.const(1.0))
    assert text.splitlines() == ["%0 = param f16 : 0", "%1 = cast f32 %0", "%2 = add %1, 1.0"]
    assert to_uir(UOp.const(5, dtypes.int64)) == "%0 = const i64(5)\n"


def test_fmt_renumbers_and_drops_dead_lines() -> None:
    text = """
    %x = const 2
    %unused = mul %x, %x
    %y = add %x, 40      # the program's value is its last line
    """
    assert fmt(text) == "%0 = add 2, 40\n"
    assert fmt(fmt(text)) == fmt(text)


# ---- round trip -----------------------------------------------------------------------------------------


def _lowered_kernel() -> UOp:
    """out[i] = sum_j a[i*3 + j] * 2, as loops over memory, with every kind of lowered node (a load with a
    prefetch hint among them)."""
    a, out = UOp.define_global(0, 12), UOp.define_global(1, 4)
    i, j = range_(4, 0), range_(3, 1, AxisType.REDUCE)
    acc = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(0.0), i), 0)
    step = UOp(Ops.ACCUMULATE, dtypes.float32, (acc, a.load(i * 3 + j, j < 3) * 2.0, j), Ops.ADD)
    total = step.end(j)
    red = UOp(Ops.REDUCE, dtypes.float32, (a.load(i * 3 + j, prefetch=6), j), Ops.MAX)
    return sink(out.store(i, total + red).end(i))


def _gpu_kernel() -> UOp:
    """A block of 64 threads summing 64 values: a shuffle, shared memory, a barrier, GPU ranges."""
    a, out = UOp.define_global(0, 256), UOp.define_global(1, 4)
    g, lane = range_(4, 0, AxisType.GROUP), range_(64, 1, AxisType.LOCAL)
    v = a.load(g * 64 + lane)
    v = v + UOp(Ops.SHUFFLE, dtypes.float32, (v, lane ^ 1))
    smem = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(AddrSpace.SHARED), (), BufferArg(0, 64))
    synced = UOp(Ops.BARRIER, smem.dtype, (smem, smem.store(lane, v)))
    total = synced.load(UOp.const(0)) + synced.load(UOp.const(32))
    h = [a.load(g * 64 + lane + k).cast(dtypes.float16) for k in range(12)]
    product = UOp(Ops.MMA, dtypes.float32, tuple(h), 2)  # element 2 of a lane's share of a 16 x 8 product
    return sink(out.store(g, total + product).end(g, lane))


ROUND_TRIP = {
    "index": ((range_(4, 0) * 3 + range_(3, 1, AxisType.UPCAST)) // 2) % 5,
    "floats": stack(0.1, -0.0, math.inf, math.nan, 3.4e38) * UOp.const(2.0),
    "wide_types": stack(UOp.const(0.1, dtypes.f64), UOp.const(1e300, dtypes.f64)).cast(dtypes.f16),
    "ints": UOp.const(2**64 - 1, dtypes.u64) + UOp.const(1, dtypes.u64),
    "movement": stack(stack(1, 2, 3), stack(4, 5, 6)).permute((1, 0)).pad(((1, 0), (0, 2))).flip((0,)),
    "shrink_expand": stack(1.0, 2.0).reshape((2, 1)).expand((2, 3)).shrink(((0, 1), (1, 3))),
    "reduce": stack(1, 2, 3).reduce(Ops.MAX, (0,)),
    "call": call("f", param(0) * 2 + param(1), UOp.const(3), UOp.const(4)),
    "call_names": sink(call("my fn", param(0), UOp.const(1)), call("true", param(0), UOp.const(2))),
    "kernel": _lowered_kernel(),
    "gpu_kernel": _gpu_kernel(),
    "buffer": UOp.buffer(0, 6, dtypes.int16) * UOp.const(3, dtypes.int16),
    "bool_logic": (param(0, dtypes.bool) & True) ^ param(1, dtypes.bool),
}


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_round_trip_is_the_same_graph(name: str) -> None:
    g = ROUND_TRIP[name]
    text = to_uir(g)
    assert parse(text) is g
    assert to_uir(parse(text)) == text


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_examples_round_trip(path: Path) -> None:
    g = parse(path.read_text())
    assert parse(to_uir(g)) is g
    assert fmt(fmt(path.read_text())) == fmt(path.read_text())


def test_the_examples_are_shipped() -> None:
    assert {p.name for p in EXAMPLES} >= {"softmax_row.uir", "index_math.uir", "call.uir", "matrix.uir"}
    softmax = parse((EXAMPLES[0].parent / "softmax_row.uir").read_text())
    ops = {u.op for u in toposort(softmax)}
    assert {Ops.STACK, Ops.REDUCE_AXIS, Ops.EXPAND, Ops.SUB, Ops.EXP, Ops.DIV} <= ops
    got = to_python(run(softmax))
    assert isinstance(got, list) and abs(sum(got) - 1.0) < 1e-6


# ---- errors ---------------------------------------------------------------------------------------------


_PTR = "%0 = define_global f32* : slot=0 size=4"
# (program, the line with the mistake, that line up to the offending token, what the message says)
SYNTAX_ERRORS = [
    ("%0 = add 1,", "%0 = add 1,", "%0 = add 1,", "expected an operand"),
    ("%0 = const 1\n%1 = add %0 %0", "%1 = add %0 %0", "%1 = add %0 ", "expected ','"),
    ("%0 = reshape %1 : (2,)", "%0 = reshape %1 : (2,)", "%0 = reshape ", "%1 is not defined on an earlier line"),
    ("%0 = frob 1", "%0 = frob 1", "%0 = ", "unknown op 'frob'"),
    ("%0 = cast 1", "%0 = cast 1", "%0 = ", "cast needs a dtype after the op name"),
    ("%0 = const 1 $", "%0 = const 1 $", "%0 = const 1 ", "unexpected character '$'"),
    ("%0 = range 4 : axis=0", "%0 = range 4 : axis=0", "%0 = range 4 : ", "expected the arg axis=... kind=..."),
    ("%0 = range 4 : axis=0 kind=up", "%0 = range 4 : axis=0 kind=up", "%0 = range 4 : ", "kind must be one of"),
    ("%0 = add 1, 2 : 3", "%0 = add 1, 2 : 3", "%0 = add 1, 2 ", "add takes no arg"),
    ("%0 = const 1\n%1 = reshape %0 : (1, 2", "%1 = reshape %0 : (1, 2", "%1 = reshape %0 : (1, 2", "',' or ')'"),
    ("%0 = const 1\n%0 = const 2", "%0 = const 2", "", "%0 is already defined"),
    ("%0 = const 1\nadd %0, %0", "add %0, %0", "", "expected a node definition"),
    ("%0 = const f32*(1.0)", "%0 = const f32*(1.0)", "%0 = const ", "a scalar dtype for a literal"),
    ("%0 = const i32(1.5)", "%0 = const i32(1.5)", "%0 = const ", "1.5 is not an integer"),
    ("%0 = const float8(1.0)", "%0 = const float8(1.0)", "%0 = const ", "unknown dtype 'float8'"),
    ("%0 = const 99999999999999999999", "%0 = const 99999999999999999999", "%0 = const ", "does not fit int64"),
    ("%0 = stack 1, 2\n%1 = reshape %0 : (3,)", "%1 = reshape %0 : (3,)", "%1 = ", "cannot reshape (2,)"),
    ("%0 = buffer f32 : slot=x size=4", "%0 = buffer f32 : slot=x size=4", "%0 = ", "BufferArg(slot >= 0"),
    (
        "%0 = reduce_axis 1 : op=frob axes=()",
        "%0 = reduce_axis 1 : op=frob axes=()",
        "%0 = reduce_axis 1 : ",
        "op name",
    ),
    ("%0 = const 1\n%1 = call %0 : 5", "%1 = call %0 : 5", "%1 = call %0 : ", "expected the CALL's name"),
    ("%0 = stack 1, 2\n%1 = reshape %0 : x=2", "%1 = reshape %0 : x=2", "%1 = reshape %0 : ", "takes a plain value"),
    (f"{_PTR}\n%1 = load %0, 0 : ahead=2", "%1 = load %0, 0 : ahead=2", "%1 = load %0, 0 : ", "the arg prefetch=..."),
    (f"{_PTR}\n%1 = load %0, 0 : prefetch=0", "%1 = load %0, 0 : prefetch=0", "%1 = ", "a positive number of"),
    (f"{_PTR}\n%1 = load %0, 0 : prefetch=2.5", "%1 = load %0, 0 : prefetch=2.5", "%1 = ", "elements ahead or None"),
]


@pytest.mark.parametrize(("text", "bad_line", "before", "expected"), SYNTAX_ERRORS)
def test_syntax_errors_name_line_column_and_what_was_expected(
    text: str, bad_line: str, before: str, expected: str
) -> None:
    assert bad_line.startswith(before)
    with pytest.raises(UIRSyntaxError) as e:
        parse(text)
    assert e.value.line == text.splitlines().index(bad_line) + 1
    assert e.value.col == len(before) + 1
    assert expected in str(e.value)
    assert str(e.value).startswith(f"line {e.value.line}, column {e.value.col}: ")


def test_empty_program() -> None:
    for text in ("", "\n\n", "# only a comment\n"):
        with pytest.raises(UIRSyntaxError, match="line 1, column 1: expected at least one node"):
            parse(text)


@pytest.mark.parametrize("depth", [17, 1_000, 100_000])
def test_deeply_nested_args_are_a_syntax_error(depth: int) -> None:
    # they ended in RecursionError when the node hashed or printed its arg
    line = "%1 = reshape %0 : " + "(" * depth + "1" + ",)" * depth
    with pytest.raises(UIRSyntaxError) as e:
        parse("%0 = const 1\n" + line)
    assert (e.value.line, e.value.col) == (2, len("%1 = reshape %0 : ") + 17)  # the 17th parenthesis
    assert "at most 16 parentheses deep" in str(e.value)


def test_args_sixteen_deep_still_parse() -> None:
    line = "%1 = reshape %0 : " + "(" * 16 + "1" + ",)" * 16
    with pytest.raises(UIRSyntaxError, match="RESHAPE: arg must be"):  # a wrong arg for reshape, not a crash
        parse("%0 = const 1\n" + line)
