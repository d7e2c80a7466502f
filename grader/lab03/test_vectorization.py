"""Graders for lab03 (vectorisation and the cost model). Trusted: never imports student code.

Anything that needs a callable or a clock (best_time, speedup_table, hotspot,
plot_speedup) goes through the probes in probes.py, which return facts as plain data;
the judgement stays here. Timing checks compare against generous factors and take the
best of several runs, so a busy machine slows things down without changing a grade.
"""

from __future__ import annotations

import io
import math
import secrets

import numpy as np
import pytest
from PIL import Image

from labkit.grading import as_float, as_int, check, fail

# A loop visits every element: at least one traced line per element.
LOOP_LINES_PER_ELEMENT = 1.0
# One NumPy call runs a few lines of NumPy's Python wrappers, whatever the size.
VECTORIZED_MAX_LINES_PER_ELEMENT = 0.1
# The vectorised sum must beat a plain Python loop over floats by at least this much
# (a real NumPy call wins by 50x or more; anything that boxes each element by ~1x).
VECTORIZED_MIN_SPEEDUP = 5.0
# The contract's promise at 100,000 elements, on the table and on the trusted clock.
MIN_RATIO_AT_100K = 10.0
# How far a table's time may stray from the trusted measurement of the same function.
AGREEMENT_FACTOR = 10.0
ROW_KEYS = {"size", "loop_s", "vectorized_s", "ratio"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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


def _expected(arr: np.ndarray) -> float:
    return float(np.sum(np.asarray(arr, dtype=np.float64) ** 2))


def _check_values(student, name: str) -> None:
    for arr, rel in _cases():
        seen = student.observe(name, arr)
        got = as_float(seen.result)
        assert got == pytest.approx(_expected(arr), rel=rel, abs=1e-12)
        after = seen.args_after[0]
        if not (isinstance(after, np.ndarray) and np.array_equal(after, arr)):
            fail("input_modified", name=name)
    base = np.random.default_rng(304).normal(size=(6, 9))
    for view, arr in (("T", base.T), ("step", base[::3])):
        got = as_float(student.probe("call_on_view", name, base, view, where=name))
        assert got == pytest.approx(_expected(arr), rel=1e-9)


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


@check("sum_squares_loop.python_loop")
def test_sum_squares_loop_python_loop(student):
    rng = np.random.default_rng(305)
    for arr in (rng.normal(size=500), rng.normal(size=(20, 30)), rng.normal(size=(4, 5, 30))):
        got = student.probe("traced_call", "sum_squares_loop", arr, where="sum_squares_loop")
        if not got["tracer_kept"] or got["lines"] < LOOP_LINES_PER_ELEMENT * got["size"]:
            fail("no_loop_per_element")


@check("sum_squares_vectorized.values")
def test_sum_squares_vectorized_values(student):
    _check_values(student, "sum_squares_vectorized")


@check("sum_squares_vectorized.no_python_loop")
def test_sum_squares_vectorized_no_python_loop(student):
    rng = np.random.default_rng(306)
    name = "sum_squares_vectorized"
    for arr in (rng.normal(size=5000), rng.normal(size=(10, 20, 25))):
        got = student.probe("traced_call", name, arr, where=name)
        if not got["tracer_kept"] or got["lines"] > VECTORIZED_MAX_LINES_PER_ELEMENT * got["size"]:
            fail("python_loop_in_vectorized")
    times = student.probe("vectorized_against_loop", 100_000, where=name)
    vectorized_s, loop_s = as_float(times["vectorized_s"]), as_float(times["python_loop_s"])
    if not vectorized_s * VECTORIZED_MIN_SPEEDUP < loop_s:
        fail("vectorized_too_slow")


@check("best_time.calls_and_timer_reads")
def test_best_time_calls_and_timer_reads(student):
    for repeats in (1, 4, None):
        n = 5 if repeats is None else repeats
        got = student.probe("best_time_log", repeats, where="best_time")
        if got["log"] != ["timer", "call", "timer"] * n:
            fail("timer_pattern")
        assert got["calls"] == [[[3, "abc"], {}]] * n
    if student.probe("best_time_default_timer", where="best_time") is not True:
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
        got = student.probe("best_time_fake_durations", repeats, durations, where="best_time")
        assert as_float(got) == pytest.approx(min(durations[:n]), rel=1e-12)


@check("best_time.rejects_bad_repeats")
def test_best_time_rejects_bad_repeats(student):
    for repeats in (0, -2):
        assert _raises(
            ValueError, lambda r=repeats: student.probe("best_time_log", r, where="best_time")
        )


def _row_numbers(row) -> tuple[int, float, float, float]:
    """A table row's four values as trusted numbers, or the check fails."""
    if not isinstance(row, dict) or set(row) != ROW_KEYS:
        fail("row_keys")
    size = as_int(row["size"])
    loop_s, vectorized_s, ratio = (as_float(row[k]) for k in ("loop_s", "vectorized_s", "ratio"))
    if not all(math.isfinite(v) and v > 0 for v in (loop_s, vectorized_s, ratio)):
        fail("times_not_positive")
    return size, loop_s, vectorized_s, ratio


@check("speedup_table.rows")
def test_speedup_table_rows(student):
    sizes = [10, 300, 2000]
    got = student.probe("speedup_rows", sizes, 2, 5, where="speedup_table")
    table = got["table"]
    if not isinstance(table, list) or len(table) != len(sizes):
        fail("table_not_list_of_rows")
    for size, row in zip(sizes, table, strict=True):
        got_size, loop_s, vectorized_s, ratio = _row_numbers(row)
        assert got_size == size
        assert ratio == pytest.approx(loop_s / vectorized_s, rel=1e-9)
    for kind in ("loop", "vectorized"):
        timed = got["seen"][kind]
        if any(["float32", size] not in timed for size in sizes):
            fail("not_timing_float32")


@check("speedup_table.measured_gap")
def test_speedup_table_measured_gap(student):
    got = student.probe("speedup_measured", 100_000, 3, 0, where="speedup_table")
    table = got["table"]
    if not isinstance(table, list) or len(table) != 1:
        fail("table_not_list_of_rows")
    _, loop_s, vectorized_s, ratio = _row_numbers(table[0])
    for kind in ("loop", "vectorized"):  # the dtype is the rows check's business
        if not any(size == 100_000 for _, size in got["seen"][kind]):
            fail("not_timing_your_functions")
    trusted_loop, trusted_vectorized = as_float(got["loop_s"]), as_float(got["vectorized_s"])
    if not trusted_loop > MIN_RATIO_AT_100K * trusted_vectorized:
        fail("gap_too_small")
    for claimed, measured in ((loop_s, trusted_loop), (vectorized_s, trusted_vectorized)):
        if not measured / AGREEMENT_FACTOR <= claimed <= measured * AGREEMENT_FACTOR:
            fail("table_disagrees")
    if not ratio > MIN_RATIO_AT_100K:
        fail("gap_too_small")


@check("hotspot.largest_own_time")
def test_hotspot_largest_own_time(student):
    # Three runs, judged by majority: a scheduler hiccup in one run must not cost points.
    tag = secrets.token_hex(3)  # fresh function names each grading: nothing to memorise
    got = student.probe("hotspot_answers", 3, 40_000, 160_000, tag, where="hotspot")
    answers = got["answers"]
    assert isinstance(answers, list) and all(isinstance(a, str) for a in answers)
    if sum(a == got["program"] for a in answers) >= 2:
        fail("hotspot_is_fn")
    assert sum(a == got["expected"] for a in answers) >= 2


TABLE = [
    {"size": 1_000, "loop_s": 2.0e-4, "vectorized_s": 5.0e-6, "ratio": 40.0},
    {"size": 10_000, "loop_s": 2.1e-3, "vectorized_s": 1.1e-5, "ratio": 2.1e-3 / 1.1e-5},
    {"size": 100_000, "loop_s": 2.3e-2, "vectorized_s": 6.0e-5, "ratio": 2.3e-2 / 6.0e-5},
    {"size": 1_000_000, "loop_s": 2.6e-1, "vectorized_s": 9.0e-4, "ratio": 2.6e-1 / 9.0e-4},
]


def _figure(student) -> dict:
    """The facts of the figure plot_speedup saved (the last one, if it saved several)."""
    got = student.probe("plot_speedup_run", TABLE, False, where="plot_speedup")
    if not got["figures"]:
        fail("no_figure")
    return got["figures"][-1]


def _follows(x: np.ndarray, y: np.ndarray, key: str) -> bool:
    """Whether a line plots the table's `key` against size (in any unit of time)."""
    sizes = np.array([row["size"] for row in TABLE], dtype=float)
    times = np.array([row[key] for row in TABLE], dtype=float)
    if x.shape != sizes.shape or y.shape != times.shape or not np.allclose(x, sizes):
        return False
    scale = y / times
    return bool(np.all(scale > 0) and np.allclose(scale, scale[0], rtol=1e-6))


@check("plot_speedup.png_file")
def test_plot_speedup_png_file(student):
    got = student.probe("plot_speedup_run", TABLE, True, where="plot_speedup")
    data = got["png"]
    if not isinstance(data, bytes) or not data.startswith(PNG_SIGNATURE):
        fail("not_a_png")
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            kind, (width, height) = image.format, image.size
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    except Exception:  # noqa: BLE001 - any decoding error means a broken file
        fail("not_a_png")
    if kind != "PNG" or width < 200 or height < 150 or (colours is not None and len(colours) < 3):
        fail("not_a_png")
    if not (got["returned_path"] and got["same_path"]):
        fail("path_not_returned")


@check("plot_speedup.log_log_labelled")
def test_plot_speedup_log_log_labelled(student):
    facts = _figure(student)
    assert any(
        ax["xscale"] == "log"
        and ax["yscale"] == "log"
        and ax["xlabel"].strip()
        and ax["ylabel"].strip()
        for ax in facts["axes"]
    )


@check("plot_speedup.curves_and_legend")
def test_plot_speedup_curves_and_legend(student):
    facts = _figure(student)
    for ax in facts["axes"]:
        lines = ax["lines"]
        has_loop = any(_follows(x, y, "loop_s") for x, y in lines)
        has_vectorized = any(_follows(x, y, "vectorized_s") for x, y in lines)
        entries = [t for t in ax["legend"] + sum(facts["figure_legends"], []) if t.strip()]
        if has_loop and has_vectorized:
            if len(entries) < 2:
                fail("no_legend")
            return
    fail("curves_missing")
