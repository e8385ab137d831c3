"""The scripts' command lines: a value that cannot work is refused before any work, naming the option.

Each case runs the script as a user would, with an empty $UOPC_DATA and kernel cache: an argparse error
(exit status 2, `argument --option:` on stderr) that leaves both empty has stopped before any data was
fetched or kernel built. Before these checks, `--batch-size 0` was a ZeroDivisionError after MNIST was
loaded, `--epochs 0` an IndexError, and a `--checkpoint` in a missing folder an error after the whole run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from uopc.tensor.nn import load

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
MISSING = "{tmp}/no-such-folder/out.txt"

# (script, arguments, the option the error names, what it says); {tmp} is a fresh folder
BAD_ARGUMENTS = [
    ("train_mnist.py", ["--epochs", "0"], "--epochs", "0 is less than 1"),
    ("train_mnist.py", ["--batch-size", "0"], "--batch-size", "0 is less than 1"),
    ("train_mnist.py", ["--batch-size", "60001"], "--batch-size", "more than the 60,000 training images"),
    ("train_mnist.py", ["--hidden", "-3"], "--hidden", "-3 is less than 0"),
    ("train_mnist.py", ["--hidden", "0"], "--hidden", "the MLP needs a hidden layer"),
    ("train_mnist.py", ["--model", "rnn"], "--model", "invalid choice: 'rnn'"),
    ("train_mnist.py", ["--model", "cnn", "--channels", "0"], "--channels", "0 is less than 1"),
    ("train_mnist.py", ["--epochs", "two"], "--epochs", "'two' is not an integer"),
    ("train_mnist.py", ["--lr", "nan"], "--lr", "nan is not a finite number positive"),
    ("train_mnist.py", ["--lr", "0"], "--lr", "0 is not a finite number positive"),
    ("train_mnist.py", ["--weight-decay=-1e-4"], "--weight-decay", "is not a finite number at least 0"),
    ("train_mnist.py", ["--seed", "-1"], "--seed", "-1 is less than 0"),
    ("train_mnist.py", ["--checkpoint", MISSING], "--checkpoint", "no-such-folder does not exist"),
    ("train_mnist.py", ["--log", "{tmp}"], "--log", "is a folder"),
    ("train_mnist.py", ["--log", "{tmp}/a", "--checkpoint", "{tmp}/a"], "--log", "the same file as --checkpoint"),
    ("train_gpt.py", ["--steps", "0"], "--steps", "0 is less than 1"),
    ("train_gpt.py", ["--heads", "3"], "--heads", "3 heads do not divide the width 64"),
    ("train_gpt.py", ["--preset", "huge"], "--preset", "invalid choice: 'huge'"),
    ("train_gpt.py", ["--temperature", "0"], "--temperature", "0 is not a finite number positive"),
    ("train_gpt.py", ["--out-dir", "{tmp}/file/out"], "--out-dir", "file is not a folder"),
    ("sample_gpt.py", ["{tmp}/none.safetensors"], "checkpoint", "none.safetensors does not exist"),
    ("sample_gpt.py", ["{tmp}/file", "--prompt", ""], "--prompt", "give at least one character"),
    ("profile_gpt.py", ["--steps", "0"], "--steps", "0 is less than 1"),
    ("compare_gpt.py", ["--frameworks", "uopc,jax"], "--frameworks", "choose from uopc, uopc-eager, torch"),
    ("compare_gpt.py", ["--frameworks", ","], "--frameworks", "choose from"),
    ("compare_gpt.py", ["--steps", "0"], "--steps", "0 is less than 1"),
    ("compare_gpt.py", ["--threads", "0"], "--threads", "0 is less than 1"),
    ("compare_gpt.py", ["--heads", "3"], "--heads", "3 heads do not divide the width 64"),
    ("compare_gpt.py", ["--out", MISSING], "--out", "does not exist"),
    ("draw_gpt_plan.py", ["--preset", "huge"], "--preset", "invalid choice: 'huge'"),
    ("draw_gpt_plan.py", ["--out", MISSING], "--out", "does not exist"),
    ("roofline_gpt.py", ["--runs", "0"], "--runs", "0 is less than 1"),
    ("roofline_gpt.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_build.py", ["--kernels", "0"], "--kernels", "0 is less than 1"),
    ("bench_build.py", ["--repeats", "0"], "--repeats", "0 is less than 1"),
    ("bench_build.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_gemm.py", ["--ladder-size", "0"], "--ladder-size", "0 is less than 1"),
    ("bench_gemm.py", ["--sizes", "256", "0"], "--sizes", "0 is less than 1"),
    ("bench_gemm.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_gemm.py", ["--beam", "-1"], "--beam", "-1 is less than 0"),
    ("bench_beam.py", ["--beam", "0"], "--beam", "0 is less than 1"),
    ("bench_beam.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_gpu.py", ["--size", "0"], "--size", "0 is less than 1"),
    ("bench_gpu.py", ["--device", "TPU"], "--device", "invalid choice: 'TPU'"),
    ("ptxas_report.py", ["{tmp}", "--jobs", "0"], "--jobs", "0 is less than 1"),
    ("ptxas_report.py", ["{tmp}/file"], "folder", "is not a folder"),
    ("bench_ir.py", ["--nodes", "0"], "--nodes", "0 is less than 1"),
    ("bench_ir.py", ["--repeats", "0"], "--repeats", "0 is less than 1"),
    ("bench_ir.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_mlp_step.py", ["--batch", "0"], "--batch", "0 is less than 1"),
    ("bench_mlp_step.py", ["--repeats", "0"], "--repeats", "0 is less than 1"),
    ("bench_mnist.py", ["--steps", "0"], "--steps", "0 is less than 1"),
    ("bench_mnist.py", ["--warmup", "-1"], "--warmup", "-1 is less than 0"),
    ("bench_mnist.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_step.py", ["--steps", "0"], "--steps", "0 is less than 1"),
    ("bench_binding.py", ["--rounds", "0"], "--rounds", "0 is less than 1"),
    ("bench_binding.py", ["--out", MISSING], "--out", "does not exist"),
    ("profile_gemm.py", ["--size", "0"], "--size", "0 is less than 1"),
    ("profile_gemm.py", ["--out", MISSING], "--out", "does not exist"),
    ("thread_policy.py", ["--repeats", "0"], "--repeats", "0 is less than 1"),
    ("thread_policy.py", ["--thresholds", "16,x"], "--thresholds", "'x' is not an exponent of two"),
    ("thread_policy.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_step.py", ["--warmup", "-1"], "--warmup", "-1 is less than 0"),
    ("bench_step.py", ["--out", MISSING], "--out", "does not exist"),
    ("profile_step.py", ["--steps", "0"], "--steps", "0 is less than 1"),
    ("profile_step.py", ["--model", "cnn"], "--model", "invalid choice: 'cnn'"),
    ("profile_step.py", ["--out", MISSING], "--out", "does not exist"),
    ("bench_bandwidth.py", ["--sizes", "1", "0"], "--sizes", "0 is less than 1"),
    ("bench_bandwidth.py", ["--rounds", "0"], "--rounds", "0 is less than 1"),
    ("bench_bandwidth.py", ["--out", MISSING], "--out", "does not exist"),
    ("mutants.py", ["--out", MISSING], "--out", "does not exist"),
    ("torch_cases.py", ["--out", MISSING], "--out", "does not exist"),
    ("plot_mnist_loss.py", ["--window", "0"], "--window", "0 is less than 1"),
    ("plot_mnist_loss.py", ["--log", "{tmp}/losses.txt"], "--log", "losses.txt does not exist"),
    ("plot_mnist_loss.py", ["--out-dir", "{tmp}/file/out"], "--out-dir", "file is not a folder"),
    ("plot_mnist_loss.py", ["--epochs", "0"], "--epochs", "0 is less than 1"),  # train_mnist.py's own check
]


@pytest.mark.parametrize(("script", "args", "option", "message"), BAD_ARGUMENTS)
def test_a_bad_argument_is_refused_before_any_work(
    tmp_path: Path, script: str, args: list[str], option: str, message: str
) -> None:
    data, cache, work = tmp_path / "data", tmp_path / "cache", tmp_path / "work"
    for folder in (data, cache, work):
        folder.mkdir()
    (work / "file").write_text("a file where a folder is expected\n")
    argv = [a.format(tmp=work) for a in args]
    env = {**os.environ, "UOPC_DATA": str(data), "UOPC_CACHE": str(cache)}
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"argument {option}: " in done.stderr and message in done.stderr, done.stderr
    assert done.stderr.startswith("usage: ") and "Traceback" not in done.stderr
    assert not list(data.iterdir()) and not list(cache.iterdir())  # nothing fetched, nothing built
    assert sorted(p.name for p in work.iterdir()) == ["file"]  # nothing written


def test_train_mnist_runs_with_good_arguments_and_writes_both_files(tmp_path: Path) -> None:
    # two steps of a tiny model: the options pass their checks and both output files are written
    checkpoint, log = tmp_path / "mlp.safetensors", tmp_path / "losses.txt"
    argv = ["--epochs", "1", "--batch-size", "30000", "--hidden", "8", "--checkpoint", str(checkpoint)]
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "train_mnist.py"), *argv, "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("test accuracy ") and f"saved {checkpoint}" in done.stdout
    assert len(log.read_text().splitlines()) == 2
    assert sorted(load(checkpoint)) == ["l1.bias", "l1.weight", "l2.bias", "l2.weight"]


def test_train_mnist_trains_the_cnn(tmp_path: Path) -> None:
    # two steps of a one-channel CNN with a hidden layer of 2: the layers train, and their names are PyTorch's
    checkpoint = tmp_path / "cnn.safetensors"
    argv = ["--model", "cnn", "--channels", "1", "--hidden", "2", "--epochs", "1", "--batch-size", "30000"]
    argv += ["--checkpoint", str(checkpoint)]
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "train_mnist.py"), *argv],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("test accuracy ")
    names = ["0.bias", "0.weight", "3.bias", "3.weight", "7.bias", "7.weight", "9.bias", "9.weight"]
    assert sorted(load(checkpoint)) == names
    assert load(checkpoint)["9.weight"].shape == (10, 2)


TILED = """extern "C" __global__ void __launch_bounds__(64) tiled(float* __restrict__ out) {
  __shared__ float smem0[64];
  smem0[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = smem0[63 - threadIdx.x];
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH: the ptxas report skips")
def test_the_ptxas_check_reports_gemm_kernels_and_fails_on_a_compile_error(tmp_path: Path) -> None:
    (tmp_path / "a.cu").write_text(TILED)
    (tmp_path / "b.cu").write_text(TILED.replace("tiled", "other"))  # two files, one batch, names kept apart
    argv = [sys.executable, str(SCRIPTS / "ptxas_report.py"), "--check", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("a ", "b "))]
    assert sorted((r[0], r[1], r[2], r[-1]) for r in rows) == [
        ("a", "tiled", arch, "GEMM") for arch in ("sm_80", "sm_90")
    ] + [("b", "other", arch, "GEMM") for arch in ("sm_80", "sm_90")]
    (tmp_path / "c.cu").write_text(TILED.replace("smem0[63", "undefined_name["))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1 and "FAILED" in done.stderr and "undefined_name" in done.stderr, done.stderr
