"""bench_gemm.py's PyTorch column: timed in a process of its own, never in the one that runs uopc's kernels.

PyTorch ships a libgomp.so.1 of its own. Imported into the benchmark's process, it loaded first, uopc's kernel
libraries then bound to it, under the settings it had read as it loaded rather than uopc's, and uopc's 256
plans ran at 0.34-0.43x numpy's speed instead of 1.05-1.29x (notes 161).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"

# times uopc's plans and PyTorch's at n = 256, where uopc's kernels are threaded and load libgomp, then says
# which modules and libraries the process loaded
PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import bench_gemm
answer = bench_gemm.torch_times([256], 1, None)
lines = bench_gemm.layouts([256], 1, False, 0, False, answer["medians"])
libraries = [line.split()[-1] for line in open("/proc/self/maps") if "gomp" in line]
print(json.dumps({"answer": answer, "lines": lines, "torch": "torch" in sys.modules, "gomp": libraries}))
"""


def test_pytorch_is_timed_in_a_process_of_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(SCRIPTS)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert not seen["torch"]
    assert seen["gomp"] and not any("torch" in path for path in seen["gomp"])
    assert set(seen["answer"]["medians"]) == {"256 ab", "256 abt", "256 atb"}
    assert all(0 < s < 1 for s in seen["answer"]["medians"].values())
    torch_cells = [line.split(" | ")[5] for line in seen["lines"]]
    assert len(torch_cells) == 3 and "n/a" not in torch_cells
