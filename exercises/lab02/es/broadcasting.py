"""Laboratorio 02 -- strides y broadcasting.

El broadcasting alinea las formas por la derecha, así que un objetivo (N,) frente a unas
predicciones (N, 1) se convierte sin avisar en una tabla (N, N) con todas las diferencias
cruzadas. Aquí escribes ese error a propósito, luego una pérdida que lo rechaza y después
las reglas que sigue el propio NumPy: la forma resultante del broadcasting, los strides de
los arrays en orden C y Fortran, los datos de los que está hecho un array y una ventana
deslizante sin copias.
"""

from __future__ import annotations

import numpy as np


def buggy_mse(y_true, y_pred) -> float:
    """El error, a propósito: la media ingenua de las diferencias al cuadrado.

    Con `y_true` de forma (N,) y `y_pred` de forma (N, 1), promedia las N*N diferencias
    cruzadas en lugar de los N pares alineados.
    """
    raise NotImplementedError


def safe_mse(y_true, y_pred) -> float:
    """Error cuadrático medio sobre N pares alineados; cualquier ambigüedad lanza ValueError.

    Cada entrada debe ser un vector de la misma longitud N > 0, de forma (N,) o (N, 1).
    El mensaje de error nombra las dos formas, para que quien llama vea qué ha fallado.
    """
    raise NotImplementedError


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """La forma que da el broadcasting de NumPy a `shapes`, calculada a mano.

    Alinea por la derecha; en cada posición todos los tamaños deben ser iguales o 1, y un 1
    se estira al otro tamaño (incluso a 0). Si no, lanza ValueError.
    """
    raise NotImplementedError


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Strides en bytes de un array de forma `shape` en orden C (por filas).

    El último eje es el que avanza más rápido.
    """
    raise NotImplementedError


def f_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Strides en bytes de un array en orden Fortran (por columnas).

    El primer eje es el que avanza más rápido.
    """
    raise NotImplementedError


def describe(arr: np.ndarray) -> dict:
    """Los datos que NumPy guarda de `arr`, leídos de él: no se mira ningún elemento.

    `shape`, `strides`, `dtype` (`arr.dtype.str`) e `itemsize` dicen cómo recorrer la
    memoria; `offset` es a cuántos bytes del primer byte del bloque de memoria dueño de los
    datos (el último ndarray de la cadena `.base`, o el propio `arr`) está el primer elemento
    del array; los cuatro flags dicen cómo se relaciona el recorrido con ese bloque.
    """
    raise NotImplementedError


def sliding_windows(x: np.ndarray, window: int) -> np.ndarray:
    """Las ventanas de longitud `window` de `x` (1-D): una vista de solo lectura, sin copia.

    Forma (len(x) - window + 1, window); la fila i es x[i:i + window]. Es una vista con
    strides, construida con `np.lib.stride_tricks.as_strided`.
    """
    raise NotImplementedError
