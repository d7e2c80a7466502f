"""Trusted probes for lab01, loaded into the worker before the student's module.

Aliasing is about what happens inside one process: which object a name refers to, which
buffer an array uses, which thread took which lock. These probes run the student's code
there and report facts as plain data (bools, ints, lists of str); every judgement stays
in test_aliasing.py.

At import time (before the student's module exists) this module captures NumPy's
`shares_memory` and instruments `threading`: `Thread.start` records each thread
started, and `threading.Lock` hands code outside the standard library a lock that
records which threads acquired it. Both behave exactly like the originals otherwise.
"""

from __future__ import annotations

import sys
import sysconfig
import threading

import numpy as np

_SHARES = np.shares_memory
_NDARRAY = np.ndarray

# --- threading instrumentation ------------------------------------------------------------

_STDLIB = sysconfig.get_paths()["stdlib"]
_REAL_LOCK = threading.Lock
_REAL_START = threading.Thread.start
_started: list[threading.Thread] = []
_locks: list[_TracedLock] = []


class _TracedLock:
    """A real lock that remembers the threads that acquired it and who created it."""

    __slots__ = ("_lock", "creator", "holders", "acquisitions")

    def __init__(self, creator: str | None) -> None:
        self._lock = _REAL_LOCK()
        self.creator = creator
        self.holders: set[threading.Thread] = set()
        self.acquisitions = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:  # only the holder writes these, so they need no lock of their own
            self.holders.add(threading.current_thread())
            self.acquisitions += 1
        return got

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self._lock.release()

    def __getattr__(self, name: str) -> object:  # anything else a real lock has
        return getattr(self._lock, name)


def _lock_factory() -> object:
    caller = sys._getframe(1).f_globals.get("__file__") or ""
    if caller.startswith(_STDLIB):  # threading, queue, concurrent.futures: real locks
        return _REAL_LOCK()
    lock = _TracedLock(sys._getframe(1).f_globals.get("__name__"))
    _locks.append(lock)
    return lock


def _traced_start(self: threading.Thread) -> None:
    _started.append(self)
    _REAL_START(self)


threading.Lock = _lock_factory
threading.Thread.start = _traced_start


def locked_count_traced(student, n_threads, n_increments):
    """Call `locked_count` and report the threads it started and the locks they took."""
    _started.clear()
    for lock in _locks:  # a lock made at import time counts; earlier acquisitions do not
        lock.holders.clear()
        lock.acquisitions = 0
    student.locked_count(n_threads, n_increments)
    threads = list(_started)
    own = [lock for lock in _locks if lock.creator == student.__name__]
    return {
        "started": len(threads),
        "all_finished": all(not t.is_alive() for t in threads),
        "lock_created": bool(own),
        "lock_used": any(lock.acquisitions > 0 for lock in own),
        "one_lock_for_all": bool(threads)
        and any(all(t in lock.holders for t in threads) for lock in own),
    }


# --- returns_view -------------------------------------------------------------------------


class _NotForIndexing(np.ndarray):
    """The array `returns_view` receives: it has `ndim` and `shape`, but refuses indexing."""

    def __getitem__(self, index):
        raise RuntimeError("returns_view must decide from the index, without indexing arr")

    def __repr__(self) -> str:  # printing arr while debugging still works
        return repr(self.view(np.ndarray))

    def __str__(self) -> str:
        return str(self.view(np.ndarray))


def _refuse(*_args, **_kwargs):
    raise RuntimeError("returns_view must decide from the index, without comparing memory")


def returns_view_blind(student, cases):
    """`returns_view(arr, index)` for each case, with `arr` unindexable and NumPy's
    memory tests switched off, so the answer must come from the index itself."""
    saved = [(name, getattr(np, name)) for name in ("shares_memory", "may_share_memory")]
    for name, _ in saved:
        setattr(np, name, _refuse)
    try:
        return [student.returns_view(arr.view(_NotForIndexing), index) for arr, index in cases]
    finally:
        for name, original in saved:
            setattr(np, name, original)


# --- snapshots ----------------------------------------------------------------------------


def _same_values(items: list, arrays: list) -> bool:
    return all(
        b.shape == a.shape and bool(np.array_equal(b, a))
        for b, a in zip(items, arrays, strict=True)
    )


def optimiser_step(student, name, lr):
    """Back params up with `name`, take an in-place step `p -= lr * g`, inspect the backup."""
    if name not in ("snapshot", "buggy_snapshot"):
        raise LookupError(name)
    params = [
        np.linspace(-1.0, 1.0, 6),
        np.arange(12.0).reshape(3, 4),
        np.array([0.5]),
    ]
    grads = [np.full_like(p, i + 1.0) for i, p in enumerate(params)]
    originals = [p.copy() for p in params]
    backup = getattr(student, name)(params)
    facts = {"is_list": type(backup) is list, "same_list": backup is params}
    items = list(backup) if facts["is_list"] else []
    facts["length"] = len(items)
    arrays = len(items) == len(params) and all(type(b) is _NDARRAY for b in items)
    facts["arrays"] = arrays
    facts["equal_before"] = arrays and _same_values(items, originals)
    for p, g in zip(params, grads, strict=True):
        p -= lr * g
    facts["equal_after"] = arrays and _same_values(items, originals)
    facts["shares"] = arrays and any(
        bool(_SHARES(b, p)) for b, p in zip(items, params, strict=True)
    )
    return facts


# --- append_history -----------------------------------------------------------------------


def _contents(value):
    return list(value) if type(value) is list else None


def history_calls(student, name):
    """Two calls without `history`, then two with a list of the caller's own."""
    if name not in ("append_history", "buggy_append_history"):
        raise LookupError(name)
    function = getattr(student, name)
    first = function("a")
    first_then = _contents(first)
    second = function("b")
    facts = {
        "first": first_then,
        "second": _contents(second),
        "first_later": _contents(first),
        "same_object": first is second,
    }
    empty: list = []
    returned = function("c", empty)
    facts["empty_returned"] = returned is empty
    facts["empty_after"] = list(empty)
    given = ["x"]
    returned = function("d", history=given)
    facts["given_returned"] = returned is given
    facts["given_after"] = list(given)
    return facts


# --- Counter ------------------------------------------------------------------------------


def counter_start(student):
    """`Counter().value`."""
    return student.Counter().value


def counter_iadd(student, steps):
    """`c += n` for each n, with `alias = c` taken first; is `c` still the same object?"""
    c = student.Counter()
    alias = c
    start = c.value
    same = []
    for n in steps:
        c += n
        same.append(c is alias)
        if c is not alias:
            break
    return {"start": start, "same": same, "alias_value": alias.value}


def counter_add(student, first, second):
    """`d = c + first`, then `e = d + second`: new objects, old ones unchanged?"""
    cls = student.Counter
    c = cls()
    start = c.value
    d = c + first
    d_ok = isinstance(d, cls) and d is not c
    e = d + second if d_ok else None
    e_ok = isinstance(e, cls) and e is not d and e is not c
    return {
        "start": start,
        "new_objects": d_ok and e_ok,
        "c_value": c.value,
        "d_value": d.value if d_ok else None,
        "e_value": e.value if e_ok else None,
    }
