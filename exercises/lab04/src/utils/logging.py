"""Structured logs: one JSON object per line, the same whoever configured what.

Imported as `utils.logging`; inside it, `import logging` would still be the standard
library's (imports are absolute), so both can be used side by side.
"""

import sys
from typing import TextIO

import numpy as np
import structlog


def json_default(value: object) -> object:
    """The JSON renderer's `default=`: what it writes for a value JSON has no type for.

    NumPy scalars become Python's (`np.float32` a float equal to it, `np.int64` an int,
    `np.bool_` a bool) and arrays (nested) lists of them, so a log line holds numbers a
    reader can compute with, not their repr in a string. Anything else is written as its
    repr, as structlog's own default does.
    """
    raise NotImplementedError


def get_logger(name: str, phase: int = 6, stream: TextIO | None = None) -> structlog.BoundLogger:
    """A structlog logger writing one JSON object per line to `stream`.

    Every line holds `event`, `level`, `logger` (= `name`), `phase`, an ISO 8601 UTC
    `timestamp` and the key-values of the call, NumPy numbers and arrays as JSON numbers
    and lists (`json_default`). `stream` defaults to `sys.stdout` as it is now, at this
    call. The processor chain belongs to this logger alone, so global
    `structlog.configure(...)` or `logging.basicConfig(...)` calls change nothing, and
    calling `get_logger` again adds no second writer to anything.
    """
    raise NotImplementedError
