"""Logs estructurados: un objeto JSON por línea, los mismos sin importar quién configuró qué.

Se importa como `utils.logging`; dentro de él, `import logging` seguiría siendo el módulo de
la biblioteca estándar (las importaciones son absolutas), así que los dos se pueden usar a
la vez.
"""

import sys
from typing import TextIO

import numpy as np
import structlog


def json_default(value: object) -> object:
    """El `default=` del renderizador JSON: lo que escribe para un valor sin tipo en JSON.

    Los escalares de NumPy pasan a ser los de Python (`np.float32` un float igual a él,
    `np.int64` un int, `np.bool_` un bool) y los arrays, listas (anidadas) de ellos, así
    que una línea de log lleva números con los que quien la lee puede calcular, no su repr
    dentro de una cadena. Cualquier otra cosa se escribe como su repr, como hace el
    `default` del propio structlog.
    """
    raise NotImplementedError


def get_logger(name: str, phase: int = 6, stream: TextIO | None = None) -> structlog.BoundLogger:
    """Un logger de structlog que escribe un objeto JSON por línea en `stream`.

    Cada línea lleva `event`, `level`, `logger` (= `name`), `phase`, un `timestamp`
    ISO 8601 en UTC y los pares clave-valor de la llamada, con los números y arrays de
    NumPy como números y listas de JSON (`json_default`). Por defecto, `stream` es
    `sys.stdout` tal como está ahora, en esta llamada. La cadena de procesadores es solo de
    este logger, así que las llamadas globales a `structlog.configure(...)` o
    `logging.basicConfig(...)` no cambian nada, y volver a llamar a `get_logger` no le
    añade a nada una segunda salida.
    """
    raise NotImplementedError
