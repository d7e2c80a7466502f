### LANG en
"""Lab 05 -- the GIL, measured.

CPython threads take turns holding one lock, the global interpreter lock: pure-Python
work does not get faster with more threads, while code that waits or works outside the
interpreter (sleeping, NumPy's loops, hashing, compression) releases the lock and lets
other threads run. Processes each have their own interpreter and their own lock. And
the lock does not make `counter += 1` atomic: a thread can lose the lock between
reading a value and writing it back. Here you measure each of those claims on your own
machine, write the race on purpose, fix it, and pass work between threads on a queue.
"""
### LANG es
# """Laboratorio 05 -- el GIL, medido.
#
# Los hilos de CPython se turnan para tener un único cerrojo, el cerrojo global del
# intérprete: el trabajo en Python puro no va más rápido con más hilos, mientras que el
# código que espera o que trabaja fuera del intérprete (las pausas, los bucles de NumPy, los
# hashes, la compresión) suelta el cerrojo y deja avanzar a otros hilos. Cada proceso tiene
# su propio intérprete y su propio cerrojo. Y el cerrojo no hace atómico `counter += 1`: un
# hilo puede perder el cerrojo entre leer un valor y volver a escribirlo. Aquí mides cada
# una de esas afirmaciones en tu propia máquina, escribes la condición de carrera a
# propósito, la corriges y pasas trabajo entre hilos por una cola.
# """
### END LANG

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

### LANG en
# How long the helper thread of `releases_gil` naps on every turn (seconds).
### LANG es
# # Cuánto duerme el hilo auxiliar de `releases_gil` en cada vuelta (segundos).
### END LANG
NAP_S = 0.0005


def square_sum(n: int) -> int:
    ### LANG en
    """0² + 1² + ... + (n-1)², by a Python loop: pure-Python work that holds the GIL."""
    ### LANG es
    # """0² + 1² + ... + (n-1)², con un bucle de Python: trabajo en Python puro, que
    # retiene el GIL."""
    ### END LANG
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
    ### LANG en
    """`[fn(x) for x in items]`, computed by `workers` threads of this process."""
    ### LANG es
    # """`[fn(x) for x in items]`, calculado por `workers` hilos de este proceso."""
    ### END LANG
    ### BEGIN SOLUTION
    _check_workers(workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))
    ### END SOLUTION


def run_in_processes(fn: Callable[[Any], Any], items: list, workers: int) -> list:
    ### LANG en
    """`[fn(x) for x in items]`, computed by `workers` child processes; none of them
    outlives the call."""
    ### LANG es
    # """`[fn(x) for x in items]`, calculado por `workers` procesos hijos; ninguno de
    # ellos sigue en marcha cuando termina la llamada."""
    ### END LANG
    ### BEGIN SOLUTION
    _check_workers(workers)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        results = pool.map(fn, items)
        pool.close()
        pool.join()
    return results
    ### END SOLUTION


def cpu_per_wall(fn: Callable[..., Any], *args: Any) -> float:
    ### LANG en
    """This process's CPU time over the wall time of one call `fn(*args)`: how many
    cores it kept busy on average."""
    ### LANG es
    # """El tiempo de CPU de este proceso dividido entre el tiempo real de una llamada
    # `fn(*args)`: cuántos núcleos mantuvo ocupados, de media."""
    ### END LANG
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
    ### LANG en
    """The race on purpose: read, hand the GIL over, write back; no lock."""
    ### LANG es
    # """La carrera a propósito: leer, ceder el GIL y volver a escribir; sin cerrojo."""
    ### END LANG
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
    ### LANG en
    """The fix: the same read, `sleep(0)` and write under one lock; the count is exact."""
    ### LANG es
    # """La corrección: la misma lectura, `sleep(0)` y escritura, bajo un único cerrojo;
    # la cuenta es exacta."""
    ### END LANG
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
    ### LANG en
    """Whether `fn(*args)` lets other Python threads run while it runs: a napping
    helper's turns during the call against its turns during a sleep as long."""
    ### LANG es
    # """Si `fn(*args)` deja que otros hilos de Python avancen mientras se ejecuta: las
    # vueltas que da durante la llamada un auxiliar que duerme a ratos, frente a las que
    # da durante una pausa igual de larga."""
    ### END LANG
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
    ### LANG en
    """Producers put 1..items_each and a sentinel on one queue; one consumer sums until
    it has seen every sentinel. Every thread is joined; returns the sum."""
    ### LANG es
    # """Los productores ponen 1..items_each y un centinela en una única cola; un
    # consumidor suma hasta haber visto todos los centinelas. Se espera a cada hilo con
    # `join`; devuelve la suma."""
    ### END LANG
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
