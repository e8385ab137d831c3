"""Mutation testing for uopc-ir: put a plausible bug back, run the property tests, see whether they notice.

    python scripts/mutants_ir.py                      # the baseline, then every mutant
    python scripts/mutants_ir.py idiv_all_terms       # one mutant
    python scripts/mutants_ir.py --list               # what each mutant breaks
    python scripts/mutants_ir.py --tests packages/uopc-ir/tests  # against the whole suite

Each mutant is applied by monkeypatching in a fresh Python process, before pytest imports a test, so the
repository is never edited and no mutant leaks into another (bounds are cached on hash-consed nodes).
A mutant is killed when at least one test fails; a surviving mutant is a test that is missing.
Exit status: 0 when the baseline passes and every mutant is killed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from uopc.ir import DType, Ops, PatternMatcher, UOp, dtypes, round_to
from uopc.ir.rewrite import RuleFn
from uopc.ir.symbolic import _BOUNDS, Interval, _divide_exactly, build_sum, fold_cmplt_const, fold_idiv, linear_terms
from uopc.ir.uir import _convert
from uopc.ir.uop import ConstValue

ROOT = Path(__file__).resolve().parents[1]
PROPERTY_TESTS = "packages/uopc-ir/tests/test_properties.py"
RESULT_TAG = "MUTANT-RESULT "


# ---------------------------------------------------------------------------------------------------------
# The mutants: each one a small, plausible mistake in the IR, written as the wrong code it would be.
# ---------------------------------------------------------------------------------------------------------


def _module(name: str) -> ModuleType:
    """The module uopc.ir.<name>, looked up by name so each mutant patches the module the tests import."""
    return importlib.import_module(f"uopc.ir.{name}")


def _swap_rule(old: RuleFn, new: RuleFn) -> None:
    """Replace a rule function in the symbolic and interpreter tables (they hold the function itself)."""
    module = _module("symbolic")
    for name in ("symbolic", "interpreter"):
        pm: PatternMatcher = getattr(module, name)
        setattr(module, name, type(pm)([(r.pattern, new if r.fn is old else r.fn) for r in pm.rules]))


def idiv_all_terms() -> None:
    """x // c moves every term of the sum out of the division, divisible by c or not."""

    def wrong(x: UOp, c: UOp) -> UOp | None:
        k = int(c.arg)
        if k <= 0:
            return None
        terms, constant = linear_terms(x)
        quotient = {t: coef // k for t, coef in terms.items()}  # forgot: only when coef % k == 0
        return build_sum(quotient, constant // k, x.scalar_dtype)

    _swap_rule(fold_idiv, wrong)


def mod_bounds_off_by_one() -> None:
    """vmax of x % c claims c - 2 where c - 1 is possible."""
    right = _BOUNDS[Ops.MOD]

    def bounds_mod(u: UOp, a: Interval, b: Interval) -> Interval | None:
        found = right(u, a, b)
        if found is None or b[0] != b[1] or found != (0, b[0] - 1):
            return found
        return 0, b[0] - 2

    _BOUNDS[Ops.MOD] = bounds_mod


def cmplt_floor() -> None:
    """g*y < c becomes y < c // g, rounding the limit down where it must round up."""

    def wrong(x: UOp, c: UOp) -> UOp | None:
        terms, constant = linear_terms(x)
        if not terms:
            return None
        g = math.gcd(*terms.values())
        if g == 1 or min(terms.values()) <= 0:
            return None
        lhs = _divide_exactly(build_sum(terms, 0, x.scalar_dtype), g)
        return lhs < c.const_like((c.arg - constant) // g)

    _swap_rule(fold_cmplt_const, wrong)


def merge_divmod_constant() -> None:
    """A bug this suite found (docs/notes.md): merging c*(x//c) + x%c gave up when x had a constant part,
    after deleting both terms from the caller's dict, so x // c * c + x % c + y simplified to y."""

    def merge(terms: dict[UOp, int]) -> tuple[dict[UOp, int], int] | None:
        changed = False
        for t in list(terms):
            if t.op is Ops.MOD and t.src[1].op is Ops.CONST and t in terms:
                x, c, k = t.src[0], t.src[1], terms[t]
                div = UOp(Ops.IDIV, x.dtype, (x, c))
                if terms.get(div) == k * c.arg:
                    del terms[t], terms[div]
                    inner, inner_const = linear_terms(x)
                    if inner_const:
                        return None
                    for it, ik in inner.items():
                        terms[it] = terms.get(it, 0) + ik * k
                    changed = True
        return ({t: k for t, k in terms.items() if k != 0}, 0) if changed else None

    setattr(_module("symbolic"), "_merge_divmod_pairs", merge)  # noqa: B010


def argkey_untyped() -> None:
    """The hash-consing key is the raw arg: 0.0 == -0.0 and 1 == True, so the cache mixes them up."""

    def argkey(arg: object) -> object:
        return arg

    for name in ("uop", "rewrite"):  # both modules hold the function
        setattr(_module(name), "_argkey", argkey)  # noqa: B010


def typed_literal_via_f32() -> None:
    """A bug this suite found (docs/notes.md): the value in f64(...) was read as a float32 literal first."""
    right = _convert

    def convert(value: ConstValue, dt: DType) -> ConstValue:
        return right(round_to(dtypes.float32, value) if dt is dtypes.float64 else value, dt)

    setattr(_module("uir"), "_convert", convert)  # noqa: B010


def where_bounds_true_branch() -> None:
    """The bounds of an undecided WHERE are those of its true branch only."""

    def bounds_where(u: UOp, c: Interval, a: Interval, b: Interval) -> Interval:
        return b if c[0] == c[1] == 0 else a

    _BOUNDS[Ops.WHERE] = bounds_where


@dataclass(frozen=True)
class Mutant:
    name: str
    apply: Callable[[], None]

    @property
    def doc(self) -> str:
        return " ".join((self.apply.__doc__ or "").split())


MUTANTS = {
    m.__name__: Mutant(m.__name__, m)
    for m in (
        idiv_all_terms,
        mod_bounds_off_by_one,
        cmplt_floor,
        merge_divmod_constant,
        argkey_untyped,
        typed_literal_via_f32,
        where_bounds_true_branch,
    )
}


# ---------------------------------------------------------------------------------------------------------
# Running: one child process per mutant; the child patches, runs pytest and reports the failed tests.
# ---------------------------------------------------------------------------------------------------------


class _Failures:
    """A pytest plugin that records the id of every failed test (and every collection error)."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.append(report.nodeid)
        elif report.passed and report.when == "call":
            self.passed += 1

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.failed.append(f"{report.nodeid} (collection)")


def run_child(mutant: str, tests: str) -> None:
    """In the child process: apply the mutant (or none), run the tests, print one result line."""
    if mutant != "baseline":
        MUTANTS[mutant].apply()
    plugin = _Failures()
    pytest.main([tests, "-q", "-q", "-p", "no:cacheprovider", "--durations=0", "--no-header"], plugins=[plugin])
    print(RESULT_TAG + json.dumps({"failed": plugin.failed, "passed": plugin.passed}), flush=True)


def run_one(mutant: str, tests: str) -> tuple[list[str], int]:
    """Run a child process for one mutant: the failed test ids and the number of tests that passed."""
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mutant, "--tests", tests],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if not lines:
        raise RuntimeError(f"mutant {mutant}: the test run crashed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    result = json.loads(lines[-1][len(RESULT_TAG) :])
    return list(result["failed"]), int(result["passed"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Re-introduce plausible bugs into uopc-ir by monkeypatching and check that tests catch them.",
        epilog="mutants:\n" + "\n".join(f"  {m.name:24} {m.doc}" for m in MUTANTS.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("mutants", nargs="*", metavar="MUTANT", help="mutants to run (default: all of them)")
    parser.add_argument("--tests", default=PROPERTY_TESTS, help=f"pytest target (default: {PROPERTY_TESTS})")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--child", metavar="MUTANT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.child, args.tests)
        return 0
    if args.list:
        for m in MUTANTS.values():
            print(f"{m.name:24} {m.doc}")
        return 0
    unknown = [m for m in args.mutants if m not in MUTANTS]
    if unknown:
        parser.error(f"unknown mutant(s) {', '.join(unknown)}; see --list")

    failed, passed = run_one("baseline", args.tests)
    print(f"== baseline: {passed} passed, {len(failed)} failed ({args.tests})")
    ok = not failed
    for name in args.mutants or list(MUTANTS):
        failed, passed = run_one(name, args.tests)
        verdict = f"KILLED by {len(failed)} failing test(s)" if failed else "SURVIVED"
        print(f"== mutant {name}: {verdict} ({passed} passed)")
        print(f"   {MUTANTS[name].doc}")
        for test in failed:
            print(f"   FAILED {test}")
        ok = ok and bool(failed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
