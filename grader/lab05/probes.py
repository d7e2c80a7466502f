"""Probes for lab05, loaded into the worker before the student's module.

Most of lab05's functions take a callable, and the grader's callables (`callback`) run
in the grading process, not here: a callable that must run in the worker (one that
naps, one that holds the GIL, one a child process can unpickle) is built here, from
source the grader wrote with fresh random names and constants, so the student's code
cannot tell from the callable what it does or what it returns without calling it.
What each probe returns is the student's answer or result, judged by the grader; how
long the call took and how much CPU the worker spent on it the grader reads itself
(its clock, `/proc`). Running beside the student's code, the probes can be rewritten
by it, so their results count only for a source free of reach-ins.
"""

from __future__ import annotations

import builtins
import hashlib  # noqa: F401 - for the grader's source: loaded once, in the zygote
import importlib
import os
import queue
import sys
import threading
import time
import zlib  # noqa: F401 - likewise

import numpy as np  # noqa: F401 - likewise

# Bound before the student's module is imported.
_SLEEP = time.sleep
_CLOCK = time.perf_counter
_THREAD_TIME = time.thread_time
_LOCK = threading.Lock
_THREAD = threading.Thread
_SETPROFILE = sys.setprofile
_FRAME = sys._getframe
_QUEUE = queue.Queue


def _define(source: str, name: str) -> object:
    """The function `name` of the grader's `source`."""
    namespace: dict = {"__builtins__": builtins}
    exec(compile(source, "<lab05 grader>", "exec"), namespace)  # noqa: S102 - the grader's text
    return namespace[name]


def _task(source: str, module: str, name: str) -> object:
    """The grader's top-level function `module.name`, its module written as a file in
    the worker's folder (on `sys.path`), so that a child process, forked or spawned,
    imports it to unpickle the function."""
    with open(f"{module}.py", "x") as handle:
        handle.write(source)
    importlib.invalidate_caches()
    return getattr(importlib.import_module(module), name)


def threads_map(student, items: list, workers: int, scale: int, offset: int) -> list:
    """run_in_threads on a function of the grader's constants."""
    return student.run_in_threads(lambda x: x * scale + offset, items, workers)


def threads_nap(student, items: list, workers: int, seconds: float, offset: int) -> dict:
    """run_in_threads on a function that sleeps `seconds` (releasing the GIL) per item;
    its result, and the most naps that were under way at once (counted by the naps
    themselves, so a busy machine that delays the threads does not change the count)."""
    lock, now, most = _LOCK(), [0], [0]

    def nap(x):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            _SLEEP(seconds)
        finally:
            with lock:
                now[0] -= 1
        return x + offset

    return {"result": student.run_in_threads(nap, items, workers), "most": most[0]}


def processes_map(student, source: str, module: str, name: str, items: list,
                  workers: int) -> list:
    """run_in_processes on the grader's top-level function `module.name`."""
    task = _task(source, module, name)
    return student.run_in_processes(task, items, workers)


def processes_left(student, source: str, module: str, name: str, items: list,
                   workers: int) -> dict:
    """run_in_processes on the grader's function; its result, and the child processes of
    this worker at the instant the call returns, before its local variables are dropped
    (a pool the call never closed is cleaned up only then, when the garbage collector
    takes it, or later still): [pid, state] of each, running or waiting to be joined,
    multiprocessing's resource tracker aside. None if that instant was not seen."""
    task = _task(source, module, name)
    here, left = _FRAME(), []

    def at_return(frame, event, _arg):
        if event == "return" and not left and frame.f_back is here:
            left.append(_children())

    _SETPROFILE(at_return)
    try:
        result = student.run_in_processes(task, items, workers)
    finally:
        _SETPROFILE(None)
    return {"result": result, "left": left[0] if left else None}


