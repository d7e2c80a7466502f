"""Probes for lab03, loaded into the worker before the student's module.

They run beside the student's code, which can rewrite them, so nothing they report
earns a point unless the grader can check it itself: `speedup_with_sums` and
`profile_program` only set up a call (the evidence is what the grader's callables
receive, and the answer it alone can judge), `read_file` hands over bytes the student
wrote anyway.

matplotlib, cProfile and pstats are imported here once, in the zygote, so that each
check's fresh worker does not pay for them again. Nothing is drawn here: fonts
loaded before the fork would hold file descriptors that the worker closes.
"""

from __future__ import annotations

import builtins
import cProfile  # noqa: F401 - loaded once in the zygote: every hotspot needs it
import pstats  # noqa: F401 - likewise
import random
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402, F401 - the backend first; loaded once for every plot

# --- speedup_table ----------------------------------------------------------------------


def speedup_with_sums(student, loop, vectorized, sizes: list[int], repeats: int, seed: int):
    """speedup_table with the module's two sums replaced, for the call, by the grader's
    callables: whatever array each timed call is given travels to the grader, which
    counts and compares them itself. Returns the table."""
    originals = student.sum_squares_loop, student.sum_squares_vectorized
    student.sum_squares_loop, student.sum_squares_vectorized = loop, vectorized
    try:
        return student.speedup_table(sizes, repeats=repeats, seed=seed)
    finally:
        student.sum_squares_loop, student.sum_squares_vectorized = originals


# --- hotspot ----------------------------------------------------------------------------


def profile_program(student, source: str, entry: str, runs: int, n: int, items: int) -> list:
    """hotspot's answer, `runs` times, on the program the grader wrote (`source`), whose
    function `entry` is profiled. Which function is hot, the grader alone knows."""
    namespace: dict = {"__builtins__": builtins}
    exec(compile(source, "<lab03 program>", "exec"), namespace)  # noqa: S102 - the grader's text
    rng = random.Random(2024)
    data = [rng.random() for _ in range(items)]
    return [student.hotspot(namespace[entry], n, data) for _ in range(runs)]


# --- plot_speedup -----------------------------------------------------------------------


def read_file(student, name: str, limit: int) -> bytes | None:
    """The regular file `name` in the worker's folder, if it holds at most `limit` bytes:
    what the student's code wrote, for the grader to decode."""
    path = Path(name)
    if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
        return None
    return path.read_bytes()
