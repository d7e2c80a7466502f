"""Lab 02 -- strides and broadcasting.

Broadcasting aligns shapes from the right, so a (N,) target against (N, 1) predictions
silently becomes an (N, N) table of every cross difference. Here you write that bug on
purpose, then a loss that refuses it, then the rules NumPy itself follows: the
broadcast shape, the strides of C and Fortran arrays, the facts an array is made of,
and a zero-copy sliding window.
"""

from __future__ import annotations

import numpy as np


def buggy_mse(y_true, y_pred) -> float:
    """The bug, on purpose: the naive mean of squared differences.

    With `y_true` of shape (N,) and `y_pred` of shape (N, 1) this averages all N*N
    cross differences instead of the N aligned pairs.
    """
    raise NotImplementedError


def safe_mse(y_true, y_pred) -> float:
    """Mean squared error over N aligned pairs; anything ambiguous raises ValueError.

    Each input must be a vector of the same length N > 0, of shape (N,) or (N, 1).
    The error message names both shapes, so the caller sees what went wrong.
    """
    raise NotImplementedError


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape NumPy's broadcasting gives `shapes`, computed by hand.

    Align from the right; at each position every size must be equal or 1, and a 1
    stretches to the other size (even to 0). Otherwise raise ValueError.
    """
    raise NotImplementedError


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-ordered (row-major) array of `shape`: last axis fastest."""
    raise NotImplementedError


def f_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a Fortran-ordered (column-major) array: first axis fastest."""
    raise NotImplementedError


def describe(arr: np.ndarray) -> dict:
    """The facts NumPy keeps about `arr`, read off it: no element is looked at.

    `shape`, `strides`, `dtype` (`arr.dtype.str`) and `itemsize` say how to walk the
    memory; `offset` is how many bytes after the first byte of the memory block that
    owns the data (the last ndarray along the `.base` chain, or `arr` itself) the
    array's first element sits; the four flags say how the walk relates to that block.
    """
    raise NotImplementedError


def sliding_windows(x: np.ndarray, window: int) -> np.ndarray:
    """Every length-`window` window of 1-D `x` as a read-only, zero-copy strided view.

    Shape (len(x) - window + 1, window); row i is x[i:i + window]. Built with
    `np.lib.stride_tricks.as_strided`.
    """
    raise NotImplementedError
