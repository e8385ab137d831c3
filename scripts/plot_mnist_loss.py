"""Plot the loss curve of an MNIST training run, for the book.

    python scripts/plot_mnist_loss.py                          # train with the defaults (about a minute), then plot
    python scripts/plot_mnist_loss.py --epochs 1               # options it does not know go to train_mnist.py
    python scripts/plot_mnist_loss.py --log losses.txt --train-output run.txt --epochs 1   # plot a finished run
    python scripts/plot_mnist_loss.py --model cnn              # the CNN: mnist_cnn_loss.png, mnist_cnn_train.txt

Writes docs/outputs/mnist_loss.png (the loss of every step, faint, and its moving average, bold) and
docs/outputs/mnist_train.txt (how the run was made, its epochs, first and last loss, and the script's
final line: test accuracy and milliseconds per step); for the CNN, mnist_cnn_loss.png and
mnist_cnn_train.txt. When plotting a finished run, pass the training options it was made with, so that
steps are counted in the right epochs.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
import stamp
from arguments import input_file, output_folder, positive_int

ROOT = Path(__file__).resolve().parent.parent
TRAIN_SCRIPT = ROOT / "scripts" / "train_mnist.py"
TRAIN_IMAGES = 60_000
# the code a training run's numbers depend on
MEASURES: list[str | Path] = [
    *(f"packages/{p}/src" for p in ("uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor")),
    TRAIN_SCRIPT,
    __file__,
]


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """This script's options, and the rest: options of train_mnist.py."""
    p = argparse.ArgumentParser(
        description="Plot the loss curve of scripts/train_mnist.py into docs/outputs. Options not listed "
        "here (--epochs, --batch-size, --hidden, --lr, ...) are passed to train_mnist.py.",
    )
    p.add_argument("--log", type=input_file, help="plot this loss log (from train_mnist.py --log) instead of training")
    p.add_argument(
        "--train-output", type=input_file, help="with --log: the printed output of that run, for its results"
    )
    p.add_argument(
        "--out-dir", type=output_folder, default=ROOT / "docs" / "outputs", help="where to write (docs/outputs)"
    )
    p.add_argument("--window", type=positive_int, default=50, help="steps in the moving average (default 50)")
    args, rest = p.parse_known_args(argv)
    if args.train_output and not args.log:
        p.error("--train-output goes with --log")
    return args, rest


