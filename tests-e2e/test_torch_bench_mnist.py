"""bench_mnist.py's PyTorch rows: timed in a process of its own, so that uopc's steps run on uopc's libgomp.

The script once built PyTorch's steps in the process that times uopc's: PyTorch's libgomp.so.1 loaded first,
and uopc's kernels ran on it, without uopc's short spin and thread binding (notes 163). uopc now warns where
that happens; here the warning is an error, in the script's process and in every process it starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_mnist.py"


def test_uopcs_steps_never_run_on_pytorchs_libgomp() -> None:
    env = {**os.environ, "PYTHONWARNINGS": "error:uopc's kernels will run on"}
    command = [sys.executable, str(SCRIPT), "--steps", "1", "--warmup", "0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = dict(line.strip("|").rsplit("|", 1) for line in done.stdout.splitlines() if line.startswith("| "))
    ratios = {name.strip(): value.strip() for name, value in rows.items() if "/ PyTorch step" in name}
    assert set(ratios) == {"uopc step / PyTorch step", "CNN: uopc step / PyTorch step"}
    assert all(float(value.rstrip("x")) > 0 for value in ratios.values())
