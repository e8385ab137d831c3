"""Pattern matching and graph rewriting: the engine every pass of the compiler is written in.

A pass is a table of rules. Each rule pairs a pattern (`UPat`) with a function that builds the
replacement from the pattern's named captures. `graph_rewrite` applies a table to every node of a graph,
again and again, until no rule applies anywhere (a fixed point).
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from uopc.ir.dtype import AnyDType, DType
from uopc.ir.errors import RewriteError
from uopc.ir.operators import OpMixin
from uopc.ir.ops import Ops
from uopc.ir.uop import ConstValue, UOp, _argkey

_ANY = object()


class UPat(OpMixin[ConstValue]):
    """A pattern over UOps. Every field left as None matches anything.

    op: an op or a collection of ops. dtype: a dtype or a collection of dtypes. src: a tuple of patterns,
    one per source (tried in both orders for a commutative op with two sources). arg: the exact arg.
    name: capture the matched node under this name; a name used twice must match the same node.
    """

    __slots__ = ("any_len", "arg", "dtypes", "name", "ops", "src")

    def __init__(
        self,
        op: Ops | Iterable[Ops] | None = None,
        dtype: AnyDType | Iterable[AnyDType] | None = None,
        src: Sequence[UPat] | None = None,
        arg: Any = _ANY,
        name: str | None = None,
        any_len: bool = False,
    ) -> None:
        self.ops = None if op is None else frozenset((op,) if isinstance(op, Ops) else op)
        self.dtypes = None if dtype is None else frozenset((dtype,) if not isinstance(dtype, Iterable) else dtype)
        self.src = None if src is None else tuple(src)
        self.arg = arg if arg is _ANY else _argkey(arg)
        self.name = name
        self.any_len = any_len  # src patterns match a prefix of the sources

    @staticmethod
    def var(name: str, dtype: AnyDType | Iterable[AnyDType] | None = None) -> UPat:
        """Any node, captured as `name`."""
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str, dtype: AnyDType | Iterable[AnyDType] | None = None) -> UPat:
        """Any constant, captured as `name`."""
        return UPat(Ops.CONST, dtype, name=name)

    @staticmethod
    def const(value: ConstValue, dtype: AnyDType | Iterable[AnyDType] | None = None) -> UPat:
        """The constant `value`, of exactly that Python type (0 does not match 0.0)."""
        return UPat(Ops.CONST, dtype, arg=value)

    def _alu(self, op: Ops, *operands: UPat | ConstValue, reverse: bool = False) -> UPat:
        """The pattern of `op` on this pattern and `operands`: a Python number matches that constant."""
        srcs = [o if isinstance(o, UPat) else UPat.const(o) for o in operands]
        return UPat(op, src=(*srcs, self) if reverse else (self, *srcs))

    def _is_float(self) -> bool:
        """A pattern's <= and >= take the form of its dtype: the pattern must say whether it is a float."""
        kinds = {isinstance(d, DType) and d.is_float for d in self.dtypes or ()}
        if len(kinds) != 1:
            raise RewriteError(
                f"{self!r}: <= and >= are spelled differently for floats and integers; give the pattern a dtype"
            )
        return kinds.pop()

    def __repr__(self) -> str:
        parts = [] if self.ops is None else ["|".join(sorted(o.name for o in self.ops))]
        if self.name:
            parts.append(f"name={self.name!r}")
        if self.src is not None:
            parts.append("src=(" + ", ".join(map(repr, self.src)) + ")")
        return f"UPat({', '.join(parts)})"

    def match(self, u: UOp, captures: dict[str, UOp]) -> list[dict[str, UOp]]:
        """Every way `u` matches this pattern, each as the captures extended by this match."""
        if self.ops is not None and u.op not in self.ops:
            return []
        if self.dtypes is not None and u.dtype not in self.dtypes:
            return []
        if self.arg is not _ANY and _argkey(u.arg) != self.arg:
            return []
        if self.name is not None:
            if captures.get(self.name, u) is not u:
                return []
            captures = {**captures, self.name: u}
        if self.src is None:
            return [captures]
        if len(u.src) != len(self.src) and not (self.any_len and len(u.src) >= len(self.src)):
            return []
        orders = [self.src]
        if len(self.src) == 2 and u.op in Ops.COMMUTATIVE:
            orders.append(self.src[::-1])
        found: list[dict[str, UOp]] = []
        for order in orders:
            partial = [captures]
            for pat, s in zip(order, u.src, strict=False):
                partial = [m for p in partial for m in pat.match(s, p)]
                if not partial:
                    break
            found.extend(partial)
        return found


RuleFn = Callable[..., UOp | None]


