"""Logs estructurados: un objeto JSON por línea, los mismos sin importar quién configuró qué.

Se importa como `utils.logging`; dentro de él, `import logging` seguiría siendo el módulo de
la biblioteca estándar (las importaciones son absolutas), así que los dos se pueden usar a
la vez.
"""

import sys
from typing import TextIO

import structlog


def get_logger(name: str, phase: int = 6, stream: TextIO | None = None) -> structlog.BoundLogger:
    """Un logger de structlog que escribe un objeto JSON por línea en `stream`.

    Cada línea lleva `event`, `level`, `logger` (= `name`), `phase`, un `timestamp`
    ISO 8601 en UTC y los pares clave-valor de la llamada. Por defecto, `stream` es
    `sys.stdout` tal como está ahora, en esta llamada. La cadena de procesadores es solo de
    este logger, así que las llamadas globales a `structlog.configure(...)` o
    `logging.basicConfig(...)` no cambian nada, y volver a llamar a `get_logger` no le
    añade a nada una segunda salida.
    """
    raise NotImplementedError
