"""Graders for lab03 (vectorisation and the cost model). Trusted: never imports student code.

Written to be read by the student: a point is paid only for evidence this process
obtains itself. best_time gets this process's fake clock and function (`callback`), so
every call and timer read happens, and is counted, here. speedup_table times the
grader's callables in place of the two sums, which then receive every timed array
here: their number shows `repeats` was passed on, their values that they came from
`default_rng(seed)`; its claimed gap is held against this process's own timing of the
two sums. hotspot profiles a program written here with fresh random names, whose
helpers share one body and whose loop counts and calls this process's callback answers
while it runs, so which helper is hot cannot be read off anything the call receives.
peak_bytes and line_hits run programs written here whose array sizes, loop counts and
branches this process's callbacks answer during the call, so the answer is
known here alone (and the trace function put back is seen by a callback it makes).
plot_speedup's PNG is decoded here, its header bounded first, and read from its pixels
alone (plotread.py, beside this file): tables drawn afresh for each grading, so a picture
made in advance shows the wrong lines. Whether the two sums loop
in Python rests on their source, parsed here, and on the worker's CPU time, read here
from /proc.
Timing checks compare against generous factors and take the best of several runs, so a
busy machine slows things down without changing a grade.
"""

from __future__ import annotations

import ast
import io
import math
import random
import secrets
import struct
import sys
import time

import numpy as np
import plotread  # beside this file (pytest puts the graders' folder on sys.path)
import pytest
from PIL import Image

from labkit.grading import as_float, as_int, callback, check, fail, refusals, refuse
from labkit.sandbox.codec import Opaque

# CPU seconds per element, read by this process from the worker's usage around one
# call. Systems count a process's CPU time in clock ticks (10 ms on Linux, 15.6 ms on
# Windows, each end of a measurement off by up to one), so the arrays are large enough
# that the limits below are 40 ms or more, two ticks beyond what the other side of them
# costs; the arrays sit in memory both sides map, so no copy of the argument is counted.
# A Python loop boxes every element: 50-300 ns each on today's machines, never under 20.
# One NumPy pass costs about 1-5 ns: even a loaded machine stays far below 25.
LOOP_MIN_CPU_PER_ELEMENT = 20e-9
VECTORIZED_MAX_CPU_PER_ELEMENT = 25e-9
LOOP_SHAPE = (4, 500_000)  # a short first axis: a loop over rows is not a loop per element
VECTORIZED_SIZE = 2_000_000
# What a loop is in the source (a `for`, a comprehension) and what hides one: builtins
# that walk an iterable element by element from Python.
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)
_PYTHON_WALKERS = {"sum", "map", "filter"}  # builtins (np.sum, arr.sum() are NumPy's)
_MODULE_WALKERS = {("math", "fsum"), ("functools", "reduce"), ("itertools", "accumulate")}
# The contract's promise at 100,000 elements, on the table and on the trusted clock.
MIN_RATIO_AT_100K = 10.0
# How far a table's time may stray from the trusted measurement of the same function.
AGREEMENT_FACTOR = 10.0
ROW_KEYS = {"size", "loop_s", "vectorized_s", "ratio"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PNG_BYTES = 4 * 1024 * 1024
MAX_PNG_SIDE = 4000  # pixels: a header asking for more is refused before decoding


def _cases() -> list[tuple[np.ndarray, float]]:
    """Arrays of several shapes and dtypes, each with its relative tolerance."""
    rng = np.random.default_rng(303)
    exact = 1e-9
    return [
        (np.array(2.5), exact),
        (np.zeros(0), exact),
        (rng.normal(size=17), exact),
        (rng.normal(size=(3, 4)), exact),
        (rng.normal(size=(2, 3, 4)), exact),
        (rng.normal(size=(2, 1, 3, 1)), exact),
        (rng.normal(size=1000).astype(np.float32), 1e-3),
        (rng.normal(scale=100.0, size=(10, 10)).astype(np.float32), 1e-3),
        (rng.integers(-1000, 1000, size=50, dtype=np.int64), exact),
        (rng.integers(-1000, 1000, size=(5, 6), dtype=np.int32), exact),
    ]


def _overflowing() -> list[np.ndarray]:
    """Integer arrays whose squares leave their dtype's range (the contract: the exact
    value all the same); every sum stays below 2**53, exact in float64 too."""
    rng = np.random.default_rng(307)
    return [
        np.full(4, 50_000, dtype=np.int32),
        rng.integers(-30_000_000, 30_000_000, size=8, dtype=np.int32),
        rng.integers(-30_000, 30_000, size=(4, 10), dtype=np.int16),
        np.arange(256, dtype=np.uint8),
    ]


def _expected(arr: np.ndarray) -> float:
    return float(np.sum(np.asarray(arr, dtype=np.float64) ** 2))


def _check_values(student, name: str) -> None:
    """Values judged here; every input sits in memory both sides map, so whether the
    call changed it is read here too, and views (a transpose, a step) arrive as views."""
    for arr, rel in _cases():
        shared = student.shared(arr)
        got = as_float(getattr(student, name)(shared))
        assert got == pytest.approx(_expected(arr), rel=rel, abs=1e-12)
        if not np.array_equal(shared.array, arr):
            fail("input_modified", name=name)
    for arr in _overflowing():
        exact = sum(int(x) ** 2 for x in arr.ravel())
        assert as_float(getattr(student, name)(arr)) == exact
    base = np.random.default_rng(304).normal(size=(6, 9))
    for view in (lambda a: a.T, lambda a: a[::3]):
        got = as_float(getattr(student, name)(student.shared(base, view)))
        assert got == pytest.approx(_expected(view(base)), rel=1e-9)


def _raises(kind: type[BaseException], call) -> bool:
    """Whether `call()` raises `kind`; other student exceptions fail the check as usual."""
    try:
        call()
    except kind:
        return True
    return False


@check("sum_squares_loop.values")
def test_sum_squares_loop_values(student):
    _check_values(student, "sum_squares_loop")


def _function(submission, name: str) -> ast.FunctionDef | None:
    """The module-level `def name` of the submission, parsed here (never run)."""
    try:
        tree = ast.parse(submission["vectorization.py"])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[-1] if found else None


def _walks_in_python(function: ast.FunctionDef) -> bool:
    """Whether the body loops in Python: a loop or comprehension, or a builtin that walks
    an iterable element by element (`sum(arr)`, `map`, `math.fsum`, ...)."""
    for node in ast.walk(function):
        if isinstance(node, _LOOPS):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _PYTHON_WALKERS | {
                    attr for _, attr in _MODULE_WALKERS}:
                return True  # also `from math import fsum`
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and (func.value.id, func.attr) in _MODULE_WALKERS):
                return True
    return False


