"""Laboratorio 06 -- identidad, igualdad y otras trampas.

`is` pregunta si dos nombres son etiquetas del mismo objeto; `==` pregunta si dos valores
son iguales y, entre arrays, responde con un array, un bool por elemento; `hash` decide
la pertenencia a dicts y sets, así que un array mutable, que no tiene un hash estable, no
puede ser clave. Aquí predices qué da una serie de expresiones de ese tipo, comparas
arrays y descartas duplicados sin tropezar con nada de eso, y después te encuentras con
tres trampas más, cada una como un error a propósito seguido de su corrección: borrar de
un dict mientras se recorre, `np.array` de objetos que contienen arrays y la memoria que
cuesta un `deepcopy`.
"""

from __future__ import annotations

import copy
import tracemalloc

import numpy as np

# Tu predicción para cada expresión, con a = np.arange(4.0): "True", "False", "array"
# (devuelve un ndarray), "TypeError" o "ValueError" (al evaluarla se lanza esa
# excepción). Sustituye cada "?".
EQUALITY_QUIZ: dict[str, str] = {
    "a is a": "?",
    "a is a.copy()": "?",
    "a == a.copy()": "?",
    "bool(a == a.copy())": "?",
    "np.array_equal(a, a.copy())": "?",
    "a[::2][1:].base is a": "?",
    "np.ascontiguousarray(a) is a": "?",
    "a.flags.owndata": "?",
    "a[1:].flags.owndata": "?",
    "hash(a.shape) == hash((4,))": "?",
    "{a}": "?",
    "{a.shape: 1}[(4,)] == 1": "?",
    "[1, 2] == [1, 2]": "?",
    "[1, 2] is [1, 2]": "?",
}


def arrays_equal(a: np.ndarray, b: np.ndarray, equal_nan: bool = False) -> bool:
    """Si `a` y `b` tienen la misma forma y elementos iguales, como bool de Python.

    `a == b` aplica broadcasting antes de comparar, así que un array (1,) "es igual" a
    un array (3,) con el mismo valor: hay que comparar antes las formas. NaN no es
    igual a nada, ni siquiera a sí mismo, salvo que `equal_nan` diga lo contrario.
    """
    raise NotImplementedError


def dedupe_arrays(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """La primera aparición de cada array distinto, en orden, como los objetos recibidos.

    Un array no puede ser elemento de un set ni clave de un dict (es mutable y, por
    tanto, no hashable), así que cada uno se describe con una clave hashable: su dtype,
    su forma y sus bytes. Importan las tres cosas: los ceros `int32` y los ceros
    `float32` comparten sus bytes, y un array (4,) y otro (2, 2) también pueden hacerlo.
    """
    raise NotImplementedError


def buggy_prune(d: dict, threshold: float) -> None:
    """El error, a propósito: borra cada clave cuyo valor esté por debajo de `threshold`
    mientras recorre el propio `d`. El dict nota que su tamaño ha cambiado durante el
    bucle y lanza `RuntimeError` justo después del primer borrado."""
    raise NotImplementedError


def prune(d: dict, threshold: float) -> None:
    """La corrección: los mismos borrados en el mismo objeto dict, recorriendo una
    instantánea de sus claves (`list(d)`), así que el bucle nunca recorre el dict que
    cambia. Las claves cuyo valor sea igual o mayor que `threshold` se quedan."""
    raise NotImplementedError


def buggy_stack(tensors: list) -> np.ndarray:
    """El error, a propósito: `np.array` de objetos que guardan arrays (en `.data`) pero
    que no son arrays. NumPy no puede ver dentro de ellos, así que crea un array
    unidimensional de `object` que contiene los objetos: ni un solo número."""
    raise NotImplementedError


def stack_data(tensors: list) -> np.ndarray:
    """La corrección: un único array numérico de forma `(len(tensors), *shape)` a
    partir de cada `.data`, construido con `np.stack`, que copia, así que no comparte
    memoria con los tensores.

    Una lista vacía, o datos de formas distintas, lanza `ValueError` con las formas en
    el mensaje, que es lo que necesita quien llama para encontrar el tensor que no
    encaja.
    """
    raise NotImplementedError


def deepcopy_bytes(obj: object) -> int:
    """Los bytes que reserva `copy.deepcopy(obj)`: el pico que registra `tracemalloc`
    durante la llamada, menos lo que tenía registrado justo antes.

    Primero se reinicia el pico y, al final, se detiene el rastreo (si lo arrancó esta
    llamada), así que cada llamada mide solo su propia copia, se haya ejecutado lo que
    se haya ejecutado antes.
    """
    raise NotImplementedError
