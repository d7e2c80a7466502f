### LANG en
"""Lab 03 -- vectorisation and the cost model.

A Python loop over an array turns every element into a Python object before it can do
arithmetic with it; one NumPy call does the same maths in compiled code straight over
the array's buffer. Here you write both versions of one sum, time them honestly, put a
number on the gap, find the slow function of a program with a profiler, and plot it.
"""
### LANG es
# """Laboratorio 03 -- la vectorización y el modelo de coste.
#
# Un bucle de Python sobre un array convierte cada elemento en un objeto de Python antes de
# poder hacer aritmética con él; una sola llamada de NumPy hace las mismas cuentas en código
# compilado, directamente sobre el búfer del array. Aquí escribes las dos versiones de una
# misma suma, las cronometras de forma fiable, le pones una cifra a la diferencia, encuentras
# con un perfilador la función lenta de un programa y lo dibujas.
# """
### END LANG

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
    ### LANG en
    """Sum of the squares of every element of `arr` (any shape), one element at a time.

    The slow way, on purpose: each step of the `for` loop boxes one element into a
    Python object and runs a handful of bytecodes on it. That per-element cost is what
    the rest of the lab measures.
    """
    ### LANG es
    # """Suma de los cuadrados de todos los elementos de `arr` (cualquier forma), de uno en uno.
    #
    # La forma lenta, a propósito: cada paso del bucle `for` empaqueta un elemento en un
    # objeto de Python y ejecuta sobre él un puñado de bytecodes. Ese coste por elemento es
    # lo que mide el resto del laboratorio.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    total = 0.0
    for x in np.asarray(arr).ravel():  # ravel: every shape, 0-d included, in one loop
        total += float(x) * float(x)
    return total
    ### END SOLUTION


def sum_squares_vectorized(arr: np.ndarray) -> float:
    ### LANG en
    """The same sum in NumPy calls, with no Python loop over the elements.

    The interpreter is paid once per call instead of once per element. Integers are
    widened to float64 first: squared in their own dtype they overflow. Floats keep
    their dtype: float32 is the dtype a model's data usually has, and widening it
    would double the memory traffic of the one pass over it.
    """
    ### LANG es
    # """La misma suma con llamadas de NumPy, sin bucle de Python sobre los elementos.
    #
    # El precio del intérprete se paga una vez por llamada, no una vez por elemento. Los
    # enteros se amplían antes a float64: elevados al cuadrado en su propio dtype, desbordan.
    # Los floats conservan su dtype: float32 es el dtype que suelen tener los datos de un
    # modelo, y ampliarlo duplicaría el tráfico de memoria de la única pasada sobre ellos.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    # einsum multiplies and adds in one compiled pass, with no temporary array of
    # squares: a temporary as large as the input costs memory traffic and page faults.
    flat = np.asarray(arr).ravel()
    if flat.dtype.kind in "biu":  # bool, signed and unsigned integers
        flat = flat.astype(np.float64)
    return float(np.einsum("i,i->", flat, flat))
    ### END SOLUTION


def best_time(
    fn: Callable[..., Any],
    *args: Any,
    repeats: int = 5,
    timer: Callable[[], float] = time.perf_counter,
) -> float:
    ### LANG en
    """The smallest of `repeats` timings of `fn(*args)`, in seconds.

    The timer is read just before and just after each call, so nothing else is timed.
    The minimum is the honest summary: noise on a busy machine (other processes, cache
    misses, the garbage collector) can only add time, never take it away.
    """
    ### LANG es
    # """El menor de `repeats` tiempos de `fn(*args)`, en segundos.
    #
    # El reloj se lee justo antes y justo después de cada llamada, así que no se cronometra
    # nada más. El mínimo es el resumen fiable: el ruido de una máquina ocupada (otros
    # procesos, fallos de caché, el recolector de basura) solo puede añadir tiempo, nunca
    # quitarlo.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    times = []
    for _ in range(repeats):
        start = timer()
        fn(*args)
        times.append(timer() - start)
    return min(times)
    ### END SOLUTION


def speedup_table(sizes: Sequence[int], repeats: int = 3, seed: int = 0) -> list[dict]:
    ### LANG en
    """Time both sums with `best_time` on a random float32 array of each size.

    The arrays come from `np.random.default_rng(seed)`, so a table can be reproduced.
    One row per size, in order: `{"size", "loop_s", "vectorized_s", "ratio"}` with
    `ratio == loop_s / vectorized_s`, how many times faster the NumPy call is.
    """
    ### LANG es
    # """Cronometra las dos sumas con `best_time` sobre un array float32 aleatorio por tamaño.
    #
    # Los arrays salen de `np.random.default_rng(seed)`, así que una tabla se puede
    # reproducir. Una fila por tamaño, en orden: `{"size", "loop_s", "vectorized_s", "ratio"}`
    # con `ratio == loop_s / vectorized_s`, cuántas veces más rápida es la llamada de NumPy.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    rng = np.random.default_rng(seed)
    table = []
    for size in sizes:
        arr = rng.random(int(size), dtype=np.float32)
        loop_s = best_time(sum_squares_loop, arr, repeats=repeats)
        vectorized_s = best_time(sum_squares_vectorized, arr, repeats=repeats)
        table.append(
            {
                "size": int(size),
                "loop_s": loop_s,
                "vectorized_s": vectorized_s,
                "ratio": loop_s / vectorized_s,
            }
        )
    return table
    ### END SOLUTION


