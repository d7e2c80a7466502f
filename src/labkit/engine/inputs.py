"""A failing check's input, as a student can read it: the call the grader made.

A property-based check fails on one generated example; the most useful thing to show
is what the student's function was called with (never what it should have returned:
that stays in the grader). The values are the grader's own, so they are shown as the
grader built them, shortened so that one input never floods the table.
"""

from __future__ import annotations

import reprlib
from typing import Any

import numpy as np

MAX_CHARS = 160

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxtuple, _REPR.maxlist, _REPR.maxdict = 4, 8, 8, 8
_REPR.maxstring, _REPR.maxother = 40, 80


def call_text(name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    """`name(arg, ..., key=value)` in at most `MAX_CHARS` characters."""
    with np.printoptions(threshold=12, edgeitems=2, precision=4, linewidth=10_000):
        parts = [_REPR.repr(a) for a in args] + [f"{k}={_REPR.repr(v)}" for k, v in kwargs.items()]
    text = " ".join(f"{name}({', '.join(parts)})".split())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
