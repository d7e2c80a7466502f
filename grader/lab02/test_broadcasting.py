"""Graders for lab02 (strides and broadcasting). Trusted: never imports student code.

Values are judged here. What only the worker can see (does the window share memory with
`x`, is it read-only) and the bans on NumPy's own helpers rest on the submission's source,
analysed here (`labkit.grading.refusals`): the helpers may not be reached under any
spelling, and a file that reaches into the interpreter or the kit earns nothing from a
check that believes a worker's report. The probe's runtime swap of the helpers stays as
a second line, never as the evidence.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from labkit.grading import (
    PROPERTY,
    as_array,
    as_float,
    check,
    fail,
    mentions,
    refusals,
    refuse,
)

# The README's lists, plus NumPy's private function behind np.broadcast_shapes.
BROADCAST_HELPERS = ("broadcast_shapes", "broadcast", "broadcast_to", "broadcast_arrays",
                     "_broadcast_shape")
WINDOW_HELPERS = ("sliding_window_view",)


@pytest.fixture
def without_broadcast_helpers(submission):
    """Fails the check before any call if the source could reach NumPy's broadcasting
    helpers (or reaches into the interpreter, which could reach them unseen)."""
    refuse(refusals(submission, BROADCAST_HELPERS))


@pytest.fixture
def without_window_helpers(submission):
    """The same for `sliding_window_view`; it also guards the zero-copy check, whose
    facts (shares memory, read-only) are reported from inside the worker."""
    refuse(refusals(submission, WINDOW_HELPERS))


def _is_int(n: object) -> bool:
    """Python or NumPy integers count (the lab's README: numbers come back as Python or
    NumPy scalars); bools do not."""
    return isinstance(n, int | np.integer) and not isinstance(n, bool)


def _expect_value_error(call, *shapes) -> None:
    """`call()` must raise ValueError whose message names every shape."""
    with pytest.raises(ValueError) as info:
        call()
    if not all(str(tuple(s)) in info.value.message for s in shapes):
        fail("shapes_not_in_message")


@check("buggy_mse.cross_differences")
def test_buggy_mse_cross_differences(student):
    rng = np.random.default_rng(2024)  # per check: a grade never depends on earlier ones
    y_true, y_pred = rng.normal(size=6), rng.normal(size=(6, 1))
    got = as_float(student.buggy_mse(y_true, y_pred))
    assert got == pytest.approx(((y_true - y_pred) ** 2).mean())
    assert got != pytest.approx(((y_true - y_pred[:, 0]) ** 2).mean())
    same = as_float(student.buggy_mse(y_true, y_pred[:, 0]))
    assert same == pytest.approx(((y_true - y_pred[:, 0]) ** 2).mean())


@check("safe_mse.aligned_pairs")
def test_safe_mse_aligned_pairs(student):
    rng = np.random.default_rng(2025)
    for n in (1, 5, 17):
        a, b = rng.normal(size=n), rng.normal(size=n)
        expected = float(np.mean((a - b) ** 2))
        for left in (a, a.reshape(-1, 1)):
            for right in (b, b.reshape(-1, 1)):
                assert as_float(student.safe_mse(left, right)) == pytest.approx(expected)
    assert as_float(student.safe_mse([1.0, 2.0], [[1.0], [4.0]])) == pytest.approx(2.0)


@check("safe_mse.rejects_mismatched_lengths")
def test_safe_mse_rejects_mismatched_lengths(student):
    cases = [(np.ones(4), np.ones(5)), (np.ones((3, 1)), np.ones(2)), (np.ones(2), np.ones((7, 1)))]
    for a, b in cases:
        _expect_value_error(lambda a=a, b=b: student.safe_mse(a, b), a.shape, b.shape)


@check("safe_mse.rejects_bad_shapes")
def test_safe_mse_rejects_bad_shapes(student):
    cases = [
        (np.ones((4, 2)), np.ones(4)),
        (np.ones(3), np.ones((3, 3))),
        (np.ones((2, 1, 1)), np.ones(2)),
        (np.ones(0), np.ones(0)),
        (np.ones((1, 4)), np.ones(4)),
    ]
    for a, b in cases:
        _expect_value_error(lambda a=a, b=b: student.safe_mse(a, b), a.shape, b.shape)


def _broadcast(student, *shapes):
    return student.probe(
        "call_without_helpers", "broadcast_shape", *shapes, where="broadcast_shape"
    )


@check("broadcast_shape.matches_numpy")
@pytest.mark.usefixtures("without_broadcast_helpers")
@PROPERTY
@given(
    st.integers(1, 4).flatmap(
        lambda n: hnp.mutually_broadcastable_shapes(num_shapes=n, min_side=0, max_side=4)
    )
)
def test_broadcast_shape_matches_numpy(student, case):
    got = _broadcast(student, *case.input_shapes)
    if not isinstance(got, tuple) or not all(_is_int(n) for n in got):
        fail("not_a_tuple_of_ints")
    assert got == np.broadcast_shapes(*case.input_shapes)


@check("broadcast_shape.rejects_incompatible")
@pytest.mark.usefixtures("without_broadcast_helpers")
def test_broadcast_shape_rejects_incompatible(student):
    assert _broadcast(student) == ()
    assert _broadcast(student, (0,), (1,)) == (0,)
    incompatible = [
        ((3,), (4,)), ((2, 1), (8, 4, 3)), ((5, 1, 2), (1, 3, 2), (5, 3, 4)), ((0,), (2,))
    ]
    for shapes in incompatible:
        with pytest.raises(ValueError):
            _broadcast(student, *shapes)


_SHAPES = hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=6)
_ITEMSIZES = st.sampled_from([1, 2, 4, 8, 16, 3, 12])


def _strides_match(function, order: str, shape: tuple[int, ...], itemsize: int) -> None:
    got = function(shape, itemsize)
    if not isinstance(got, tuple | list) or not all(_is_int(n) for n in got):
        fail("strides_not_ints")
    assert tuple(got) == np.empty(shape, dtype=f"V{itemsize}", order=order).strides


@check("c_strides.matches_numpy")
@PROPERTY
@given(_SHAPES, _ITEMSIZES)
def test_c_strides_matches_numpy(student, shape, itemsize):
    _strides_match(student.c_strides, "C", shape, itemsize)


@check("f_strides.matches_numpy")
@PROPERTY
@given(_SHAPES, _ITEMSIZES)
def test_f_strides_matches_numpy(student, shape, itemsize):
    _strides_match(student.f_strides, "F", shape, itemsize)


def _windows(x: np.ndarray, window: int) -> np.ndarray:
    return np.stack([x[i : i + window] for i in range(len(x) - window + 1)])


@check("sliding_windows.values")
@pytest.mark.usefixtures("without_window_helpers")
@PROPERTY
@given(
    hnp.arrays(
        st.sampled_from([np.float64, np.int32, np.int8]),
        st.integers(1, 40),
        elements=st.integers(-100, 100),
    ).flatmap(
        # strided inputs too: the worker slices base[::step], since arrays travel contiguous
        lambda base: st.integers(1, 3).flatmap(
            lambda step: st.tuples(
                st.just(base), st.just(step), st.integers(1, len(base[::step]))
            )
        )
    )
)
def test_sliding_windows_values(student, case):
    base, step, window = case
    x = base[::step]
    got = as_array(
        student.probe("sliding_windows_strided", base, step, window, where="sliding_windows")
    )
    expected = _windows(x, window)
    assert got.shape == expected.shape and got.dtype == x.dtype
    assert np.array_equal(got, expected)


@check("sliding_windows.zero_copy_readonly")
@pytest.mark.usefixtures("without_window_helpers")
def test_sliding_windows_zero_copy_readonly(student, submission):
    for x, window in [(np.arange(10.0), 3), (np.arange(20)[::2], 4), (np.arange(5.0), 5)]:
        seen = student.observe("sliding_windows", x, window)
        got, expected = as_array(seen.result), _windows(x, window)
        # a view of x with other values (x itself, a wrong stride) is not the windows
        if got.shape != expected.shape or got.dtype != x.dtype or not np.array_equal(got, expected):
            fail("view_values_wrong")
        assert seen.shares[0] is True, "must be a view of x"
        assert seen.writeable is False, "must be read-only"
        assert np.array_equal(seen.args_after[0], x)
    if not mentions(submission, "as_strided"):  # the README: built with as_strided
        fail("not_as_strided")


@check("sliding_windows.rejects_bad_input")
def test_sliding_windows_rejects_bad_input(student):
    cases = [(np.arange(5.0), 0), (np.arange(5.0), 6), (np.ones((3, 3)), 2), (np.arange(4), -1)]
    for x, window in cases:
        with pytest.raises(ValueError):
            student.sliding_windows(x, window)
