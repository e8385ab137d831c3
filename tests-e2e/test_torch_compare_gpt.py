"""scripts/compare_gpt.py's PyTorch row against its uopc row on a tiny model: the same weights (loaded by
name) and batch give the same losses, before and after one AdamW update, each framework in its own process.
torch.compile is left out here: compiling takes a minute, the book's run shows its row."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
TINY = ["--layers", "1", "--dim", "16", "--heads", "2", "--block-size", "8", "--batch-size", "2"]


def test_pytorch_computes_the_losses_of_uopc_from_the_same_weights() -> None:
    argv = [sys.executable, str(SCRIPTS / "compare_gpt.py"), *TINY, "--steps", "1", "--warmup", "1"]
    argv += ["--frameworks", "uopc,torch"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = {m[1]: m[2].split("|") for m in re.finditer(r"^\| (uopc|torch) \|(.*)\|$", done.stdout, re.MULTILINE)}
    losses = {name: [float(cells[i]) for i in (3, 4)] for name, cells in found.items()}
    assert losses["torch"] == pytest.approx(losses["uopc"], abs=1e-5)
    assert losses["uopc"][1] < losses["uopc"][0]  # the update changed the weights, in both


def test_tinygrad_computes_the_losses_of_uopc_from_the_same_weights() -> None:
    # only where tinygrad is installed (hatch's compare environment): its loss must be read before its update
    pytest.importorskip("tinygrad")
    argv = [sys.executable, str(SCRIPTS / "compare_gpt.py"), *TINY, "--steps", "1", "--warmup", "1"]
    argv += ["--frameworks", "uopc,tinygrad"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.finditer(r"^\| (uopc|tinygrad) \|(.*)\|$", done.stdout, re.MULTILINE)
    losses = {m[1]: [float(m[2].split("|")[i]) for i in (3, 4)] for m in found}
    assert losses["tinygrad"] == pytest.approx(losses["uopc"], abs=1e-5)
