"""Numeric bounds at the edges: the limits every verb applies, and argparse types that apply them.

A number that enters through a file or an option is refused with one line naming the field or option
when it is outside what the computation can hold, rather than overflowing later (`OverflowError` in
numpy's seeding, `inf − inf` in a group mean, a `range` of 10^12 seeds). The manifest schemas in
workflow/schemas/ say the same limits as `maximum`s; this module is the one owner of their values.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from agentrepro.reading import INT64_MAX

MAX_SEED = 2**32 - 1  # numpy's legacy RandomState (the reference environments) takes seeds below 2**32
MAX_TASKS = 100_000  # eval.tasks and any seed list expanded from ranges (a panel is built task by task)
MAX_MAGNITUDE = 1e100  # rewards and values: squares and sums of a million of them stay finite
MAX_STEP = INT64_MAX
MAX_TRAIN_STEPS = (
    1_000_000  # train.steps, and every step a manifest names (eval.every, eval.checkpoint, analysis.final_step)
)
# A job's resources (`resources`, `backends.<name>.resources`): what a scheduler could be asked for, no more.
MAX_GPUS = 1_024
MAX_CPUS = 4_096
MAX_RUNTIME_MIN = 525_600  # a year
MAX_MEM_MB = 64 << 20  # 64 TiB
MAX_GPU_MEM_GB = 65_536  # resources.gpu_mem_gb: one GPU's memory, 64 TiB


def check_magnitude(value: float) -> bool:
    """True when `value` is a finite number small enough for sums and squares (|x| <= MAX_MAGNITUDE)."""
    return math.isfinite(value) and abs(value) <= MAX_MAGNITUDE


def number(
    low: float = -math.inf, high: float = math.inf, *, low_open: bool = False, high_open: bool = False
) -> Callable[[str], float]:
    """An argparse `type`: a finite float in the given interval (open ends where said); the error names the range."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    span = f"{left}{low:g}, {high:g}{right}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        inside = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
        if not math.isfinite(value) or not inside:
            raise argparse.ArgumentTypeError(f"expected a finite number in {span}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def integer(low: int = 0, high: int = INT64_MAX) -> Callable[[str], int]:
    """An argparse `type`: an integer in [low, high]; the error names the range."""

    def parse(text: str) -> int:
        stripped = text.strip().lstrip("+-")
        if not stripped.isdigit() or len(stripped) > 20:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, {high}], got {text[:40]!r}")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, {high}], got {text[:40]!r}")
        return value

    parse.__name__ = "integer"
    return parse


SEED = integer(0, MAX_SEED)
STEP = integer(0, MAX_STEP)
