"""Graders for lab02 (strides and broadcasting). Trusted: never imports student code.

Values are judged here (describe's facts against the same view built here). What only
the worker can see (does the window share memory with `x`, is it read-only) and the bans
on NumPy's own helpers rest on the submission's source,
analysed here (`labkit.grading.refusals`): the helpers may not be reached under any
spelling, and a file that reaches into the interpreter or the kit earns nothing from a
check that believes a worker's report. The probe's runtime swap of the helpers stays as
a second line, never as the evidence.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from labkit.grading import (
    PROPERTY,
    Refusal,
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


def _could_reach_a_helper(found: list[Refusal]) -> list[Refusal]:
    """The refusals whose construct could reach a banned helper unseen. One that only
    moves bytes through descriptors it did not open (`os.read(0, 100)`, `os.write`)
    cannot, nor change a value judged here: it costs only the checks that believe a
    worker's report."""
    return [r for r in found if r.reach == "process"]


@pytest.fixture
def without_broadcast_helpers(submission):
    """Fails the check before any call if the source could reach NumPy's broadcasting
    helpers (or reaches into the interpreter, which could reach them unseen)."""
    refuse(_could_reach_a_helper(refusals(submission, BROADCAST_HELPERS)))


@pytest.fixture
def without_window_helpers(submission):
    """The same for `sliding_window_view`."""
    refuse(_could_reach_a_helper(refusals(submission, WINDOW_HELPERS)))


@pytest.fixture
def believable_windows(submission):
    """The zero-copy check's facts (shares memory, read-only) are reported from inside
    the worker: they count only for a source that holds no refused construct at all."""
    refuse(refusals(submission, WINDOW_HELPERS))


def _is_int(n: object) -> bool:
    """Python or NumPy integers count (the lab's README: numbers come back as Python or
    NumPy scalars); bools do not."""
    return isinstance(n, int | np.integer) and not isinstance(n, bool)


def _ints(value: object, key: str) -> tuple:
    """A shape or strides as a tuple, or the check fails with `key`: the README accepts a
    tuple or a list of ints (Python or NumPy) wherever it asks for a tuple of ints."""
    if not isinstance(value, tuple | list) or not all(_is_int(n) for n in value):
        fail(key)
    return tuple(value)


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


def _answers_aligned_pairs(student) -> None:
    """A refusal counts only from a function that accepts good input: one that raises
    ValueError on everything (whatever its message says) refuses nothing. What it
    answers is judged by the other checks."""
    for a, b in [(np.arange(4.0), np.arange(4.0)[:, None] + 2), (np.ones((3, 1)), np.zeros(3))]:
        if _raises_value_error(lambda a=a, b=b: student.safe_mse(a, b)):
            fail("valid_pair_refused", a=str(a.shape), b=str(b.shape))


def _raises_value_error(call) -> bool:
    """Whether `call()` raises ValueError (what it returns is judged by other checks)."""
    try:
        call()
    except ValueError:
        return True
    return False


@check("safe_mse.rejects_mismatched_lengths")
def test_safe_mse_rejects_mismatched_lengths(student):
    cases = [(np.ones(4), np.ones(5)), (np.ones((3, 1)), np.ones(2)), (np.ones(2), np.ones((7, 1)))]
    for a, b in cases:
        _expect_value_error(lambda a=a, b=b: student.safe_mse(a, b), a.shape, b.shape)
    _answers_aligned_pairs(student)


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
    _answers_aligned_pairs(student)


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
    got = _ints(_broadcast(student, *case.input_shapes), "not_a_tuple_of_ints")
    assert got == np.broadcast_shapes(*case.input_shapes)


@check("broadcast_shape.rejects_incompatible")
@pytest.mark.usefixtures("without_broadcast_helpers")
def test_broadcast_shape_rejects_incompatible(student):
    assert _ints(_broadcast(student), "not_a_tuple_of_ints") == ()
    assert _ints(_broadcast(student, (0,), (1,)), "not_a_tuple_of_ints") == (0,)
    incompatible = [
        ((3,), (4,)), ((2, 1), (8, 4, 3)), ((5, 1, 2), (1, 3, 2), (5, 3, 4)), ((0,), (2,))
    ]
    for shapes in incompatible:
        with pytest.raises(ValueError):
            _broadcast(student, *shapes)


