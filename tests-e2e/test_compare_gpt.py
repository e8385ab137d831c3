"""scripts/compare_gpt.py and scripts/draw_gpt_plan.py on tiny models: seconds, not the book's runs.

The comparison's uopc row runs in its own process, as every framework's does; a framework that cannot run
(here: one that is not installed) gets a row that says why. The PyTorch rows are checked against the uopc
row in tests-e2e/test_torch_compare_gpt.py, where torch is installed. The drawing's parts of a step are
checked on plans whose answer is known without the drawing's rules: a forward pass alone, and kernels of
one kind each.
"""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from uopc.lower import Plan
from uopc.tensor import Tensor, realizer
from uopc.tensor.nn import Linear
from uopc.tensor.optim import AdamW

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
TINY = ["--layers", "1", "--dim", "16", "--heads", "2", "--block-size", "8", "--batch-size", "2"]
ROW = re.compile(r"^\| (\S+) \| (.*) \|$", re.MULTILINE)


def load(name: str) -> ModuleType:
    if str(SCRIPTS) not in sys.path:  # as `python scripts/draw_gpt_plan.py` has it: for `import gpt`
        sys.path.append(str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(f"{name}_script", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def rows(table: str) -> dict[str, list[str]]:
    return {m[1]: [c.strip() for c in m[2].split("|")] for m in ROW.finditer(table) if m[1] not in ("framework", "---")}


def test_the_uopc_row_runs_and_a_framework_that_cannot_run_says_why(tmp_path: Path) -> None:
    out = tmp_path / "compare.txt"
    argv = [sys.executable, str(SCRIPTS / "compare_gpt.py"), *TINY, "--steps", "2", "--warmup", "1"]
    argv += ["--frameworks", "uopc,tinygrad", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert text.startswith("stamp: commit ") and "with 2 threads" in text.splitlines()[0]
    found = rows(text)
    first_ms, steady_ms, ratio, loss1, loss2, diff = found["uopc"]
    assert float(first_ms) > 0 and float(steady_ms) > 0 and ratio == "1.00x" and diff == "0.0e+00"
    # fresh weights give every character about the same chance: the first loss is near ln(vocabulary)
    assert abs(float(loss1) - math.log(84)) < 0.3
    assert float(loss2) < float(loss1)  # one AdamW update on that same batch lowers its loss
    if importlib.util.find_spec("tinygrad") is None:
        assert found["tinygrad"][-1] == "did not run: ModuleNotFoundError: No module named 'tinygrad'"


def step_plan(run: object) -> Plan:
    """The largest of the plans that `run()` added to the cache: a training step's."""
    assert callable(run)
    before = set(realizer.plans.plans)
    run()
    return max((p for k, p in realizer.plans.plans.items() if k not in before), key=lambda p: len(p.steps))


def test_a_forward_pass_alone_is_all_forward_and_its_layers_follow_its_buffers() -> None:
    draw = load("draw_gpt_plan")
    gpt = load("gpt")
    Tensor.manual_seed(3)
    model = gpt.GPT(gpt.Config(vocab_size=11, block_size=8, dim=16, heads=2, layers=1))
    x, y = (np.random.default_rng(3).integers(0, 11, (2, 8)).astype(np.int32) for _ in range(2))
    with Tensor.no_grad():
        plan = step_plan(lambda: model(Tensor(x)).cross_entropy(Tensor(y)).realize())
    assert draw.phases(plan, plan.outputs[-1]) == ["forward"] * len(plan.steps)
    deps, layer = draw.producers(plan), draw.layers(draw.producers(plan))
    assert all(layer[j] < layer[i] for i, d in enumerate(deps) for j in d)
    assert any(deps) and len(draw.passed_buffers(plan)) > 0


def test_a_training_step_has_the_three_parts_and_its_picture_carries_the_stamp(tmp_path: Path) -> None:
    draw = load("draw_gpt_plan")
    stamp = load("stamp")
    Tensor.manual_seed(4)
    layer = Linear(3, 2)
    opt = AdamW(layer.parameters(), lr=1e-2)
    x = Tensor(np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32))

    def step() -> None:
        loss = layer(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step(loss)  # the loss last, as train_step passes it

    plan = step_plan(step)
    loss = plan.outputs[-1]
    part = draw.phases(plan, loss)
    writers = {b: i for i in range(len(plan.steps)) for b in draw.step_buffers(plan, i)[1]}
    assert part[writers[loss]] == "forward"
    assert all(part[writers[b]] == "optimizer" for b in plan.outputs[:-1] if b in writers)
    assert part.count("backward") > 0  # the weight's gradient: x.T @ the loss's gradient
    seconds = draw.kernel_seconds(step, plan)
    assert len(seconds) == len(plan.steps) and all(s >= 0 for s in seconds)
    out, line = tmp_path / "plan.png", "stamp: a test's line"
    draw.draw(plan, loss, seconds, "tiny", out, line)
    assert stamp.png_text(out.read_bytes())[stamp.PNG_KEY] == line


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda a, b: a @ b, "matmul-like"),
        (lambda a, b: a.sum(1), "reduce"),
        (lambda a, b: (a * 2.0).sum(1), "reduce"),  # a product with a constant is no matrix product
        (lambda a, b: a.relu() + 1.0, "elementwise"),
    ],
)
def test_each_kernel_kind_is_told_apart(make: object, kind: str) -> None:
    draw = load("draw_gpt_plan")
    rng = np.random.default_rng(5)
    a, b = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((4, 3), (3, 6)))
    assert callable(make)
    plan = step_plan(lambda: make(a, b).realize())
    assert [draw.kernel_kind(k) for k in plan.kernels] == [kind]


