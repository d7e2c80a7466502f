### LANG en
"""Lab 06 -- identity, equality and the other pitfalls.

`is` asks whether two names label the same object; `==` asks whether two values are
equal, and on arrays it answers with an array, one bool per element; `hash` decides
membership in dicts and sets, so a mutable array, which has no stable hash, cannot be a
key. Here you predict what a row of such expressions gives, compare and deduplicate
arrays without tripping over any of that, then meet three more pitfalls, each as a bug
on purpose followed by its fix: deleting from a dict while iterating it, `np.array` of
objects that hold arrays, and the memory a `deepcopy` costs.
"""
### LANG es
# """Laboratorio 06 -- identidad, igualdad y otras trampas.
#
# `is` pregunta si dos nombres son etiquetas del mismo objeto; `==` pregunta si dos valores
# son iguales y, entre arrays, responde con un array, un bool por elemento; `hash` decide
# la pertenencia a dicts y sets, así que un array mutable, que no tiene un hash estable, no
# puede ser clave. Aquí predices qué da una serie de expresiones de ese tipo, comparas
# arrays y descartas duplicados sin tropezar con nada de eso, y después te encuentras con
# tres trampas más, cada una como un error a propósito seguido de su corrección: borrar de
# un dict mientras se recorre, `np.array` de objetos que contienen arrays y la memoria que
# cuesta un `deepcopy`.
# """
### END LANG

from __future__ import annotations

import copy
import tracemalloc

import numpy as np

### LANG en
# Your prediction for each expression, with a = np.arange(4.0): "True", "False", "array"
# (an ndarray comes back), "TypeError" or "ValueError" (evaluating it raises that).
# Replace every "?".
### LANG es
# # Tu predicción para cada expresión, con a = np.arange(4.0): "True", "False", "array"
# # (devuelve un ndarray), "TypeError" o "ValueError" (al evaluarla se lanza esa
# # excepción). Sustituye cada "?".
### END LANG
### BEGIN SOLUTION
EQUALITY_QUIZ: dict[str, str] = {
    "a is a": "True",
    "a is a.copy()": "False",
    "a == a.copy()": "array",
    "bool(a == a.copy())": "ValueError",
    "np.array_equal(a, a.copy())": "True",
    "a[::2][1:].base is a": "True",
    "np.ascontiguousarray(a) is a": "True",
    "a.flags.owndata": "True",
    "a[1:].flags.owndata": "False",
    "hash(a.shape) == hash((4,))": "True",
    "{a}": "TypeError",
    "{a.shape: 1}[(4,)] == 1": "True",
    "[1, 2] == [1, 2]": "True",
    "[1, 2] is [1, 2]": "False",
}
### END SOLUTION
### BEGIN STUB
# EQUALITY_QUIZ: dict[str, str] = {
#     "a is a": "?",
#     "a is a.copy()": "?",
#     "a == a.copy()": "?",
#     "bool(a == a.copy())": "?",
#     "np.array_equal(a, a.copy())": "?",
#     "a[::2][1:].base is a": "?",
#     "np.ascontiguousarray(a) is a": "?",
#     "a.flags.owndata": "?",
#     "a[1:].flags.owndata": "?",
#     "hash(a.shape) == hash((4,))": "?",
#     "{a}": "?",
#     "{a.shape: 1}[(4,)] == 1": "?",
#     "[1, 2] == [1, 2]": "?",
#     "[1, 2] is [1, 2]": "?",
# }
### END STUB


def arrays_equal(a: np.ndarray, b: np.ndarray, equal_nan: bool = False) -> bool:
    ### LANG en
    """Whether `a` and `b` have the same shape and equal elements, as a Python bool.

    `a == b` broadcasts before it compares, so a (1,) array "equals" a (3,) array of
    the same value; the shapes must be compared first. NaN is unequal to everything,
    itself included, unless `equal_nan` says otherwise.
    """
    ### LANG es
    # """Si `a` y `b` tienen la misma forma y elementos iguales, como bool de Python.
    #
    # `a == b` aplica broadcasting antes de comparar, así que un array (1,) "es igual" a
    # un array (3,) con el mismo valor: hay que comparar antes las formas. NaN no es
    # igual a nada, ni siquiera a sí mismo, salvo que `equal_nan` diga lo contrario.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    same = a == b
    if equal_nan:
        same |= np.isnan(a) & np.isnan(b)
    return bool(same.all())
    ### END SOLUTION


