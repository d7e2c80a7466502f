"""Graders for lab01 (references, mutation and views). Trusted: never imports student code.

Memory sharing, mutation and object identity only exist inside the worker, so they are
seen through `student.observe` or the probes in probes.py, which report plain facts;
the judging is done here.
"""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from labkit.grading import PROPERTY, as_array, as_float, as_int, check, fail

# --- VIEW_OR_COPY ------------------------------------------------------------------------

# The expressions of the contract. Their truth is computed below with np.shares_memory
# on the arrays the contract names; the answers are never written down here.
EXPRESSIONS = (
    "a[::2]",
    "a[2:5]",
    "a[[0, 2, 4]]",
    "a[a > 3]",
    "a.reshape(2, 5)",
    "a.copy()",
    "a.ravel()",
    "m.T",
    "m.T.ravel()",
    "m[:, 1]",
    "m[1]",
    "m[[1]]",
    "np.ascontiguousarray(m[:, ::2])",
    "m.flatten()",
    "a[...]",
    "a[None]",
)


def _truth() -> dict[str, str]:
    a = np.arange(10.0)
    m = np.arange(12.0).reshape(3, 4)
    truth = {}
    for expression in EXPRESSIONS:  # the grader's own constant strings, not student input
        result = eval(expression, {"__builtins__": {}, "np": np}, {"a": a, "m": m})
        shares = np.shares_memory(a, result) or np.shares_memory(m, result)
        truth[expression] = "view" if shares else "copy"
    return truth


@check("VIEW_OR_COPY.predictions")
def test_view_or_copy_predictions(student, credit):
    got = student.value("VIEW_OR_COPY")
    if type(got) is not dict or not all(type(k) is str and type(v) is str for k, v in got.items()):
        credit.partial(0, len(EXPRESSIONS))
        fail("view_or_copy_not_a_dict")
    truth = _truth()
    right = sum(got.get(key) == word for key, word in truth.items())
    credit.partial(right, len(truth))


# --- returns_view ------------------------------------------------------------------------


