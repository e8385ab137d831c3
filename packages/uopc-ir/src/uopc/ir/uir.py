"""The `.uir` text format: one node per line, so a graph can be read, written, diffed and typed by hand.

    # softmax numerator of one row
    %0 = stack 1.0, 2.0, 3.0
    %1 = reduce_axis %0 : op=max axes=(0,)
    %2 = expand %1 : (3,)
    %3 = sub %0, %2
    %4 = exp %3

Grammar (one `line` per text line; `#` starts a comment; blank lines are ignored):

    line     := '%' NAME '=' OP [DTYPE] [operand {',' operand}] [':' arg]
    operand  := '%' NAME | literal
    literal  := INT | FLOAT | 'true' | 'false' | 'inf' | '-inf' | 'nan' | DTYPE '(' literal ')'
    arg      := value | KEY '=' value {KEY '=' value}
    value    := INT | FLOAT | WORD | '(' [value {',' value} [',']] ')'     (at most 16 parentheses deep)
    DTYPE    := a dtype's short name (f32, i64, bool, ...), or one followed by '*' and an address space

A literal operand is a constant: `3` is int32, `3.0` float32, `true` bool; `i64(3)` gives the type. The
dtype after the op is written only where the op's sources do not determine it (CAST, PARAM, BUFFER, ...).
A program's value is its last line; `to_uir` and `fmt` write every node reachable from it, once, in order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uopc.ir.dtype import AddrSpace, AnyDType, DType, PtrDType, dtypes
from uopc.ir.errors import UIRSyntaxError, UOpError
from uopc.ir.ops import Ops
from uopc.ir.uop import AxisType, BufferArg, ConstValue, RangeArg, UOp, toposort

# ---------------------------------------------------------------------------------------------------------
# dtypes and literals
# ---------------------------------------------------------------------------------------------------------


def infer_dtype(op: Ops, src: tuple[UOp, ...]) -> AnyDType | None:
    """The dtype an op's sources determine, or None where the text must say it."""
    if op in Ops.COMPARISON:
        return dtypes.bool
    if op is Ops.WHERE:
        return src[1].dtype if len(src) > 1 else None
    if op in (Ops.STORE, Ops.SINK, Ops.ENDRANGE):
        return dtypes.void
    if op is Ops.LOAD:
        return src[0].dtype.base if src and isinstance(src[0].dtype, PtrDType) else None
    if op in (Ops.CAST, Ops.PARAM, Ops.BUFFER, Ops.DEFINE_GLOBAL, Ops.CONST) or not src:
        return None
    return src[0].dtype


def dtype_text(d: AnyDType) -> str:
    if isinstance(d, PtrDType):
        return f"{d.base.short}*" + ("" if d.addrspace is AddrSpace.GLOBAL else d.addrspace.value)
    return d.short


def literal_text(value: ConstValue, dtype: DType) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = "nan" if math.isnan(value) else repr(value)
    else:
        text = str(value)
    return text if dtype is dtypes.from_python(value) else f"{dtype.short}({text})"


# ---------------------------------------------------------------------------------------------------------
# args: one codec per op
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """A bare word in an arg: an op name, an axis kind or a CALL's name."""

    text: str