@check("sum_squares_loop.python_loop")
def test_sum_squares_loop_python_loop(student, submission):
    """Evidence held here: the source has a Python loop, and the worker's CPU time for
    one large array, read from /proc by this process, is what boxing each element costs
    (a loop over rows, or one NumPy call behind a decorative loop, is far cheaper)."""
    function = _function(submission, "sum_squares_loop")
    if function is None or not _walks_in_python(function):
        fail("no_loop_per_element")
    arr = np.random.default_rng(305).normal(size=LOOP_SHAPE)
    measured = student.measure("sum_squares_loop", student.shared(arr))
    if measured.cpu_s < LOOP_MIN_CPU_PER_ELEMENT * arr.size:
        fail("no_loop_per_element")


@check("sum_squares_vectorized.values")
def test_sum_squares_vectorized_values(student):
    _check_values(student, "sum_squares_vectorized")


@check("sum_squares_vectorized.no_python_loop")
def test_sum_squares_vectorized_no_python_loop(student, submission):
    """Evidence held here: the source walks nothing element by element in Python, and
    the worker's CPU time for a million elements, read from /proc by this process,
    is NumPy's, not a Python loop's (which costs at least ten times more)."""
    name = "sum_squares_vectorized"
    function = _function(submission, name)
    if function is None or _walks_in_python(function):
        fail("python_loop_in_vectorized")
    arr = np.random.default_rng(306).normal(size=VECTORIZED_SIZE)
    getattr(student, name)(arr[:10])  # first call: imports and caches are not the point
    measured = student.measure(name, student.shared(arr))
    if measured.cpu_s > VECTORIZED_MAX_CPU_PER_ELEMENT * arr.size:
        fail("vectorized_too_slow")


# --- best_time: the grader's clock and function, called back here ------------------------


def _timed(student, repeats, durations=None, reading=0.001):
    """best_time on this process's clock and function; what each received and returned.

    The clock advances `reading` per read; call k of fn advances it `durations[k]` (0.5
    without `durations`; calls past them 8.0). Both run here: the student's code sees
    only the numbers they return.
    """
    now, calls = [1000.0], []

    def timer() -> float:
        now[0] += reading
        return now[0]

    def fn(*args, **kwargs) -> None:
        calls.append((list(args), kwargs))
        k = len(calls) - 1
        now[0] += 0.5 if durations is None else durations[k] if k < len(durations) else 8.0

    options = {"timer": callback(timer, "timer")}
    if repeats is not None:
        options["repeats"] = repeats
    result = student.best_time(callback(fn, "fn"), 3, "abc", **options)
    return result, calls, student.last_call.callbacks


