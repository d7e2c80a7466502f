"""Laboratorio 01 -- referencias, mutación y vistas.

Un nombre de Python es una etiqueta pegada a un objeto, no una caja que guarda un valor; un
slice de NumPy es una ventana al mismo búfer que el array del que sale. Cambia el objeto a
través de una etiqueta, o el búfer a través de una ventana, y todas las demás etiquetas y
ventanas lo ven. Aquí predices qué expresiones de NumPy comparten memoria, escribes tres
errores de aliasing a propósito (un slice normalizado in situ, una "copia de seguridad" que
es la misma lista, un argumento por defecto mutable), después sus soluciones, un `+=` in
situ en el que el alias es intencionado y un contador que varios hilos comparten de forma
segura.
"""

from __future__ import annotations

import threading

import numpy as np

# Tu predicción para cada expresión: "view" (vista: comparte memoria con su origen) o
# "copy" (copia), con a = np.arange(10.0) y m = np.arange(12.0).reshape(3, 4). Sustituye
# cada "?".
VIEW_OR_COPY: dict[str, str] = {
    "a[::2]": "?",
    "a[2:5]": "?",
    "a[[0, 2, 4]]": "?",
    "a[a > 3]": "?",
    "a.reshape(2, 5)": "?",
    "a.copy()": "?",
    "a.ravel()": "?",
    "m.T": "?",
    "m.T.ravel()": "?",
    "m[:, 1]": "?",
    "m[1]": "?",
    "m[[1]]": "?",
    "np.ascontiguousarray(m[:, ::2])": "?",
    "m.flatten()": "?",
    "a[...]": "?",
    "a[None]": "?",
}


def returns_view(arr: np.ndarray, index) -> bool:
    """Si `arr[index]` es un ndarray que comparte memoria con `arr`, decidiéndolo sin indexar.

    La indexación básica (enteros, slices, `...`, `None` y tuplas de ellos) solo cambia el
    offset, la forma y los strides de una ventana al mismo búfer, así que da una vista,
    salvo que elija un único elemento, que vuelve como escalar. La indexación avanzada (una
    lista, un array, un booleano) elige elementos arbitrarios, que ningún offset, forma y
    strides pueden describir, así que los reúne en un búfer nuevo: una copia. (`labkit hint`
    tiene una receta.)
    """
    raise NotImplementedError


def corrupt_through_view(weights: np.ndarray, start: int, stop: int) -> np.ndarray:
    """El error, a propósito: una "copia temporal normalizada" que en realidad es una vista.

    `weights[start:stop]` es una ventana a `weights`; el `-=` y el `/=` in situ escriben a
    través de ella, así que los pesos de quien llama quedan con los valores normalizados.
    Devuelve el slice.
    """
    raise NotImplementedError


def normalized_copy(weights: np.ndarray, start: int, stop: int) -> np.ndarray:
    """La solución: `(x - mean) / std` de `weights[start:stop]` en memoria propia.

    La copia explícita es lo que mantiene la aritmética in situ lejos de `weights`
    (`np.asarray` no copiaría un array de floats). Std poblacional (ddof=0), como hace
    `np.std` por defecto. Un slice vacío o con std cero no tiene una normalización con
    sentido, así que lanza ValueError en lugar de devolver NaN o inf.
    """
    raise NotImplementedError


def buggy_snapshot(params: list[np.ndarray]) -> list[np.ndarray]:
    """El error, a propósito: una "copia de seguridad" que es justo el mismo objeto lista.

    En Python la asignación nunca copia: añade una etiqueta. Un paso de optimizador in situ
    (`p -= lr * g`) sobre `params` cambia entonces también la copia de seguridad.
    """
    raise NotImplementedError


def snapshot(params: list[np.ndarray]) -> list[np.ndarray]:
    """La solución: una lista nueva que contiene un array nuevo por cada parámetro.

    Copiar solo la lista no basta: una lista nueva de los mismos arrays sigue cambiando con
    cada paso in situ. Cada array necesita memoria propia.
    """
    raise NotImplementedError


def buggy_append_history(item, history=[]) -> list:  # noqa: B006
    """El error, a propósito: la lista por defecto se crea una sola vez, al ejecutarse `def`.

    Cada llamada que omite `history` añade a esa única lista compartida, así que crece de
    llamada en llamada.
    """
    raise NotImplementedError


def append_history(item, history: list | None = None) -> list:
    """La solución: `None` por defecto y una lista nueva creada dentro de la llamada.

    Una lista que pasa quien llama se amplía y se devuelve (el mismo objeto), también si está
    vacía -- así que comprueba `is None`, no su valor de verdad.
    """
    raise NotImplementedError


class Counter:
    """Un contador en el que `+=` modifica in situ y `+` crea un objeto nuevo.

    `c += n` llama a `__iadd__`, cuyo valor de retorno se vuelve a asignar a `c`; devolver
    `self` hace que `c` siga siendo el mismo objeto, así que todas sus demás etiquetas ven el
    cambio. `c + n` no toca `c` y devuelve un Counter nuevo, como `+` con ints.
    """

    def __init__(self) -> None:
        raise NotImplementedError

    def __iadd__(self, n) -> Counter:
        raise NotImplementedError

    def __add__(self, n) -> Counter:
        raise NotImplementedError


def locked_count(n_threads: int, n_increments: int) -> int:
    """`n_threads` hilos suman 1 a un total común `n_increments` veces cada uno, con un Lock.

    `total += 1` es una lectura, una suma y una escritura: sin el cerrojo, dos hilos pueden
    leer el mismo valor y se pierde un incremento. Todos los hilos usan el mismo cerrojo, y
    se espera a todos (join) antes de leer el total.
    """
    raise NotImplementedError
