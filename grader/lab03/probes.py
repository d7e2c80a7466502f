"""Probes for lab03, loaded into the worker before the student's module.

They run beside the student's code, which can rewrite them, so nothing they report
earns a point unless the grader can check it itself: `speedup_with_sums` and
`profile_program` only set up a call (the evidence is what the grader's callables
receive, and the answer it alone can judge), `read_file` hands over bytes the student
wrote anyway. The line counts and times of the two sums' probes are the last
worker-side facts this lab still pays for (see test_vectorization.py).

The clock and the tracer hooks are bound at import time, before the student's module
exists. matplotlib, cProfile and pstats are imported here once, in the zygote, so that
each check's fresh worker does not pay for them again. Nothing is drawn here: fonts
loaded before the fork would hold file descriptors that the worker closes.
"""

from __future__ import annotations

import builtins
import cProfile  # noqa: F401 - loaded once in the zygote: every hotspot needs it
import ctypes
import pstats  # noqa: F401 - likewise
import random
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402, F401 - the backend first; loaded once for every plot
import numpy as np  # noqa: E402

_perf_counter = time.perf_counter
_settrace = sys.settrace
_gettrace = sys.gettrace
_default_rng = np.random.default_rng
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, from glibc's malloc.h


def _steady_allocator() -> None:
    """Keep freed memory for reuse in this worker (glibc only; elsewhere a no-op).

    By default glibc hands every large temporary array back to the OS when it is freed
    and page-faults it in again on the next call, which can make an honest NumPy call
    ten times slower than its arithmetic. Timings should measure the interpreter's cost
    per element, the subject of this lab, not the page-fault cost of one machine.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):
        return
    mallopt(_M_TRIM_THRESHOLD, 1 << 28)
    mallopt(_M_MMAP_THRESHOLD, 1 << 25)


def _best_of(call, runs: int) -> float:
    """Smallest wall time of `runs` calls, on the clock taken at import."""
    best = float("inf")
    for _ in range(runs):
        start = _perf_counter()
        call()
        best = min(best, _perf_counter() - start)
    return best


# --- sum of squares ---------------------------------------------------------------------


def _view(arr: np.ndarray, view: str | None) -> np.ndarray:
    """Arrays arrive contiguous; views that are not are made here."""
    if view == "T":
        return arr.T
    if view == "step":
        return arr[::3]
    return arr


def call_on_view(student, name: str, arr: np.ndarray, view: str):
    """`name(arr.T)` or `name(arr[::3])`: a non-contiguous input."""
    return getattr(student, name)(_view(arr, view))


def _line_events(call) -> tuple[object, int, bool]:
    """Run `call()` with a tracer on every Python frame it starts; count line events.

    A Python-level loop over n elements runs at least one line per element; one NumPy
    call runs a few lines of NumPy's own Python wrappers, however large the array.
    Also reports whether the tracer was still installed when the call returned.
    """
    count = 0

    def on_line(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return on_line

    def on_call(frame, event, arg):
        return on_line

    _settrace(on_call)
    try:
        result = call()
    finally:
        kept = _gettrace() is on_call
        _settrace(None)
    return result, count, kept


def traced_call(student, name: str, arr: np.ndarray, view: str | None = None) -> dict:
    """`name(arr)` under the line tracer: its result, line events and the array size."""
    arr = _view(arr, view)
    result, lines, kept = _line_events(lambda: getattr(student, name)(arr))
    return {"result": result, "lines": lines, "size": int(arr.size), "tracer_kept": kept}


def _python_sum_squares(values: list[float]) -> float:
    total = 0.0
    for x in values:
        total += x * x
    return total


def vectorized_against_loop(student, size: int) -> dict:
    """Best times of the student's vectorised sum and of a plain Python loop, same data.

    The loop runs over a ready-made list of floats, the cheapest a Python loop gets,
    so any version that still touches each element from Python lands near it.
    """
    _steady_allocator()
    arr = _default_rng(11).standard_normal(size)
    values = arr.tolist()
    vectorized = student.sum_squares_vectorized
    vectorized(arr)  # first call: imports, caches and page faults are not the point
    return {
        "vectorized_s": _best_of(lambda: vectorized(arr), 9),
        "python_loop_s": _best_of(lambda: _python_sum_squares(values), 3),
    }


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