def _default_timer_source(files) -> str | None:
    """The source text of best_time's `timer` default, read from the submission here."""
    try:
        tree = ast.parse(files.get("vectorization.py", b""))
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "best_time":
            args = node.args
            for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                if arg.arg == "timer" and default is not None:
                    return ast.unparse(default)
    return None


@check("best_time.calls_and_timer_reads")
def test_best_time_calls_and_timer_reads(student, submission):
    for repeats in (1, 4, None):
        n = 5 if repeats is None else repeats
        _, calls, events = _timed(student, repeats)
        if events != ("timer", "fn", "timer") * n:
            fail("timer_pattern")
        assert calls == [([3, "abc"], {})] * n
    # The default clock: the source says time.perf_counter, and the clock it names
    # measures this process's 30 ms sleep in seconds (a clock rebound at import does not).
    if _default_timer_source(submission) not in ("time.perf_counter", "perf_counter"):
        fail("default_timer")
    got = as_float(student.best_time(callback(lambda: time.sleep(0.03), "fn"), repeats=1))
    if not 0.03 <= got <= student.last_call.wall_s:
        fail("default_timer")


@check("best_time.returns_minimum")
def test_best_time_returns_minimum(student):
    # Durations are binary fractions, so every clock difference is exact. The shortest
    # call is never first or last, and calls past `repeats` would be the longest.
    cases = [
        (1, [0.375]),
        (3, [0.75, 0.25, 0.5, 4.0, 4.0]),
        (None, [0.5, 0.625, 0.125, 1.0, 0.25, 4.0, 4.0]),
        (6, [0.3125, 0.5, 0.4375, 0.0625, 0.125, 0.25, 4.0, 4.0]),
    ]
    for repeats, durations in cases:
        n = 5 if repeats is None else repeats
        got, _, _ = _timed(student, repeats, durations, reading=0.0)
        assert as_float(got) == pytest.approx(min(durations[:n]), rel=1e-12)


@check("best_time.rejects_bad_repeats")
def test_best_time_rejects_bad_repeats(student):
    for repeats in (0, -2):
        assert _raises(ValueError, lambda r=repeats: _timed(student, r))


# --- speedup_table ----------------------------------------------------------------------


def _row_numbers(row) -> tuple[int, float, float, float]:
    """A table row's four values as trusted numbers, or the check fails."""
    if not isinstance(row, dict) or set(row) != ROW_KEYS:
        fail("row_keys")
    size = as_int(row["size"])
    loop_s, vectorized_s, ratio = (as_float(row[k]) for k in ("loop_s", "vectorized_s", "ratio"))
    if not all(math.isfinite(v) and v > 0 for v in (loop_s, vectorized_s, ratio)):
        fail("times_not_positive")
    return size, loop_s, vectorized_s, ratio


def _table_with_our_sums(student, sizes, repeats, seed):
    """speedup_table timing this process's callables in place of the two sums.

    Returns the table and, per sum, every array a timed call gave it, as received here.
    """
    given: dict[str, list] = {"loop": [], "vectorized": []}

    def sum_for(kind: str):
        def timed(arr, *_args, **_kwargs) -> float:
            given[kind].append(arr)
            return _expected(arr) if isinstance(arr, np.ndarray) else 0.0
        return callback(timed, kind)

    table = student.probe("speedup_with_sums", sum_for("loop"), sum_for("vectorized"),
                          sizes, repeats, seed, where="speedup_table")
    return table, given


@check("speedup_table.rows")
def test_speedup_table_rows(student):
    sizes = [10, 300, 2000]
    table, given = _table_with_our_sums(student, sizes, 2, 5)
    if not isinstance(table, list) or len(table) != len(sizes):
        fail("table_not_list_of_rows")
    for size, row in zip(sizes, table, strict=True):
        got_size, loop_s, vectorized_s, ratio = _row_numbers(row)
        assert got_size == size
        assert ratio == pytest.approx(loop_s / vectorized_s, rel=1e-9)
    for arrays in given.values():
        timed = {(a.dtype, a.size) for a in arrays if isinstance(a, np.ndarray)}
        if any((np.dtype(np.float32), size) not in timed for size in sizes):
            fail("not_timing_float32")