def _children() -> list:
    """[pid, state letter] of this process's children, the resource tracker aside."""
    found = []
    for thread in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{thread}/children", "rb") as handle:
                pids = [int(pid) for pid in handle.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as handle:
                    state = handle.read().rsplit(b")", 1)[1].split()[0].decode()
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    argv = handle.read(4096)
            except (OSError, IndexError):
                continue  # reaped in the meantime
            if b"multiprocessing.resource_tracker" not in argv:
                found.append([pid, state])
    return found


def run_here(student, source: str, module: str, name: str, items: list) -> list:
    """The same function on the same items in this process, for the grader to measure
    what it costs here."""
    task = _task(source, module, name)
    return [task(x) for x in items]


def cpu_per_wall_of(student, source: str, name: str, arg: int) -> object:
    """cpu_per_wall on the grader's function `name`."""
    return student.cpu_per_wall(_define(source, name), arg)


def cpu_per_wall_threads(student, source: str, name: str, arg: int, threads: int) -> object:
    """cpu_per_wall on a call that runs the grader's pure-Python function in `threads`
    threads at once and joins them."""
    work = _define(source, name)

    def in_threads(n):
        started = [threading.Thread(target=work, args=(n,)) for _ in range(threads)]
        for thread in started:
            thread.start()
        for thread in started:
            thread.join()

    return student.cpu_per_wall(in_threads, arg)


# The grader's functions for releases_gil, defined once per worker (their data is built
# as they are defined): name -> function.
_DEFINED: dict = {}
NAP_S = 0.0005  # the grader's own helper naps as the README's does


def releases_setup(student, source: str, name: str, seconds: float) -> int:
    """Define the grader's function `name` and return how many repeats of its work
    (its one argument) make a call last about `seconds` on this machine when it is not
    kept waiting for a CPU: a repeat costs the larger of its CPU time (this thread's) and
    its wall time less the time the thread waited for a CPU (the kernel's count, which
    is coarse), so a busy machine does not shorten the calls; and never so many that a
    call would last over CALL_CAP_S by the wall time measured."""
    fn = _DEFINED[name] = _define(source, name)
    costs, walls = [], []
    for _ in range(2):  # the smaller: the first may pay first-touch page faults
        waited, cpu, started = _waited(), _THREAD_TIME(), _CLOCK()
        fn(1)
        wall = _CLOCK() - started
        costs.append(max(_THREAD_TIME() - cpu, wall - (_waited() - waited)))
        walls.append(wall)
    repeats = round(seconds / max(min(costs), 1e-3))
    return max(1, min(repeats, int(CALL_CAP_S / max(min(walls), 1e-3))))


CALL_CAP_S = 0.5


def _waited() -> float:
    """Seconds this thread has spent runnable but waiting for a CPU (0 where the kernel
    does not say)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def releases_run(student, name: str, repeats: int, window: float) -> dict:
    """releases_gil's answer for the grader's function `name` (with `repeats`), while the
    grader's own helper naps beside the student's and counts its turns: its pace (turns
    a second) in a sleep of `window` s just before the student's call, during every call
    the student's code makes of the function, and in a sleep just after. The student's
    code gets a wrapper that only marks the clock and the count around each call."""
    fn, turns = _DEFINED[name], _helper()
    marks = []

    def call(n):
        marks.append((_CLOCK(), turns[0]))
        try:
            return fn(n)
        finally:
            marks.append((_CLOCK(), turns[0]))

    call.__name__ = call.__qualname__ = name
    before = _pace(turns, window)
    answer = student.releases_gil(call, repeats)
    after = _pace(turns, window)
    spans = list(zip(marks[::2], marks[1::2], strict=False))
    inside = sum(end - start for (start, _), (end, _) in spans)
    counted = sum(last - first for (_, first), (_, last) in spans)
    return {"answer": answer, "calls": len(spans), "before": before, "after": after,
            "during": counted / inside if inside > 0 else None}


_TURNS: list = []  # the grader's helper's count of turns, once it runs


def _helper() -> list:
    """The grader's napping helper's turn count, the helper started on first use and left
    running for the rest of the worker's life: a thread just started waits behind the
    machine's other work before it gets going (the scheduler's debit for new threads),
    and a warm one keeps its pace."""
    if not _TURNS:
        _TURNS.append(0)

        def helper():
            while True:
                _SLEEP(NAP_S)
                _TURNS[0] += 1

        _THREAD(target=helper, daemon=True).start()
        _SLEEP(0.03)
    return _TURNS


def _pace(turns: list, seconds: float) -> float:
    """The helper's turns a second while this thread sleeps `seconds`."""
    count, started = turns[0], _CLOCK()
    _SLEEP(seconds)
    return (turns[0] - count) / (_CLOCK() - started)


def queue_paced(student, put, producers: int, items_each: int) -> object:
    """producer_consumer with `queue.Queue`, for the length of the call, a queue of the
    grader's whose `put` first hands the item to the grader's callable `put` (which
    counts it and waits before answering), one put at a time, then puts it. The names of
    the student's module bound to `queue.Queue` (`from queue import Queue`) are swapped
    too, and everything is put back after the call. A put after the call (a thread left
    running) no longer asks the grader, which then reads no question it did not expect."""
    lock, closed = _LOCK(), [False]

    class Paced(_QUEUE):  # type: ignore[valid-type, misc]
        def put(self, item, block=True, timeout=None):
            with lock:
                if not closed[0]:
                    put(item if type(item) is int else None)
            _QUEUE.put(self, item, block, timeout)

    names = [name for name, value in list(student.__dict__.items()) if value is _QUEUE]
    queue.Queue = Paced  # type: ignore[misc]
    for name in names:
        student.__dict__[name] = Paced
    try:
        return student.producer_consumer(producers, items_each)
    finally:
        with lock:
            closed[0] = True
        queue.Queue = _QUEUE  # type: ignore[misc]
        for name in names:
            if student.__dict__.get(name) is Paced:
                student.__dict__[name] = _QUEUE


def idle(student) -> None:
    """Nothing: a call for the grader to count the worker's threads around."""
    return None
