"""Train train_mnist.py's CNN in PyTorch, to find a recipe before paying for it in uopc.

A uopc step of the CNN costs several PyTorch steps, so recipes (channels, hidden layer, learning rate,
epochs, batch size) are tried here first: the same network, data order (numpy's permutation from the
seed), AdamW and cosine schedule as scripts/train_mnist.py, on one thread by default. Each run is one
argument of name=value pairs on top of RECIPE (the default of train_mnist.py --model cnn); the names are
train_mnist.py's options.

    python scripts/search_cnn.py channels=8,hidden=0,lr=2e-3 seed=0 seed=1 seed=2
    python scripts/search_cnn.py channels=8,hidden=0,lr=2e-3 seed=0 seed=1 seed=2 --out docs/outputs/cnn_recipe.txt
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import stamp
from arguments import output_file, positive_int
from train_mnist import TRAIN_IMAGES, cosine_lr, normalize

from uopc.tensor.datasets import mnist

RECIPE = {"channels": 16, "hidden": 128, "epochs": 2, "lr": 5e-3, "batch_size": 128, "weight_decay": 1e-4, "seed": 0}


def recipe(text: str) -> dict[str, Any]:
    """'channels=16,lr=5e-3' on top of RECIPE; an unknown name or a bad number is an argparse error."""
    out: dict[str, Any] = dict(RECIPE)
    for pair in text.split(","):
        name, _, value = pair.partition("=")
        if name not in RECIPE:
            raise argparse.ArgumentTypeError(f"{name!r} is not one of {', '.join(RECIPE)}")
        try:
            out[name] = type(RECIPE[name])(float(value) if isinstance(RECIPE[name], float) else int(value))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}={value!r} is not a number") from None
    return out


def torch_cnn(channels: int, hidden: int) -> Any:
    """train_mnist.cnn in PyTorch: the same layers in the same order."""
    from torch import nn

    features = 2 * channels * 7 * 7
    head = [nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 10)] if hidden else [nn.Linear(features, 10)]
    return nn.Sequential(
        nn.Conv2d(1, channels, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels, 2 * channels, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        *head,
    )


def train(r: dict[str, Any], data: list[Any]) -> tuple[float, float, int]:
    """Test accuracy, seconds of training, and steps of one run of recipe r."""
    import torch

    x, y, test_x, test_y = data
    seed = r["seed"]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = torch_cnn(r["channels"], r["hidden"])
    opt = torch.optim.AdamW(model.parameters(), lr=r["lr"], weight_decay=r["weight_decay"])
    per_epoch = TRAIN_IMAGES // r["batch_size"]
    total, start = per_epoch * r["epochs"], time.perf_counter()
    for epoch in range(r["epochs"]):
        order = torch.from_numpy(rng.permutation(TRAIN_IMAGES))
        for i in range(per_epoch):
            for group in opt.param_groups:
                group["lr"] = cosine_lr(r["lr"], epoch * per_epoch + i, total)
            idx = order[i * r["batch_size"] : (i + 1) * r["batch_size"]]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    with torch.no_grad():
        accuracy = float((model(test_x).argmax(-1) == test_y).float().mean())
    return accuracy, seconds, total


def main() -> None:
    p = argparse.ArgumentParser(description="Train train_mnist.py's CNN in PyTorch for each recipe and seed.")
    p.add_argument("recipes", type=recipe, nargs="+", help="name=value pairs, comma-separated (see RECIPE)")
    p.add_argument("--threads", type=positive_int, default=1, help="PyTorch's threads (default 1)")
    p.add_argument("--out", type=output_file, help="also write the table to this file, stamped")
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    train_x, train_y, test_x, test_y = mnist()
    data = [
        torch.from_numpy(normalize(train_x, "cnn")),
        torch.from_numpy(train_y.astype(np.int64)),
        torch.from_numpy(normalize(test_x, "cnn")),
        torch.from_numpy(test_y.astype(np.int64)),
    ]
    lines = [
        f"train_mnist.py's CNN trained in PyTorch {torch.__version__} ({args.threads} thread(s)): AdamW, cosine decay",
        "",
        "| recipe | test accuracy | training (s) | ms per step |",
        "| --- | ---: | ---: | ---: |",
    ]
    print("\n".join(lines), flush=True)
    for r in args.recipes:
        accuracy, seconds, steps = train(r, data)
        name = ", ".join(f"{k} {v:g}" for k, v in r.items())
        lines.append(f"| {name} | {accuracy:.2%} | {seconds:.1f} | {seconds / steps * 1e3:.1f} |")
        print(lines[-1], flush=True)
    if args.out:
        stamp.write(args.out, "\n".join(lines) + "\n", [__file__, "scripts/train_mnist.py"])


if __name__ == "__main__":
    main()
