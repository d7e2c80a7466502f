"""Una semilla, dos mecanismos: sembrar los globales que usa otro código y pasar generadores.

`seed_everything` fija `random` de Python, el generador global (heredado) de NumPy y la
semilla del hash de cualquier proceso Python que lance este, para que las bibliotecas que
sacan valores de esos globales vuelvan a sacar los mismos. Nuestro propio código nunca saca
valores de un global: toma un `np.random.Generator` de `make_rng(seed)` y se lo pasa a quien
lo necesite, y cada worker de un trabajo en paralelo recibe su propia secuencia
independiente de `worker_rngs(seed, n)`.
"""

import os
import random

import numpy as np


def checked_seed(seed: int) -> int:
    """`seed` tal cual si es un `int` (no un `bool`) en `0 ..= 2**32 - 1`, el rango que
    aceptan tanto NumPy como `PYTHONHASHSEED`; si no, `TypeError` o `ValueError`. La regla
    que comparten `seed_everything` y `make_rng`."""
    raise NotImplementedError


def seed_everything(seed: int) -> int:
    """Siembra `random`, el generador global de NumPy y `PYTHONHASHSEED`; devuelve `seed`.

    `seed` debe ser un `int` (no un `bool`) en `0 ..= 2**32 - 1`, el rango que aceptan
    tanto NumPy como `PYTHONHASHSEED`: cualquier otra cosa lanza `TypeError` o
    `ValueError` antes de que cambie ningún estado.
    """
    raise NotImplementedError


def make_rng(seed: int) -> np.random.Generator:
    """El generador del que saca valores nuestro propio código: `np.random.default_rng(seed)`.

    Un Generator es un objeto con su propio estado, así que ningún `np.random.seed(...)` ni
    `random.seed(...)`, en ningún sitio, antes o después, cambia sus valores. Las mismas
    reglas de semilla que `seed_everything`.
    """
    raise NotImplementedError


def worker_rngs(seed: int, n: int) -> list[np.random.Generator]:
    """`n` generadores independientes, uno por worker, hijos de un mismo `SeedSequence(seed)`.

    Los hijos de `spawn` dan secuencias que no se solapan, a diferencia de `seed + i`, y los
    `k` primeros de `n` son los mismos sea cual sea `n`, así que añadir un worker no cambia
    los valores de ningún otro.
    """
    raise NotImplementedError
