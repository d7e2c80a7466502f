"""Probes for lab01, loaded into the worker before the student's module.

Object identity exists only inside the worker's interpreter: which object a name refers
to, which thread took which lock. These probes run the student's code there and report
facts as plain data; every judgement stays in test_aliasing.py. Running beside the
student's code, they can be rewritten by it: their facts count only for a submission
the static analysis finds free of reach-ins, or only to explain a failure.

At import time (before the student's module exists) this module instruments
`threading`: `Thread.start` records each thread started, and `threading.Lock` hands code
outside the standard library a lock that records which threads acquired it. Both behave
exactly like the originals otherwise.
"""

from __future__ import annotations

import sys
import sysconfig
import threading

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