def test_a_failed_framework_row_gives_the_error_line_not_the_caret_under_a_quoted_line() -> None:
    compare = load("compare_gpt")
    stderr = (
        'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n'
        "RuntimeError: src:18:39: error: '%v3' defined with type 'float*'\n"
        "  store <4 x float> %v0, <4 x float>* %v3\n                                      ^\n"
    )
    assert compare.failure_reason(stderr, 1) == "RuntimeError: src:18:39: error: '%v3' defined with type 'float*'"
    assert compare.failure_reason("", 3) == "exit status 3"


def test_the_roofline_counts_a_matmuls_work_and_traffic() -> None:
    roofline = load("roofline_gpt")
    rng = np.random.default_rng(5)
    a, b = (Tensor(rng.standard_normal(shape).astype(np.float32)) for shape in [(6, 7), (7, 5)])
    plan = step_plan((a @ b).realize)
    programs = next(iter(realizer.compiled[plan].values())).programs
    [i] = [i for i, s in enumerate(plan.steps) if programs[s.kernel].flops]
    assert programs[plan.steps[i].kernel].flops == 2 * 6 * 7 * 5  # a multiply and an add per term
    assert roofline.step_bytes(plan, i) == 4 * (6 * 7 + 7 * 5 + 6 * 5)  # both operands and the result, once


def test_the_roofline_table_gives_each_kind_its_time_at_the_roof_and_the_share_reached() -> None:
    roofline = load("roofline_gpt")
    roofs = roofline.Roofs(compute=100.0, cache=50.0, memory=10.0)
    # at the roof, 1e9 FLOPs take 10 ms (compute bound) and 1e8 bytes take 2 ms (bound by the cache's rate)
    matmul = roofline.KernelRun("r_a", "matmul-like", "forward", flops=10**9, traffic=10**6, seconds=0.020)
    scale = roofline.KernelRun("E_b", "elementwise", "optimizer", flops=10**6, traffic=10**8, seconds=0.008)
    text = roofline.table([scale, matmul], roofs)
    assert "| matmul-like | 1 | 20.00 | 10.000 | 50.0% |" in text
    assert "| elementwise | 1 | 8.00 | 2.000 | 25.0% |" in text
    assert "| reduce | 0 | 0.00 | 0.000 | 0.0% |" in text
    assert "| whole step | 2 | 28.00 | 12.000 | 37.5% |" in text
    assert text.index("`r_a`") < text.index("`E_b`")  # the slowest first
