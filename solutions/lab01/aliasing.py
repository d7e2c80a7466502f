### LANG en
"""Lab 01 -- references, mutation and views.

A Python name is a label stuck on an object, not a box holding a value; a NumPy slice is
a window onto the same buffer as the array it came from. Change the object through one
label, or the buffer through one window, and every other label and window sees it.
Here you predict which NumPy expressions share memory, write three aliasing bugs on
purpose (a slice normalised in place, a "backup" that is the same list, a mutable default
argument), then their fixes, an in-place `+=` that is meant to alias, and a counter that
several threads share safely.
"""
### LANG es
# """Laboratorio 01 -- referencias, mutación y vistas.
#
# Un nombre de Python es una etiqueta pegada a un objeto, no una caja que guarda un valor; un
# slice de NumPy es una ventana al mismo búfer que el array del que sale. Cambia el objeto a
# través de una etiqueta, o el búfer a través de una ventana, y todas las demás etiquetas y
# ventanas lo ven. Aquí predices qué expresiones de NumPy comparten memoria, escribes tres
# errores de aliasing a propósito (un slice normalizado in situ, una "copia de seguridad" que
# es la misma lista, un argumento por defecto mutable), después sus soluciones, un `+=` in
# situ en el que el alias es intencionado y un contador que varios hilos comparten de forma
# segura.
# """
### END LANG

from __future__ import annotations

import threading

import numpy as np

### LANG en
# Your prediction for each expression: "view" (shares memory with its source) or "copy",
# with a = np.arange(10.0) and m = np.arange(12.0).reshape(3, 4). Replace every "?".
### LANG es
# # Tu predicción para cada expresión: "view" (vista: comparte memoria con su origen) o
# # "copy" (copia), con a = np.arange(10.0) y m = np.arange(12.0).reshape(3, 4). Sustituye
# # cada "?".
### END LANG
### BEGIN SOLUTION
VIEW_OR_COPY: dict[str, str] = {
    "a[::2]": "view",
    "a[2:5]": "view",
    "a[[0, 2, 4]]": "copy",
    "a[a > 3]": "copy",
    "a.reshape(2, 5)": "view",
    "a.copy()": "copy",
    "a.ravel()": "view",
    "m.T": "view",
    "m.T.ravel()": "copy",
    "m[:, 1]": "view",
    "m[1]": "view",
    "m[[1]]": "copy",
    "np.ascontiguousarray(m[:, ::2])": "copy",
    "m.flatten()": "copy",
    "a[...]": "view",
    "a[None]": "view",
}
### END SOLUTION
### BEGIN STUB
# VIEW_OR_COPY: dict[str, str] = {
#     "a[::2]": "?",
#     "a[2:5]": "?",
#     "a[[0, 2, 4]]": "?",
#     "a[a > 3]": "?",
#     "a.reshape(2, 5)": "?",
#     "a.copy()": "?",
#     "a.ravel()": "?",
#     "m.T": "?",
#     "m.T.ravel()": "?",
#     "m[:, 1]": "?",
#     "m[1]": "?",
#     "m[[1]]": "?",
#     "np.ascontiguousarray(m[:, ::2])": "?",
#     "m.flatten()": "?",
#     "a[...]": "?",
#     "a[None]": "?",
# }
### END STUB


