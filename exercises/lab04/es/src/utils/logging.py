"""Structured logs: one JSON object per line, the same whoever configured what.

Imported as `utils.logging`; inside it, `import logging` would still be the standard
library's (imports are absolute), so both can be used side by side.
"""

import sys
from typing import TextIO

import structlog


def get_logger(name: str, phase: int = 6, stream: TextIO | None = None) -> structlog.BoundLogger:
    """A structlog logger writing one JSON object per line to `stream`.

    Every line holds `event`, `level`, `logger` (= `name`), `phase`, an ISO 8601 UTC
    `timestamp` and the key-values of the call. `stream` defaults to `sys.stdout` as it
    is now, at this call. The processor chain belongs to this logger alone, so global
    `structlog.configure(...)` or `logging.basicConfig(...)` calls change nothing, and
    calling `get_logger` again adds no second writer to anything.
    """
    raise NotImplementedError
