"""Probes for lab03, loaded into the worker before the student's module.

They run beside the student's code, which can rewrite them, so nothing they report
earns a point unless the grader can check it itself: `speedup_with_sums` and
`profile_program` only set up a call (the evidence is what the grader's callables
receive, and the answer it alone can judge), `read_file` hands over bytes the student
wrote anyway.

cProfile and pstats are imported here, once in the zygote, so that each check's fresh
worker does not pay for them again; matplotlib too, named in `PRELOAD`, which only a
zygote imports (a portable worker, a process per check, would pay 0.3 s for it in
every check, where only the plot needs it). Workers draw with matplotlib's Agg back end
(`MPLBACKEND`, set by the sandbox). Nothing is drawn here: fonts loaded before the fork
would hold file descriptors that the worker closes.
"""

from __future__ import annotations

import builtins
import cProfile  # noqa: F401 - loaded once in the zygote: every hotspot needs it
import pstats  # noqa: F401 - likewise
import random
import sys
import tracemalloc
from pathlib import Path

import numpy as np

PRELOAD = ("matplotlib.pyplot",)

# Bound before the student's module is imported: rebinding them there changes nothing here.
_SETTRACE, _GETTRACE = sys.settrace, sys.gettrace
_TRACE_START, _TRACE_STOP, _TRACING = tracemalloc.start, tracemalloc.stop, tracemalloc.is_tracing
_ONES = np.ones

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


def vectorized_windows(student, base, size: int, count: int) -> list:
    """sum_squares_vectorized on `count` windows of `base`, `size` long, each one element
    further along. The grader times the whole request from its side and checks some of
    the sums: what this returns only shows the calls were made."""
    return [student.sum_squares_vectorized(base[i:i + size]) for i in range(count)]


# --- hotspot ----------------------------------------------------------------------------


def profile_program(student, source: str, entry: str, ask_name: str, ask, runs: int,
                    n: int, items: int) -> list:
    """hotspot's answer, `runs` times, on the program the grader wrote (`source`), whose
    function `entry` is profiled. The entry asks the grader's callable `ask` for its
    plan while it runs: which function is hot, the grader alone knows."""
    namespace: dict = {"__builtins__": builtins, ask_name: ask}
    exec(compile(source, "<lab03 program>", "exec"), namespace)  # noqa: S102 - the grader's text
    rng = random.Random(2024)
    data = [rng.random() for _ in range(items)]
    return [student.hotspot(namespace[entry], n, data) for _ in range(runs)]


# --- peak_bytes and line_hits: programs the grader wrote, sizes and branches it answers --


def _program(source: str, names: dict[str, object]) -> dict:
    namespace: dict = {"__builtins__": builtins, **names}
    exec(compile(source, "<lab03 program>", "exec"), namespace)  # noqa: S102 - the grader's text
    return namespace


def peak_in_program(student, source, entry, size_name, size, rows, held, old_peak):
    """peak_bytes of the grader's program, whose arrays are as large as the callback
    `size` answers (here, during the call). With `held` > 0, tracemalloc is already
    tracing `held` float64 elements and an earlier peak of `old_peak` when it is called."""
    fn = _program(source, {size_name: size, "np": np})[entry]
    if not held:
        return student.peak_bytes(fn, rows)
    started = not _TRACING()
    if started:
        _TRACE_START()
    try:
        kept = _ONES(held)  # traced before the call, alive during it
        _ONES(old_peak)  # freed at once: an earlier peak, higher than the call's
        result = student.peak_bytes(fn, rows)
        del kept
        return result
    finally:
        if started:
            _TRACE_STOP()


def _mark() -> None:
    """Called before and after line_hits: the trace function in force sees the call."""


_MARK = _mark.__code__


def lines_in_program(student, source, entry, count_name, count, flip_name, flip, seen, rows):
    """line_hits of the grader's program (loop counts and branches answered by the
    callbacks `count` and `flip`), under a trace function of this probe's that calls
    `seen` whenever `_mark` runs: before the call, and after it only if line_hits put
    this trace function back. A raising program's exception becomes its class name."""
    fn = _program(source, {count_name: count, flip_name: flip})[entry]

    def tracer(frame, event, _arg):
        if event == "call" and frame.f_code is _MARK:
            seen()

    previous = _GETTRACE()
    _SETTRACE(tracer)
    try:
        _mark()
        try:
            result = student.line_hits(fn, rows)
        except Exception as exc:  # noqa: BLE001 - the program raises on purpose
            result = type(exc).__name__
        _mark()
    finally:
        _SETTRACE(previous)
    return result


# --- plot_speedup -----------------------------------------------------------------------


def read_file(student, name: str, limit: int) -> bytes | None:
    """The regular file `name` in the worker's folder, if it holds at most `limit` bytes:
    what the student's code wrote, for the grader to decode."""
    path = Path(name)
    if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
        return None
    return path.read_bytes()
