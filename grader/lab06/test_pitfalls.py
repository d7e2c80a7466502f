"""Graders for lab06 (identity, equality and the other pitfalls). Trusted: never imports
student code.

Points rest on what this process holds itself: values returned as plain data and judged
here against NumPy or the contract's figures (for `deepcopy_bytes`, objects of drawn
sizes whose copy is not the sum of their arrays' bytes, against this process's own
trace of deep-copying the same object built the same way); arrays placed in memory this
process maps too (`student.shared`), into which it writes after the call to see whether
a result lives there; and the submission's source, which may not reach NumPy's own equality helpers
from `arrays_equal` under any spelling. Identity (the very arrays given, the same dict
pruned) and tensors, which cannot travel, exist only inside the worker: the probes in
probes.py report them, and those reports count only for a submission the static
analysis finds free of reach-ins (`_believable`).
"""

from __future__ import annotations

import copy
import importlib.util
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from labkit.grading import (
    PROPERTY,
    as_array,
    as_int,
    check,
    fail,
    mentions,
    refusals,
    refuse,
)

# What the README forbids in arrays_equal.
EQUALITY_HELPERS = ("array_equal", "array_equiv", "allclose")


def _refusals(submission, banned=()):
    """The source analysis's refusals, less `import tracemalloc`: the README asks
    `deepcopy_bytes` for it, and it reads sizes and file/line pairs only, never an
    object, a frame or a module of the kit."""
    return [r for r in refusals(submission, banned)
            if (r.kind, r.what) != ("reach_in", "import tracemalloc")]


def _believable(submission) -> None:
    """Fail, saying why, unless the worker's reports can be believed: the source holds
    nothing that could have rewritten them (frames, `gc`, `ctypes`, the kit's modules...)."""
    refuse(_refusals(submission))


@pytest.fixture
def without_equality_helpers(submission):
    """Fails the check before any call if the source could reach NumPy's equality
    helpers (or reaches into the interpreter, which could reach them unseen)."""
    refuse(_refusals(submission, EQUALITY_HELPERS))


def _facts(student, probe: str, *args, where: str) -> dict:
    """A probe's report: a dict of facts, or the check fails as garbled."""
    facts = student.probe(probe, *args, where=where)
    if type(facts) is not dict:
        fail("probe_garbled")
    return facts


# --- EQUALITY_QUIZ -----------------------------------------------------------------------

# The expressions of the contract; their truth is what evaluating them does, here.
EXPRESSIONS = (
    "a is a",
    "a is a.copy()",
    "a == a.copy()",
    "bool(a == a.copy())",
    "np.array_equal(a, a.copy())",
    "a[::2][1:].base is a",
    "np.ascontiguousarray(a) is a",
    "a.flags.owndata",
    "a[1:].flags.owndata",
    "hash(a.shape) == hash((4,))",
    "{a}",
    "{a.shape: 1}[(4,)] == 1",
    "[1, 2] == [1, 2]",
    "[1, 2] is [1, 2]",
)


def _outcome(expression: str) -> str:
    """What evaluating one of the grader's own constant expressions gives, as a word of
    the quiz (`is` with a literal warns at compile time: not part of the answer)."""
    env = {"np": np, "a": np.arange(4.0), "bool": bool, "hash": hash}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = eval(compile(expression, "<quiz>", "eval"), {"__builtins__": {}}, env)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__
    return "array" if isinstance(result, np.ndarray) else str(bool(result))


@check("EQUALITY_QUIZ.predictions")
def test_equality_quiz_predictions(student, credit):
    got = student.value("EQUALITY_QUIZ")
    if type(got) is not dict or not all(type(k) is str and type(v) is str for k, v in got.items()):
        credit.partial(0, len(EXPRESSIONS))
        fail("quiz_not_a_dict")
    right = sum(got.get(expression) == _outcome(expression) for expression in EXPRESSIONS)
    credit.partial(right, len(EXPRESSIONS))


# --- arrays_equal ------------------------------------------------------------------------


def _equal(student, a, b, equal_nan) -> bool:
    got = student.arrays_equal(a, b, equal_nan=equal_nan)
    if type(got) is not bool:
        fail("not_a_bool")
    return got


