"""Probes for lab06, loaded into the worker before the student's module.

Two things exist only inside the worker: objects that are not plain data (a tensor that
holds its array in `.data` cannot travel to the worker, so it is built there) and object
identity (is a returned array one of the arrays given, is the pruned dict the one
passed). These probes run the student's code there and report facts or plain results;
every judgement stays in test_pitfalls.py. Running beside the student's code, they can
be rewritten by it, so their reports count only for a submission whose source the
static analysis finds free of reach-ins.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

# Bound before the student's module is imported: rebinding them there changes nothing here.
_TRACE_START, _TRACE_STOP, _TRACING = tracemalloc.start, tracemalloc.stop, tracemalloc.is_tracing
_ONES = np.ones


class Tensor:
    """The smallest tensor: an object that holds an array and is not one (phase 8's
    Tensor class has the same shape)."""

    __slots__ = ("data",)

    def __init__(self, data: object) -> None:
        self.data = data


_held: list[object] = []  # the last result of `stack_keep`, for `stack_kept`


def dedupe_identity(student, arrays):
    """For each array `dedupe_arrays` returned, the index of the given array it is
    (`is`), or None when it is none of them."""
    result = student.dedupe_arrays(arrays)
    return [next((i for i, arr in enumerate(arrays) if got is arr), None) for got in result]


def prune_after(student, name, d, threshold):
    """Call `buggy_prune` or `prune` on `d`; report what it raised (a class name or
    None), what it returned and what `d` holds afterwards, in order: the same object
    the call was given, so a new dict built inside the call leaves it unchanged."""
    if name not in ("prune", "buggy_prune"):
        raise LookupError(name)
    raised, returned = None, None
    try:
        returned = getattr(student, name)(d, threshold)
    except Exception as exc:  # noqa: BLE001 -- reported as a fact, judged by the test
        raised = type(exc).__name__
    return {"raised": raised, "returned_none": returned is None, "after": list(d.items())}


def buggy_stack_facts(student, datas):
    """`buggy_stack` on tensors holding `datas`: what kind of array came back, and
    whether its elements are the tensors themselves."""
    tensors = [Tensor(data) for data in datas]
    result = student.buggy_stack(tensors)
    if type(result) is not np.ndarray:
        return {"ndarray": False}
    return {
        "ndarray": True,
        "object_dtype": result.dtype.kind == "O",
        "shape": result.shape,
        "holds_the_tensors": result.ndim == 1 and len(result) == len(tensors)
        and all(got is t for got, t in zip(result, tensors, strict=True)),
    }


def stack_keep(student, datas):
    """`stack_data` on tensors holding `datas`; the result is also held for
    `stack_kept`, which encodes it again after the grader wrote into shared inputs."""
    _held[:] = [student.stack_data([Tensor(data) for data in datas])]
    return _held[0]


def stack_kept(student):
    """The result of the last `stack_keep`, as it is now."""
    return _held[0]


# --- deepcopy_bytes: objects whose copy is not the sum of their arrays' bytes -----------


def build_copied(kind: str, arrays: list, count: int) -> object:
    """The object `deepcopy_bytes` measures, made from `arrays` (which travelled as
    plain arrays) the same way in the worker and, for the truth, in the grader.

    "shared": arrays held twice and views of larger bases (a deep copy copies each
    array once, and a view's own bytes, not its base's); "nested": `count` small lists
    around an array (their copies and deepcopy's own memo outweigh the bytes they hold).
    """
    a, b, big = arrays
    if kind == "shared":
        window = big[count:count + len(a)]
        return [a, b, a, {"w": a, "v": b[::2], "window": window}, (a, b[1:]), [window]]
    if kind == "nested":
        return {"rows": [[k, -k] for k in range(count)], "w": a, "again": [a, (a,)]}
    raise LookupError(kind)


def deepcopy_of(student, kind, arrays, count, held=0, old_peak=0):
    """`deepcopy_bytes` of `build_copied(kind, arrays, count)`. With `held` > 0,
    tracemalloc is already tracing `held` float64 elements, kept alive through the call,
    and an earlier peak of `old_peak` elements when it is called."""
    obj = build_copied(kind, arrays, count)
    if not held:
        return student.deepcopy_bytes(obj)
    started = not _TRACING()
    if started:
        _TRACE_START()
    try:
        kept = _ONES(held)  # traced before the call, alive during it
        _ONES(old_peak)  # freed at once: an earlier peak, higher than the call's
        result = student.deepcopy_bytes(obj)
        del kept
        return result
    finally:
        if started:
            _TRACE_STOP()

