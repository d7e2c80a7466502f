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
EQUALITY_QUIZ: dict[str, str] = {
    "a is a": "?",
    "a is a.copy()": "?",
    "a == a.copy()": "?",
    "bool(a == a.copy())": "?",
    "np.array_equal(a, a.copy())": "?",
    "a[::2][1:].base is a": "?",
    "np.ascontiguousarray(a) is a": "?",
    "a.flags.owndata": "?",
    "a[1:].flags.owndata": "?",
    "hash(a.shape) == hash((4,))": "?",
    "{a}": "?",
    "{a.shape: 1}[(4,)] == 1": "?",
    "[1, 2] == [1, 2]": "?",
    "[1, 2] is [1, 2]": "?",
}


def arrays_equal(a: np.ndarray, b: np.ndarray, equal_nan: bool = False) -> bool:
    """Whether `a` and `b` have the same shape and equal elements, as a Python bool.

    `a == b` broadcasts before it compares, so a (1,) array "equals" a (3,) array of
    the same value; the shapes must be compared first. NaN is unequal to everything,
    itself included, unless `equal_nan` says otherwise.
    """
    raise NotImplementedError


def dedupe_arrays(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The first occurrence of each distinct array, in order, as the objects given.

    An array cannot be a set member or a dict key (it is mutable, hence unhashable), so
    each one is described by a hashable key: its dtype, its shape and its bytes. All
    three matter: `int32` zeros and `float32` zeros share their bytes, a (4,) and a
    (2, 2) array may too.
    """
    raise NotImplementedError


def buggy_prune(d: dict, threshold: float) -> None:
    """The bug, on purpose: deletes every key whose value is below `threshold` while
    iterating over `d` itself. The dict notices that its size changed under the loop
    and raises `RuntimeError` right after the first deletion."""
    raise NotImplementedError


def prune(d: dict, threshold: float) -> None:
    """The fix: the same deletions on the same dict object, looping over a snapshot
    of its keys (`list(d)`), so the loop never walks the dict it changes. Keys whose
    value is at or above `threshold` stay."""
    raise NotImplementedError


def buggy_stack(tensors: list) -> np.ndarray:
    """The bug, on purpose: `np.array` of objects that hold arrays (in `.data`) but are
    not arrays themselves. NumPy cannot see inside them, so it makes a one-dimensional
    array of `object` holding the objects: no numbers at all."""
    raise NotImplementedError


def stack_data(tensors: list) -> np.ndarray:
    """The fix: one numeric array of shape `(len(tensors), *shape)` from each `.data`,
    built with `np.stack`, which copies, so it shares no memory with the tensors.

    An empty list or data of different shapes raises `ValueError` naming the shapes,
    which is what the caller needs to find the odd tensor out.
    """
    raise NotImplementedError


def deepcopy_bytes(obj: object) -> int:
    """The bytes `copy.deepcopy(obj)` allocates: the peak that `tracemalloc` traces
    during the call, minus what it traced just before.

    The peak is reset first and tracing stopped after (when this call started it), so
    each call measures its own copy only, whatever ran before it.
    """
    raise NotImplementedError
