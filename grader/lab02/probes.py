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


def build_view(shape, dtype, order, steps):
    """An array that owns its data, then the view each step makes of the last: one
    definition, run by `describe_views` in the worker and by the grader for the truth
    (arrays travel as contiguous copies, so a view is built where it is described)."""
    view = np.zeros(tuple(shape), dtype=np.dtype(dtype), order=order)
    for step, arg in steps:
        if step == "index":
            view = view[arg]
        elif step == "T":
            view = view.T
        elif step == "reshape":
            view = view.reshape(arg)
        elif step == "windows":  # a 1-D view: every length-`arg` window, as lab02 builds them
            (stride,) = view.strides
            view = np.lib.stride_tricks.as_strided(
                view, shape=(len(view) - arg + 1, arg), strides=(stride, stride),
                writeable=False)
        elif step == "repeat":  # `arg` copies of the view along a new axis of stride 0
            view = np.lib.stride_tricks.as_strided(
                view, shape=(arg, *view.shape), strides=(0, *view.strides), writeable=False)
        elif step == "readonly":
            view = view.view()
            view.flags.writeable = False
        else:
            raise ValueError(f"unknown step {step!r}")
    return view


def describe_views(student, cases):
    """`describe` of each case's view, built here: the student's facts, for the grader
    to judge against the same view built on its side."""
    return [student.describe(build_view(*case)) for case in cases]
