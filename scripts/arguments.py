"""Argument types for the scripts' command lines, checked before any work starts.

A value that cannot work (a batch of 0 images, a learning rate of nan, an output file in a folder that does
not exist) is an argparse error: the usage line, the option named, exit status 2. Without them it was a
ZeroDivisionError, an IndexError, or, for an output file, an error at the end of a run whose result was
then lost.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path


def positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{value} is less than {low}")
    return value


def positive_float(text: str) -> float:
    return _finite_float(text, "positive", lambda v: v > 0)


def non_negative_float(text: str) -> float:
    return _finite_float(text, "at least 0", lambda v: v >= 0)


def _finite_float(text: str, what: str, ok: Callable[[float], bool]) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and ok(value)):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number {what}")
    return value


def output_file(text: str) -> Path:
    """A file the script will write: its folder must exist and be writable, and it must not be a folder."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{text} cannot be written (permissions)")
    return path


def output_folder(text: str) -> Path:
    """A folder the script will write into, created if need be: it, or the nearest folder above it that
    exists, must be a writable folder."""
    path = Path(text)
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{existing} cannot be written (permissions)")
    return path


def input_file(text: str) -> Path:
    """A file the script will read: it must exist and be a readable file."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text} is not a file" if path.exists() else f"{text} does not exist")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be read (permissions)")
    return path