def train_settings(train_argv: list[str]) -> argparse.Namespace:
    """The training options as train_mnist.py itself reads them (its defaults, and its errors)."""
    spec = importlib.util.spec_from_file_location("train_mnist", TRAIN_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    settings: argparse.Namespace = module.parse_args(train_argv)
    return settings


def run_training(train_argv: list[str], log: Path) -> str:
    """Run train_mnist.py (its progress bar shows on stderr); returns what it printed."""
    cmd = [sys.executable, str(TRAIN_SCRIPT), *train_argv, "--log", str(log)]
    print(f"running {shlex.join(cmd)}", flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    print(done.stdout, end="")
    if done.returncode != 0:
        raise SystemExit(f"train_mnist.py failed (exit status {done.returncode})")
    return done.stdout


def read_losses(log: Path) -> npt.NDArray[np.float64]:
    losses = np.loadtxt(log, dtype=np.float64, ndmin=1)
    if losses.size == 0:
        raise SystemExit(f"{log} holds no losses")
    return losses


def moving_average(values: npt.NDArray[np.float64], window: int) -> npt.NDArray[np.float64]:
    """The mean of each `window` consecutive values: window - 1 values fewer than given."""
    window = min(window, len(values))
    averaged: npt.NDArray[np.float64] = np.convolve(values, np.ones(window) / window, mode="valid")
    return averaged


def result_line(output: str) -> str | None:
    """train_mnist.py's final line: 'test accuracy ...% | ... ms/step (median; first step ... ms)'."""
    found = [line.strip() for line in output.splitlines() if line.startswith("test accuracy")]
    return found[-1] if found else None


def plot(
    losses: npt.NDArray[np.float64],
    settings: argparse.Namespace,
    window: int,
    result: str | None,
    out: Path,
    stamp_line: str,
) -> None:
    steps_per_epoch = TRAIN_IMAGES // settings.batch_size
    epochs = np.arange(1, len(losses) + 1) / steps_per_epoch
    averaged = moving_average(losses, window)
    start = (len(losses) - len(averaged)) // 2  # each mean drawn at the middle of its window
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=150)
    ax.plot(epochs, losses, color="tab:blue", alpha=0.25, linewidth=0.7, label="loss of each step")
    ax.plot(
        epochs[start : start + len(averaged)],
        averaged,
        color="tab:blue",
        linewidth=2.2,
        label=f"moving average over {min(window, len(losses))} steps",
    )
    ax.set_yscale("log")
    ax.set_xlim(0, epochs[-1])
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross-entropy loss (log scale)")
    accuracy = f", {result.split('|')[0].strip()}" if result else ""
    ax.set_title(f"uopc: {model_name(settings)} on MNIST, AdamW, batch {settings.batch_size}{accuracy}", fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out, metadata={stamp.PNG_KEY: stamp_line})  # the stamp of the run, as docs/hooks.py reads it
    plt.close(fig)


def result_figures(result: str | None) -> list[tuple[str, str]]:
    """The figures of train_mnist.py's final line, as table rows."""
    found = re.search(r"test accuracy ([\d.]+%)\s*\|\s*([\d.]+) ms/step \(median; first step (\d+) ms\)", result or "")
    if found is None:
        return [("test accuracy", "not recorded (pass the run's printed output with --train-output)")]
    accuracy, median_ms, first_ms = found.groups()
    return [("test accuracy", accuracy), ("ms per step (median)", median_ms), ("first step (ms)", first_ms)]


def model_name(settings: argparse.Namespace) -> str:
    if settings.model == "mlp":
        return f"784-{settings.hidden}-10 MLP"
    head = f", a hidden layer of {settings.hidden}" if settings.hidden else ""
    return f"CNN (3x3 convolutions of {settings.channels} and {2 * settings.channels} channels{head})"


def summary(losses: npt.NDArray[np.float64], settings: argparse.Namespace, window: int, result: str | None) -> str:
    steps_per_epoch = TRAIN_IMAGES // settings.batch_size
    window = min(window, len(losses))
    rows = [
        ("epochs", f"{settings.epochs} ({steps_per_epoch} steps each)"),
        ("steps in all", str(len(losses))),
        ("loss at the first step", f"{losses[0]:.4f}"),
        (f"mean loss of the last {window} steps", f"{float(np.mean(losses[-window:])):.4f}"),
        *result_figures(result),
    ]
    lines = [
        f"MNIST training with scripts/train_mnist.py: {model_name(settings)}, AdamW (peak lr {settings.lr:g}, "
        f"weight decay {settings.weight_decay:g}, cosine decay), batch {settings.batch_size}, seed {settings.seed}",
        "",
        "| measurement | value |",
        "| --- | ---: |",
        *(f"| {name} | {value} |" for name, value in rows),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args, train_argv = parse_args(argv)
    settings = train_settings(train_argv)
    if args.log:
        losses = read_losses(args.log)
        output = args.train_output.read_text() if args.train_output else ""
    else:
        with tempfile.TemporaryDirectory() as tmp:
            output = run_training(train_argv, Path(tmp, "losses.txt"))
            losses = read_losses(Path(tmp, "losses.txt"))
    expected = settings.epochs * (TRAIN_IMAGES // settings.batch_size)
    if len(losses) != expected:
        runs = f"{settings.epochs} epochs of batch {settings.batch_size}"
        print(f"warning: {len(losses)} losses, but {runs} make {expected} steps: pass the run's training options")
    result = result_line(output)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    name = "mnist" if settings.model == "mlp" else f"mnist_{settings.model}"
    png, txt = args.out_dir / f"{name}_loss.png", args.out_dir / f"{name}_train.txt"
    made = stamp.write(txt, summary(losses, settings, args.window, result), MEASURES)
    plot(losses, settings, args.window, result, png, made.line())
    print(f"wrote {png} and {txt}")


if __name__ == "__main__":
    main()
