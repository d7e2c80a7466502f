"""Values as they cross the process boundary: a JSON tree, with binary parts as blobs.

Nothing here unpickles. Bytes, and the data of arrays and NumPy scalars, travel as blobs
beside the tree (`labkit.sandbox.protocol` frames the two). An array's blob is its raw
data, with its dtype string and shape in the tree (a dtype with an object in it is
refused); a structured array, whose dtype a string cannot name, travels as a `.npy`
blob read back with `allow_pickle=False`. Anything else the student returns becomes an
`opaque` record naming its type, so an object with a lying `__eq__` or `__float__`
never reaches the trusted side.

Apart from the framing because it needs NumPy, which the batch's parent process never
imports.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from labkit.sandbox.protocol import ProtocolError

# In a worker the student's code runs next, and may patch builtins; bound now, the
# decoder's own checks keep their meaning there (in the trusted process nothing patches).
_all, _any = all, any
MAX_DEPTH = 64  # containers in a value; deeper ones travel as opaque
# What a decoded value may hold, checked before it is built (the framing bounds a whole
# tree's values, `protocol.MAX_HEADER_VALUES`). An array's elements are counted apart
# from its bytes: a zero-size dtype (`V0`, a structured dtype with no fields) carries
# 10**18 elements in no bytes at all, and copying or comparing it would never end. So
# every element counts as at least a byte, field and subarray elements included.
MAX_ITEMS = 1 << 20  # items of one list, tuple or dict
MAX_STRING = 1 << 22  # characters of one string
MAX_ELEMENTS = 64 * 1024 * 1024  # elements of one array (its message's byte limit)
MAX_NDIM = 64  # NumPy's own limit on dimensions


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
        # np.load builds only what the blob holds, and nothing at all for a zero-size
        # dtype: the elements are counted once it has read the header.
        array = np.load(io.BytesIO(blob), allow_pickle=False)
        _check_elements(array.shape, array.dtype)
        return array
    name, shape = tree["dtype"], tree["shape"]
    if type(name) is not str or type(shape) is not list or len(shape) > MAX_NDIM:
        raise ValueError("bad dtype or shape")
    dtype = np.dtype(name)
    if dtype.hasobject or dtype.names is not None or dtype.str != name:
        raise ValueError(f"dtype {name!r} may not travel")
    if not _all(type(n) is int and n >= 0 for n in shape):
        raise ValueError("bad shape")
    _check_elements(shape, dtype)
    if math.prod(shape) * dtype.itemsize != len(blob):
        raise ValueError("the data does not match the shape")
    order: Literal["C", "F"] = "F" if tree.get("order") == "F" else "C"
    return np.ndarray(shape, dtype, buffer=blob, order=order).copy(order="K")


def _check_elements(shape: Any, dtype: np.dtype) -> None:
    """Refuse an array of over `MAX_ELEMENTS` elements (see there), before it is built."""
    if _any(n > MAX_ELEMENTS for n in shape):  # (0, 10**30) holds nothing, yet no array has it
        raise ValueError(f"a dimension of over {MAX_ELEMENTS}")
    if math.prod(shape) * _dtype_elements(dtype) > MAX_ELEMENTS:
        raise ValueError(f"an array of over {MAX_ELEMENTS} elements")


def _dtype_elements(dtype: np.dtype) -> int:
    """Elements in one item of `dtype`: its fields' and subarrays' (at least one)."""
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return math.prod(shape) * _dtype_elements(base)
    fields = dtype.fields
    if fields is not None:
        return max(1, sum(_dtype_elements(fields[name][0]) for name in fields))
    return 1


@dataclass(frozen=True)
class Shared:
    """An argument that travels as a place in the worker's shared memory, not as bytes.

    The grader's process maps the same memory (`labkit.sandbox.shared`), so what the
    student's code does to the array there, it sees itself instead of being told.
    """

    offset: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None = None  # a view (None: C order)


# The worker's shared memory (`serve_shared`); None in every trusted process, whose
# decoder therefore refuses a "shared" value: a worker cannot point the grader at memory.
_ARENA: memoryview | None = None


def serve_shared(arena: memoryview | None) -> None:
    """In a worker: decode "shared" values as arrays over `arena` (its mapping of the
    memory the grader shares with it); None: refuse them again."""
    global _ARENA
    _ARENA = arena


def _decode_shared(tree: dict[str, Any]) -> np.ndarray:
    """A "shared" value: an array over the worker's shared memory, bounds checked."""
    if _ARENA is None:
        raise ValueError("no shared memory here")
    name, shape, offset = tree["dtype"], tree["shape"], tree["offset"]
    if type(name) is not str or type(shape) is not list or type(offset) is not int:
        raise ValueError("bad dtype, shape or offset")
    dtype = np.dtype(name)
    if dtype.hasobject or dtype.names is not None or dtype.str != name:
        raise ValueError(f"dtype {name!r} may not be shared")
    if not _all(type(n) is int and n >= 0 for n in shape) or len(shape) > MAX_NDIM:
        raise ValueError("bad shape")
    strides = tree.get("strides")
    if strides is None:
        low, high = offset, offset + math.prod(shape) * dtype.itemsize
    elif (type(strides) is not list or len(strides) != len(shape)
          or not _all(type(s) is int for s in strides)):
        raise ValueError("bad strides")
    elif 0 in shape:
        low = high = offset
    else:  # the lowest and highest bytes the view reaches, whatever the strides' signs
        reach = [(n - 1) * s for n, s in zip(shape, strides, strict=True)]
        low = offset + sum(r for r in reach if r < 0)
        high = offset + sum(r for r in reach if r > 0) + dtype.itemsize
    if low < 0 or offset % dtype.alignment or high > len(_ARENA):
        raise ValueError("outside the shared memory")
    return np.ndarray(tuple(shape), dtype, buffer=_ARENA, offset=offset,
                      strides=None if strides is None else tuple(strides))


