"""``type=`` functions for the command lines of benchmarks/ and scripts/: a number or a path that
cannot be right is refused by argparse itself (the usage, ``prog: error: argument --x: ...``,
exit code 2) before any work starts.

>>> positive_int("3"), non_negative_int("0"), positive_float("0.5")
(3, 0, 0.5)
>>> positive_int("0")
Traceback (most recent call last):
argparse.ArgumentTypeError: expected a positive integer, found '0'
>>> positive_float("nan")
Traceback (most recent call last):
argparse.ArgumentTypeError: expected a positive number, found 'nan'
>>> existing_dir("/nonexistent")
Traceback (most recent call last):
argparse.ArgumentTypeError: /nonexistent: no such folder
"""

from __future__ import annotations

import math
from argparse import ArgumentTypeError
from pathlib import Path

__all__ = ["existing_dir", "existing_file", "existing_path", "non_negative_int", "positive_float", "positive_int"]


def positive_int(text: str) -> int:
    """An integer >= 1: a count of queries, steps, repeats, workers."""
    return _integer(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0: a number of examples to list, where 0 lists none."""
    return _integer(text, 0, "an integer >= 0")


def _integer(text: str, least: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise ArgumentTypeError(f"expected {expected}, found {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0: seconds (nan would switch a timeout off, inf bounds nothing)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ArgumentTypeError(f"expected a positive number, found {text!r}")
    return value


def existing_dir(text: str) -> Path:
    """A folder that exists (a data root)."""
    if not Path(text).is_dir():
        raise ArgumentTypeError(f"{text}: no such folder")
    return Path(text)


def existing_file(text: str) -> Path:
    """A file that exists (an input to read)."""
    if not Path(text).is_file():
        raise ArgumentTypeError(f"{text}: no such file")
    return Path(text)


def existing_path(text: str) -> Path:
    """A file or a folder that exists (a model: a run folder or a checkpoint file)."""
    if not Path(text).exists():
        raise ArgumentTypeError(f"{text}: no such file or folder")
    return Path(text)
