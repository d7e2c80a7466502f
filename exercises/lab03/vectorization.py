"""Lab 03 -- vectorisation and the cost model.

A Python loop over an array turns every element into a Python object before it can do
arithmetic with it; one NumPy call does the same maths in compiled code straight over
the array's buffer. Here you write both versions of one sum, time them honestly, put a
number on the gap, find the slow function of a program with a profiler, and plot it.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def sum_squares_loop(arr: np.ndarray) -> float:
    """Sum of the squares of every element of `arr` (any shape), one element at a time.

    The slow way, on purpose: each step of the `for` loop boxes one element into a
    Python object and runs a handful of bytecodes on it. That per-element cost is what
    the rest of the lab measures.
    """
    raise NotImplementedError


def sum_squares_vectorized(arr: np.ndarray) -> float:
    """The same sum in NumPy calls, with no Python loop over the elements.

    The interpreter is paid once per call instead of once per element. Integers are
    widened to float64 first: squared in their own dtype they overflow. Floats keep
    their dtype: float32 is the dtype a model's data usually has, and widening it
    would double the memory traffic of the one pass over it.
    """
    raise NotImplementedError


def best_time(
    fn: Callable[..., Any],
    *args: Any,
    repeats: int = 5,
    timer: Callable[[], float] = time.perf_counter,
) -> float:
    """The smallest of `repeats` timings of `fn(*args)`, in seconds.

    The timer is read just before and just after each call, so nothing else is timed.
    The minimum is the honest summary: noise on a busy machine (other processes, cache
    misses, the garbage collector) can only add time, never take it away.
    """
    raise NotImplementedError


def speedup_table(sizes: Sequence[int], repeats: int = 3, seed: int = 0) -> list[dict]:
    """Time both sums with `best_time` on a random float32 array of each size.

    The arrays come from `np.random.default_rng(seed)`, so a table can be reproduced.
    One row per size, in order: `{"size", "loop_s", "vectorized_s", "ratio"}` with
    `ratio == loop_s / vectorized_s`, how many times faster the NumPy call is.
    """
    raise NotImplementedError


def hotspot(fn: Callable[..., Any], *args: Any) -> str:
    """Name (`co_name`) of the Python function with the largest own time in `fn(*args)`.

    Own time (`tottime`) counts only the time spent in a function's own lines, not in
    what it calls, so it points at the code to rewrite. `fn` itself is left out: the
    question is which of the functions it runs is slow. Built-in functions are left
    out too, since they have no Python code to change.
    """
    raise NotImplementedError


def peak_bytes(fn: Callable[..., Any], *args: Any) -> int:
    """Bytes `fn(*args)` needed at its peak, beyond what was allocated before the call.

    `tracemalloc` sees every allocation Python and NumPy make. If it is already tracing
    (someone measuring something larger), its peak is reset and what is traced before
    the call is subtracted, and it is left tracing; otherwise it runs for the call only.
    """
    raise NotImplementedError


def line_hits(fn: Callable[..., Any], *args: Any) -> dict[int, int]:
    """How many times each line of `fn`'s own code ran during `fn(*args)`.

    A trace function sees every new frame; it traces line by line only the frames of
    `fn`'s code object, so lines of the functions `fn` calls are not counted. The trace
    function in force before (a debugger, a coverage tool) is put back afterwards, also
    when `fn` raises.
    """
    raise NotImplementedError


def plot_speedup(table: list[dict], path: str | Path) -> Path:
    """Plot loop and vectorised time against size, log-log, into the PNG at `path`.

    Both costs grow in proportion to the size, so on log-log axes they are nearly
    straight lines, and the vertical gap between them is the speed-up, readable across
    many orders of magnitude of size.
    """
    # matplotlib is imported here, when a plot is drawn: importing it takes about a third
    # of a second, which every other function of this module would pay at import time.
    # Draw into files only (the Agg back end): no window, so it works on a server or in CI.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    raise NotImplementedError