@st.composite
def _same_shape_pairs(draw):
    """Two arrays of one shape (0-d to 3-D, empty too), small integer values in int or
    float dtypes, no NaN: equal, cast to another dtype, or one element changed."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    a = draw(hnp.arrays(np.int64, shape, elements=st.integers(-3, 3)))
    a = a.astype(draw(st.sampled_from(["<i8", "<f8", "<i4", "<f4"])))
    b = a.astype(draw(st.sampled_from(["<i8", "<f8", a.dtype.str])))
    if a.size and draw(st.booleans()):
        b.flat[draw(st.integers(0, a.size - 1))] += draw(st.sampled_from([1, -2, 0.5]))
    return a, b, draw(st.booleans())


@check("arrays_equal.same_shape")
@pytest.mark.usefixtures("without_equality_helpers")
@PROPERTY
@given(_same_shape_pairs())
def test_arrays_equal_same_shape(student, case):
    a, b, equal_nan = case
    assert _equal(student, a, b, equal_nan) == bool(np.array_equal(a, b))


# Same values that `==` would broadcast into a match, and shapes it cannot broadcast.
_OTHER_SHAPES = [
    (np.ones(1), np.ones(3)),
    (np.ones(3), np.ones((1, 3))),
    (np.ones((3, 1)), np.ones(3)),
    (np.array(5.0), np.full(3, 5.0)),
    (np.zeros(0), np.zeros((0, 1))),
    (np.zeros((2, 3)), np.zeros((3, 2))),
    (np.arange(6.0), np.arange(6.0).reshape(2, 3)),
]


@check("arrays_equal.different_shapes")
@pytest.mark.usefixtures("without_equality_helpers")
def test_arrays_equal_different_shapes(student):
    assert _equal(student, np.ones((2, 2)), np.ones((2, 2)), False) is True
    for a, b in _OTHER_SHAPES:
        for x, y in ((a, b), (b, a)):
            assert _equal(student, x, y, False) is False


_NAN = np.nan
_NAN_CASES = [  # a, b: equal without equal_nan, equal with it
    (np.array([_NAN]), np.array([_NAN]), False, True),
    (np.array([1.0, _NAN]), np.array([1.0, _NAN]), False, True),
    (np.array([[_NAN, 2.0], [3.0, _NAN]]), np.array([[_NAN, 2.0], [3.0, _NAN]]), False, True),
    (np.array([_NAN, 1.0]), np.array([1.0, _NAN]), False, False),
    (np.array([_NAN]), np.array([1.0]), False, False),
    (np.array([_NAN, 2.0]), np.array([_NAN, 3.0]), False, False),
    (np.arange(3), np.arange(3), True, True),
    (np.array([1.0, 2.0]), np.array([1.0, 2.0]), True, True),
]


@check("arrays_equal.nan")
@pytest.mark.usefixtures("without_equality_helpers")
def test_arrays_equal_nan(student):
    for a, b, plain, with_nan in _NAN_CASES:
        assert _equal(student, a, b, False) is plain
        assert _equal(student, a, b, True) is with_nan


# --- dedupe_arrays -----------------------------------------------------------------------


def _dedupe_inputs() -> tuple[list[np.ndarray], list[int]]:
    """Arrays whose equality each ignore one of dtype, shape and bytes, repeated; and
    the indices of the first occurrences, in order (worked out here from the three)."""
    arrays = [
        np.zeros(4, np.int32), np.zeros(4, np.float32), np.zeros(4, np.int32),
        np.zeros((2, 2), np.int32), np.array([0.0, 1.0]), np.array([-0.0, 1.0]),
        np.array([_NAN]), np.array([_NAN]), np.arange(3), np.array([0.0, 1.0]),
        np.arange(3.0), np.arange(3),
    ]
    rng = np.random.default_rng(606)
    pool = [rng.integers(0, 3, size=int(n)).astype(d) for n, d in
            zip(rng.integers(1, 4, size=5), ["<i8", "<f8", "<i8", "<u1", "<f4"], strict=True)]
    arrays += [pool[int(i)].copy() for i in rng.integers(0, len(pool), size=8)]
    first, seen = [], set()
    for i, arr in enumerate(arrays):
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in seen:
            seen.add(key)
            first.append(i)
    return arrays, first


def _same_array(got, expected: np.ndarray) -> bool:
    return (type(got) is np.ndarray and got.dtype.str == expected.dtype.str
            and got.shape == expected.shape and got.tobytes() == expected.tobytes())


@check("dedupe_arrays.first_occurrences")
def test_dedupe_arrays_first_occurrences(student):
    arrays, first = _dedupe_inputs()
    got = student.dedupe_arrays(arrays)
    if type(got) is not list:
        fail("not_a_list")
    assert len(got) == len(first)
    assert all(_same_array(g, arrays[i]) for g, i in zip(got, first, strict=True))
    assert student.dedupe_arrays([]) == []


@check("dedupe_arrays.very_objects")
def test_dedupe_arrays_very_objects(student, submission):
    arrays, first = _dedupe_inputs()
    shared = [student.shared(arr) for arr in arrays]
    before = student.keep("dedupe_arrays", shared)
    if type(before) is not list or len(before) != len(first):
        fail("not_a_list")
    sentinels = [np.full(arr.shape, 100 + i, arr.dtype) for i, arr in enumerate(arrays)]
    for place, sentinel in zip(shared, sentinels, strict=True):
        place.array[...] = sentinel
    after = student.kept("dedupe_arrays")
    # what this side wrote into each first occurrence shows through what came back
    assert all(_same_array(g, sentinels[i]) for g, i in zip(after, first, strict=True))
    _believable(submission)
    assert student.probe("dedupe_identity", arrays, where="dedupe_arrays") == first, \
        "the result must hold the arrays given, not views of them"


# --- buggy_prune / prune -----------------------------------------------------------------


def _pruned(d: dict, threshold: float) -> list[tuple[str, float]]:
    return [(k, v) for k, v in d.items() if not v < threshold]


@check("buggy_prune.raises_while_iterating")
def test_buggy_prune_raises_while_iterating(student, submission):
    d = {"w1": 0.9, "w2": 0.01, "w3": 0.5, "w4": 0.02}
    with pytest.raises(RuntimeError):
        student.buggy_prune(dict(d), 0.1)
    assert student.buggy_prune({"a": 3, "b": 4}, 2) is None, "nothing to delete, nothing raised"
    _believable(submission)
    facts = _facts(student, "prune_after", "buggy_prune", d, 0.1, where="buggy_prune")
    assert facts["raised"] == "RuntimeError"
    # the loop stops right after the first deletion: w2 is gone, w4 is still there
    assert facts["after"] == [("w1", 0.9), ("w3", 0.5), ("w4", 0.02)]


def _random_dicts() -> list[tuple[dict, float]]:
    """Dicts of drawn weights with no value equal to its threshold; one empty, one with
    every key going, one with none."""
    rng = np.random.default_rng(66)
    cases: list[tuple[dict, float]] = [({}, 1.0), ({"a": 0.1, "b": 0.2}, 0.5),
                                       ({"a": 2.0, "b": 3.0}, 1.0)]
    for size in (5, 9, 16):
        values = rng.normal(size=size)
        cases.append(({f"p{i}": float(v) for i, v in enumerate(values)}, float(rng.normal())))
    return cases


def _prune_facts(student, d: dict, threshold: float) -> dict:
    facts = _facts(student, "prune_after", "prune", d, threshold, where="prune")
    if facts["raised"] is not None:
        fail("prune_raised")
    return facts


@check("prune.removes_below")
def test_prune_removes_below(student, submission):
    assert student.prune({"a": 0.1, "b": 0.9}, 0.5) is None
    _believable(submission)
    for d, threshold in _random_dicts():
        facts = _prune_facts(student, d, threshold)
        assert facts["returned_none"] is True
        assert facts["after"] == _pruned(d, threshold), "the dict given must lose those keys"


@check("prune.keeps_at_threshold")
def test_prune_keeps_at_threshold(student, submission):
    assert student.prune({"a": 1, "b": 2}, 2) is None
    _believable(submission)
    for d, threshold in [({"w": 0.5, "x": 0.25, "y": 0.5, "z": 1.0}, 0.5),
                         ({"a": 3, "b": 2, "c": 2, "d": 1}, 2)]:
        assert _prune_facts(student, d, threshold)["after"] == _pruned(d, threshold)


# --- buggy_stack / stack_data ------------------------------------------------------------


@check("buggy_stack.object_array")
def test_buggy_stack_object_array(student, submission):
    _believable(submission)
    for datas in ([np.arange(3.0), np.ones(3), np.zeros(3)], [np.eye(2)]):
        facts = _facts(student, "buggy_stack_facts", datas, where="buggy_stack")
        assert facts == {"ndarray": True, "object_dtype": True, "shape": (len(datas),),
                         "holds_the_tensors": True}


def _stack_cases() -> list[list[np.ndarray]]:
    rng = np.random.default_rng(68)
    return [
        [rng.normal(size=(2, 3)) for _ in range(3)],
        [rng.integers(-5, 5, size=4).astype(np.int32)],
        [np.array(float(v)) for v in rng.normal(size=5)],
        [rng.normal(size=(2, 1, 2)).astype(np.float32) for _ in range(2)],
    ]


def _stacked(student, datas) -> np.ndarray:
    return as_array(student.probe("stack_keep", datas, where="stack_data"))


def _is_stack(got: np.ndarray, datas: list[np.ndarray]) -> bool:
    expected = np.stack(datas)
    return (got.shape == expected.shape and got.dtype == expected.dtype
            and np.array_equal(got, expected))


@check("stack_data.values")
def test_stack_data_values(student, submission):
    _believable(submission)
    for datas in _stack_cases():
        assert _is_stack(_stacked(student, datas), datas)
    if not mentions(submission, "stack"):  # the README: built with np.stack
        fail("not_np_stack")


@check("stack_data.no_shared_memory")
def test_stack_data_no_shared_memory(student, submission):
    _believable(submission)
    for datas in _stack_cases():
        shared = [student.shared(data) for data in datas]
        assert _is_stack(_stacked(student, shared), datas)
        for place in shared:
            place.array[...] = 77
        again = as_array(student.probe("stack_kept", where="stack_data"))
        assert _is_stack(again, datas), "the result must not share memory with any .data"


@check("stack_data.rejects_bad_input")
def test_stack_data_rejects_bad_input(student, submission):
    with pytest.raises(ValueError):
        student.stack_data([])
    _believable(submission)
    for shapes in [((2, 3), (3, 2)), ((3,), (3,), (4,)), ((1, 2), (2,))]:
        with pytest.raises(ValueError) as info:
            _stacked(student, [np.zeros(s) for s in shapes])
        if not all(str(s) in info.value.message for s in shapes):
            fail("shapes_not_in_message")


# --- deepcopy_bytes ----------------------------------------------------------------------
# The objects copied are built by probes.py's `build_copied`, in the worker and here from
# the same arrays, and are such that no sum of their arrays' bytes gives the answer:
# arrays held twice and views of larger bases (copied once, and only the view's bytes),
# thousands of small lists (their copies and deepcopy's own memo dict outweigh what they
# hold). The truth is this process's own trace of `copy.deepcopy` of the object built
# here; sizes and counts are drawn afresh each grading (the operating system's entropy).


def _load_builder():
    """probes.py's `build_copied`, loaded here under its own name: one definition of
    the object copied, on both sides."""
    spec = importlib.util.spec_from_file_location(
        "lab06_copy_builder", Path(__file__).with_name("probes.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_copied


build_copied = _load_builder()


def _copy_cost(obj: object) -> int:
    """What `copy.deepcopy(obj)` allocates at its peak, traced in this process."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        copy.deepcopy(obj)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()


