"""Laboratorio 05 -- el GIL, medido.

Los hilos de CPython se turnan para tener un único cerrojo, el cerrojo global del
intérprete: el trabajo en Python puro no va más rápido con más hilos, mientras que el
código que espera o que trabaja fuera del intérprete (las pausas, los bucles de NumPy, los
hashes, la compresión) suelta el cerrojo y deja avanzar a otros hilos. Cada proceso tiene
su propio intérprete y su propio cerrojo. Y el cerrojo no hace atómico `counter += 1`: un
hilo puede perder el cerrojo entre leer un valor y volver a escribirlo. Aquí mides cada
una de esas afirmaciones en tu propia máquina, escribes la condición de carrera a
propósito, la corriges y pasas trabajo entre hilos por una cola.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Cuánto duerme el hilo auxiliar de `releases_gil` en cada vuelta (segundos).
NAP_S = 0.0005


def square_sum(n: int) -> int:
    """0² + 1² + ... + (n-1)², con un bucle de Python: trabajo en Python puro, que
    retiene el GIL."""
    raise NotImplementedError


def _check_workers(workers: int) -> None:
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")


def run_in_threads(fn: Callable[[Any], Any], items: list, workers: int) -> list:
    """`[fn(x) for x in items]`, calculado por `workers` hilos de este proceso."""
    raise NotImplementedError


def run_in_processes(fn: Callable[[Any], Any], items: list, workers: int) -> list:
    """`[fn(x) for x in items]`, calculado por `workers` procesos hijos; ninguno de
    ellos sigue en marcha cuando termina la llamada."""
    raise NotImplementedError


def cpu_per_wall(fn: Callable[..., Any], *args: Any) -> float:
    """El tiempo de CPU de este proceso dividido entre el tiempo real de una llamada
    `fn(*args)`: cuántos núcleos mantuvo ocupados, de media."""
    raise NotImplementedError


def _check_counts(n_threads: int, n_increments: int) -> None:
    if n_threads < 1 or n_increments < 1:
        raise ValueError(f"need positive counts, got {n_threads} and {n_increments}")


def racy_count(n_threads: int, n_increments: int) -> int:
    """La carrera a propósito: leer, ceder el GIL y volver a escribir; sin cerrojo."""
    raise NotImplementedError


def safe_count(n_threads: int, n_increments: int) -> int:
    """La corrección: la misma lectura, `sleep(0)` y escritura, bajo un único cerrojo;
    la cuenta es exacta."""
    raise NotImplementedError


def releases_gil(fn: Callable[..., Any], *args: Any) -> bool:
    """Si `fn(*args)` deja que otros hilos de Python avancen mientras se ejecuta: las
    vueltas que da durante la llamada un auxiliar que duerme a ratos, frente a las que
    da durante una pausa igual de larga."""
    raise NotImplementedError


def producer_consumer(n_producers: int, items_each: int) -> int:
    """Los productores ponen 1..items_each y un centinela en una única cola; un
    consumidor suma hasta haber visto todos los centinelas. Se espera a cada hilo con
    `join`; devuelve la suma."""
    raise NotImplementedError
