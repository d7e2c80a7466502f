"""Plain-data messages between the trusted grader and the student's worker.

Nothing here unpickles. Values travel as a JSON tree; bytes, and the data of arrays and
NumPy scalars, travel as blobs beside it. An array's blob is its raw data, with its dtype
string and shape in the tree (a dtype with an object in it is refused); a structured
array, whose dtype a string cannot name, travels as a `.npy` blob read back with
`allow_pickle=False`. Anything else the student returns becomes an `opaque` record
naming its type, so an object with a lying `__eq__` or `__float__` never reaches the
trusted side.
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import struct
import time
from typing import Any

import numpy as np

MAX_MESSAGE = 64 * 1024 * 1024  # one reply may carry large arrays, but not unbounded
MAX_DEPTH = 64
_LEN = struct.Struct(">Q")
# Bytes asked for by a message's first read (a buffer this size is allocated for every
# read: kept under malloc's mmap threshold) and by the reads of a large message's rest.
_FIRST_READ = 64 * 1024
_READ_SIZE = 1 << 20


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class ChannelClosed(Exception):
    """The other side closed the channel (for a worker: it exited or died)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


# --- values -----------------------------------------------------------------------------


def _encode_array(array: np.ndarray, tag: str, blobs: list[bytes]) -> dict[str, Any]:
    """A plain array as its raw data (in Fortran order if that is how it is laid out).

    Raw data with a dtype string costs a few microseconds each way; a `.npy` header
    is written and parsed (`ast.literal_eval`) for every value, ten times as long.
    """
    if array.dtype.names is not None:  # structured: only .npy describes its dtype
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        blobs.append(buffer.getvalue())
        return {"t": tag, "blob": len(blobs) - 1}
    fortran = array.ndim > 1 and array.flags.f_contiguous and not array.flags.c_contiguous
    blobs.append(array.tobytes(order="F" if fortran else "C"))
    tree = {"t": tag, "blob": len(blobs) - 1, "dtype": array.dtype.str, "shape": list(array.shape)}
    if fortran:
        tree["order"] = "F"
    return tree


def _decode_array(tree: dict[str, Any], blobs: list[bytes]) -> np.ndarray:
    """Inverse of `_encode_array`: a new, writable array; refuses object dtypes."""
    blob = blobs[tree["blob"]]
    if "dtype" not in tree:
        return np.load(io.BytesIO(blob), allow_pickle=False)
    name, shape = tree["dtype"], tree["shape"]
    if type(name) is not str or type(shape) is not list:
        raise ValueError("bad dtype or shape")
    dtype = np.dtype(name)
    if dtype.hasobject or dtype.names is not None or dtype.str != name:
        raise ValueError(f"dtype {name!r} may not travel")
    if not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError("bad shape")
    if math.prod(shape) * dtype.itemsize != len(blob):
        raise ValueError("the data does not match the shape")
    order = "F" if tree.get("order") == "F" else "C"
    return np.ndarray(shape, dtype, buffer=blob, order=order).copy(order="K")


