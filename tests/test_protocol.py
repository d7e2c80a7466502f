"""Values cross the process boundary as plain data, and nothing else gets through."""

from __future__ import annotations

import io
import os
import struct
import time

import numpy as np
import pytest

from labkit.sandbox import protocol
from labkit.sandbox.protocol import Opaque, ProtocolError


def roundtrip(value):
    blobs: list[bytes] = []
    tree = protocol.encode_value(value, blobs)
    header, got_blobs = protocol.unpack(protocol.pack({"v": tree}, blobs)[8:])
    return protocol.decode_value(header["v"], got_blobs)


@pytest.mark.parametrize(
    "value",
    [None, True, 3, -2**70, 1.5, float("inf"), "héllo", b"\x00\x01", 2 + 3j, [1, [2]],
     (1, (2.0, None)), {"a": 1, 2: (3,)}, slice(1, None, -2), Ellipsis,
     (0, slice(None), None, ...)],
)
def test_plain_values_roundtrip(value):
    assert roundtrip(value) == value
    assert type(roundtrip(value)) is type(value)


def test_arrays_and_numpy_scalars_keep_dtype_shape_and_values():
    for array in [np.arange(6, dtype=np.int8).reshape(2, 3), np.ones((0, 3)), np.array(2.5),
                  np.arange(10.0)[::3], np.asfortranarray(np.eye(3, dtype=np.float32))]:
        got = roundtrip(array)
        assert type(got) is np.ndarray and got.dtype == array.dtype
        assert got.shape == array.shape and np.array_equal(got, array)
    scalar = roundtrip(np.float32(1.25))
    assert type(scalar) is np.float32 and scalar == np.float32(1.25)


def test_liars_and_unknown_objects_arrive_opaque():
    class Liar:
        def __eq__(self, other):
            return True

    class Sub(float):
        def __eq__(self, other):
            return True

    assert isinstance(roundtrip(Liar()), Opaque)
    got = roundtrip(Sub(2.0))
    assert type(got) is float and got == 2.0 and got != 3.0  # only the honest value travels
    assert isinstance(roundtrip(np.array([object()], dtype=object)), Opaque)
    with pytest.raises(AssertionError):
        float(roundtrip(Liar()))
    with pytest.raises(AssertionError):
        assert roundtrip(Liar()) == 1


def test_ndarray_subclass_travels_as_plain_array():
    class Weird(np.ndarray):
        def __eq__(self, other):
            return True

    got = roundtrip(np.arange(3.0).view(Weird))
    assert type(got) is np.ndarray and not np.array_equal(got, [9, 9, 9])


def test_structured_arrays_roundtrip():
    array = np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8", (2,))])
    array["a"] = [1, 2]
    got = roundtrip(array)
    assert got.dtype == array.dtype and np.array_equal(got, array)


@pytest.mark.parametrize(
    "tree",
    [{"t": "ndarray", "blob": 0, "dtype": "|O", "shape": [1]},  # an object dtype
     {"t": "ndarray", "blob": 0, "dtype": "<f8", "shape": [2]},  # more data than the shape
     {"t": "ndarray", "blob": 0, "dtype": "<f8", "shape": [-1]},
     {"t": "ndarray", "blob": 0, "dtype": "f8,O", "shape": [1]}],
)
def test_raw_arrays_that_do_not_add_up_are_refused(tree):
    with pytest.raises(ProtocolError):
        protocol.decode_value(tree, [bytes(8)])


def test_pickled_arrays_are_refused():
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(ProtocolError):
        protocol.decode_value({"t": "ndarray", "blob": 0}, [buffer.getvalue()])


@pytest.mark.parametrize(
    "body",
    [b"", b"\x00\x00\x00\x05{}", struct.pack(">I", 2) + b"{}",
     struct.pack(">I", 13) + b'{"blobs":[5]}' + b"abc"],
)
def test_malformed_messages_are_refused(body):
    with pytest.raises(ProtocolError):
        protocol.unpack(body)


@pytest.mark.parametrize("tree", [{"t": "pickle"}, {"x": 1}, [1, 2], {"t": "ndarray"}])
def test_malformed_values_are_refused(tree):
    with pytest.raises(ProtocolError):
        protocol.decode_value(tree, [])


def test_a_reader_times_out_and_sees_eof():
    r, w = os.pipe()
    try:
        with pytest.raises(protocol.ChannelTimeout):
            protocol.Reader(r).read(deadline=0)
        os.write(w, struct.pack(">Q", 1 << 40))
        with pytest.raises(ProtocolError):
            protocol.Reader(r).read()
    finally:
        os.close(w)
    with pytest.raises(protocol.ChannelClosed):
        protocol.Reader(r).read()
    os.close(r)


def test_a_reader_takes_messages_in_pieces_and_keeps_what_came_ahead():
    import threading

    big = bytes(range(256)) * 4096  # more than one read's worth
    r, w = os.pipe()
    try:
        data = protocol.pack({"id": 1}, [big]) + protocol.pack({"id": 2}, [b"x"])
        os.write(w, data[:3])  # not even the whole length yet

        def rest() -> None:
            time.sleep(0.05)
            view = memoryview(data)[3:]
            while view:
                view = view[os.write(w, view):]

        writer = threading.Thread(target=rest)
        writer.start()
        reader = protocol.Reader(r)
        assert reader.read(deadline=time.monotonic() + 10) == ({"id": 1}, [big])
        writer.join()
        assert reader.read(deadline=0) == ({"id": 2}, [b"x"])  # already here: no wait
        with pytest.raises(protocol.ChannelTimeout):
            reader.read(deadline=0)
    finally:
        os.close(w)
        os.close(r)
