"""Sample text from a GPT checkpoint written by scripts/train_gpt.py.

    python scripts/sample_gpt.py gpt-run/gpt.safetensors
    python scripts/sample_gpt.py gpt-run/gpt.safetensors --prompt "ROMEO:" --chars 300 --temperature 0.7 --top-k 10

Prints the prompt and what follows it, then (on stderr) the characters per second: every position runs
the same plan, as the model sees a window of the same shape each time.
"""

from __future__ import annotations

import argparse
import sys
import time

from arguments import input_file, non_negative_int, positive_float, positive_int
from gpt import generate, load_checkpoint
from safetensors import SafetensorError

from uopc.tensor import Tensor
from uopc.tensor.nn import CheckpointError
from uopc.tensor.realize import realizer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Sample from a GPT checkpoint of scripts/train_gpt.py.")
    p.add_argument("checkpoint", type=input_file, help="a .safetensors file written by train_gpt.py")
    p.add_argument("--prompt", default="\n", help="the text to continue (a newline)")
    p.add_argument("--chars", type=non_negative_int, default=500, help="characters to generate (500)")
    p.add_argument("--temperature", type=positive_float, default=0.8, help="sampling temperature (0.8)")
    p.add_argument("--top-k", type=positive_int, help="sample from the k most likely characters only (all)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the draws (0)")
    args = p.parse_args(argv)
    if not args.prompt:
        p.error("argument --prompt: give at least one character")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        model, vocabulary = load_checkpoint(args.checkpoint)
    except SafetensorError as e:  # not a safetensors file at all
        raise SystemExit(f"{args.checkpoint} is not a GPT checkpoint of train_gpt.py: {e}") from None
    except CheckpointError as e:  # a safetensors file, but not of this model
        raise SystemExit(str(e)) from None
    unknown = vocabulary.unknown(args.prompt)
    if unknown:
        raise SystemExit(f"--prompt: the model never saw the characters {unknown!r}")
    Tensor.manual_seed(args.seed)
    made, began = realizer.plans.made, time.perf_counter()
    print(args.prompt, end="", flush=True)
    for token in generate(model, vocabulary.encode(args.prompt), args.chars, args.temperature, args.top_k):
        print(vocabulary.decode([token]), end="", flush=True)
    seconds = time.perf_counter() - began
    print()
    rate = args.chars / seconds if seconds > 0 else 0.0
    print(f"{args.chars} characters, {rate:.1f} per second, {realizer.plans.made - made} plans built", file=sys.stderr)


if __name__ == "__main__":
    main()