@check("speedup_table.repeats")
def test_speedup_table_repeats(student):
    sizes, repeats = [10, 300], 4  # neither default of speedup_table nor of best_time
    _, given = _table_with_our_sums(student, sizes, repeats, 1)
    for arrays in given.values():
        counts = [sum(isinstance(a, np.ndarray) and a.size == s for a in arrays) for s in sizes]
        if counts != [repeats] * len(sizes):
            fail("repeats_ignored")


def _draws(sizes: list[int], seed: int, fresh: bool, cast: bool) -> list[np.ndarray]:
    """The arrays the README allows for `sizes`: from one generator for the table or a
    fresh one per size, drawn as float32 (`rng.random(n, dtype=np.float32)`) or as
    float64 cast to float32 (`rng.random(n).astype(np.float32)`)."""
    shared = np.random.default_rng(seed)
    draws = []
    for size in sizes:
        rng = np.random.default_rng(seed) if fresh else shared
        draws.append(rng.random(size).astype(np.float32) if cast
                     else rng.random(size, dtype=np.float32))
    return draws


@check("speedup_table.seeded")
def test_speedup_table_seeded(student):
    sizes, seed = [10, 300, 2000], 7
    _, given = _table_with_our_sums(student, sizes, 1, seed)
    schemes = [_draws(sizes, seed, fresh, cast) for fresh in (False, True)
               for cast in (False, True)]
    def drawn(arrays: list, scheme: list[np.ndarray]) -> bool:
        """Every size timed, every array timed one of that size's draws (how often is
        the repeats check's business)."""
        expected = dict(zip(sizes, scheme, strict=True))
        return {getattr(a, "size", -1) for a in arrays} == set(sizes) and all(
            isinstance(a, np.ndarray) and a.dtype == expected[a.size].dtype
            and np.array_equal(a, expected[a.size]) for a in arrays)

    for arrays in given.values():
        if not any(drawn(arrays, scheme) for scheme in schemes):
            fail("not_seeded")


def _best_wall(call, runs: int) -> float:
    """Smallest wall time of `runs` calls to the worker, on this process's clock."""
    best = math.inf
    for _ in range(runs):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


# The vectorised sum of 100,000 float32 takes about 15 us, a request's round trip to the
# worker up to a millisecond: timed one call at a time from here, the round trip would be
# most of what is seen. So it is timed over `count` calls in one request (on windows of a
# larger array, each one element further along, so no call can reuse the last answer),
# and the round trip of the same request with no call is taken off.
WINDOWS_TARGET_S = 0.005  # enough calls per request that the round trip is noise
MAX_WINDOWS = 400
GAP_ATTEMPTS = 3  # a gap or agreement that fails is measured again before it counts


def _vectorized_per_call(student, size: int) -> float:
    """The student's vectorised sum at `size` elements, in seconds per call: this
    process's clock around requests of many calls, less an empty request's round trip.
    The answers come back and are judged here, so the calls were made."""
    base = student.shared(np.random.default_rng(secrets.randbits(32)).random(
        size + MAX_WINDOWS, dtype=np.float32))

    def windows(count: int) -> float:
        best = math.inf
        for _ in range(5):
            started = time.perf_counter()
            sums = student.probe("vectorized_windows", base, size, count,
                                 where="sum_squares_vectorized")
            best = min(best, time.perf_counter() - started)
            if not isinstance(sums, list) or len(sums) != count:
                fail("timed_sums_wrong")
            for i in sorted(secrets.SystemRandom().sample(range(count), min(count, 2))):
                if as_float(sums[i]) != pytest.approx(_expected(base.array[i:i + size]),
                                                      rel=1e-3):
                    fail("timed_sums_wrong")
        return best

    round_trip = windows(0)
    one = max(windows(1) - round_trip, 1e-6)
    count = max(1, min(MAX_WINDOWS, int(WINDOWS_TARGET_S / one)))
    return max(windows(count) - round_trip, 1e-7) / count


