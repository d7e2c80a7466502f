"""One call that makes a run repeatable: seed every source of randomness we use.

Python's `random`, NumPy's global generator and the hash seed of any Python process this
one starts are all fixed from a single integer, so two runs with the same seed draw the
same numbers.
"""

from __future__ import annotations

import os
import random

import numpy as np


def seed_everything(seed: int) -> int:
    """Seed `random`, NumPy's global generator and `PYTHONHASHSEED`; return `seed`.

    `seed` must be an `int` (not a `bool`) in `0 ..= 2**32 - 1`, the range NumPy and
    `PYTHONHASHSEED` both accept: anything else raises `TypeError` or `ValueError`
    before any state changes.
    """
    raise NotImplementedError
