"""Lab 06 -- identity, equality and the other pitfalls.

`is` asks whether two names label the same object; `==` asks whether two values are
equal, and on arrays it answers with an array, one bool per element; `hash` decides
membership in dicts and sets, so a mutable array, which has no stable hash, cannot be a
key. Here you predict what a row of such expressions gives, compare and deduplicate
arrays without tripping over any of that, then meet three more pitfalls, each as a bug
on purpose followed by its fix: deleting from a dict while iterating it, `np.array` of
objects that hold arrays, and the memory a `deepcopy` costs.
"""

from __future__ import annotations

import copy
import tracemalloc

import numpy as np

# Your prediction for each expression, with a = np.arange(4.0): "True", "False", "array"
# (an ndarray comes back), "TypeError" or "ValueError" (evaluating it raises that).
# Replace every "?".
### BEGIN SOLUTION
EQUALITY_QUIZ: dict[str, str] = {
    "a is a": "True",
    "a is a.copy()": "False",
    "a == a.copy()": "array",
    "bool(a == a.copy())": "ValueError",
    "np.array_equal(a, a.copy())": "True",
    "a[::2][1:].base is a": "True",
    "np.ascontiguousarray(a) is a": "True",
    "a.flags.owndata": "True",
    "a[1:].flags.owndata": "False",
    "hash(a.shape) == hash((4,))": "True",
    "{a}": "TypeError",
    "{a.shape: 1}[(4,)] == 1": "True",
    "[1, 2] == [1, 2]": "True",
    "[1, 2] is [1, 2]": "False",
}
### END SOLUTION
### BEGIN STUB
# EQUALITY_QUIZ: dict[str, str] = {
#     "a is a": "?",
#     "a is a.copy()": "?",
#     "a == a.copy()": "?",
#     "bool(a == a.copy())": "?",
#     "np.array_equal(a, a.copy())": "?",
#     "a[::2][1:].base is a": "?",
#     "np.ascontiguousarray(a) is a": "?",
#     "a.flags.owndata": "?",
#     "a[1:].flags.owndata": "?",
#     "hash(a.shape) == hash((4,))": "?",
#     "{a}": "?",
#     "{a.shape: 1}[(4,)] == 1": "?",
#     "[1, 2] == [1, 2]": "?",
#     "[1, 2] is [1, 2]": "?",
# }
### END STUB


def arrays_equal(a: np.ndarray, b: np.ndarray, equal_nan: bool = False) -> bool:
    """Whether `a` and `b` have the same shape and equal elements, as a Python bool.

    `a == b` broadcasts before it compares, so a (1,) array "equals" a (3,) array of
    the same value; the shapes must be compared first. NaN is unequal to everything,
    itself included, unless `equal_nan` says otherwise.
    """
    ### BEGIN SOLUTION
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    same = a == b
    if equal_nan:
        same |= np.isnan(a) & np.isnan(b)
    return bool(same.all())
    ### END SOLUTION


def dedupe_arrays(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The first occurrence of each distinct array, in order, as the objects given.

    An array cannot be a set member or a dict key (it is mutable, hence unhashable), so
    each one is described by a hashable key: its dtype, its shape and its bytes. All
    three matter: `int32` zeros and `float32` zeros share their bytes, a (4,) and a
    (2, 2) array may too.
    """
    ### BEGIN SOLUTION
    seen: set[tuple[str, tuple[int, ...], bytes]] = set()
    kept = []
    for arr in arrays:
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in seen:
            seen.add(key)
            kept.append(arr)
    return kept
    ### END SOLUTION


def buggy_prune(d: dict, threshold: float) -> None:
    """The bug, on purpose: deletes every key whose value is below `threshold` while
    iterating over `d` itself. The dict notices that its size changed under the loop
    and raises `RuntimeError` right after the first deletion."""
    ### BEGIN SOLUTION
    for key in d:
        if d[key] < threshold:
            del d[key]
    ### END SOLUTION


def prune(d: dict, threshold: float) -> None:
    """The fix: the same deletions on the same dict object, looping over a snapshot
    of its keys (`list(d)`), so the loop never walks the dict it changes. Keys at or
    above `threshold` stay."""
    ### BEGIN SOLUTION
    for key in list(d):
        if d[key] < threshold:
            del d[key]
    ### END SOLUTION


def buggy_stack(tensors: list) -> np.ndarray:
    """The bug, on purpose: `np.array` of objects that hold arrays (in `.data`) but are
    not arrays themselves. NumPy cannot see inside them, so it makes a one-dimensional
    array of `object` holding the objects: no numbers at all."""
    ### BEGIN SOLUTION
    return np.array(tensors)
    ### END SOLUTION


def stack_data(tensors: list) -> np.ndarray:
    """The fix: one numeric array of shape `(len(tensors), *shape)` from each `.data`,
    built with `np.stack`, which copies, so it shares no memory with the tensors.

    An empty list or data of different shapes raises `ValueError` naming the shapes,
    which is what the caller needs to find the odd tensor out.
    """
    ### BEGIN SOLUTION
    shapes = [np.shape(t.data) for t in tensors]
    if not shapes or len(set(shapes)) != 1:
        raise ValueError(f"stack_data needs one or more .data of one shape, got {shapes}")
    return np.stack([t.data for t in tensors])
    ### END SOLUTION


def deepcopy_bytes(obj: object) -> int:
    """The bytes `copy.deepcopy(obj)` allocates: the peak that `tracemalloc` traces
    during the call, minus what it traced just before.

    The peak is reset first and tracing stopped after (when this call started it), so
    each call measures its own copy only, whatever ran before it.
    """
    ### BEGIN SOLUTION
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    copy.deepcopy(obj)
    peak = tracemalloc.get_traced_memory()[1]
    if started:
        tracemalloc.stop()
    return peak - before
    ### END SOLUTION