def _gap_verdict(student, size: int, repeats: int) -> tuple[str | None, dict[str, str]]:
    """One measurement of the gap: the message key that fails it (None: it holds) and
    the numbers measured, for the message. The table's evidence of work (its CPU) is
    not luck: a table that fails it fails every attempt."""
    arr = student.shared(np.random.default_rng(0).random(size, dtype=np.float32))
    student.sum_squares_vectorized(arr)  # first call: imports, caches and page faults
    trusted_loop = _best_wall(lambda: student.sum_squares_loop(arr), 3)
    trusted_vectorized = _vectorized_per_call(student, size)
    # The loop's CPU cost per element, read from the kernel around a call ten times the
    # size (its clock ticks every 10 ms): the table must spend about `repeats` loops'
    # worth of it. CPU time, unlike wall time, a busy machine does not inflate.
    big = student.shared(np.random.default_rng(1).random(10 * size, dtype=np.float32))
    loop_cpu = student.measure("sum_squares_loop", big).cpu_s / (10 * size)
    measured = student.measure("speedup_table", [size], repeats=repeats, seed=0)
    table = measured.result
    if not isinstance(table, list) or len(table) != 1:
        fail("table_not_list_of_rows")
    _, loop_s, vectorized_s, ratio = _row_numbers(table[0])
    numbers = {
        "loop_ms": f"{trusted_loop * 1e3:.1f}",
        "vectorized_us": f"{trusted_vectorized * 1e6:.1f}",
        "ratio": f"{trusted_loop / trusted_vectorized:.0f}",
        "table_loop_ms": f"{loop_s * 1e3:.1f}",
        "table_vectorized_us": f"{vectorized_s * 1e6:.1f}",
        "table_ratio": f"{ratio:.0f}",
    }
    if not trusted_loop > MIN_RATIO_AT_100K * trusted_vectorized:
        return "gap_too_small", numbers
    # A table measured with `repeats` loops spends about that much CPU (a third of it is
    # allowed, for the clock's ticks). Only an error that widens the gap is refused: a
    # loop time above ours, a vectorised time below ours, each by more than the
    # agreement factor (a busy moment inside the table's own timing only narrows it).
    if measured.cpu_s < repeats * size * loop_cpu / 3:
        return "table_disagrees", numbers
    if loop_s > trusted_loop * AGREEMENT_FACTOR:
        return "table_disagrees", numbers
    if vectorized_s < trusted_vectorized / AGREEMENT_FACTOR:
        return "table_disagrees", numbers
    if not ratio > MIN_RATIO_AT_100K:
        return "gap_too_small", numbers
    return None, numbers


@check("speedup_table.measured_gap")
def test_speedup_table_measured_gap(student):
    for _ in range(GAP_ATTEMPTS):
        # nine loops: enough CPU (about 0.1 s) that the kernel's 10 ms ticks cannot make up
        # a third of it for a table that timed nothing
        key, numbers = _gap_verdict(student, 100_000, 9)
        if key is None:
            return
    fail(key, **numbers)


# --- hotspot ----------------------------------------------------------------------------
# A program with a known profile, in units of `n` loop steps: the entry does 14 to 18
# units and sorts its data (the built-in `sorted` takes longer than any of them), the
# hot helper 4 to 6, two others 1 each; a light one calls the hot one, so that its
# cumulative time beats the hot one's own. Nothing in the program says which helper is
# hot or who calls whom: the three helpers are one body with fresh names and drawn loop
# operations and constants, reached through a table, and the entry asks this process's
# callback for the plan (every loop count and call) while it runs. So neither the
# program's text, its constants nor its names hold the answer, which exists here alone.

_ENTRY = """def {entry}(n, data):
    {plan} = {ask}()
    {total} = 0
    for i in range({plan}[0] * n):
        {total} += i % 3
    {ordered} = sorted(data)
    for {index}, {count}, {then} in {plan}[1]:
        {total} += {table}[{index}](n, {count}, {then})
    return {total} + len({ordered})
"""
_HELPER = """def {name}(n, {count}, {then}):
    {total} = {start}
    for i in range({count} * n):
        {total} {op}
    for {index}, {inner}, {after} in {then}:
        {total} += {table}[{index}](n, {inner}, {after})
    return {total}
"""
# One operation per loop step, each about as costly as the others (a modulo, a mask or
# a shift, then an in-place add or xor), constants drawn per grading.
_OPS = ("+= i % {k}", "^= i + {k}", "+= i & {k}", "-= i % {k}", "^= i >> {s}", "+= i | {k}")