def returns_view(arr: np.ndarray, index) -> bool:
    ### LANG en
    """Whether `arr[index]` is an ndarray sharing memory with `arr`, decided without indexing.

    Basic indexing (ints, slices, `...`, `None`, tuples of them) only changes the offset,
    shape and strides of a window onto the same buffer, so it is a view, unless it picks
    a single element, which comes back as a scalar. Advanced indexing (a list, an array,
    a boolean) picks arbitrary elements, which no offset, shape and strides describe, so
    it gathers them into a new buffer: a copy. (`labkit hint` has a recipe.)
    """
    ### LANG es
    # """Si `arr[index]` es un ndarray que comparte memoria con `arr`, decidiéndolo sin indexar.
    #
    # La indexación básica (enteros, slices, `...`, `None` y tuplas de ellos) solo cambia el
    # offset, la forma y los strides de una ventana al mismo búfer, así que da una vista,
    # salvo que elija un único elemento, que vuelve como escalar. La indexación avanzada (una
    # lista, un array, un booleano) elige elementos arbitrarios, que ningún offset, forma y
    # strides pueden describir, así que los reúne en un búfer nuevo: una copia. (`labkit hint`
    # tiene una receta.)
    # """
    ### END LANG
    ### BEGIN SOLUTION
    parts = index if isinstance(index, tuple) else (index,)
    if any(isinstance(part, bool | np.bool_ | list | np.ndarray) for part in parts):
        return False
    ints = sum(isinstance(part, int | np.integer) for part in parts)
    return not (ints == len(parts) == arr.ndim)
    ### END SOLUTION


def corrupt_through_view(weights: np.ndarray, start: int, stop: int) -> np.ndarray:
    ### LANG en
    """The bug, on purpose: a "temporary normalised copy" that is really a view.

    `weights[start:stop]` is a window onto `weights`; the in-place `-=` and `/=` write
    through it, so the caller's weights now hold the normalised values. Returns the slice.
    """
    ### LANG es
    # """El error, a propósito: una "copia temporal normalizada" que en realidad es una vista.
    #
    # `weights[start:stop]` es una ventana a `weights`; el `-=` y el `/=` in situ escriben a
    # través de ella, así que los pesos de quien llama quedan con los valores normalizados.
    # Devuelve el slice.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    x = weights[start:stop]
    mean, std = x.mean(), x.std()
    x -= mean
    x /= std
    return x
    ### END SOLUTION


def normalized_copy(weights: np.ndarray, start: int, stop: int) -> np.ndarray:
    ### LANG en
    """The fix: `(x - mean) / std` of `weights[start:stop]` in memory of its own.

    The explicit copy is what keeps the in-place arithmetic away from `weights`
    (`np.asarray` would not copy a float array). Population std (ddof=0), as
    `np.std` does by default. An empty slice or one with zero std has no meaningful
    normalisation, so it raises ValueError instead of returning NaN or inf.
    """
    ### LANG es
    # """La solución: `(x - mean) / std` de `weights[start:stop]` en memoria propia.
    #
    # La copia explícita es lo que mantiene la aritmética in situ lejos de `weights`
    # (`np.asarray` no copiaría un array de floats). Std poblacional (ddof=0), como hace
    # `np.std` por defecto. Un slice vacío o con std cero no tiene una normalización con
    # sentido, así que lanza ValueError en lugar de devolver NaN o inf.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    x = np.array(weights[start:stop], dtype=float)
    if x.size == 0:
        raise ValueError(f"weights[{start}:{stop}] is empty: nothing to normalise")
    mean, std = x.mean(), x.std()
    if not std > 0:
        raise ValueError(f"weights[{start}:{stop}] has zero std: cannot normalise")
    x -= mean
    x /= std
    return x
    ### END SOLUTION


def buggy_snapshot(params: list[np.ndarray]) -> list[np.ndarray]:
    ### LANG en
    """The bug, on purpose: a "backup" that is the very same list object.

    Assignment never copies in Python; it adds a label. An in-place optimiser step
    (`p -= lr * g`) on `params` then changes the backup as well.
    """
    ### LANG es
    # """El error, a propósito: una "copia de seguridad" que es justo el mismo objeto lista.
    #
    # En Python la asignación nunca copia: añade una etiqueta. Un paso de optimizador in situ
    # (`p -= lr * g`) sobre `params` cambia entonces también la copia de seguridad.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    backup = params
    return backup
    ### END SOLUTION


