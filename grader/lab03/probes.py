"""Trusted probes for lab03, loaded into the worker before the student's module.

Functions cannot travel between processes, so everything that hands the student a
callable (a fake clock, a program to profile) or times the student's code runs here.
Probes return facts as plain data; the tests in test_vectorization.py judge them.

The clock, the tracer hooks and matplotlib's save path are bound at import time,
before the student's module exists, so a module that replaces `time.perf_counter` or
`sys.settrace` changes what the student's code sees, not what the probes measure.
matplotlib, cProfile and pstats are imported here once, in the zygote, so that each
check's fresh worker does not pay for them again. Nothing is drawn here: fonts loaded
before the fork would hold file descriptors that the worker closes.
"""

from __future__ import annotations

import builtins
import contextlib
import cProfile  # noqa: F401 - loaded once in the zygote: every hotspot needs it
import ctypes
import inspect
import pstats  # noqa: F401 - likewise
import random
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
from matplotlib.backend_bases import FigureCanvasBase  # noqa: E402

_perf_counter = time.perf_counter
_settrace = sys.settrace
_gettrace = sys.gettrace
_default_rng = np.random.default_rng
_print_figure = FigureCanvasBase.print_figure
_open_figures = plt.get_fignums
_get_figure = plt.figure
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


# --- best_time --------------------------------------------------------------------------

_ARGS = (3, "abc")


def best_time_log(student, repeats: int | None) -> dict:
    """Call best_time with a fake clock and a fake function; report the order of events.

    Every timer read and every call is logged; `calls` holds the positional and keyword
    arguments each call received. `repeats=None` leaves the default in place.
    """
    log: list[str] = []
    calls: list[list] = []
    now = [1000.0]

    def timer() -> float:
        log.append("timer")
        now[0] += 0.001
        return now[0]

    def fn(*args, **kwargs):
        log.append("call")
        calls.append([list(args), dict(kwargs)])
        now[0] += 0.5

    options = {"timer": timer} if repeats is None else {"timer": timer, "repeats": repeats}
    result = student.best_time(fn, *_ARGS, **options)
    return {"result": result, "log": log, "calls": calls}


def best_time_fake_durations(student, repeats: int | None, durations: list[float]):
    """best_time's answer when call k takes durations[k] and reading the clock is free."""
    now = [4096.0]
    count = [0]

    def timer() -> float:
        return now[0]

    def fn(*_args, **_kwargs):
        now[0] += durations[count[0]] if count[0] < len(durations) else 8.0
        count[0] += 1

    options = {"timer": timer} if repeats is None else {"timer": timer, "repeats": repeats}
    return student.best_time(fn, *_ARGS, **options)


def best_time_default_timer(student) -> bool:
    """Is best_time's default `timer` the real `time.perf_counter`?"""
    try:
        parameter = inspect.signature(student.best_time).parameters["timer"]
    except (KeyError, TypeError, ValueError):
        return False
    return parameter.default is _perf_counter


# --- speedup_table ----------------------------------------------------------------------

_SUMS = {"loop": "sum_squares_loop", "vectorized": "sum_squares_vectorized"}


@contextlib.contextmanager
def _watching_sums(student):
    """Record the dtype and size of every array the student's two sums are given.

    For the duration of the block each sum is replaced, in the student's module, by a
    thin wrapper that notes its argument and calls the student's own function.
    """
    seen: dict[str, list] = {kind: [] for kind in _SUMS}
    originals = {kind: getattr(student, name) for kind, name in _SUMS.items()}

    def spy(kind: str):
        original = originals[kind]

        def wrapper(arr, *args, **kwargs):
            if isinstance(arr, np.ndarray):
                seen[kind].append([str(arr.dtype), int(arr.size)])
            else:
                seen[kind].append([type(arr).__name__, -1])
            return original(arr, *args, **kwargs)

        return wrapper

    for kind, name in _SUMS.items():
        setattr(student, name, spy(kind))
    try:
        yield seen
    finally:
        for kind, name in _SUMS.items():
            setattr(student, name, originals[kind])


def speedup_rows(student, sizes: list[int], repeats: int, seed: int) -> dict:
    """The student's table, plus the dtype and size of every array each sum was given."""
    with _watching_sums(student) as seen:
        table = student.speedup_table(sizes, repeats=repeats, seed=seed)
    return {"table": table, "seen": seen}