def dedupe_arrays(arrays: list[np.ndarray]) -> list[np.ndarray]:
    ### LANG en
    """The first occurrence of each distinct array, in order, as the objects given.

    An array cannot be a set member or a dict key (it is mutable, hence unhashable), so
    each one is described by a hashable key: its dtype, its shape and its bytes. All
    three matter: `int32` zeros and `float32` zeros share their bytes, a (4,) and a
    (2, 2) array may too.
    """
    ### LANG es
    # """La primera aparición de cada array distinto, en orden, como los objetos recibidos.
    #
    # Un array no puede ser elemento de un set ni clave de un dict (es mutable y, por
    # tanto, no hashable), así que cada uno se describe con una clave hashable: su dtype,
    # su forma y sus bytes. Importan las tres cosas: los ceros `int32` y los ceros
    # `float32` comparten sus bytes, y un array (4,) y otro (2, 2) también pueden hacerlo.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    seen: set[tuple[str, tuple[int, ...], bytes]] = set()
    kept = []
    for arr in arrays:
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in seen:
            seen.add(key)
            kept.append(arr)
    return kept
    ### END SOLUTION


def buggy_prune(d: dict, threshold: float) -> None:
    ### LANG en
    """The bug, on purpose: deletes every key whose value is below `threshold` while
    iterating over `d` itself. The dict notices that its size changed under the loop
    and raises `RuntimeError` right after the first deletion."""
    ### LANG es
    # """El error, a propósito: borra cada clave cuyo valor esté por debajo de `threshold`
    # mientras recorre el propio `d`. El dict nota que su tamaño ha cambiado durante el
    # bucle y lanza `RuntimeError` justo después del primer borrado."""
    ### END LANG
    ### BEGIN SOLUTION
    for key in d:
        if d[key] < threshold:
            del d[key]
    ### END SOLUTION


def prune(d: dict, threshold: float) -> None:
    ### LANG en
    """The fix: the same deletions on the same dict object, looping over a snapshot
    of its keys (`list(d)`), so the loop never walks the dict it changes. Keys whose
    value is at or above `threshold` stay."""
    ### LANG es
    # """La corrección: los mismos borrados en el mismo objeto dict, recorriendo una
    # instantánea de sus claves (`list(d)`), así que el bucle nunca recorre el dict que
    # cambia. Las claves cuyo valor sea igual o mayor que `threshold` se quedan."""
    ### END LANG
    ### BEGIN SOLUTION
    for key in list(d):
        if d[key] < threshold:
            del d[key]
    ### END SOLUTION


def buggy_stack(tensors: list) -> np.ndarray:
    ### LANG en
    """The bug, on purpose: `np.array` of objects that hold arrays (in `.data`) but are
    not arrays themselves. NumPy cannot see inside them, so it makes a one-dimensional
    array of `object` holding the objects: no numbers at all."""
    ### LANG es
    # """El error, a propósito: `np.array` de objetos que guardan arrays (en `.data`) pero
    # que no son arrays. NumPy no puede ver dentro de ellos, así que crea un array
    # unidimensional de `object` que contiene los objetos: ni un solo número."""
    ### END LANG
    ### BEGIN SOLUTION
    return np.array(tensors)
    ### END SOLUTION


def stack_data(tensors: list) -> np.ndarray:
    ### LANG en
    """The fix: one numeric array of shape `(len(tensors), *shape)` from each `.data`,
    built with `np.stack`, which copies, so it shares no memory with the tensors.

    An empty list or data of different shapes raises `ValueError` naming the shapes,
    which is what the caller needs to find the odd tensor out.
    """
    ### LANG es
    # """La corrección: un único array numérico de forma `(len(tensors), *shape)` a
    # partir de cada `.data`, construido con `np.stack`, que copia, así que no comparte
    # memoria con los tensores.
    #
    # Una lista vacía, o datos de formas distintas, lanza `ValueError` con las formas en
    # el mensaje, que es lo que necesita quien llama para encontrar el tensor que no
    # encaja.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    shapes = [np.shape(t.data) for t in tensors]
    if not shapes or len(set(shapes)) != 1:
        raise ValueError(f"stack_data needs one or more .data of one shape, got {shapes}")
    return np.stack([t.data for t in tensors])
    ### END SOLUTION


def deepcopy_bytes(obj: object) -> int:
    ### LANG en
    """The bytes `copy.deepcopy(obj)` allocates: the peak that `tracemalloc` traces
    during the call, minus what it traced just before.

    The peak is reset first and tracing stopped after (when this call started it), so
    each call measures its own copy only, whatever ran before it.
    """
    ### LANG es
    # """Los bytes que reserva `copy.deepcopy(obj)`: el pico que registra `tracemalloc`
    # durante la llamada, menos lo que tenía registrado justo antes.
    #
    # Primero se reinicia el pico y, al final, se detiene el rastreo (si lo arrancó esta
    # llamada), así que cada llamada mide solo su propia copia, se haya ejecutado lo que
    # se haya ejecutado antes.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    copy.deepcopy(obj)
    peak = tracemalloc.get_traced_memory()[1]
    if started:
        tracemalloc.stop()
    return peak - before
    ### END SOLUTION
