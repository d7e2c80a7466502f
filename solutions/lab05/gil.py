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
    ### BEGIN SOLUTION
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    total = 0
    for i in range(n):
        total += i * i
    return total
    ### END SOLUTION


def _check_workers(workers: int) -> None:
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")


def run_in_threads(fn: Callable[[Any], Any], items: list, workers: int) -> list:
    """`[fn(x) for x in items]`, computed by `workers` threads of this process."""
    ### BEGIN SOLUTION
    _check_workers(workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))
    ### END SOLUTION


def run_in_processes(fn: Callable[[Any], Any], items: list, workers: int) -> list:
    """`[fn(x) for x in items]`, computed by `workers` child processes; none of them
    outlives the call."""
    ### BEGIN SOLUTION
    _check_workers(workers)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        results = pool.map(fn, items)
        pool.close()
        pool.join()
    return results
    ### END SOLUTION


def cpu_per_wall(fn: Callable[..., Any], *args: Any) -> float:
    """This process's CPU time over the wall time of one call `fn(*args)`: how many
    cores it kept busy on average."""
    ### BEGIN SOLUTION
    cpu, wall = time.process_time(), time.perf_counter()
    fn(*args)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / wall if wall > 0 else 0.0
    ### END SOLUTION


def _check_counts(n_threads: int, n_increments: int) -> None:
    if n_threads < 1 or n_increments < 1:
        raise ValueError(f"need positive counts, got {n_threads} and {n_increments}")


def racy_count(n_threads: int, n_increments: int) -> int:
    """The race on purpose: read, hand the GIL over, write back; no lock."""
    ### BEGIN SOLUTION
    _check_counts(n_threads, n_increments)
    counter = [0]

    def work() -> None:
        for _ in range(n_increments):
            v = counter[0]
            time.sleep(0)
            counter[0] = v + 1

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counter[0]
    ### END SOLUTION


def safe_count(n_threads: int, n_increments: int) -> int:
    """The fix: the same read, `sleep(0)` and write under one lock; the count is exact."""
    ### BEGIN SOLUTION
    _check_counts(n_threads, n_increments)
    counter = [0]
    lock = threading.Lock()

    def work() -> None:
        for _ in range(n_increments):
            with lock:
                v = counter[0]
                time.sleep(0)
                counter[0] = v + 1

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return counter[0]
    ### END SOLUTION


def releases_gil(fn: Callable[..., Any], *args: Any) -> bool:
    """Whether `fn(*args)` lets other Python threads run while it runs: a napping
    helper's turns during the call against its turns during a sleep as long."""
    ### BEGIN SOLUTION
    def turns_during(call: Callable[[], Any]) -> tuple[int, float]:
        """How many naps a helper thread took while `call()` ran, and how long it ran."""
        stop = threading.Event()
        turns = [0]

        def helper() -> None:
            while not stop.is_set():
                time.sleep(NAP_S)
                turns[0] += 1

        thread = threading.Thread(target=helper, daemon=True)
        thread.start()
        time.sleep(5 * NAP_S)  # let the helper get going before the call
        before, started = turns[0], time.perf_counter()
        call()
        elapsed, counted = time.perf_counter() - started, turns[0] - before
        stop.set()
        thread.join()
        return counted, elapsed

    during, elapsed = turns_during(lambda: fn(*args))
    baseline, _ = turns_during(lambda: time.sleep(elapsed))
    return during > 0.25 * baseline
    ### END SOLUTION


def producer_consumer(n_producers: int, items_each: int) -> int:
    """Producers put 1..items_each and a sentinel on one queue; one consumer sums until
    it has seen every sentinel. Every thread is joined; returns the sum."""
    ### BEGIN SOLUTION
    _check_counts(n_producers, items_each)
    channel: queue.Queue = queue.Queue()
    done = object()
    total = [0]

    def produce() -> None:
        for item in range(1, items_each + 1):
            channel.put(item)
        channel.put(done)

    def consume() -> None:
        finished = 0
        while finished < n_producers:
            item = channel.get()
            if item is done:
                finished += 1
            else:
                total[0] += item

    threads = [threading.Thread(target=produce) for _ in range(n_producers)]
    threads.append(threading.Thread(target=consume))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return total[0]
    ### END SOLUTION
