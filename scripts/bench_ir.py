"""Benchmark the IR: how fast uopc-ir builds, walks and rewrites graphs, and simplifies index expressions.

    python scripts/bench_ir.py --nodes 100000 --exprs 2000

Rows: building a graph node by node (hash consing on), toposorting it, rewriting it with the symbolic
rules, printing and parsing its .uir text; simplify() on random index expressions of the kind rangeify
produces; and `run` on a matrix-vector product of --nodes elements, counted as `run`'s limit counts them.
Each row is the median of --repeats runs, in nodes (or calls, or elements) per second.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import stamp
from arguments import output_file, positive_int

from uopc.ir import UOp, dtypes, param, parse, prod, range_, run, simplify, stack, to_uir


def build_chain(n: int) -> UOp:
    """A long sum of distinct products: every node is new, so hash consing does real work."""
    x = param(0, dtypes.int32)
    out = x
    for i in range(n // 3):
        out = out + x * (i % 7 + 2) + 1
    return out


def random_index(rng: random.Random, ranges: list[UOp]) -> UOp:
    """sum of ranges times small constants, then floor divided and reduced modulo small constants."""
    e = UOp.const(rng.randint(-3, 8))
    for r in rng.sample(ranges, rng.randint(1, len(ranges))):
        e = e + r * rng.randint(1, 12)
    if rng.random() < 0.7:
        e = e // rng.randint(1, 8)
    if rng.random() < 0.7:
        e = e % rng.randint(1, 9)
    return e


def median_rate(work: Callable[[], int], repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = work()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    p = argparse.ArgumentParser(description="Nodes per second for uopc-ir's core operations.")
    p.add_argument("--nodes", type=positive_int, default=60_000, help="nodes in the graph (default 60000)")
    p.add_argument(
        "--exprs", type=positive_int, default=2000, help="random index expressions to simplify (default 2000)"
    )
    p.add_argument("--repeats", type=positive_int, default=3, help="runs per row; the median is shown (default 3)")
    p.add_argument("--out", type=output_file, help="also write the table to this file")
    args = p.parse_args()

    graph = build_chain(args.nodes)
    n = len(graph.toposort())
    text = to_uir(graph)
    rng = random.Random(0)
    ranges = [range_(rng.randint(2, 16), a) for a in range(4)]
    exprs = [random_index(rng, ranges) for _ in range(args.exprs)]

    def rebuild() -> int:
        return len(build_chain(args.nodes).toposort())

    def simplify_all() -> int:
        for e in exprs:
            simplify(e)
        return len(exprs)

    # the interpreter: a matrix-vector product of distinct values, rows x 16, as `run`'s limit counts elements
    rows_ = max(1, args.nodes // 16)  # --nodes is at least 1
    matrix = stack(*[float(i % 13) for i in range(rows_ * 16)]).reshape((rows_, 16))
    vector = stack(*[float(i % 7) for i in range(rows_)]).reshape((rows_, 1)).expand((rows_, 16))
    product = (matrix * vector).sum((0,))
    elements = sum(prod(u.shape) for u in product.toposort())

    def interpret() -> int:
        run(product, max_elements=elements)
        return elements

    rows = [
        ("build (hash-consed constructors)", median_rate(rebuild, args.repeats), "nodes/s"),
        ("toposort", median_rate(lambda: len(graph.toposort()), args.repeats), "nodes/s"),
        (
            "graph_rewrite with the symbolic rules",
            median_rate(lambda: len(simplify(graph).toposort()) and n, args.repeats),
            "nodes/s",
        ),
        ("to_uir", median_rate(lambda: len(to_uir(graph).splitlines()) and n, args.repeats), "nodes/s"),
        ("parse", median_rate(lambda: len(parse(text).toposort()), args.repeats), "nodes/s"),
        ("simplify on random index expressions", median_rate(simplify_all, args.repeats), "calls/s"),
        ("run (the interpreter), a matrix-vector product", median_rate(interpret, args.repeats), "elements/s"),
    ]
    lines = [f"uopc-ir benchmark: a graph of {n} nodes, {len(exprs)} index expressions (median of {args.repeats})"]
    lines += [f"{name:48s} {rate:14,.0f} {unit}" for name, rate, unit in rows]
    table = "\n".join(lines)
    print(table)
    if args.out:
        stamp.write(Path(args.out), table + "\n", ["packages/uopc-ir/src", __file__])


if __name__ == "__main__":
    main()