def encode_value(value: Any, blobs: list[bytes], depth: int = 0) -> Any:
    """Turn `value` into a JSON-able tree, appending binary parts to `blobs`."""
    if depth > MAX_DEPTH:
        return {"t": "opaque", "type": "<too deeply nested>"}
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    # Containers first: argument lists, shapes and keyword arguments are the usual case.
    if isinstance(value, list | tuple):
        items = [encode_value(item, blobs, depth + 1) for item in list(value)]
        return {"t": "tuple" if isinstance(value, tuple) else "list", "v": items}
    if isinstance(value, dict):
        pairs = [
            [encode_value(k, blobs, depth + 1), encode_value(v, blobs, depth + 1)]
            for k, v in dict.items(value)
        ]
        return {"t": "dict", "v": pairs}
    if isinstance(value, bool):  # subclasses keep only their honest base value
        return bool.__bool__(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if value is Ellipsis:
        return {"t": "ellipsis"}
    if isinstance(value, slice):  # indexing expressions travel too (lab01)
        parts = (value.start, value.stop, value.step)
        return {"t": "slice", "v": [encode_value(p, blobs, depth + 1) for p in parts]}
    if isinstance(value, complex):
        return {"t": "complex", "v": [complex.__complex__(value).real, value.imag]}
    if isinstance(value, np.ndarray | np.generic):
        if isinstance(value, np.ndarray) and value.dtype.hasobject:
            return {"t": "opaque", "type": "numpy.ndarray[object]"}
        tag = "ndarray" if isinstance(value, np.ndarray) else "npscalar"
        return _encode_array(np.asarray(value), tag, blobs)
    if isinstance(value, bytes | bytearray):
        blobs.append(bytes(value))
        return {"t": "bytes", "blob": len(blobs) - 1}
    return {"t": "opaque", "type": f"{kind.__module__}.{kind.__qualname__}"}


class OpaqueValue(AssertionError):
    """A grader compared or converted an `Opaque`: the check fails, naming the type."""

    def __init__(self, type_name: str) -> None:
        super().__init__(f"returned a {type_name}, which is not a plain value")
        self.type_name = type_name


class Opaque:
    """Stands for a student value that could not travel as plain data.

    Every comparison or conversion fails as an assertion, so a grader that meets one
    marks the check as failed with a message naming the type, never as a pass.
    """

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"

    def _refuse(self, *_: Any) -> Any:
        raise OpaqueValue(self.type_name)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __float__ = __int__ = __index__ = __bool__ = __len__ = __iter__ = _refuse
    __array__ = __getitem__ = __hash__ = _refuse


def decode_value(tree: Any, blobs: list[bytes], depth: int = 0) -> Any:
    """Inverse of `encode_value`; rejects anything not produced by it."""
    if depth > MAX_DEPTH + 1:
        raise ProtocolError("value nested too deeply")
    if tree is None or type(tree) in (bool, int, float, str):
        return tree
    if type(tree) is not dict or "t" not in tree:
        raise ProtocolError("malformed value")
    tag = tree["t"]
    try:
        if tag in ("list", "tuple"):
            items = [decode_value(item, blobs, depth + 1) for item in tree["v"]]
            return tuple(items) if tag == "tuple" else items
        if tag == "dict":
            return {decode_value(k, blobs, depth + 1): decode_value(v, blobs, depth + 1)
                    for k, v in tree["v"]}
        if tag in ("ndarray", "npscalar"):
            array = _decode_array(tree, blobs)
            return array if tag == "ndarray" else array[()]
        if tag == "bytes":
            return blobs[tree["blob"]]
        if tag == "ellipsis":
            return Ellipsis
        if tag == "slice":
            return slice(*(decode_value(p, blobs, depth + 1) for p in tree["v"]))
        if tag == "complex":
            return complex(*tree["v"])
        if tag == "opaque":
            return Opaque(str(tree["type"]))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed {tag!r} value: {exc}") from None
    raise ProtocolError(f"unknown value tag {tag!r}")


# --- framing ----------------------------------------------------------------------------


def pack(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    """One message: JSON header (with blob sizes) followed by the blobs."""
    header = {**header, "blobs": [len(b) for b in blobs]}
    head = json.dumps(header, allow_nan=True).encode()
    body = struct.pack(">I", len(head)) + head + b"".join(blobs)
    return _LEN.pack(len(body)) + body


def unpack(body: bytes) -> tuple[dict[str, Any], list[bytes]]:
    """Split a message body into its header and blobs, checking every size."""
    try:
        (head_len,) = struct.unpack_from(">I", body)
        header = json.loads(str(body[4 : 4 + head_len], "utf-8"))  # as `pack` wrote it
        sizes = header.pop("blobs")
        if type(header) is not dict or not all(type(s) is int and s >= 0 for s in sizes):
            raise ValueError("bad blob sizes")
    except (struct.error, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from None
    blobs, offset = [], 4 + head_len
    for size in sizes:
        blobs.append(body[offset : offset + size])
        offset += size
    if offset != len(body):
        raise ProtocolError("message length does not match its blobs")
    return header, blobs


def _wait(fd: int, deadline: float | None, write: bool = False) -> None:
    if deadline is None:
        return
    left = max(0.0, deadline - time.monotonic())
    ready = select.select([], [fd], [], left) if write else select.select([fd], [], [], left)
    if not (ready[1] if write else ready[0]):
        raise ChannelTimeout()


def write_message(
    fd: int,
    header: dict[str, Any],
    blobs: list[bytes] | None = None,
    deadline: float | None = None,
) -> None:
    """Write one message; with a deadline, a reader that stops reading cannot block us."""
    write_all(fd, pack(header, blobs or []), deadline)


def write_all(fd: int, packed: bytes, deadline: float | None = None) -> None:
    """Write packed messages. The pipe nearly always has room: it is written first, and
    waited on only when full."""
    data = memoryview(packed)
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            _wait(fd, deadline, write=True)
        except BrokenPipeError:
            raise ChannelClosed() from None


class Reader:
    """Reads the messages arriving on one descriptor, in order.

    A message usually comes in one read, length and all. Bytes read beyond it belong
    to the next message (a sender may send several ahead, see `proxy.Session.send_ahead`)
    and are kept for the next `read`.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = b""

    def read(self, deadline: float | None = None) -> tuple[dict[str, Any], list[bytes]]:
        """The next message; `deadline` is a `time.monotonic()` value or None to wait."""
        chunks, have, size = [self.pending], len(self.pending), None
        while size is None or have < _LEN.size + size:
            if size is None and have >= _LEN.size:
                chunks = [b"".join(chunks)]
                (size,) = _LEN.unpack_from(chunks[0])
                if size > MAX_MESSAGE:
                    raise ProtocolError(f"message of {size} bytes is over the limit")
                continue
            wanted = _FIRST_READ if size is None else min(_LEN.size + size - have, _READ_SIZE)
            chunk = self._chunk(deadline, wanted)
            chunks.append(chunk)
            have += len(chunk)
        data = b"".join(chunks)
        self.pending = data[_LEN.size + size :]
        return unpack(data[_LEN.size : _LEN.size + size])

    def _chunk(self, deadline: float | None, wanted: int) -> bytes:
        while True:
            _wait(self.fd, deadline)
            try:
                chunk = os.read(self.fd, wanted)
            except BlockingIOError:
                continue
            if not chunk:
                raise ChannelClosed()
            return chunk