def hotspot(fn: Callable[..., Any], *args: Any) -> str:
    ### LANG en
    """Name (`co_name`) of the Python function with the largest own time in `fn(*args)`.

    Own time (`tottime`) counts only the time spent in a function's own lines, not in
    what it calls, so it points at the code to rewrite. `fn` itself is left out: the
    question is which of the functions it runs is slow. Built-in functions are left
    out too, since they have no Python code to change.
    """
    ### LANG es
    # """Nombre (`co_name`) de la función de Python con mayor tiempo propio en `fn(*args)`.
    #
    # El tiempo propio (`tottime`) cuenta solo el tiempo pasado en las propias líneas de una
    # función, no en lo que llama, así que señala el código que hay que reescribir. La propia
    # `fn` queda fuera: la pregunta es cuál de las funciones que ejecuta es la lenta. Las
    # funciones integradas también quedan fuera, porque no tienen código de Python que cambiar.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    code = fn.__code__
    own = (code.co_filename, code.co_firstlineno, code.co_name)
    best_name, best_tottime = "", -1.0
    for key, (_calls, _primitive, tottime, _cumtime, _callers) in stats.items():
        filename, _line, name = key
        if filename == "~" or key == own:  # "~": built-in functions
            continue
        if tottime > best_tottime:
            best_name, best_tottime = name, tottime
    return best_name
    ### END SOLUTION


def peak_bytes(fn: Callable[..., Any], *args: Any) -> int:
    ### LANG en
    """Bytes `fn(*args)` needed at its peak, beyond what was allocated before the call.

    `tracemalloc` sees every allocation Python and NumPy make. If it is already tracing
    (someone measuring something larger), its peak is reset and what is traced before
    the call is subtracted, and it is left tracing; otherwise it runs for the call only.
    """
    ### LANG es
    # """Bytes que `fn(*args)` necesitó en su pico, además de lo reservado antes de la llamada.
    #
    # `tracemalloc` ve cada reserva de memoria que hacen Python y NumPy. Si ya está trazando
    # (alguien que mide algo mayor), se olvida su pico anterior, se resta lo trazado antes de
    # la llamada y se deja trazando; si no, traza solo durante la llamada.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    try:
        fn(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if started:
            tracemalloc.stop()
    return peak - before
    ### END SOLUTION


def line_hits(fn: Callable[..., Any], *args: Any) -> dict[int, int]:
    ### LANG en
    """How many times each line of `fn`'s own code ran during `fn(*args)`.

    A trace function sees every new frame; it traces line by line only the frames of
    `fn`'s code object, so lines of the functions `fn` calls are not counted. The trace
    function in force before (a debugger, a coverage tool) is put back afterwards, also
    when `fn` raises.
    """
    ### LANG es
    # """Cuántas veces se ejecutó cada línea del propio código de `fn` durante `fn(*args)`.
    #
    # Una función de traza ve cada marco nuevo; solo traza línea a línea los marcos del
    # objeto de código de `fn`, así que no se cuentan las líneas de las funciones a las que
    # llama `fn`. La función de traza que estaba activa antes (un depurador, una herramienta
    # de cobertura) se restablece después, también cuando `fn` lanza una excepción.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    code, hits = fn.__code__, {}

    def count_lines(frame, event, _arg):
        if event == "line":
            hits[frame.f_lineno] = hits.get(frame.f_lineno, 0) + 1
        return count_lines

    def on_call(frame, _event, _arg):
        return count_lines if frame.f_code is code else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        fn(*args)
    finally:
        sys.settrace(previous)
    return hits
    ### END SOLUTION


def plot_speedup(table: list[dict], path: str | Path) -> Path:
    ### LANG en
    """Plot loop and vectorised time against size, log-log, into the PNG at `path`.

    Both costs grow in proportion to the size, so on log-log axes they are nearly
    straight lines, and the vertical gap between them is the speed-up, readable across
    many orders of magnitude of size.
    """
    ### LANG es
    # """Dibuja el tiempo del bucle y el vectorizado frente al tamaño, log-log, en el PNG `path`.
    #
    # Los dos costes crecen en proporción al tamaño, así que en ejes log-log son líneas casi
    # rectas, y la distancia vertical entre ellas es la aceleración, legible a lo largo de
    # muchos órdenes de magnitud del tamaño.
    # """
    ### END LANG
    ### LANG en
    # matplotlib is imported here, when a plot is drawn: importing it takes about a third
    # of a second, which every other function of this module would pay at import time.
    # Draw into files only (the Agg back end): no window, so it works on a server or in CI.
    ### LANG es
    # # matplotlib se importa aquí, al dibujar: importarlo cuesta cerca de un tercio de
    # # segundo, que pagarían todas las demás funciones del módulo al importarlo.
    # # Dibuja solo en archivos (el backend Agg): sin ventana, así funciona en un servidor o en CI.
    ### END LANG
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ### BEGIN SOLUTION
    path = Path(path)
    sizes = [row["size"] for row in table]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.loglog(sizes, [row["loop_s"] for row in table], "o-", label="Python loop")
    ax.loglog(sizes, [row["vectorized_s"] for row in table], "s-", label="NumPy (vectorised)")
    ax.set_xlabel("array size (elements)")
    ax.set_ylabel("best time (s)")
    ax.set_title("Sum of squares: loop vs one NumPy call")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.savefig(path, format="png")
    plt.close(fig)  # pyplot keeps every open figure alive until it is closed
    return path
    ### END SOLUTION