def snapshot(params: list[np.ndarray]) -> list[np.ndarray]:
    ### LANG en
    """The fix: a new list holding a new array for every parameter.

    Copying the list alone is not enough: a new list of the same arrays still changes
    with every in-place step. Each array needs memory of its own.
    """
    ### LANG es
    # """La solución: una lista nueva que contiene un array nuevo por cada parámetro.
    #
    # Copiar solo la lista no basta: una lista nueva de los mismos arrays sigue cambiando con
    # cada paso in situ. Cada array necesita memoria propia.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    return [np.array(p, copy=True) for p in params]
    ### END SOLUTION


def buggy_append_history(item, history=[]) -> list:  # noqa: B006
    ### LANG en
    """The bug, on purpose: the default list is built once, when `def` runs.

    Every call that omits `history` appends to that one shared list, so it keeps
    growing from call to call.
    """
    ### LANG es
    # """El error, a propósito: la lista por defecto se crea una sola vez, al ejecutarse `def`.
    #
    # Cada llamada que omite `history` añade a esa única lista compartida, así que crece de
    # llamada en llamada.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    history.append(item)
    return history
    ### END SOLUTION


def append_history(item, history: list | None = None) -> list:
    ### LANG en
    """The fix: `None` as the default, and a fresh list made inside the call.

    A list the caller passes is appended to and returned (the same object), even when
    it is empty -- so test `is None`, not truthiness.
    """
    ### LANG es
    # """La solución: `None` por defecto y una lista nueva creada dentro de la llamada.
    #
    # Una lista que pasa quien llama se amplía y se devuelve (el mismo objeto), también si está
    # vacía -- así que comprueba `is None`, no su valor de verdad.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    if history is None:
        history = []
    history.append(item)
    return history
    ### END SOLUTION


class Counter:
    ### LANG en
    """A counter where `+=` mutates in place and `+` makes a new object.

    `c += n` calls `__iadd__`, whose return value is rebound to `c`; returning `self`
    keeps `c` the same object, so every other label of it sees the change. `c + n`
    leaves `c` alone and returns a new Counter, like `+` on ints.
    """
    ### LANG es
    # """Un contador en el que `+=` modifica in situ y `+` crea un objeto nuevo.
    #
    # `c += n` llama a `__iadd__`, cuyo valor de retorno se vuelve a asignar a `c`; devolver
    # `self` hace que `c` siga siendo el mismo objeto, así que todas sus demás etiquetas ven el
    # cambio. `c + n` no toca `c` y devuelve un Counter nuevo, como `+` con ints.
    # """
    ### END LANG

    def __init__(self) -> None:
        ### BEGIN SOLUTION
        self.value = 0
        ### END SOLUTION

    def __iadd__(self, n) -> Counter:
        ### BEGIN SOLUTION
        self.value += n
        return self
        ### END SOLUTION

    def __add__(self, n) -> Counter:
        ### BEGIN SOLUTION
        result = type(self)()
        result.value = self.value + n
        return result
        ### END SOLUTION


def locked_count(n_threads: int, n_increments: int) -> int:
    ### LANG en
    """`n_threads` threads each add 1 to a shared total `n_increments` times, under a Lock.

    `total += 1` is a read, an add and a write: without the lock two threads can read
    the same value and one increment is lost. Every thread uses the same lock, and all
    are joined before the total is read.
    """
    ### LANG es
    # """`n_threads` hilos suman 1 a un total común `n_increments` veces cada uno, con un Lock.
    #
    # `total += 1` es una lectura, una suma y una escritura: sin el cerrojo, dos hilos pueden
    # leer el mismo valor y se pierde un incremento. Todos los hilos usan el mismo cerrojo, y
    # se espera a todos (join) antes de leer el total.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    if n_threads < 1 or n_increments < 1:
        raise ValueError(
            f"n_threads and n_increments must be positive, got {n_threads} and {n_increments}"
        )
    total = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal total
        for _ in range(n_increments):
            with lock:
                total += 1

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return total
    ### END SOLUTION