def _shares(arr: np.ndarray, index) -> bool | None:
    """NumPy's answer for `arr[index]`, or None when the indexing is not usable here."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = arr[index]
    except (IndexError, TypeError, ValueError, Warning):
        return None
    if isinstance(result, np.ndarray):
        if result.size == 0:  # an empty view shares no bytes: not a fair question
            return None
        return bool(np.shares_memory(arr, result))
    return False


def _random_part(rng: np.random.Generator, shape: tuple[int, ...]):
    """One part of an index: int, slice, ..., None, bool, list, int array or bool mask."""
    kind = int(rng.integers(9))
    side = shape[int(rng.integers(len(shape)))]

    def some_ints() -> list[int]:
        return [int(i) for i in rng.integers(-side, side, size=int(rng.integers(1, 4)))]

    if kind == 0:
        return some_ints()[0]
    if kind == 1:
        ends = [None, *range(-5, 6)]
        step = [None, 1, 2, 3, -1, -2][int(rng.integers(6))]
        return slice(ends[int(rng.integers(12))], ends[int(rng.integers(12))], step)
    if kind == 2:
        return Ellipsis
    if kind == 3:
        return None
    if kind == 4:
        return bool(rng.integers(2))
    if kind == 5:
        return some_ints()
    if kind == 6:
        return [bool(b) for b in rng.integers(2, size=shape[0])]
    if kind == 7:
        return np.array(some_ints(), dtype=np.intp)
    return rng.integers(2, size=shape[: int(rng.integers(1, len(shape) + 1))]).astype(bool)


def _random_indexing(seed: int) -> tuple[np.ndarray, object]:
    """A 1-D to 3-D array (sides 1..4) and an index NumPy accepts with a non-empty result.

    Hypothesis draws only the seed: one draw per example keeps the check fast, and the
    generator behind it gives every example a different structure.
    """
    rng = np.random.default_rng(seed)
    while True:
        shape = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 4))))
        arr = np.arange(float(np.prod(shape))).reshape(shape)
        form = int(rng.choice(4, p=[0.3, 0.4, 0.15, 0.15]))
        if form == 0:  # one part alone
            index = _random_part(rng, shape)
        elif form == 1:  # a tuple of parts
            index = tuple(_random_part(rng, shape) for _ in range(int(rng.integers(0, 5))))
        else:  # ints, one per axis (a scalar), maybe with one more part (an array again)
            ints: list = [int(rng.integers(-side, side)) for side in shape]
            if form == 3:
                ints.insert(int(rng.integers(len(ints) + 1)), _random_part(rng, shape))
            index = tuple(ints)
        if _shares(arr, index) is not None:
            return arr, index


BATCH = 5  # indexings per example: one trip to the worker answers a whole batch
_BATCHES = st.integers(0, 2**63).map(
    lambda seed: [_random_indexing(seed + k) for k in range(BATCH)]
)

_A, _M, _T = np.arange(10.0), np.arange(12.0).reshape(3, 4), np.arange(24.0).reshape(2, 3, 4)
# the contract's corner cases, always asked first
_CORNERS = [
    (_A, (0, None)),
    (_M, (1, 2, Ellipsis)),
    (_M, (1, 2)),
    (_A, 3),
    (_A, (3,)),
    (_T, (0, 1, 2)),
    (_A, ()),
    (_M, True),
    (_T, (0, True)),
    (_A, [0, 2, 4]),
    (_M, ([1],)),
    (_M, (slice(None), np.array([0, 3]))),
    (_A, _A > 3),
    (_M, (None, 1)),
    (_T, (0, Ellipsis, 1)),
    (_M, 1),
    (_A, slice(None, None, -2)),
]


@check("returns_view.matches_numpy")
@settings(parent=PROPERTY, max_examples=12)
@given(_BATCHES)
@example(_CORNERS)
def test_returns_view_matches_numpy(student, cases):
    answers = student.probe("returns_view_blind", cases, where="returns_view")
    if type(answers) is not list or len(answers) != len(cases):
        fail("probe_garbled")
    for (arr, index), got in zip(cases, answers, strict=True):
        if type(got) not in (bool, np.bool_):
            fail("not_a_bool")
        assert bool(got) == _shares(arr, index)


# --- corrupt_through_view / normalized_copy -----------------------------------------------


def _expect_value_error(call, *args) -> None:
    """`call(*args)` must raise ValueError; not raising is a plain failed check (any other
    exception the student's code raises propagates and is reported as such)."""
    try:
        call(*args)
    except ValueError:
        return
    raise AssertionError("no ValueError")


def _normalised(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / x.std()


def _close(got: np.ndarray, expected: np.ndarray) -> bool:
    """Same shape and values; a student's NaN or inf makes it False, never a warning."""
    with np.errstate(all="ignore"):
        return got.shape == expected.shape and bool(np.allclose(got, expected))


_SLICES = [(12, 2, 9), (6, 0, 6), (9, 4, 8), (15, 10, 15)]


@check("corrupt_through_view.writes_through")
def test_corrupt_through_view_writes_through(student):
    rng = np.random.default_rng(11)
    for size, start, stop in _SLICES:
        weights = rng.normal(3.0, 2.0, size=size)
        seen = student.observe("corrupt_through_view", weights, start, stop)
        result = as_array(seen.result)
        expected = _normalised(weights[start:stop])
        after = as_array(seen.args_after[0])
        assert _close(result, expected)
        assert seen.shares[0] is True, "the result must be the slice itself"
        assert _close(after[start:stop], expected), "weights must show the change"
        outside = np.ones(size, dtype=bool)
        outside[start:stop] = False
        assert np.array_equal(after[outside], weights[outside]), "the rest must be untouched"


@check("normalized_copy.values")
def test_normalized_copy_values(student):
    rng = np.random.default_rng(12)
    for size, start, stop in _SLICES:
        weights = rng.normal(-1.0, 5.0, size=size)
        result = as_array(student.normalized_copy(weights, start, stop))
        assert _close(result, _normalised(weights[start:stop]))


@check("normalized_copy.no_shared_memory")
def test_normalized_copy_no_shared_memory(student):
    rng = np.random.default_rng(13)
    for size, start, stop in _SLICES:
        weights = rng.normal(2.0, 3.0, size=size)
        seen = student.observe("normalized_copy", weights, start, stop)
        result = as_array(seen.result)
        assert seen.shares[0] is False, "the result must not share memory with weights"
        assert np.array_equal(as_array(seen.args_after[0]), weights), "weights must not change"
        # it must be the slice centred and scaled (whatever the scale), not any new array
        x = weights[start:stop]
        assert result.shape == x.shape and result.dtype.kind == "f"
        with np.errstate(all="ignore"):
            centred = abs(float(result.mean())) < 1e-9
            rescaled = result / result.std()
        assert centred and _close(rescaled, _normalised(x))


@check("normalized_copy.rejects_bad_slices")
def test_normalized_copy_rejects_bad_slices(student):
    weights = np.array([4.0, 4.0, 4.0, 1.0, 2.0, 7.0])
    student.normalized_copy(weights, 2, 5)  # a good slice must not raise
    for start, stop in [(3, 3), (5, 2), (10, 12), (0, 3), (1, 2)]:
        _expect_value_error(student.normalized_copy, weights, start, stop)


# --- snapshots ---------------------------------------------------------------------------


def _facts(student, probe: str, *args, where: str) -> dict:
    """A probe's report: a dict of facts, or the check fails as garbled."""
    facts = student.probe(probe, *args, where=where)
    if type(facts) is not dict:
        fail("probe_garbled")
    return facts


def _step(student, name):
    return _facts(student, "optimiser_step", name, 0.1, where=name)


@check("buggy_snapshot.same_object")
def test_buggy_snapshot_same_object(student):
    facts = _step(student, "buggy_snapshot")
    assert facts["same_list"] is True


@check("snapshot.new_list_equal_values")
def test_snapshot_new_list_equal_values(student):
    facts = _step(student, "snapshot")
    if facts["is_list"] is not True:
        fail("snapshot_not_a_list")
    assert facts["same_list"] is False, "the backup must be a new list"
    assert facts["arrays"] is True and facts["equal_before"] is True


@check("snapshot.survives_in_place_step")
def test_snapshot_survives_in_place_step(student):
    facts = _step(student, "snapshot")
    if facts["is_list"] is not True:
        fail("snapshot_not_a_list")
    assert facts["arrays"] is True
    assert facts["shares"] is False, "no backup array may share memory with params"
    assert facts["equal_after"] is True, "the backup must keep the values from before the step"


# --- append_history ----------------------------------------------------------------------


def _history(student, name):
    return _facts(student, "history_calls", name, where=name)


@check("buggy_append_history.shared_default")
def test_buggy_append_history_shared_default(student):
    facts = _history(student, "buggy_append_history")
    assert facts["first"] == ["a"]
    assert facts["same_object"] is True and facts["second"] == ["a", "b"]


@check("append_history.fresh_default")
def test_append_history_fresh_default(student):
    facts = _history(student, "append_history")
    assert facts["first"] == ["a"] and facts["second"] == ["b"]
    assert facts["same_object"] is False and facts["first_later"] == ["a"]


@check("append_history.appends_to_given_list")
def test_append_history_appends_to_given_list(student):
    facts = _history(student, "append_history")
    assert facts["empty_returned"] is True and facts["empty_after"] == ["c"]
    assert facts["given_returned"] is True and facts["given_after"] == ["x", "d"]


# --- Counter -----------------------------------------------------------------------------


@check("Counter.starts_at_zero")
def test_counter_starts_at_zero(student):
    assert as_float(student.probe("counter_start", where="Counter")) == 0


@check("Counter.iadd_mutates_in_place")
def test_counter_iadd_mutates_in_place(student):
    steps = [3, 4, -2]
    facts = _facts(student, "counter_iadd", steps, where="Counter")
    if facts["same"] != [True] * len(steps):
        fail("iadd_not_self")
    start = as_float(facts["start"])
    assert as_float(facts["alias_value"]) == start + sum(steps)


@check("Counter.add_returns_new")
def test_counter_add_returns_new(student):
    facts = _facts(student, "counter_add", 5, 2, where="Counter")
    if facts["new_objects"] is not True:
        fail("add_not_new")
    start = as_float(facts["start"])
    assert as_float(facts["c_value"]) == start, "c must be left alone"
    assert as_float(facts["d_value"]) == start + 5
    assert as_float(facts["e_value"]) == start + 7


# --- locked_count ------------------------------------------------------------------------


@check("locked_count.exact_total")
def test_locked_count_exact_total(student):
    for n_threads, n_increments in [(4, 1000), (1, 1), (3, 7), (8, 100)]:
        assert as_int(student.locked_count(n_threads, n_increments)) == n_threads * n_increments


@check("locked_count.threads_and_lock")
def test_locked_count_threads_and_lock(student):
    for n_threads, n_increments in [(4, 200), (2, 3)]:
        facts = _facts(student, "locked_count_traced", n_threads, n_increments,
                       where="locked_count")
        if facts["started"] != n_threads:
            fail("wrong_thread_count")
        if facts["all_finished"] is not True:
            fail("threads_not_joined")
        if facts["lock_created"] is not True or facts["lock_used"] is not True:
            fail("no_lock")
        if facts["one_lock_for_all"] is not True:
            fail("lock_not_shared")


@check("locked_count.rejects_non_positive")
def test_locked_count_rejects_non_positive(student):
    student.locked_count(2, 3)  # good arguments must not raise
    for n_threads, n_increments in [(0, 10), (3, 0), (-1, 5), (2, -4)]:
        _expect_value_error(student.locked_count, n_threads, n_increments)
