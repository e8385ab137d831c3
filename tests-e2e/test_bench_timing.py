"""How the benchmarks in scripts/ take turns: what each timed block of runs follows.

Two thread pools that spin after their work starve each other on a two-core machine. bench_gemm.py checks each
plan against numpy's matmul right before timing it, and while each block of runs was followed by a pause, the
first block was not preceded by one: uopc's first block ran at about half speed behind OpenBLAS's spinning
pool, a third of its runs, enough to move a median (notes 160).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@pytest.mark.parametrize("one_side", [False, True])
def test_every_block_of_bench_gemm_starts_after_a_pause(monkeypatch: pytest.MonkeyPatch, one_side: bool) -> None:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import bench_gemm

    events: list[str] = []
    monkeypatch.setattr(time, "sleep", lambda s: events.append(f"pause {s}"))
    other = None if one_side else lambda: events.append("numpy")
    bench_gemm.blocks(lambda: events.append("uopc"), other, 2, one_thread=False)

    pause = f"pause {bench_gemm.PAUSE_S}"
    block = ["uopc"] * 3 if one_side else ["uopc"] * 3 + [pause] + ["numpy"] * 3  # an untimed run, then two
    assert events == [pause, *block] * bench_gemm.ROUNDS
