"""Lab 01 -- references, mutation and views.

A Python name is a label stuck on an object, not a box holding a value; a NumPy slice is
a window onto the same buffer as the array it came from. Change the object through one
label, or the buffer through one window, and every other label and window sees it.
Here you predict which NumPy expressions share memory, write three aliasing bugs on
purpose (a slice normalised in place, a "backup" that is the same list, a mutable default
argument), then their fixes, an in-place `+=` that is meant to alias, and a counter that
several threads share safely.
"""

from __future__ import annotations

import threading

import numpy as np

# Your prediction for each expression: "view" (shares memory with its source) or "copy",
# with a = np.arange(10.0) and m = np.arange(12.0).reshape(3, 4). Replace every "?".
VIEW_OR_COPY: dict[str, str] = {
    "a[::2]": "?",
    "a[2:5]": "?",
    "a[[0, 2, 4]]": "?",
    "a[a > 3]": "?",
    "a.reshape(2, 5)": "?",
    "a.copy()": "?",
    "a.ravel()": "?",
    "m.T": "?",
    "m.T.ravel()": "?",
    "m[:, 1]": "?",
    "m[1]": "?",
    "m[[1]]": "?",
    "np.ascontiguousarray(m[:, ::2])": "?",
    "m.flatten()": "?",
    "a[...]": "?",
    "a[None]": "?",
}


def returns_view(arr: np.ndarray, index) -> bool:
    """Whether `arr[index]` is an ndarray sharing memory with `arr`, decided without indexing.

    Basic indexing (ints, slices, `...`, `None`, tuples of them) only changes the offset,
    shape and strides of a window onto the same buffer, so it is a view, unless it picks
    a single element, which comes back as a scalar. Advanced indexing (a list, an array,
    a boolean) picks arbitrary elements, which no offset, shape and strides describe, so
    it gathers them into a new buffer: a copy. (`labkit hint` has a recipe.)
    """
    raise NotImplementedError


def corrupt_through_view(weights: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The bug, on purpose: a "temporary normalised copy" that is really a view.

    `weights[start:stop]` is a window onto `weights`; the in-place `-=` and `/=` write
    through it, so the caller's weights now hold the normalised values. Returns the slice.
    """
    raise NotImplementedError


def normalized_copy(weights: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The fix: `(x - mean) / std` of `weights[start:stop]` in memory of its own.

    The explicit copy is what keeps the in-place arithmetic away from `weights`
    (`np.asarray` would not copy a float array). Population std (ddof=0), as
    `np.std` does by default. An empty slice or one with zero std has no meaningful
    normalisation, so it raises ValueError instead of returning NaN or inf.
    """
    raise NotImplementedError


def buggy_snapshot(params: list[np.ndarray]) -> list[np.ndarray]:
    """The bug, on purpose: a "backup" that is the very same list object.

    Assignment never copies in Python; it adds a label. An in-place optimiser step
    (`p -= lr * g`) on `params` then changes the backup as well.
    """
    raise NotImplementedError


def snapshot(params: list[np.ndarray]) -> list[np.ndarray]:
    """The fix: a new list holding a new array for every parameter.

    Copying the list alone is not enough: a new list of the same arrays still changes
    with every in-place step. Each array needs memory of its own.
    """
    raise NotImplementedError


def buggy_append_history(item, history=[]) -> list:  # noqa: B006
    """The bug, on purpose: the default list is built once, when `def` runs.

    Every call that omits `history` appends to that one shared list, so it keeps
    growing from call to call.
    """
    raise NotImplementedError


def append_history(item, history: list | None = None) -> list:
    """The fix: `None` as the default, and a fresh list made inside the call.

    A list the caller passes is appended to and returned (the same object), even when
    it is empty -- so test `is None`, not truthiness.
    """
    raise NotImplementedError


class Counter:
    """A counter where `+=` mutates in place and `+` makes a new object.

    `c += n` calls `__iadd__`, whose return value is rebound to `c`; returning `self`
    keeps `c` the same object, so every other label of it sees the change. `c + n`
    leaves `c` alone and returns a new Counter, like `+` on ints.
    """

    def __init__(self) -> None:
        raise NotImplementedError

    def __iadd__(self, n) -> Counter:
        raise NotImplementedError

    def __add__(self, n) -> Counter:
        raise NotImplementedError


def locked_count(n_threads: int, n_increments: int) -> int:
    """`n_threads` threads each add 1 to a shared total `n_increments` times, under a Lock.

    `total += 1` is a read, an add and a write: without the lock two threads can read
    the same value and one increment is lost. Every thread uses the same lock, and all
    are joined before the total is read.
    """
    raise NotImplementedError
