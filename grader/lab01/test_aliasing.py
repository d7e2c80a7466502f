"""Graders for lab01 (references, mutation and views). Trusted: never imports student code.

Every point rests on what this process holds itself: values returned as data and
judged against NumPy here; arrays placed in memory it maps too (`student.shared`), whose
bytes it reads after the call, and into which it writes to see whether a kept result
lives there (`student.keep` / `student.kept`); and the submission's source. Object
identity (the same list, `__iadd__` returning `self`) exists only inside the worker: it
is seen through `observe` and the probes in probes.py, which run beside the student's
code, so those facts count only for a submission the static analysis finds free of
code that reaches into the interpreter or the kit (`_believable`).
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from labkit.grading import PROPERTY, as_array, as_float, as_int, check, fail, refusals, refuse


def _believable(submission) -> None:
    """Fail, saying why, unless the worker's reports can be believed: the source holds
    nothing that could have rewritten them (frames, `gc`, `ctypes`, the kit's modules...)."""
    refuse(refusals(submission))

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
    wrong = [key for key, word in truth.items() if got.get(key) != word]
    credit.partial(len(truth) - len(wrong), len(truth), wrong=wrong)


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
    for arr, index in cases:
        # the same number of axes, but no elements: the answer must come from the index
        # (asking NumPy about this array says "no view", or raises, every time)
        got = student.returns_view(np.empty((0,) * arr.ndim), index)
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


def _sentinel(shape: tuple[int, ...]) -> np.ndarray:
    """Values no normalisation gives, written into a shared input after the call."""
    return np.arange(float(np.prod(shape))).reshape(shape) * 7.0 + 1000.0


@check("corrupt_through_view.writes_through")
def test_corrupt_through_view_writes_through(student):
    rng = np.random.default_rng(11)
    for size, start, stop in _SLICES:
        weights = rng.normal(3.0, 2.0, size=size)
        shared = student.shared(weights)
        result = as_array(student.keep("corrupt_through_view", shared, start, stop))
        expected = _normalised(weights[start:stop])
        assert _close(result, expected)
        after = shared.array  # the bytes the worker's array lives in, read here
        assert _close(after[start:stop], expected), "weights must show the change"
        outside = np.ones(size, dtype=bool)
        outside[start:stop] = False
        assert np.array_equal(after[outside], weights[outside]), "the rest must be untouched"
        sentinel = _sentinel((stop - start,))
        after[start:stop] = sentinel
        again = as_array(student.kept("corrupt_through_view"))
        assert np.array_equal(again, sentinel), "the result must be the slice itself"


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
        shared = student.shared(weights)
        result = as_array(student.keep("normalized_copy", shared, start, stop))
        assert np.array_equal(shared.array, weights), "weights must not change"
        shared.array[...] = _sentinel(weights.shape)
        again = as_array(student.kept("normalized_copy"))
        assert np.array_equal(again, result), "the result must not share memory with weights"
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


_PARAMS = (np.linspace(-1.0, 1.0, 6), np.arange(12.0).reshape(3, 4), np.array([0.5]))


def _same_arrays(got, arrays) -> bool:
    """`got` is a list of ndarrays with the shapes and values of `arrays`."""
    return (type(got) is list and len(got) == len(arrays)
            and all(type(g) is np.ndarray and g.shape == a.shape and np.array_equal(g, a)
                    for g, a in zip(got, arrays, strict=False)))


def _backup_then_step(student, name: str) -> tuple[object, object, list[np.ndarray]]:
    """Back shared params up with `name`, then take the optimiser's in-place step
    `p -= lr * g` on them here, in the memory both sides map; return the backup as it
    came back, as it is after the step, and the stepped params."""
    params = [student.shared(p) for p in _PARAMS]
    before = student.keep(name, params)
    for number, param in enumerate(params, 1):
        param.array[...] -= 0.1 * number
    return before, student.kept(name), [p.array.copy() for p in params]


@check("buggy_snapshot.same_object")
def test_buggy_snapshot_same_object(student, submission):
    before, after, stepped = _backup_then_step(student, "buggy_snapshot")
    assert _same_arrays(before, _PARAMS)
    assert _same_arrays(after, stepped), "the backup must move with params"
    _believable(submission)
    params = [np.array(p) for p in _PARAMS]
    assert student.observe("buggy_snapshot", params).result_is_arg == [True]


@check("snapshot.new_list_equal_values")
def test_snapshot_new_list_equal_values(student, submission):
    backup = student.snapshot([np.array(p) for p in _PARAMS])
    if type(backup) is not list:
        fail("snapshot_not_a_list")
    assert _same_arrays(backup, _PARAMS)
    _believable(submission)
    params = [np.array(p) for p in _PARAMS]
    assert student.observe("snapshot", params).result_is_arg == [False], \
        "the backup must be a new list"


@check("snapshot.survives_in_place_step")
def test_snapshot_survives_in_place_step(student):
    before, after, _ = _backup_then_step(student, "snapshot")
    if type(before) is not list:
        fail("snapshot_not_a_list")
    assert _same_arrays(before, _PARAMS)
    assert _same_arrays(after, _PARAMS), "the backup must keep the values from before the step"


# --- append_history ----------------------------------------------------------------------


def _history(student, name):
    return _facts(student, "history_calls", name, where=name)


@check("buggy_append_history.shared_default")
def test_buggy_append_history_shared_default(student, submission):
    assert student.buggy_append_history("a") == ["a"]
    assert student.buggy_append_history("b") == ["a", "b"], "the default must be shared"
    _believable(submission)
    facts = _history(student, "buggy_append_history")
    assert facts["same_object"] is True


@check("append_history.fresh_default")
def test_append_history_fresh_default(student):
    assert student.append_history("a") == ["a"]
    assert student.append_history("b") == ["b"], "each call needs a fresh list"
    assert student.append_history("c", ["x"]) == ["x", "c"]
    assert student.append_history("d") == ["d"]


@check("append_history.appends_to_given_list")
def test_append_history_appends_to_given_list(student, submission):
    assert student.append_history("c", []) == ["c"]
    assert student.append_history("d", history=["x"]) == ["x", "d"]
    _believable(submission)
    facts = _history(student, "append_history")
    assert facts["empty_returned"] is True and facts["empty_after"] == ["c"]
    assert facts["given_returned"] is True and facts["given_after"] == ["x", "d"]


# --- Counter -----------------------------------------------------------------------------


@check("Counter.starts_at_zero")
def test_counter_starts_at_zero(student, submission):
    _believable(submission)
    assert as_float(student.probe("counter_start", where="Counter")) == 0


@check("Counter.iadd_mutates_in_place")
def test_counter_iadd_mutates_in_place(student, submission):
    _believable(submission)
    steps = [3, 4, -2]
    facts = _facts(student, "counter_iadd", steps, where="Counter")
    if facts["same"] != [True] * len(steps):
        fail("iadd_not_self")
    start = as_float(facts["start"])
    assert as_float(facts["alias_value"]) == start + sum(steps)


@check("Counter.add_returns_new")
def test_counter_add_returns_new(student, submission):
    _believable(submission)
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


def _called(node: ast.AST, name: str) -> bool:
    """A call of `name`: `x.name(...)`, or `name(...)` for a name imported as such."""
    return isinstance(node, ast.Call) and _name_of(node.func) == name


def _name_of(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)


def _is_thread_class(node: ast.ClassDef) -> bool:
    return any(_name_of(base) == "Thread" for base in node.bases)


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == name),
                None)