_SHAPES = hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=6)
_ITEMSIZES = st.sampled_from([1, 2, 4, 8, 16, 3, 12])


def _strides_match(function, order: str, shape: tuple[int, ...], itemsize: int) -> None:
    got = _ints(function(shape, itemsize), "strides_not_ints")
    assert got == np.empty(shape, dtype=f"V{itemsize}", order=order).strides


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


# --- describe: views built in the worker by the probe's builder, judged against the same
# view built here -----------------------------------------------------------------------


def _load_builder():
    """probes.py's `build_view`, loaded here under its own name: one definition of how
    a case's view is made, on both sides."""
    spec = importlib.util.spec_from_file_location(
        "lab02_view_builder", Path(__file__).with_name("probes.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_view


build_view = _load_builder()
_DTYPES = ("<f8", "<i4", "|u1", ">i2", "<c16", "<f4", "|b1")
_HAND_PICKED = [
    ((10,), "<f8", "C", []),
    ((10,), "<f8", "C", [("index", slice(None, None, -1))]),
    ((10,), "<i4", "C", [("index", slice(7, 1, -2))]),
    ((3, 4), "<f8", "C", [("T", None)]),
    ((3, 4), "<f8", "F", []),
    ((3, 4), ">i2", "C", [("index", (slice(None), 1))]),
    ((3, 4), "<f8", "C", [("T", None), ("reshape", (-1,))]),  # a copy: a new owner
    ((12,), "<f8", "C", [("reshape", (3, 4)), ("index", (None, 1, Ellipsis))]),
    ((9,), "<f4", "C", [("index", slice(2, None)), ("windows", 3)]),
    ((6,), "|u1", "C", [("index", slice(None, None, -2)), ("windows", 2)]),
    ((2, 3), "<c16", "C", [("repeat", 4)]),
    ((4, 5), "<i4", "C", [("readonly", None), ("index", (slice(1, 3), slice(None, None, -1)))]),
]


def _random_step(rng: np.random.Generator, view: np.ndarray) -> tuple:
    """One step that keeps `view` non-empty: a basic index, a transpose, a reshape or a
    strided view (windows, repeats), or making it read-only."""
    kinds = ["index", "index", "T", "reshape", "repeat", "readonly"]
    if view.ndim == 1 and len(view) > 1:
        kinds.append("windows")
    kind = kinds[rng.integers(len(kinds))]
    if kind == "windows":
        return kind, int(rng.integers(1, len(view) + 1))
    if kind == "repeat":
        return kind, int(rng.integers(2, 4))
    if kind == "reshape":
        return kind, (-1,) if rng.random() < 0.5 else (1, *view.shape)
    if kind != "index":
        return kind, None
    key: list = []
    for n in view.shape:
        dropped = any(isinstance(k, int) for k in key)
        if n > 1 and view.ndim > 1 and not dropped and rng.random() < 0.2:
            key.append(int(rng.integers(-n, n)))  # drops the axis (one at most: no scalar)
            continue
        step = int(rng.choice([1, 2, 3, -1, -2]))
        first = int(rng.integers(0, n))
        key.append(slice(first, None, step) if rng.random() < 0.5
                   else slice(first, (first + step * 3) if first + step * 3 >= 0 else None, step))
    if rng.random() < 0.3:
        key.insert(int(rng.integers(0, len(key) + 1)), None)
    return kind, tuple(key)


def _describe_cases() -> list[tuple]:
    """The hand-picked views and 40 drawn ones: 1-D to 3-D owners in C or F order, one to
    three steps each."""
    rng = np.random.default_rng(2029)
    cases = list(_HAND_PICKED)
    while len(cases) < len(_HAND_PICKED) + 40:
        shape = tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(1, 4)))
        case = (shape, _DTYPES[rng.integers(len(_DTYPES))], "CF"[rng.integers(2)], [])
        for _ in range(rng.integers(1, 4)):
            case[3].append(_random_step(rng, build_view(*case)))
        if build_view(*case).size:
            cases.append(case)
    # immutable all through: sent once, every grading asks the same (`Session.request_once`)
    return tuple((shape, dtype, order, tuple(steps)) for shape, dtype, order, steps in cases)


DESCRIBE_CASES = _describe_cases()