def _program() -> tuple[str, str, str, str, list]:
    """A fresh program: its source, the entry's name, the plan callback's name, the hot
    helper's name and the plan the callback answers."""
    draw = random.Random(secrets.randbits(64))
    names = _names("entry", "ask", "table", "plan", "total", "ordered", "index", "count",
                   "then", "inner", "after", "helper0", "helper1", "helper2")
    helpers = [names["helper0"], names["helper1"], names["helper2"]]
    parts = [_ENTRY.format(**names)]
    for name in helpers:
        op = draw.choice(_OPS).format(k=draw.randrange(3, 100), s=draw.randrange(1, 5))
        parts.append(_HELPER.format(**{**names, "name": name, "op": op,
                                       "start": draw.randrange(0, 50)}))
    draw.shuffle(parts)
    parts.append(f"{names['table']} = ({', '.join(helpers)})\n")
    hot, caller, other = draw.sample(range(3), 3)
    hot_call = [hot, draw.randrange(4, 7), []]
    # the other light helper: called by the entry, by the caller or by the hot one
    other_call = [other, 1, []]
    where = draw.randrange(3)
    caller_then = [hot_call] + ([other_call] if where == 1 else [])
    if where == 2:
        hot_call[2].append(other_call)
    calls = [[caller, 1, caller_then]] + ([other_call] if where == 0 else [])
    draw.shuffle(calls)
    plan = [draw.randrange(14, 19), calls]
    return "\n\n".join(parts), names["entry"], names["ask"], helpers[hot], plan


RUNS = 3


@check("hotspot.largest_own_time")
@pytest.mark.usefixtures("profilers_only")
def test_hotspot_largest_own_time(student):
    # Three runs, judged by majority: a scheduler hiccup in one run must not cost points.
    source, entry, ask, hot, plan = _program()
    answers = student.probe("profile_program", source, entry, ask,
                            callback(lambda: plan, "plan"), RUNS, 40_000, 160_000,
                            where="hotspot")
    if student.last_call.callbacks != ("plan",) * RUNS:
        fail("fn_not_called_once")
    assert isinstance(answers, list) and all(isinstance(a, str) for a in answers)
    if sum(a == entry for a in answers) >= 2:
        fail("hotspot_is_fn")
    assert sum(a == hot for a in answers) >= 2


# --- peak_bytes and line_hits -----------------------------------------------------------
# Both run a program written here with fresh names, whose sizes, loop counts and branches
# are answered by this process's callbacks during the call: nothing the call receives
# holds the answer, which is computed here from what the callbacks answered. Reading
# the program's globals or frames would reveal those answers, so these checks (and
# hotspot's) pay only for source free of reach-ins, less what the profilers need:
# `tracemalloc`, `sys.settrace`/`gettrace`, `fn.__code__` and `frame.f_code` (and
# `pathlib`, which plot_speedup's contract needs).

_PROFILER_NEEDS = {"__code__", "f_code", "settrace", "gettrace"}
_PROFILER_IMPORTS = {"import tracemalloc", "import pathlib"}


@pytest.fixture
def profilers_only(submission) -> None:
    """Fails the check before any call if the source reaches into the interpreter
    beyond what a memory and a line profiler need."""
    refuse([r for r in refusals(submission) if not (
        r.kind == "reach_in"
        and (r.what in _PROFILER_IMPORTS or r.what.rsplit(".", 1)[-1] in _PROFILER_NEEDS))])


def _names(*roles: str) -> dict[str, str]:
    return {role: f"{role[0]}{secrets.token_hex(5)}" for role in roles}


_PEAK_PROGRAMS = {
    "one": """def {entry}(rows):
    {a} = np.ones((rows, {size}()))
    return float({a}.sum())
""",
    # two temporaries one after the other: the peak is the larger one, not their sum
    "two": """def {entry}(rows):
    {a} = np.ones((rows, {size}()))
    {total} = float({a}.sum())
    del {a}
    {b} = np.ones((rows, {size}()))
    return {total} + float({b}.sum())
""",
}