def _params(function: ast.FunctionDef | ast.Lambda) -> list[str]:
    return [a.arg for a in (*function.args.posonlyargs, *function.args.args)]


def _given_a_lock(call: ast.Call, params: list[str], locks: set[str]) -> set[str]:
    """The parameters of the threads' function that `call` (a `Thread(target=f,
    args=..., kwargs=...)`, or `f(...)` for a Thread subclass's `__init__` without its
    `self`) hands one of `locks`."""
    def is_lock(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id in locks

    given = set()
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    positional = list(call.args)
    if _called(call, "Thread"):
        spread = keywords.get("args")
        positional = list(spread.elts) if isinstance(spread, ast.Tuple | ast.List) else []
        spread = keywords.get("kwargs")
        keywords = {k.value: v for k, v in zip(spread.keys, spread.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)} \
            if isinstance(spread, ast.Dict) else {}
    given.update(name for name, value in zip(params, positional, strict=False) if is_lock(value))
    given.update(name for name, value in keywords.items() if name in params and is_lock(value))
    return given


def _thread_code(tree: ast.Module, function: ast.FunctionDef,
                 locks: set[str]) -> list[tuple[ast.AST, Callable[[ast.expr], bool]]]:
    """The code `locked_count`'s threads run, each with a test of whether an expression
    there is the shared lock: a function nested in `locked_count` (the lock a closure
    name), a function given as `Thread(target=...)` (also a parameter the Thread's
    `args`/`kwargs` hand the lock), or the `run` method of a module-level `Thread`
    subclass that `locked_count` instantiates (also `self.<attr>` set in its `__init__`
    from a parameter given the lock, or from a module-level lock)."""
    nested = {node.name: node for node in ast.walk(function)
              if isinstance(node, ast.FunctionDef) and node is not function}
    top = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    classes = {node.name: node for node in tree.body
               if isinstance(node, ast.ClassDef) and _is_thread_class(node)}

    def named(names: set[str]) -> Callable[[ast.expr], bool]:
        return lambda e: isinstance(e, ast.Name) and e.id in names

    code: list[tuple[ast.AST, Callable[[ast.expr], bool]]] = [
        (node, named(locks)) for node in ast.walk(function)
        if isinstance(node, ast.FunctionDef | ast.Lambda) and node is not function]
    for call in (node for node in ast.walk(function) if isinstance(node, ast.Call)):
        if _called(call, "Thread"):
            target = next((k.value for k in call.keywords if k.arg == "target"),
                          call.args[1] if len(call.args) > 1 else None)
            if isinstance(target, ast.Name) and target.id in {**top, **nested}:
                run = nested.get(target.id) or top[target.id]
                code.append((run, named(locks | _given_a_lock(call, _params(run), locks))))
        elif isinstance(call.func, ast.Name) and call.func.id in classes:
            cls = classes[call.func.id]
            init, run = _method(cls, "__init__"), _method(cls, "run")
            if run is None or not _params(run):
                continue
            held = set(locks)
            if init is not None and _params(init):
                held |= _given_a_lock(call, _params(init)[1:], locks)
                me = _params(init)[0]
                attrs = {target.attr for node in ast.walk(init) if isinstance(node, ast.Assign)
                         and named(held)(node.value) for target in node.targets
                         if isinstance(target, ast.Attribute) and named({me})(target.value)}
            else:
                attrs = set()
            me_run = _params(run)[0]
            code.append((run, lambda e, attrs=attrs, me=me_run: named(locks)(e) or (
                isinstance(e, ast.Attribute) and e.attr in attrs and named({me})(e.value))))
    return code


def _rebinds(tree: ast.Module, name: str) -> bool:
    """Whether a module-level statement other than a `def` binds `name` (an assignment,
    an import, a class): then the `def` read here need not be what runs."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return True
            continue  # a def is read as `found`; a class's body binds its own names
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Store):
                return True
            if isinstance(sub, ast.alias) and (sub.asname or sub.name) == name:
                return True
            if isinstance(sub, ast.ClassDef | ast.FunctionDef) and sub.name == name:
                return True
    return False


def _lock_in_source(submission) -> str | None:
    """What the source of `locked_count` lacks of the contract's shape, read here: a
    `threading.Lock()` made once (at module level, or in its body outside any loop and
    any nested function: never one per thread), taken (`with` or `acquire`) in the code
    its threads run (`_thread_code`: a nested function, a function given as `target=`,
    or a `Thread` subclass's `run`, the lock reaching it as a closure name, an argument
    or an attribute), threads made with `threading.Thread` or a subclass of it, started
    and joined; None when nothing is missing."""
    try:
        tree = ast.parse(bytes(submission["aliasing.py"]))
    except (SyntaxError, ValueError, KeyError):
        return "no_lock"
    found = [node for node in tree.body
             if isinstance(node, ast.FunctionDef) and node.name == "locked_count"]
    if len(found) != 1 or _rebinds(tree, "locked_count"):
        return "no_lock"  # the source read must be the function that runs
    function = found[0]
    repeated = [node for node in ast.walk(function) if node is not function and isinstance(
        node, ast.FunctionDef | ast.Lambda | ast.For | ast.While)]
    inner = {id(node) for n in repeated for node in ast.walk(n)}
    once = [*tree.body, *(node for node in ast.walk(function) if id(node) not in inner)]
    locks = {target.id for node in once
             if isinstance(node, ast.Assign) and _called(node.value, "Lock")
             for target in node.targets if isinstance(target, ast.Name)}
    taken = any(
        (isinstance(node, ast.With) and any(is_lock(item.context_expr) for item in node.items))
        or (_called(node, "acquire") and isinstance(node.func, ast.Attribute)
            and is_lock(node.func.value))
        for code, is_lock in _thread_code(tree, function, locks) for node in ast.walk(code))
    if not locks or not taken:
        return "no_lock"
    classes = {node.name for node in tree.body
               if isinstance(node, ast.ClassDef) and _is_thread_class(node)}
    nodes = list(ast.walk(function))
    if not (any(_called(node, "Thread") or (isinstance(node, ast.Call)
                                            and _name_of(node.func) in classes)
                for node in nodes)
            and any(_called(node, "start") for node in nodes)):
        return "wrong_thread_count"
    if not any(_called(node, "join") for node in nodes):
        return "threads_not_joined"
    return None


@check("locked_count.threads_and_lock")
def test_locked_count_threads_and_lock(student, submission):
    missing = _lock_in_source(submission)
    if missing is not None:
        fail(missing)
    # what the worker saw can only explain a failure: the points rest on the source
    # read above and on the exact total (`requires`)
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
