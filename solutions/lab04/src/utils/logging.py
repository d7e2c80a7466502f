### LANG en
"""Structured logs: one JSON object per line, the same whoever configured what.

Imported as `utils.logging`; inside it, `import logging` would still be the standard
library's (imports are absolute), so both can be used side by side.
"""
### LANG es
# """Logs estructurados: un objeto JSON por línea, los mismos sin importar quién configuró qué.
#
# Se importa como `utils.logging`; dentro de él, `import logging` seguiría siendo el módulo de
# la biblioteca estándar (las importaciones son absolutas), así que los dos se pueden usar a
# la vez.
# """
### END LANG

import sys
from typing import TextIO

import structlog


def get_logger(name: str, phase: int = 6, stream: TextIO | None = None) -> structlog.BoundLogger:
    ### LANG en
    """A structlog logger writing one JSON object per line to `stream`.

    Every line holds `event`, `level`, `logger` (= `name`), `phase`, an ISO 8601 UTC
    `timestamp` and the key-values of the call. `stream` defaults to `sys.stdout` as it
    is now, at this call. The processor chain belongs to this logger alone, so global
    `structlog.configure(...)` or `logging.basicConfig(...)` calls change nothing, and
    calling `get_logger` again adds no second writer to anything.
    """
    ### LANG es
    # """Un logger de structlog que escribe un objeto JSON por línea en `stream`.
    #
    # Cada línea lleva `event`, `level`, `logger` (= `name`), `phase`, un `timestamp`
    # ISO 8601 en UTC y los pares clave-valor de la llamada. Por defecto, `stream` es
    # `sys.stdout` tal como está ahora, en esta llamada. La cadena de procesadores es solo de
    # este logger, así que las llamadas globales a `structlog.configure(...)` o
    # `logging.basicConfig(...)` no cambian nada, y volver a llamar a `get_logger` no le
    # añade a nada una segunda salida.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    out = sys.stdout if stream is None else stream
    processors = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.JSONRenderer(),
    ]
    return structlog.wrap_logger(
        structlog.PrintLogger(out),
        processors=processors,
        wrapper_class=structlog.BoundLogger,
        context_class=dict,
        cache_logger_on_first_use=True,
    ).bind(logger=name, phase=phase)
    ### END SOLUTION