def _peak(student, kind: str, held: int = 0, old_peak: int = 0) -> tuple[int, int]:
    """peak_bytes of a fresh program of `kind`: the answer and the bytes its arrays
    take at their peak, from the sizes this process answered."""
    names = _names("entry", "size", "a", "b", "total")
    source = _PEAK_PROGRAMS[kind].format(**names)
    rng = np.random.default_rng()
    rows = int(rng.integers(1, 4))
    answered: list[int] = []

    def size() -> int:
        answered.append(int(rng.integers(600_000, 1_400_000)) // rows)
        return answered[-1]

    got = student.probe("peak_in_program", source, names["entry"], names["size"],
                        callback(size, "size"), rows, held, old_peak, where="peak_bytes")
    if student.last_call.callbacks != ("size",) * (1 if kind == "one" else 2):
        fail("fn_not_called_once")
    return as_int(got), 8 * rows * max(answered)


def _near(got: int, expected: int) -> bool:
    return abs(got - expected) <= 0.1 * expected


@check("peak_bytes.temporary")
@pytest.mark.usefixtures("profilers_only")
def test_peak_bytes_temporary(student):
    for kind in ("one", "two", "one"):
        got, expected = _peak(student, kind)
        if not _near(got, expected):
            fail("peak_wrong", megabytes=f"{got / 1e6:.2f}")


@check("peak_bytes.already_tracing")
@pytest.mark.usefixtures("profilers_only")
def test_peak_bytes_already_tracing(student):
    # 4.8 MB traced before and during the call, an earlier peak of 24 MB
    got, expected = _peak(student, "one", held=600_000, old_peak=3_000_000)
    if not _near(got, expected):
        fail("peak_not_of_the_call", megabytes=f"{got / 1e6:.2f}")


_LINE_PROGRAMS = {
    "loop": """def {entry}(rows):
    {total} = 0

    for _ in range({count}()):
        if {flip}():
            {total} += rows
        else:
            {total} -= 1
            {total} *= 1
    {total} = {helper}({total})
    return {total}


def {helper}(x):
    for _ in range(3):
        x += 1
    return x
""",
    "raises": """def {entry}(rows):
    {total} = rows
    for _ in range({count}()):
        {total} += 1
    if {flip}():
        raise LookupError("raised on purpose")
    return {total}
""",
}


def _reference_hits(source: str, entry: str, names: dict[str, object], rows: int) -> dict:
    """This process's own count of the lines `entry` ran, with the callbacks' answers
    replayed: the same source compiled by the same Python gives the same line events."""
    namespace: dict = dict(names)
    exec(compile(source, "<lab03 program>", "exec"), namespace)  # noqa: S102 - our own text
    code, hits = namespace[entry].__code__, {}

    def local(frame, event, _arg):
        if event == "line":
            hits[frame.f_lineno] = hits.get(frame.f_lineno, 0) + 1
        return local

    previous = sys.gettrace()
    sys.settrace(lambda frame, _event, _arg: local if frame.f_code is code else None)
    try:
        namespace[entry](rows)
    except LookupError:
        pass
    finally:
        sys.settrace(previous)
    return hits


def _lines(student, kind: str, restored: bool = False):
    """line_hits of a fresh program of `kind`, placed at a random line, and what it
    should be; fails unless fn ran once and, if `restored`, the trace function in force
    before the call saw `_mark` run before it and again after it (so it was put back)."""
    names = _names("entry", "count", "flip", "helper", "total")
    source = "\n" * secrets.randbelow(40) + _LINE_PROGRAMS[kind].format(**names)
    rng = np.random.default_rng()
    n = int(rng.integers(5, 25))
    flips = [True] if kind == "raises" else [bool(b) for b in rng.integers(0, 2, size=n)]
    given: list[str] = []

    def count() -> int:
        given.append("count")
        return n

    def flip() -> bool:
        given.append("flip")
        return flips[min(given.count("flip"), len(flips)) - 1]

    rows = int(rng.integers(2, 9))
    got = student.probe("lines_in_program", source, names["entry"], names["count"],
                        callback(count, "count"), names["flip"], callback(flip, "flip"),
                        callback(lambda: None, "seen"), rows, where="line_hits")
    events = student.last_call.callbacks
    if restored and (events[:1] != ("seen",) or events[-1:] != ("seen",)
                     or events.count("seen") != 2):
        fail("tracer_not_restored")
    if tuple(e for e in events if e != "seen") != ("count", *("flip",) * len(flips)):
        fail("fn_not_called_once")
    answers = iter([n, *flips])
    expected = _reference_hits(source, names["entry"], {
        names["count"]: lambda: next(answers), names["flip"]: lambda: next(answers)}, rows)
    return got, expected


def _hits_agree(got, expected: dict) -> bool:
    return (isinstance(got, dict) and all(_is_count(k) and _is_count(v) for k, v in got.items())
            and {int(k): int(v) for k, v in got.items()} == expected)


def _is_count(n: object) -> bool:
    return isinstance(n, int | np.integer) and not isinstance(n, bool)


@check("line_hits.counts")
@pytest.mark.usefixtures("profilers_only")
def test_line_hits_counts(student):
    for _ in range(2):
        got, expected = _lines(student, "loop")
        if not _hits_agree(got, expected):
            fail("hits_wrong")


@check("line_hits.restores_tracer")
@pytest.mark.usefixtures("profilers_only")
def test_line_hits_restores_tracer(student):
    _lines(student, "loop", restored=True)
    _lines(student, "raises", restored=True)


# --- plot_speedup -----------------------------------------------------------------------

# Each table is drawn afresh: both times one power law of the size over three to four
# decades of it, a constant ratio (20x to 300x) apart. The exponent is kept away from 1
# (0.5-0.7 or 1.4-1.7), so the lines are straight on log-log axes only (with an exponent
# of 1 they would be straight on linear axes too), and the gap in decades over the
# exponent varies from one grading to the next, so a picture made in advance is wrong.


def _plot_table() -> tuple[list[dict], plotread.Expected]:
    """A drawn table and what its log-log plot must show."""
    rng = np.random.default_rng()
    decades = rng.uniform(3.2, 4.0)
    sizes = np.unique(np.rint(10 ** rng.uniform(1.5, 2.5)
                              * np.logspace(0, decades, int(rng.integers(7, 11)))))
    exponent = rng.uniform(0.5, 0.7) if rng.random() < 0.5 else rng.uniform(1.4, 1.7)
    ratio = 10 ** rng.uniform(1.3, 2.5)
    loop = 10 ** rng.uniform(-5.0, -3.0) * (sizes / sizes[0]) ** exponent
    table = [{"size": int(size), "loop_s": float(t), "vectorized_s": float(t / ratio),
              "ratio": float(t / (t / ratio))} for size, t in zip(sizes, loop, strict=True)]
    return table, plotread.Expected(size_decades=math.log10(sizes[-1] / sizes[0]),
                                    exponent=float(exponent), gap_decades=math.log10(ratio))


def _png(student, table, name: str) -> tuple[np.ndarray, object]:
    """plot_speedup's PNG at `name`, decoded here, and what the call returned: the
    header's size is checked before anything is decoded, so a crafted file costs at
    most MAX_PNG_SIDE² pixels."""
    result = student.plot_speedup(table, name)
    data = student.probe("read_file", name, MAX_PNG_BYTES, where="plot_speedup")
    if not isinstance(data, bytes) or not data.startswith(PNG_SIGNATURE) or len(data) < 33:
        fail("not_a_png")
    if data[12:16] != b"IHDR":
        fail("not_a_png")
    width, height = struct.unpack(">II", data[16:24])
    if not (200 <= width <= MAX_PNG_SIDE and 150 <= height <= MAX_PNG_SIDE):
        fail("not_a_png")
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG" or image.size != (width, height):
                fail("not_a_png")
            pixels = np.asarray(image.convert("RGB"))
    except Exception:  # noqa: BLE001 - any decoding error means a broken file
        fail("not_a_png")
    return pixels, result


def _reading(student, name: str) -> tuple[plotread.Reading, plotread.Expected]:
    """What plot_speedup's picture of a freshly drawn table shows, and should."""
    table, expected = _plot_table()
    pixels, _ = _png(student, table, name)
    return plotread.read_plot(pixels), expected


def _fail_on(fault: plotread.Fault | None) -> None:
    if fault is not None:
        fail(fault.key, **fault.params)


@check("plot_speedup.png_file")
def test_plot_speedup_png_file(student):
    pixels, result = _png(student, _plot_table()[0], "speedup.png")
    if not (isinstance(result, Opaque) and result.type_name.startswith("pathlib.")
            and result.type_name.endswith("Path")):
        fail("path_not_returned")
    colours, counts = np.unique(pixels.reshape(-1, 3), axis=0, return_counts=True)
    # Something is drawn: not one flat colour, at least 1% of the pixels off the background.
    if len(colours) < 3 or counts.max() > 0.99 * counts.sum():
        fail("blank_png")
    other, _ = _png(student, _plot_table()[0], "other.png")
    if other.shape == pixels.shape and np.array_equal(other, pixels):
        fail("plot_ignores_table")


@check("plot_speedup.log_axes")
def test_plot_speedup_log_axes(student):
    reading, _ = _reading(student, "speedup.png")
    _fail_on(plotread.bend_fault(reading))


@check("plot_speedup.gap")
def test_plot_speedup_gap(student):
    # two tables: a gap that matched one drawn table by chance does not match the next
    for name in ("speedup.png", "other.png"):
        reading, expected = _reading(student, name)
        _fail_on(plotread.gap_fault(reading, expected))


@check("plot_speedup.legend")
def test_plot_speedup_legend(student):
    reading, _ = _reading(student, "speedup.png")
    _fail_on(plotread.legend_fault(reading))
