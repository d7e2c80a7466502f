### LANG en
"""One seed, two mechanisms: seed the globals other code draws from, pass generators down.

`seed_everything` fixes Python's `random`, NumPy's global (legacy) generator and the hash
seed of any Python process this one starts, so libraries that draw from those globals
repeat their draws. Our own code never draws from a global: it takes a
`np.random.Generator` from `make_rng(seed)` and passes it down, and each worker of a
parallel job gets its own independent stream from `worker_rngs(seed, n)`.
"""
### LANG es
# """Una semilla, dos mecanismos: sembrar los globales que usa otro código y pasar generadores.
#
# `seed_everything` fija `random` de Python, el generador global (heredado) de NumPy y la
# semilla del hash de cualquier proceso Python que lance este, para que las bibliotecas que
# sacan valores de esos globales vuelvan a sacar los mismos. Nuestro propio código nunca saca
# valores de un global: toma un `np.random.Generator` de `make_rng(seed)` y se lo pasa a quien
# lo necesite, y cada worker de un trabajo en paralelo recibe su propia secuencia
# independiente de `worker_rngs(seed, n)`.
# """
### END LANG

import os
import random

import numpy as np


def checked_seed(seed: int) -> int:
    ### LANG en
    """`seed` itself if it is an `int` (not a `bool`) in `0 ..= 2**32 - 1`, the range NumPy
    and `PYTHONHASHSEED` both accept; otherwise `TypeError` or `ValueError`. The rule
    `seed_everything` and `make_rng` share."""
    ### LANG es
    # """`seed` tal cual si es un `int` (no un `bool`) en `0 ..= 2**32 - 1`, el rango que
    # aceptan tanto NumPy como `PYTHONHASHSEED`; si no, `TypeError` o `ValueError`. La regla
    # que comparten `seed_everything` y `make_rng`."""
    ### END LANG
    ### BEGIN SOLUTION
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if not 0 <= seed <= 2**32 - 1:
        raise ValueError(f"seed must lie in 0 ..= 2**32 - 1, got {seed}")
    return seed
    ### END SOLUTION


def seed_everything(seed: int) -> int:
    ### LANG en
    """Seed `random`, NumPy's global generator and `PYTHONHASHSEED`; return `seed`.

    `seed` must be an `int` (not a `bool`) in `0 ..= 2**32 - 1`, the range NumPy and
    `PYTHONHASHSEED` both accept: anything else raises `TypeError` or `ValueError`
    before any state changes.
    """
    ### LANG es
    # """Siembra `random`, el generador global de NumPy y `PYTHONHASHSEED`; devuelve `seed`.
    #
    # `seed` debe ser un `int` (no un `bool`) en `0 ..= 2**32 - 1`, el rango que aceptan
    # tanto NumPy como `PYTHONHASHSEED`: cualquier otra cosa lanza `TypeError` o
    # `ValueError` antes de que cambie ningún estado.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    checked_seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    return seed
    ### END SOLUTION


def make_rng(seed: int) -> np.random.Generator:
    ### LANG en
    """The generator our own code draws from: `np.random.default_rng(seed)`.

    A Generator is an object with its own state, so no `np.random.seed(...)` or
    `random.seed(...)` anywhere, before or after, changes its draws. Same seed rules as
    `seed_everything`.
    """
    ### LANG es
    # """El generador del que saca valores nuestro propio código: `np.random.default_rng(seed)`.
    #
    # Un Generator es un objeto con su propio estado, así que ningún `np.random.seed(...)` ni
    # `random.seed(...)`, en ningún sitio, antes o después, cambia sus valores. Las mismas
    # reglas de semilla que `seed_everything`.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    return np.random.default_rng(checked_seed(seed))
    ### END SOLUTION


def worker_rngs(seed: int, n: int) -> list[np.random.Generator]:
    ### LANG en
    """`n` independent generators, one per worker, spawned from one `SeedSequence(seed)`.

    Spawning gives streams that do not overlap, unlike `seed + i`, and the first `k` of
    `n` are the same whatever `n` is, so adding a worker changes no one else's draws.
    """
    ### LANG es
    # """`n` generadores independientes, uno por worker, hijos de un mismo `SeedSequence(seed)`.
    #
    # Los hijos de `spawn` dan secuencias que no se solapan, a diferencia de `seed + i`, y los
    # `k` primeros de `n` son los mismos sea cual sea `n`, así que añadir un worker no cambia
    # los valores de ningún otro.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]
    ### END SOLUTION
