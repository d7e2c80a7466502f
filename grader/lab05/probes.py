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
import threading
import time
import zlib  # noqa: F401 - likewise

import numpy as np  # noqa: F401 - likewise

_SLEEP = time.sleep  # bound before the student's module is imported


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


def threads_nap(student, items: list, workers: int, seconds: float, offset: int) -> list:
    """run_in_threads on a function that sleeps `seconds` (releasing the GIL) per item."""
    def nap(x):
        _SLEEP(seconds)
        return x + offset
    return student.run_in_threads(nap, items, workers)


def processes_map(student, source: str, module: str, name: str, items: list,
                  workers: int) -> list:
    """run_in_processes on the grader's top-level function `module.name`."""
    task = _task(source, module, name)
    return student.run_in_processes(task, items, workers)


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


def releases(student, source: str, name: str, arg: int, runs: int) -> list:
    """releases_gil's answers, `runs` times, for the grader's function `name`."""
    fn = _define(source, name)
    return [student.releases_gil(fn, arg) for _ in range(runs)]


def idle(student) -> None:
    """Nothing: a call for the grader to count the worker's threads around."""
    return None