def speedup_measured(student, size: int, repeats: int, seed: int) -> dict:
    """The student's one-row table for `size`, and the same two sums timed here.

    The functions are taken before speedup_table runs and timed on the clock bound at
    import, so neither a replaced clock nor invented numbers change these times.
    """
    loop, vectorized = student.sum_squares_loop, student.sum_squares_vectorized
    _steady_allocator()
    with _watching_sums(student) as seen:
        table = student.speedup_table([size], repeats=repeats, seed=seed)
    arr = _default_rng(seed).random(size, dtype=np.float32)
    vectorized(arr)
    return {
        "table": table,
        "seen": seen,
        "loop_s": _best_of(lambda: loop(arr), 3),
        "vectorized_s": _best_of(lambda: vectorized(arr), 9),
    }


# --- hotspot ----------------------------------------------------------------------------
# A program with a known profile, in units of `n` loop steps: `_program` itself does 16
# units, `_dispatch` 1 and then calls `_hot_inner` (5 units), `_side_task` does 1, and
# the built-in `sorted` takes longer than any of them. The answer is `_hot_inner`:
# the largest own time among Python functions other than the program itself.


def _hot_inner(n: int) -> int:
    total = 0
    for i in range(5 * n):
        total += i % 7
    return total


def _dispatch(n: int) -> int:
    total = 0
    for i in range(n):
        total += i & 1
    return total + _hot_inner(n)


def _side_task(n: int) -> int:
    total = 0
    for i in range(n):
        total ^= i
    return total


def _program(n: int, data: list[float]) -> int:
    total = 0
    for i in range(16 * n):
        total += i % 3
    ordered = sorted(data)
    return total + _dispatch(n) + _side_task(n) + len(ordered)


def _renamed_program(tag: str) -> tuple[types.FunctionType, dict[str, str]]:
    """The program above with every function renamed `<name>_<tag>`.

    The names change from one grading to the next, so an answer cannot be written in
    advance. The functions still find each other under their original global names.
    """
    originals = {
        "_hot_inner": _hot_inner,
        "_dispatch": _dispatch,
        "_side_task": _side_task,
        "_program": _program,
    }
    namespace: dict = {"__builtins__": builtins}
    names = {}
    for name, function in originals.items():
        names[name] = f"{name.lstrip('_')}_{tag}"
        code = function.__code__.replace(co_name=names[name], co_qualname=names[name])
        namespace[name] = types.FunctionType(code, namespace, names[name])
    return namespace["_program"], names


def hotspot_answers(student, runs: int, n: int, items: int, tag: str) -> dict:
    """hotspot's answer on the program in each of `runs` runs, and the names involved."""
    program, names = _renamed_program(tag)
    rng = random.Random(2024)
    data = [rng.random() for _ in range(items)]
    answers = [student.hotspot(program, n, data) for _ in range(runs)]
    return {"answers": answers, "expected": names["_hot_inner"], "program": names["_program"]}


# --- plot_speedup -----------------------------------------------------------------------


def _floats(values) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return np.zeros(0)


def _figure_facts(figure) -> dict:
    """What a saved figure shows: per axes, scales, labels, legend texts and line data."""
    axes = []
    for ax in figure.get_axes():
        legend = ax.get_legend()
        axes.append(
            {
                "xscale": str(ax.get_xscale()),
                "yscale": str(ax.get_yscale()),
                "xlabel": str(ax.get_xlabel()),
                "ylabel": str(ax.get_ylabel()),
                "legend": [str(t.get_text()) for t in legend.get_texts()]
                if legend is not None
                else [],
                "lines": [
                    [_floats(line.get_xdata()), _floats(line.get_ydata())]
                    for line in ax.get_lines()
                ],
            }
        )
    legends = [[str(t.get_text()) for t in legend.get_texts()] for legend in figure.legends]
    return {"axes": axes, "figure_legends": legends}


def plot_speedup_run(student, table: list[dict], as_str: bool) -> dict:
    """Call plot_speedup with a path in a fresh temporary folder; report what it made.

    Facts about each figure are taken when it is saved (matplotlib's canvases all go
    through `print_figure`), or from the figures still open afterwards if none was.
    """
    folder = Path(tempfile.mkdtemp(prefix="lab03-plot-"))
    path = folder / "speedup.png"
    saved: list[dict] = []

    def spy(canvas, *args, **kwargs):
        saved.append(_figure_facts(canvas.figure))
        return _print_figure(canvas, *args, **kwargs)

    FigureCanvasBase.print_figure = spy
    try:
        result = student.plot_speedup(table, str(path) if as_str else path)
    finally:
        FigureCanvasBase.print_figure = _print_figure
    try:
        if not saved:
            saved = [_figure_facts(_get_figure(number)) for number in _open_figures()]
        return {
            "returned_path": isinstance(result, Path),
            "same_path": isinstance(result, str | Path) and Path(result) == path,
            "png": path.read_bytes() if path.is_file() else None,
            "figures": saved,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