def _index_text(key) -> str:
    def one(k) -> str:
        if isinstance(k, slice):
            text = ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step))
            return text.removesuffix(":") if k.step is None else text
        return "..." if k is Ellipsis else str(k)
    return ", ".join(one(k) for k in (key if isinstance(key, tuple) else (key,)))


def _spelled(case: tuple) -> str:
    """How a case's view is made, as code the student can run (no fact of it named)."""
    shape, dtype, order, steps = case
    text = f"np.zeros({shape}, dtype={dtype!r}, order={order!r})"
    for step, arg in steps:
        if step == "index":
            text += f"[{_index_text(arg)}]"
        elif step == "T":
            text += ".T"
        elif step == "reshape":
            text += f".reshape({arg})"
        elif step == "windows":  # the same view as lab02's own sliding_windows gives
            text = f"sliding_windows({text}, {arg})"
        elif step == "repeat":
            text = (f"as_strided(X := {text}, shape=({arg}, *X.shape), "
                    "strides=(0, *X.strides), writeable=False)")
        else:
            text = f"as_strided({text}, writeable=False)"
    return text


def _truth(view: np.ndarray) -> dict:
    """The facts of `view`, read here: the offset from the data pointers."""
    owner, node = view, view.base
    while node is not None:
        if isinstance(node, np.ndarray):
            owner = node
        node = node.base
    return {
        "shape": view.shape, "strides": view.strides, "dtype": view.dtype.str,
        "itemsize": view.itemsize,
        "offset": view.__array_interface__["data"][0] - owner.__array_interface__["data"][0],
        "c_contiguous": view.flags.c_contiguous, "f_contiguous": view.flags.f_contiguous,
        "owndata": view.flags.owndata, "writeable": view.flags.writeable,
    }


_KINDS = {
    "shape": "ints", "strides": "ints", "dtype": "str", "itemsize": "int", "offset": "int",
    "c_contiguous": "bool", "f_contiguous": "bool", "owndata": "bool", "writeable": "bool",
}


@functools.cache
def _truths() -> tuple[dict, ...]:
    """The facts of every case's view, read here once: the same in every grading."""
    return tuple(_truth(build_view(*case)) for case in DESCRIBE_CASES)


def _well_typed(value: object, kind: str) -> bool:
    if kind == "ints":  # a tuple or a list, as everywhere in this lab
        return isinstance(value, tuple | list) and all(_is_int(n) for n in value)
    if kind == "int":
        return _is_int(value)
    if kind == "str":
        return isinstance(value, str)
    return isinstance(value, bool | np.bool_)


def _judge_describe(student, keys: tuple[str, ...]) -> None:
    """`describe` of every case against the truth, on `keys` only (each check judges
    its own facts): the dicts travel as data and are compared here. The three checks
    share one answer when they share a worker (`once`)."""
    got = student.probe("describe_views", DESCRIBE_CASES, where="describe", once=True)
    if not isinstance(got, list) or len(got) != len(DESCRIBE_CASES):
        fail("describe_not_dicts")
    for index, (case, facts) in enumerate(zip(DESCRIBE_CASES, got, strict=True)):
        if not isinstance(facts, dict) or not all(
                key in facts and _well_typed(facts[key], _KINDS[key]) for key in keys):
            fail("describe_keys", keys=", ".join(keys))
        truth = _truths()[index]
        for key in keys:
            fact = tuple(facts[key]) if _KINDS[key] == "ints" else facts[key]
            if fact != truth[key]:
                fail("describe_wrong", fact=key, view=_spelled(case))


@check("describe.layout")
def test_describe_layout(student):
    _judge_describe(student, ("shape", "strides", "dtype", "itemsize"))


@check("describe.offset")
def test_describe_offset(student):
    _judge_describe(student, ("offset",))


@check("describe.flags")
def test_describe_flags(student):
    _judge_describe(student, ("c_contiguous", "f_contiguous", "owndata", "writeable"))


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
@pytest.mark.usefixtures("believable_windows")
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
    # A refusal counts only from a function that accepts good input: one that raises
    # ValueError on everything (whatever its exception's text) refuses nothing.
    for x, window in [(np.arange(5.0), 1), (np.arange(5.0), 5), (np.arange(4), 4)]:
        if _raises_value_error(lambda x=x, window=window: student.sliding_windows(x, window)):
            fail("valid_window_refused", window=window, n=len(x))
