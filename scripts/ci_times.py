"""The wall time of each step of `hatch run ci:all`, with the machine's load, to see where CI's time goes.

    python scripts/ci_times.py                        # every step, in ci:all's order, through .tools/bin/hatch
    python scripts/ci_times.py tensor:test e2e:test   # some steps only (each step a `hatch run` name)

Run it after the environments exist (a first `hatch run ENV:SCRIPT` creates one, which is not the step's own
time). Each row gives the step's exit status and the one-minute load average when it started and ended: on a
shared machine a step that ran beside other work is slower, so compare runs made back to back at like loads.
Steps run one after another, as ci:all runs them, and a failed step does not stop the others.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ci_steps() -> list[str]:
    """The `hatch run` names that ci:all runs, in its order."""
    config = tomllib.loads((ROOT / "hatch.toml").read_text())
    return [line.removeprefix("hatch run ") for line in config["envs"]["ci"]["scripts"]["all"]]


def load() -> float:
    return os.getloadavg()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="*", help="hatch run names (default: every step of ci:all)")
    parser.add_argument("--hatch", default=str(ROOT / ".tools/bin/hatch"), help="the hatch to run")
    args = parser.parse_args()
    steps = args.steps or ci_steps()
    rows, total, failed = [], 0.0, 0
    for step in steps:
        before, start = load(), time.perf_counter()
        done = subprocess.run([args.hatch, "run", *step.split()], cwd=ROOT, check=False)
        seconds = time.perf_counter() - start
        total += seconds
        failed += done.returncode != 0
        rows.append(f"{step:24} {seconds:8.1f} {done.returncode:5} {before:6.2f} {load():6.2f}")
        print(f"== {rows[-1]}", file=sys.stderr, flush=True)
    print(f"{'step':24} {'wall s':>8} {'exit':>5} {'load0':>6} {'load1':>6}")
    print("\n".join(rows))
    print(f"{'total':24} {total:8.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
