### LANG en
"""Lab 02 -- strides and broadcasting.

Broadcasting aligns shapes from the right, so a (N,) target against (N, 1) predictions
silently becomes an (N, N) table of every cross difference. Here you write that bug on
purpose, then a loss that refuses it, then the rules NumPy itself follows: the
broadcast shape, the strides of C and Fortran arrays, the facts an array is made of,
and a zero-copy sliding window.
"""
### LANG es
# """Laboratorio 02 -- strides y broadcasting.
#
# El broadcasting alinea las formas por la derecha, así que un objetivo (N,) frente a unas
# predicciones (N, 1) se convierte sin avisar en una tabla (N, N) con todas las diferencias
# cruzadas. Aquí escribes ese error a propósito, luego una pérdida que lo rechaza y después
# las reglas que sigue el propio NumPy: la forma resultante del broadcasting, los strides de
# los arrays en orden C y Fortran, los datos de los que está hecho un array y una ventana
# deslizante sin copias.
# """
### END LANG

from __future__ import annotations

import numpy as np


def buggy_mse(y_true, y_pred) -> float:
    ### LANG en
    """The bug, on purpose: the naive mean of squared differences.

    With `y_true` of shape (N,) and `y_pred` of shape (N, 1) this averages all N*N
    cross differences instead of the N aligned pairs.
    """
    ### LANG es
    # """El error, a propósito: la media ingenua de las diferencias al cuadrado.
    #
    # Con `y_true` de forma (N,) y `y_pred` de forma (N, 1), promedia las N*N diferencias
    # cruzadas en lugar de los N pares alineados.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    return float(((np.asarray(y_true) - np.asarray(y_pred)) ** 2).mean())
    ### END SOLUTION


def safe_mse(y_true, y_pred) -> float:
    ### LANG en
    """Mean squared error over N aligned pairs; anything ambiguous raises ValueError.

    Each input must be a vector of the same length N > 0, of shape (N,) or (N, 1).
    The error message names both shapes, so the caller sees what went wrong.
    """
    ### LANG es
    # """Error cuadrático medio sobre N pares alineados; cualquier ambigüedad lanza ValueError.
    #
    # Cada entrada debe ser un vector de la misma longitud N > 0, de forma (N,) o (N, 1).
    # El mensaje de error nombra las dos formas, para que quien llama vea qué ha fallado.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    a, b = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)

    def as_vector(x: np.ndarray) -> np.ndarray | None:
        if x.ndim == 1:
            return x
        if x.ndim == 2 and x.shape[1] == 1:
            return x[:, 0]
        return None

    va, vb = as_vector(a), as_vector(b)
    if va is None or vb is None or va.shape != vb.shape or va.size == 0:
        raise ValueError(
            f"safe_mse needs two vectors of one length N > 0, shaped (N,) or (N, 1); "
            f"got {a.shape} and {b.shape}"
        )
    return float(np.mean((va - vb) ** 2))
    ### END SOLUTION


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ### LANG en
    """The shape NumPy's broadcasting gives `shapes`, computed by hand.

    Align from the right; at each position every size must be equal or 1, and a 1
    stretches to the other size (even to 0). Otherwise raise ValueError.
    """
    ### LANG es
    # """La forma que da el broadcasting de NumPy a `shapes`, calculada a mano.
    #
    # Alinea por la derecha; en cada posición todos los tamaños deben ser iguales o 1, y un 1
    # se estira al otro tamaño (incluso a 0). Si no, lanza ValueError.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis}
        others = sizes - {1}
        if len(others) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast: sizes {sorted(sizes)}")
        result.append(others.pop() if others else 1)
    return tuple(result)
    ### END SOLUTION


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    ### LANG en
    """Byte strides of a C-ordered (row-major) array of `shape`: last axis fastest."""
    ### LANG es
    # """Strides en bytes de un array de forma `shape` en orden C (por filas).
    #
    # El último eje es el que avanza más rápido.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    if 0 in shape:
        return (0,) * len(shape)
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))
    ### END SOLUTION


def f_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    ### LANG en
    """Byte strides of a Fortran-ordered (column-major) array: first axis fastest."""
    ### LANG es
    # """Strides en bytes de un array en orden Fortran (por columnas).
    #
    # El primer eje es el que avanza más rápido.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    if 0 in shape:
        return (0,) * len(shape)
    strides, step = [], itemsize
    for size in shape:
        strides.append(step)
        step *= size
    return tuple(strides)
    ### END SOLUTION


def describe(arr: np.ndarray) -> dict:
    ### LANG en
    """The facts NumPy keeps about `arr`, read off it: no element is looked at.

    `shape`, `strides`, `dtype` (`arr.dtype.str`) and `itemsize` say how to walk the
    memory; `offset` is how many bytes after the first byte of the memory block that
    owns the data (the last ndarray along the `.base` chain, or `arr` itself) the
    array's first element sits; the four flags say how the walk relates to that block.
    """
    ### LANG es
    # """Los datos que NumPy guarda de `arr`, leídos de él: no se mira ningún elemento.
    #
    # `shape`, `strides`, `dtype` (`arr.dtype.str`) e `itemsize` dicen cómo recorrer la
    # memoria; `offset` es a cuántos bytes del primer byte del bloque de memoria dueño de los
    # datos (el último ndarray de la cadena `.base`, o el propio `arr`) está el primer elemento
    # del array; los cuatro flags dicen cómo se relaciona el recorrido con ese bloque.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    owner, node = arr, arr.base
    while node is not None:  # as_strided puts a non-array holder in the chain: walk on
        if isinstance(node, np.ndarray):
            owner = node
        node = node.base
    # byte_bounds gives the lowest byte an array touches; a negative stride puts the
    # first element above it, by (size - 1) * |stride| on that axis.
    lowest = np.lib.array_utils.byte_bounds(arr)[0] - np.lib.array_utils.byte_bounds(owner)[0]
    above = sum((n - 1) * -s for n, s in zip(arr.shape, arr.strides, strict=True) if s < 0)
    return {
        "shape": tuple(int(n) for n in arr.shape),
        "strides": tuple(int(s) for s in arr.strides),
        "dtype": arr.dtype.str,
        "itemsize": int(arr.itemsize),
        "offset": int(lowest + above),
        "c_contiguous": bool(arr.flags.c_contiguous),
        "f_contiguous": bool(arr.flags.f_contiguous),
        "owndata": bool(arr.flags.owndata),
        "writeable": bool(arr.flags.writeable),
    }
    ### END SOLUTION


def sliding_windows(x: np.ndarray, window: int) -> np.ndarray:
    ### LANG en
    """Every length-`window` window of 1-D `x` as a read-only, zero-copy strided view.

    Shape (len(x) - window + 1, window); row i is x[i:i + window]. Built with
    `np.lib.stride_tricks.as_strided`.
    """
    ### LANG es
    # """Las ventanas de longitud `window` de `x` (1-D): una vista de solo lectura, sin copia.
    #
    # Forma (len(x) - window + 1, window); la fila i es x[i:i + window]. Es una vista con
    # strides, construida con `np.lib.stride_tricks.as_strided`.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    if x.ndim != 1:
        raise ValueError(f"sliding_windows needs a 1-D array, got shape {x.shape}")
    if not 1 <= window <= len(x):
        raise ValueError(f"window must be between 1 and {len(x)}, got {window}")
    (stride,) = x.strides
    return np.lib.stride_tricks.as_strided(
        x, shape=(len(x) - window + 1, window), strides=(stride, stride), writeable=False
    )
    ### END SOLUTION