@dataclass(frozen=True)
class Rule:
    pattern: UPat
    fn: RuleFn
    wants_ctx: bool

    @property
    def name(self) -> str:
        """The function's name, or for a lambda the file and line it is written on."""
        code = getattr(self.fn, "__code__", None)
        where = f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}" if code else "?"
        fn_name = getattr(self.fn, "__name__", "<rule>")
        return f"{fn_name} ({where})" if fn_name != "<lambda>" else f"rule at {where} for {self.pattern!r}"


class PatternMatcher:
    """A table of (pattern, function) rules, indexed by op so each node is tried only against its candidates.

    A rule function receives the pattern's captures as keyword arguments, and the rewrite's `ctx` too if
    it has a parameter named `ctx`. It returns the replacement, or None to decline.
    """

    def __init__(self, rules: Sequence[tuple[UPat, RuleFn]]) -> None:
        self.rules = [Rule(p, f, "ctx" in inspect.signature(f).parameters) for p, f in rules]
        self._by_op: dict[Ops, list[Rule]] = {
            op: [r for r in self.rules if r.pattern.ops is None or op in r.pattern.ops] for op in Ops
        }

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher([(r.pattern, r.fn) for r in self.rules + other.rules])

    def rewrite(self, u: UOp, ctx: Any = None) -> tuple[UOp, Rule] | None:
        """The first rule (in table order) that matches `u` and returns a new node, with that node."""
        for rule in self._by_op[u.op]:
            for captures in rule.pattern.match(u, {}):
                out = rule.fn(ctx=ctx, **captures) if rule.wants_ctx else rule.fn(**captures)
                if out is not None and out is not u:
                    return out, rule
        return None


def graph_rewrite(
    root: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = True, memo: dict[UOp, UOp] | None = None
) -> UOp:
    """Apply `pm` to every node of `root` until no rule applies anywhere; iterative and memoized.

    Bottom-up (the default) rewrites a node's sources before the node. Top-down first tries the rules on
    a node as it is, before its sources are visited. Either way, a replacement is itself rewritten until no
    rule applies, and a node whose sources changed is tried again.

    `memo` (node -> its fully rewritten form) is the caller's to keep between rewrites with the same `pm` and
    `ctx` whose rules look at nothing but the nodes: a node one rewrite finished is not visited again by the
    next (an upcast's copies share most of their sources with the kernel they were made from).
    """
    done: dict[UOp, UOp] = {} if memo is None else memo
    active: set[UOp] = set()  # nodes whose rewrite is in progress: meeting one again is a cycle
    budget = _Budget(root)
    # a frame: (node, stage, the rule whose output is being walked, the node's replacement)
    stack: list[tuple[UOp, int, Rule | None, UOp | None]] = [(root, VISIT, None, None)]
    while stack:
        u, stage, via, replacement = stack.pop()
        if stage == VISIT:
            if u in done:
                continue
            if u in active:
                raise RewriteError(
                    f"rewrite cycle: {via.name if via else 'a rule'} built a graph that contains "
                    f"{u!r}, which is still being rewritten"
                )
            active.add(u)
            hit = None if bottom_up else pm.rewrite(u, ctx)
            if hit is None:
                stack.append((u, SOURCES_DONE, via, None))
                stack += [(s, VISIT, via, None) for s in reversed(u.src) if s not in done]
                continue
        elif stage == SOURCES_DONE:
            src = tuple(done[s] for s in u.src)
            new = u if src == u.src else u.replace(src=src)
            hit = pm.rewrite(new, ctx)
            if hit is None:
                done[u] = done[new] = new
                active.discard(u)
                continue
        else:  # REPLACED: the replacement is finished
            assert replacement is not None
            done[u] = done[replacement]
            active.discard(u)
            continue
        budget.count(hit[1])
        stack += [(u, REPLACED, hit[1], hit[0]), (hit[0], VISIT, hit[1], None)]
    return done[root]


VISIT, SOURCES_DONE, REPLACED = 0, 1, 2


class _Budget:
    """The rule applications a rewrite of `root` may take: 100 per node of it, and MIN_BUDGET more. The
    nodes are counted once MIN_BUDGET rules have fired, not before: most rewrites stop long before, and
    counting walks the whole graph (for the small rewrites of a kernel's opts, as long as the rewrite)."""

    def __init__(self, root: UOp) -> None:
        self.root, self.fired, self.limit = root, Counter[str](), MIN_BUDGET

    def count(self, rule: Rule) -> None:
        self.fired[rule.name] += 1
        total = self.fired.total()
        if total > self.limit and self.limit == MIN_BUDGET:  # the first time past the minimum
            self.limit = 100 * len(self.root.toposort()) + MIN_BUDGET
        if total > self.limit:
            top = ", ".join(f"{name} x{n}" for name, n in self.fired.most_common(3))
            raise RewriteError(
                f"rewrite does not reach a fixed point within {self.limit} rule applications; most fired: {top}"
            )


MIN_BUDGET = 10_000