def _value_text(v: Any) -> str:
    if isinstance(v, Ops):
        return v.name.lower()
    if isinstance(v, AxisType):
        return v.value
    if isinstance(v, tuple):
        inner = ", ".join(_value_text(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return repr(v)


def _keyed(**fields: Any) -> str:
    return " ".join(f"{k}={_value_text(v)}" for k, v in fields.items())


def _get(value: Any, keys: tuple[str, ...], problem: Callable[[str], UIRSyntaxError]) -> list[Any]:
    if not isinstance(value, dict) or set(value) != set(keys):
        raise problem(f"expected the arg {' '.join(k + '=...' for k in keys)}")
    return [value[k] for k in keys]


def _op_word(w: Any, problem: Callable[[str], UIRSyntaxError]) -> Ops:
    if isinstance(w, Word) and w.text.upper() in Ops.__members__:
        return Ops[w.text.upper()]
    raise problem(f"expected an op name such as add or max, found {w!r}")


def _decode_range(v: Any, problem: Callable[[str], UIRSyntaxError]) -> RangeArg:
    axis, kind = _get(v, ("axis", "kind"), problem)
    kinds = {k.value: k for k in AxisType}
    if not isinstance(kind, Word) or kind.text not in kinds:
        raise problem(f"kind must be one of {', '.join(kinds)}")
    return RangeArg(axis, kinds[kind.text])


def _decode_reduce_axis(v: Any, problem: Callable[[str], UIRSyntaxError]) -> tuple[Ops, Any]:
    op, axes = _get(v, ("op", "axes"), problem)
    return (_op_word(op, problem), axes)


def _decode_plain(v: Any, problem: Callable[[str], UIRSyntaxError]) -> Any:
    if isinstance(v, dict):
        raise problem("this op takes a plain value, not key=value pairs")
    return v


def _decode_call(v: Any, problem: Callable[[str], UIRSyntaxError]) -> str:
    if isinstance(v, Word):
        return v.text
    if isinstance(v, str):
        return v
    raise problem("expected the CALL's name")


_NOT_NAMES = frozenset({"true", "false", "none", "inf", "nan"})
"""Identifiers an arg reads as a value, not a word: a CALL with such a name has it written in quotes."""

Codec = tuple[Callable[[Any], str], Callable[[Any, Callable[[str], UIRSyntaxError]], Any]]
ARG_CODECS: dict[Ops, Codec] = {
    Ops.PARAM: (_value_text, _decode_plain),
    Ops.DEFINE_ACC: (_value_text, _decode_plain),
    Ops.MMA: (_value_text, _decode_plain),
    Ops.CALL: (lambda a: a if a.isidentifier() and a not in _NOT_NAMES else f'"{a}"', _decode_call),
    Ops.RANGE: (lambda a: _keyed(axis=a.axis, kind=a.kind), _decode_range),
    Ops.BUFFER: (lambda a: _keyed(slot=a.slot, size=a.size), lambda v, p: BufferArg(*_get(v, ("slot", "size"), p))),
    Ops.DEFINE_GLOBAL: (
        lambda a: _keyed(slot=a.slot, size=a.size),
        lambda v, p: BufferArg(*_get(v, ("slot", "size"), p)),
    ),
    Ops.REDUCE_AXIS: (lambda a: _keyed(op=a[0], axes=a[1]), _decode_reduce_axis),
    Ops.REDUCE: (lambda a: _keyed(op=a), lambda v, p: _op_word(_get(v, ("op",), p)[0], p)),
    Ops.ACCUMULATE: (lambda a: _keyed(op=a), lambda v, p: _op_word(_get(v, ("op",), p)[0], p)),
    Ops.LOAD: (lambda a: _keyed(prefetch=a), lambda v, p: _get(v, ("prefetch",), p)[0]),
    **dict.fromkeys(Ops.MOVEMENT, (_value_text, _decode_plain)),
}


# ---------------------------------------------------------------------------------------------------------
# printing
# ---------------------------------------------------------------------------------------------------------


def to_uir(root: UOp) -> str:
    """The text of the graph under `root`: every node once, sources first, constants written inline."""
    return "\n".join(line for _, line in uir_lines(toposort(root))) + "\n"


def uir_lines(nodes: Sequence[UOp]) -> list[tuple[UOp, str]]:
    """The nodes of `nodes` that get a line, each with it, in their order (each after its sources: a toposort,
    or a linear program), named %0, %1, ...; a constant is written inline where it is used, unless it is last."""
    names: dict[UOp, str] = {}
    lines: list[tuple[UOp, str]] = []
    for k, u in enumerate(nodes):
        if u.op is Ops.CONST and k < len(nodes) - 1:
            names[u] = literal_text(u.arg, u.scalar_dtype)
            continue
        names[u] = f"%{len(lines)}"
        lines.append((u, f"{names[u]} = {_node_text(u, names)}"))
    return lines


def _node_text(u: UOp, names: dict[UOp, str]) -> str:
    parts = [u.op.name.lower()]
    if u.op is Ops.CONST:
        return f"const {literal_text(u.arg, u.scalar_dtype)}"
    if infer_dtype(u.op, u.src) is not u.dtype:
        parts.append(dtype_text(u.dtype))
    text = " ".join(parts)
    if u.src:
        text += " " + ", ".join(names[s] for s in u.src)
    if u.arg is not None:
        text += " : " + ARG_CODECS[u.op][0](u.arg)
    return text


# ---------------------------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<ref>%[A-Za-z0-9_.]+)|(?P<num>-?(?:inf\b|nan\b|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[=,:()*])|(?P<str>\"[^\"]*\")|(?P<bad>\S))"
)


@dataclass
class Token:
    kind: str
    text: str
    col: int


def tokenize(line: str, lineno: int) -> list[Token]:
    code = line.split("#", 1)[0]
    tokens = []
    for m in _TOKEN.finditer(code):
        kind = m.lastgroup
        if kind is None:
            continue
        if kind == "bad":
            raise UIRSyntaxError(lineno, m.start(kind) + 1, f"unexpected character {m.group(kind)!r}")
        tokens.append(Token(kind, m.group(kind), m.start(kind) + 1))
    return tokens


MAX_ARG_DEPTH = 16
"""Args nest two deep (PAD's pairs); hashing and printing a value recurse once per level, so depth is bounded."""


class _LineParser:
    """Parses the tokens of one line; every error carries the line and the column of the offending token."""

    def __init__(self, tokens: list[Token], lineno: int, end_col: int, names: dict[str, UOp]) -> None:
        self.tokens, self.pos, self.lineno, self.end_col, self.names = tokens, 0, lineno, end_col, names

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def error(self, expected: str, token: Token | None = None) -> UIRSyntaxError:
        tok = token or self.peek()
        found = f"found {tok.text!r}" if tok else "found the end of the line"
        return UIRSyntaxError(self.lineno, tok.col if tok else self.end_col, f"expected {expected}, {found}")

    def take(self, kind: str, text: str | None = None, expected: str = "") -> Token:
        tok = self.peek()
        if tok is None or tok.kind != kind or (text is not None and tok.text != text):
            raise self.error(expected or repr(text))
        self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == "punct" and tok.text == text

    def dtype(self) -> AnyDType:
        tok = self.take("word", expected="a dtype")
        try:
            base = dtypes.by_name(tok.text)
        except UOpError as e:
            raise UIRSyntaxError(self.lineno, tok.col, str(e)) from None
        if not self.at("*"):
            return base
        self.pos += 1
        space = AddrSpace.GLOBAL
        nxt = self.peek()
        if nxt is not None and nxt.kind == "word" and nxt.text in {a.value for a in AddrSpace}:
            space, self.pos = AddrSpace(nxt.text), self.pos + 1
        return PtrDType(base, space)

    def literal(self) -> UOp:
        tok = self.peek()
        if tok is not None and tok.kind == "word" and tok.text not in ("true", "false"):  # a typed literal: i64(3)
            dt = self.dtype()
            if not isinstance(dt, DType):
                raise self.error("a scalar dtype for a literal", tok)
            self.take("punct", "(")
            value = self.plain_literal()  # its own value: rounding it to a default type first would lose f64 digits
            self.take("punct", ")")
            return _make(self, tok, lambda: UOp.const(_convert(value, dt), dt))
        value = self.plain_literal()
        start = self.tokens[self.pos - 1]
        if isinstance(value, bool):
            return UOp.const(value)
        if isinstance(value, float):
            return UOp.const(value, dtypes.float32)
        return _make(self, start, lambda: UOp.const(value, dtypes.int32 if _fits_i32(value) else dtypes.int64))

    def plain_literal(self) -> ConstValue:
        """The value of `true`, `false` or a number, as Python holds it."""
        tok = self.peek()
        if tok is not None and tok.kind == "word" and tok.text in ("true", "false"):
            self.pos += 1
            return tok.text == "true"
        text = self.take("num", expected="an operand (%name or a literal)").text
        return _number(text)

    def operand(self) -> UOp:
        tok = self.peek()
        if tok is not None and tok.kind == "ref":
            self.pos += 1
            if tok.text not in self.names:
                raise UIRSyntaxError(self.lineno, tok.col, f"{tok.text} is not defined on an earlier line")
            return self.names[tok.text]
        return self.literal()

    def value(self) -> Any:
        """A value in an arg; tuples are parsed with an explicit stack of open parentheses."""
        open_tuples: list[list[Any]] = []
        while True:
            tok = self.peek()
            if tok is None:
                raise self.error("a value")
            self.pos += 1
            if tok.kind == "punct" and tok.text == "(":
                if len(open_tuples) == MAX_ARG_DEPTH:
                    raise UIRSyntaxError(self.lineno, tok.col, f"an arg nests at most {MAX_ARG_DEPTH} parentheses deep")
                open_tuples.append([])
                if self.at(")"):
                    self.pos += 1
                    item: Any = tuple(open_tuples.pop())
                else:
                    continue
            elif tok.kind == "num":
                item = _number(tok.text)
            elif tok.kind == "word":
                item = {"true": True, "false": False, "none": None}.get(tok.text, Word(tok.text))
            elif tok.kind == "str":
                item = tok.text[1:-1]
            else:
                raise self.error("a value", tok)
            while True:
                if not open_tuples:
                    return item
                open_tuples[-1].append(item)
                if self.at(","):
                    self.pos += 1
                    if not self.at(")"):
                        break
                if not self.at(")"):
                    raise self.error("',' or ')'")
                self.pos += 1
                item = tuple(open_tuples.pop())

    def arg(self) -> Any:
        tok = self.peek()
        nxt = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else None
        if not (tok and tok.kind == "word" and nxt and nxt.text == "="):
            return self.value()
        fields = {}
        while self.peek() is not None:
            key = self.take("word", expected="key=value")
            self.take("punct", "=")
            fields[key.text] = self.value()
        return fields


def _number(text: str) -> int | float:
    """A numeric token: a float if it has a point, an exponent, or is inf or nan; an int otherwise."""
    return float(text) if any(c in text for c in ".eEn") else int(text)


def _fits_i32(value: int) -> bool:
    return dtypes.int32.min <= value <= dtypes.int32.max


def _convert(value: ConstValue, dt: DType) -> ConstValue:
    if dt.is_float:
        return float(value)
    if dt.is_int and isinstance(value, float):
        raise UOpError(f"{value!r} is not an integer")
    return value


def _make(p: _LineParser, tok: Token, build: Callable[[], UOp]) -> UOp:
    try:
        return build()
    except (UOpError, ValueError) as e:
        raise UIRSyntaxError(p.lineno, tok.col, str(e)) from None


def parse(text: str) -> UOp:
    """The graph a .uir text describes: the node on its last line, with everything it refers to."""
    names: dict[str, UOp] = {}
    last: UOp | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        tokens = tokenize(line, lineno)
        if tokens:
            last = _parse_line(_LineParser(tokens, lineno, len(line.rstrip()) + 1, names))
    if last is None:
        raise UIRSyntaxError(1, 1, "expected at least one node, found an empty program")
    return last


def _parse_line(p: _LineParser) -> UOp:
    name = p.take("ref", expected="a node definition '%name = op ...'")
    if name.text in p.names:
        raise UIRSyntaxError(p.lineno, name.col, f"{name.text} is already defined")
    p.take("punct", "=")
    op_tok = p.take("word", expected="an op name")
    op = Ops.__members__.get(op_tok.text.upper())
    if op is None:
        raise UIRSyntaxError(p.lineno, op_tok.col, f"unknown op {op_tok.text!r}")
    node = p.literal() if op is Ops.CONST else _parse_node(p, op, op_tok)
    if p.peek() is not None:
        raise p.error("the end of the line")
    p.names[name.text] = node
    return node


def _parse_node(p: _LineParser, op: Ops, op_tok: Token) -> UOp:
    tok, nxt = p.peek(), p.tokens[p.pos + 1] if p.pos + 1 < len(p.tokens) else None
    given = None
    if tok and tok.kind == "word" and tok.text not in ("true", "false") and not (nxt and nxt.text == "("):
        given = p.dtype()
    src: list[UOp] = []
    if p.peek() is not None and not p.at(":"):
        src.append(p.operand())
        while p.at(","):
            p.pos += 1
            src.append(p.operand())
    arg = None
    if p.at(":"):
        colon = p.take("punct", ":")
        if op not in ARG_CODECS:
            raise UIRSyntaxError(p.lineno, colon.col, f"{op.name.lower()} takes no arg")
        arg_tok = p.peek() or colon
        raw = p.arg()
        arg = ARG_CODECS[op][1](raw, lambda msg: UIRSyntaxError(p.lineno, arg_tok.col, msg))
    if p.peek() is not None:  # before the node is built: `add %0 %1` lacks a comma, not a second source
        expected = "the end of the line" if arg is not None else "',' between operands, ':' before the arg, or the end"
        raise p.error(expected)
    dtype = given or infer_dtype(op, tuple(src))
    if dtype is None:
        raise UIRSyntaxError(p.lineno, op_tok.col, f"{op.name.lower()} needs a dtype after the op name")
    return _make(p, op_tok, lambda: UOp(op, dtype, src, arg))


def fmt(text: str) -> str:
    """The canonical text of a program: names renumbered, constants inline, unreachable lines dropped."""
    return to_uir(parse(text))
