"""Trusted probes for lab02, loaded into the worker before the student's module."""

from __future__ import annotations

import numpy as np

_BANNED = {
    "broadcast_shape": [
        (np, "broadcast_shapes"),
        (np, "broadcast"),
        (np, "broadcast_to"),
        (np, "broadcast_arrays"),
    ],
    "sliding_windows": [(np.lib.stride_tricks, "sliding_window_view")],
}


def _refuse(*_args, **_kwargs):
    raise RuntimeError("this NumPy helper is off limits in this exercise")


def call_without_helpers(student, name, *args):
    """Call `name` with NumPy's own helpers for the same job made to raise."""
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr in _BANNED[name]]
    for owner, attr, _ in saved:
        setattr(owner, attr, _refuse)
    try:
        return getattr(student, name)(*args)
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


def sliding_windows_strided(student, base, step, window):
    """`sliding_windows(base[::step], window)`, sliced here: arrays travel contiguous."""
    return call_without_helpers(student, "sliding_windows", base[::step], window)
