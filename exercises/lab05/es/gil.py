"""Lab 05 -- the GIL, measured.

CPython threads take turns holding one lock, the global interpreter lock: pure-Python
work does not get faster with more threads, while code that waits or works outside the
interpreter (sleeping, NumPy's loops, hashing, compression) releases the lock and lets
other threads run. Processes each have their own interpreter and their own lock. And
the lock does not make `counter += 1` atomic: a thread can lose the lock between
reading a value and writing it back. Here you measure each of those claims on your own
machine, write the race on purpose, fix it, and pass work between threads on a queue.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# How long the helper thread of `releases_gil` naps on every turn (seconds).
NAP_S = 0.0005


def square_sum(n: int) -> int:
    """0² + 1² + ... + (n-1)², by a Python loop: pure-Python work that holds the GIL."""
    raise NotImplementedError


def _check_workers(workers: int) -> None:
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")


def run_in_threads(fn: Callable[[Any], Any], items: list, workers: int) -> list:
    """`[fn(x) for x in items]`, computed by `workers` threads of this process."""
    raise NotImplementedError


def run_in_processes(fn: Callable[[Any], Any], items: list, workers: int) -> list:
    """`[fn(x) for x in items]`, computed by `workers` child processes; none of them
    outlives the call."""
    raise NotImplementedError


def cpu_per_wall(fn: Callable[..., Any], *args: Any) -> float:
    """This process's CPU time over the wall time of one call `fn(*args)`: how many
    cores it kept busy on average."""
    raise NotImplementedError


def _check_counts(n_threads: int, n_increments: int) -> None:
    if n_threads < 1 or n_increments < 1:
        raise ValueError(f"need positive counts, got {n_threads} and {n_increments}")


def racy_count(n_threads: int, n_increments: int) -> int:
    """The race on purpose: read, hand the GIL over, write back; no lock."""
    raise NotImplementedError


def safe_count(n_threads: int, n_increments: int) -> int:
    """The fix: the same read, `sleep(0)` and write under one lock; the count is exact."""
    raise NotImplementedError


def releases_gil(fn: Callable[..., Any], *args: Any) -> bool:
    """Whether `fn(*args)` lets other Python threads run while it runs: a napping
    helper's turns during the call against its turns during a sleep as long."""
    raise NotImplementedError


def producer_consumer(n_producers: int, items_each: int) -> int:
    """Producers put 1..items_each and a sentinel on one queue; one consumer sums until
    it has seen every sentinel. Every thread is joined; returns the sum."""
    raise NotImplementedError
