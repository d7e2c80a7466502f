"""One seed, two mechanisms: seed the globals other code draws from, pass generators down.

`seed_everything` fixes Python's `random`, NumPy's global (legacy) generator and the hash
seed of any Python process this one starts, so libraries that draw from those globals
repeat their draws. Our own code never draws from a global: it takes a
`np.random.Generator` from `make_rng(seed)` and passes it down, and each worker of a
parallel job gets its own independent stream from `worker_rngs(seed, n)`.
"""

import os
import random

import numpy as np


def checked_seed(seed: int) -> int:
    """`seed` itself if it is an `int` (not a `bool`) in `0 ..= 2**32 - 1`, the range NumPy
    and `PYTHONHASHSEED` both accept; otherwise `TypeError` or `ValueError`. The rule
    `seed_everything` and `make_rng` share."""
    raise NotImplementedError


def seed_everything(seed: int) -> int:
    """Seed `random`, NumPy's global generator and `PYTHONHASHSEED`; return `seed`.

    `seed` must be an `int` (not a `bool`) in `0 ..= 2**32 - 1`, the range NumPy and
    `PYTHONHASHSEED` both accept: anything else raises `TypeError` or `ValueError`
    before any state changes.
    """
    raise NotImplementedError


def make_rng(seed: int) -> np.random.Generator:
    """The generator our own code draws from: `np.random.default_rng(seed)`.

    A Generator is an object with its own state, so no `np.random.seed(...)` or
    `random.seed(...)` anywhere, before or after, changes its draws. Same seed rules as
    `seed_everything`.
    """
    raise NotImplementedError


def worker_rngs(seed: int, n: int) -> list[np.random.Generator]:
    """`n` independent generators, one per worker, spawned from one `SeedSequence(seed)`.

    Spawning gives streams that do not overlap, unlike `seed + i`, and the first `k` of
    `n` are the same whatever `n` is, so adding a worker changes no one else's draws.
    """
    raise NotImplementedError