def _copy_case(kind: str) -> tuple[list[np.ndarray], int, int]:
    """Arrays and a count drawn afresh, and what deep-copying the object they build
    allocates: the smallest of three traces here (a first copy may fill free lists)."""
    rng = np.random.default_rng()
    sizes = (rng.integers(20_000, 40_000), rng.integers(40_000, 80_000),
             rng.integers(150_000, 250_000))
    arrays = [np.full(int(n), float(rng.integers(1, 9))) for n in sizes]
    count = int(rng.integers(8_000, 16_000) if kind == "nested" else rng.integers(0, 100_000))
    expected = min(_copy_cost(build_copied(kind, arrays, count)) for _ in range(3))
    return arrays, count, expected


def _copied(student, kind: str, held: int = 0, old_peak: int = 0) -> tuple[int, int]:
    arrays, count, expected = _copy_case(kind)
    got = as_int(student.probe("deepcopy_of", kind, arrays, count, held, old_peak,
                               where="deepcopy_bytes"))
    return got, expected


def _near(got: int, expected: int) -> bool:
    return abs(got - expected) <= 0.1 * expected


# Fresh workers: deepcopy_bytes switches tracemalloc on, interpreter-wide state that a
# buggy submission leaves on (its old peak, its slowdown).
@check("deepcopy_bytes.big_arrays", fresh=True)
def test_deepcopy_bytes_big_arrays(student):
    for kind in ("shared", "nested"):
        got, expected = _copied(student, kind)
        if not _near(got, expected):
            fail(f"deepcopy_wrong_{kind}", got=f"{got:,}")


@check("deepcopy_bytes.small_ints", fresh=True)
def test_deepcopy_bytes_small_ints(student):
    rng = np.random.default_rng()
    student.probe("deepcopy_of", "shared", _copy_case("shared")[0], 0,
                  where="deepcopy_bytes")  # a big copy first: it must not count later
    got = as_int(student.deepcopy_bytes([int(n) for n in rng.integers(0, 200, size=3)]))
    assert 0 <= got < 10_000
    # already tracing: 4 MB held through the call, an earlier peak of 40 MB
    got, expected = _copied(student, "shared", held=500_000, old_peak=5_000_000)
    if not _near(got, expected):
        fail("deepcopy_not_of_the_call", got=f"{got:,}")