@dataclass(frozen=True)
class CallbackRef:
    """A callable of the grader's, sent as its number only: in the worker it becomes an
    object that asks the grader to call it (`serve_callbacks`), so the student's code
    can call it but never see into it."""

    id: int


# The worker's maker of callback objects (`serve_callbacks`); None in every trusted
# process, whose decoder therefore refuses a "callback" value in a reply.
_CALLBACKS: Callable[[int], Any] | None = None


def serve_callbacks(make: Callable[[int], Any] | None) -> None:
    """In a worker: decode "callback" values with `make(id)`; None: refuse them again."""
    global _CALLBACKS
    _CALLBACKS = make


_PLAIN = (bool, int, float, str)  # exactly these types: a subclass is converted below


def encode_value(value: Any, blobs: list[bytes], depth: int = 0) -> Any:
    """Turn `value` into a JSON-able tree, appending binary parts to `blobs`."""
    if depth > MAX_DEPTH:
        return {"t": "opaque", "type": "<too deeply nested>"}
    kind = type(value)
    if value is None or kind in _PLAIN:
        return value
    # Containers first: argument lists, shapes and keyword arguments are the usual case,
    # and their items mostly plain (taken as they are, without a call each).
    if isinstance(value, list | tuple):
        within = depth < MAX_DEPTH  # an item past the limit is opaque, plain or not
        items = [item if within and (item is None or type(item) in _PLAIN) else
                 encode_value(item, blobs, depth + 1) for item in list(value)]
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
    if isinstance(value, Shared):
        tree = {"t": "shared", "offset": value.offset, "dtype": value.dtype,
                "shape": list(value.shape)}
        if value.strides is not None:
            tree["strides"] = list(value.strides)
        return tree
    if isinstance(value, CallbackRef):
        return {"t": "callback", "id": value.id}
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
    if tree is None or type(tree) in (bool, int, float):
        return tree
    if type(tree) is str:
        if len(tree) > MAX_STRING:
            raise ProtocolError(f"a string of over {MAX_STRING} characters")
        return tree
    if type(tree) is not dict or "t" not in tree:
        raise ProtocolError("malformed value")
    tag = tree["t"]
    try:
        if tag in ("list", "tuple", "dict") and len(tree["v"]) > MAX_ITEMS:
            raise ProtocolError(f"a {tag} of over {MAX_ITEMS} items")
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
        if tag == "shared":
            return _decode_shared(tree)
        if tag == "callback":
            if _CALLBACKS is None or type(tree["id"]) is not int:
                raise ValueError("no callbacks here")
            return _CALLBACKS(tree["id"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed {tag!r} value: {exc}") from None
    raise ProtocolError(f"unknown value tag {tag!r}")
