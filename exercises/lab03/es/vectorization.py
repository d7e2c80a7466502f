"""Laboratorio 03 -- la vectorización y el modelo de coste.

Un bucle de Python sobre un array convierte cada elemento en un objeto de Python antes de
poder hacer aritmética con él; una sola llamada de NumPy hace las mismas cuentas en código
compilado, directamente sobre el búfer del array. Aquí escribes las dos versiones de una
misma suma, las cronometras de forma fiable, le pones una cifra a la diferencia, encuentras
con un perfilador la función lenta de un programa y lo dibujas.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def sum_squares_loop(arr: np.ndarray) -> float:
    """Suma de los cuadrados de todos los elementos de `arr` (cualquier forma), de uno en uno.

    La forma lenta, a propósito: cada paso del bucle `for` empaqueta un elemento en un
    objeto de Python y ejecuta sobre él un puñado de bytecodes. Ese coste por elemento es
    lo que mide el resto del laboratorio.
    """
    raise NotImplementedError


def sum_squares_vectorized(arr: np.ndarray) -> float:
    """La misma suma con llamadas de NumPy, sin bucle de Python sobre los elementos.

    El precio del intérprete se paga una vez por llamada, no una vez por elemento. Los
    enteros se amplían antes a float64: elevados al cuadrado en su propio dtype, desbordan.
    Los floats conservan su dtype: float32 es el dtype que suelen tener los datos de un
    modelo, y ampliarlo duplicaría el tráfico de memoria de la única pasada sobre ellos.
    """
    raise NotImplementedError


def best_time(
    fn: Callable[..., Any],
    *args: Any,
    repeats: int = 5,
    timer: Callable[[], float] = time.perf_counter,
) -> float:
    """El menor de `repeats` tiempos de `fn(*args)`, en segundos.

    El reloj se lee justo antes y justo después de cada llamada, así que no se cronometra
    nada más. El mínimo es el resumen fiable: el ruido de una máquina ocupada (otros
    procesos, fallos de caché, el recolector de basura) solo puede añadir tiempo, nunca
    quitarlo.
    """
    raise NotImplementedError


def speedup_table(sizes: Sequence[int], repeats: int = 3, seed: int = 0) -> list[dict]:
    """Cronometra las dos sumas con `best_time` sobre un array float32 aleatorio por tamaño.

    Los arrays salen de `np.random.default_rng(seed)`, así que una tabla se puede
    reproducir. Una fila por tamaño, en orden: `{"size", "loop_s", "vectorized_s", "ratio"}`
    con `ratio == loop_s / vectorized_s`, cuántas veces más rápida es la llamada de NumPy.
    """
    raise NotImplementedError


def hotspot(fn: Callable[..., Any], *args: Any) -> str:
    """Nombre (`co_name`) de la función de Python con mayor tiempo propio en `fn(*args)`.

    El tiempo propio (`tottime`) cuenta solo el tiempo pasado en las propias líneas de una
    función, no en lo que llama, así que señala el código que hay que reescribir. La propia
    `fn` queda fuera: la pregunta es cuál de las funciones que ejecuta es la lenta. Las
    funciones integradas también quedan fuera, porque no tienen código de Python que cambiar.
    """
    raise NotImplementedError


def peak_bytes(fn: Callable[..., Any], *args: Any) -> int:
    """Bytes que `fn(*args)` necesitó en su pico, además de lo reservado antes de la llamada.

    `tracemalloc` ve cada reserva de memoria que hacen Python y NumPy. Si ya está trazando
    (alguien que mide algo mayor), se olvida su pico anterior, se resta lo trazado antes de
    la llamada y se deja trazando; si no, traza solo durante la llamada.
    """
    raise NotImplementedError


def line_hits(fn: Callable[..., Any], *args: Any) -> dict[int, int]:
    """Cuántas veces se ejecutó cada línea del propio código de `fn` durante `fn(*args)`.

    Una función de traza ve cada marco nuevo; solo traza línea a línea los marcos del
    objeto de código de `fn`, así que no se cuentan las líneas de las funciones a las que
    llama `fn`. La función de traza que estaba activa antes (un depurador, una herramienta
    de cobertura) se restablece después, también cuando `fn` lanza una excepción.
    """
    raise NotImplementedError


def plot_speedup(table: list[dict], path: str | Path) -> Path:
    """Dibuja el tiempo del bucle y el vectorizado frente al tamaño, log-log, en el PNG `path`.

    Los dos costes crecen en proporción al tamaño, así que en ejes log-log son líneas casi
    rectas, y la distancia vertical entre ellas es la aceleración, legible a lo largo de
    muchos órdenes de magnitud del tamaño.
    """
    # matplotlib se importa aquí, al dibujar: importarlo cuesta cerca de un tercio de
    # segundo, que pagarían todas las demás funciones del módulo al importarlo.
    # Dibuja solo en archivos (el backend Agg): sin ventana, así funciona en un servidor o en CI.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    raise NotImplementedError
