"""Memory the grader maps too: inputs whose fate the trusted side sees for itself.

Each worker is started with memory that both it and the grader map (on Linux a memfd,
`labkit.sandbox.linux.memfd.make_arena`). The grader copies an input into it
(`Arena.place`) and passes the `SharedArray` as an argument: it travels as a place
(`codec.Shared`), and the worker's decoder turns it into an ndarray over the same bytes.
After the call the grader reads those bytes itself, so
"the input was normalised in place and the rest untouched" is a fact it observes, not a
report from beside the student's code; and by writing into the input and asking for a
kept result again (`Student.keep` / `Student.kept`), it sees whether that result lives in
the input's memory.

The arena belongs to one worker: placements are bounded by its size, zeroed when the
worker serves another check, and unmapped with the worker.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from labkit.sandbox import codec

ALIGN = 64  # every placement starts on a cache line (and so on any dtype's alignment)


@dataclass(frozen=True)
class SharedArray(codec.Shared):
    """An input placed in shared memory: pass it to the student; read `array` after."""

    array: np.ndarray = field(compare=False, repr=False, kw_only=True)


class Arena:
    """Placements in one worker's shared memory, in order, until it is full."""

    def __init__(self, mapping: mmap.mmap) -> None:
        self.mapping = mapping
        self.used = 0

    def place(self, value: np.ndarray) -> SharedArray:
        """A copy of `value` in shared memory, C-ordered; ValueError when it does not fit
        or its dtype holds objects or fields (no honest input needs more)."""
        value = np.asarray(value)
        if value.dtype.hasobject or value.dtype.names is not None:
            raise ValueError(f"a {value.dtype} array cannot be shared")
        start = -(-self.used // ALIGN) * ALIGN
        if start + value.nbytes > len(self.mapping):
            raise ValueError(f"{value.nbytes} bytes do not fit in the shared memory")
        array = np.ndarray(value.shape, value.dtype, buffer=self.mapping, offset=start)
        array[...] = value
        self.used = start + value.nbytes
        return SharedArray(start, value.dtype.str, tuple(value.shape), array=array)

    def place_view(self, value: np.ndarray,
                   view: Callable[[np.ndarray], np.ndarray]) -> SharedArray:
        """`value` placed as by `place`, passed as `view(placed)`: a view over it (a
        transpose, a step) that reaches the worker as a view, not a contiguous copy."""
        base = self.place(value).array
        seen = view(base)
        if not (isinstance(seen, np.ndarray) and np.shares_memory(seen, base)):
            raise ValueError("view() must return a view of the array it is given")
        offset = seen.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        start = self.used - base.nbytes
        return SharedArray(start + offset, seen.dtype.str, tuple(seen.shape),
                           tuple(seen.strides), array=seen)

    def clear(self) -> None:
        """Zero what was placed and start again: nothing reaches the next check."""
        self.mapping[: self.used] = bytes(self.used)
        self.used = 0
