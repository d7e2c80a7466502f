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

import numpy as np
import structlog


def json_default(value: object) -> object:
    ### LANG en
    """The JSON renderer's `default=`: what it writes for a value JSON has no type for.

    NumPy scalars become Python's (`np.float32` a float equal to it, `np.int64` an int,
    `np.bool_` a bool) and arrays (nested) lists of them, so a log line holds numbers a
    reader can compute with, not their repr in a string. Anything else is written as its
    repr, as structlog's own default does.
    """
    ### LANG es
    # """El `default=` del renderizador JSON: lo que escribe para un valor sin tipo en JSON.
    #
    # Los escalares de NumPy pasan a ser los de Python (`np.float32` un float igual a él,
    # `np.int64` un int, `np.bool_` un bool) y los arrays, listas (anidadas) de ellos, así
    # que una línea de log lleva números con los que quien la lee puede calcular, no su repr
    # dentro de una cadena. Cualquier otra cosa se escribe como su repr, como hace el
    # `default` del propio structlog.
    # """
    ### END LANG
    ### BEGIN SOLUTION
    return value.tolist() if isinstance(value, np.generic | np.ndarray) else repr(value)
    ### END SOLUTION


def get_logger(name: str, phase: int = 6, stream: TextIO | None = None) -> structlog.BoundLogger:
    ### LANG en
    """A structlog logger writing one JSON object per line to `stream`.

    Every line holds `event`, `level`, `logger` (= `name`), `phase`, an ISO 8601 UTC
    `timestamp` and the key-values of the call, NumPy numbers and arrays as JSON numbers
    and lists (`json_default`). `stream` defaults to `sys.stdout` as it is now, at this
    call. The processor chain belongs to this logger alone, so global
    `structlog.configure(...)` or `logging.basicConfig(...)` calls change nothing, and
    calling `get_logger` again adds no second writer to anything.
    """
    ### LANG es
    # """Un logger de structlog que escribe un objeto JSON por línea en `stream`.
    #
    # Cada línea lleva `event`, `level`, `logger` (= `name`), `phase`, un `timestamp`
    # ISO 8601 en UTC y los pares clave-valor de la llamada, con los números y arrays de
    # NumPy como números y listas de JSON (`json_default`). Por defecto, `stream` es
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
        structlog.processors.JSONRenderer(default=json_default),
    ]
    return structlog.wrap_logger(
        structlog.PrintLogger(out), processors=processors, wrapper_class=structlog.BoundLogger,
        context_class=dict, cache_logger_on_first_use=True,
    ).bind(logger=name, phase=phase)
    ### END SOLUTION
