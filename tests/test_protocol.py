"""Values cross the process boundary as plain data, and nothing else gets through."""

from __future__ import annotations

import io
import os
import struct
import time

import numpy as np
import pytest

from labkit.sandbox import codec, protocol
from labkit.sandbox.codec import Opaque
from labkit.sandbox.protocol import ProtocolError


def roundtrip(value):
    blobs: list[bytes] = []
    tree = codec.encode_value(value, blobs)
    header, got_blobs = protocol.unpack(protocol.pack({"v": tree}, blobs)[8:])
    return codec.decode_value(header["v"], got_blobs)


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
        codec.decode_value(tree, [bytes(8)])


def test_pickled_arrays_are_refused():
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(ProtocolError):
        codec.decode_value({"t": "ndarray", "blob": 0}, [buffer.getvalue()])


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
        codec.decode_value(tree, [])


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


def _body(head: bytes, blobs: bytes = b"") -> bytes:
    return struct.pack(">I", len(head)) + head + blobs


@pytest.mark.parametrize(
    "body",
    [_body(b"[" * 100_000),  # json.loads would raise RecursionError
     _body(b'{"x":' * 300 + b"1" + b"}" * 300),
     _body(b'{"blobs":[1,1]}', b"a"),  # blobs that add up to less than sent
     _body(b'{"blobs":[-1]}'),
     _body(b'{"blobs":' + str([0] * (protocol.MAX_BLOBS + 1)).encode() + b"}"),
     struct.pack(">I", protocol.MAX_HEADER + 1) + b"{}",  # a header length over the limit
     _body(b'{"blobs":[], "x": "\xff"}')],  # a header that is not UTF-8
    ids=["deep-list", "deep-object", "short-blobs", "negative-blob", "too-many-blobs",
         "long-header", "not-utf8"],
)
def test_framing_limits_are_checked_before_parsing(body):
    with pytest.raises(ProtocolError):
        protocol.unpack(body)


def test_brackets_inside_strings_and_the_deepest_value_pass_the_depth_check():
    header = {"text": "[" * 10_000, "quoted": '"[' * 1000}
    assert protocol.unpack(protocol.pack(header, [])[8:]) == (header, [])
    deep: object = 1
    for _ in range(3 * codec.MAX_DEPTH):
        deep = {"k": [deep]}
    blobs: list[bytes] = []
    tree = codec.encode_value({"result": deep, "args_after": [deep]}, blobs)
    assert protocol.unpack(protocol.pack({"id": 1, "ok": tree}, blobs)[8:])[0]["ok"] == tree


def test_past_the_depth_limit_a_plain_item_is_opaque_as_any_other():
    def nested(leaf: object, depth: int) -> object:
        for _ in range(depth):
            leaf = [leaf]
        return leaf

    def leaf_of(tree: object) -> object:
        while isinstance(tree, dict) and tree.get("t") in ("list", "tuple"):
            tree = tree["v"][0]
        return tree

    too_deep = {"t": "opaque", "type": "<too deeply nested>"}
    assert leaf_of(codec.encode_value(nested(7, codec.MAX_DEPTH), [])) == 7
    assert leaf_of(codec.encode_value(nested(7, codec.MAX_DEPTH + 1), [])) == too_deep
    assert leaf_of(codec.encode_value(nested((7,), codec.MAX_DEPTH), [])) == too_deep


def test_a_whole_message_is_parsed_only_if_its_length_is_its_own():
    packed = protocol.pack({"op": "ping"}, [b"x"])
    assert protocol.parse(packed) == ({"op": "ping"}, [b"x"])
    for data in (packed[:-1], packed + b"y", packed[:5]):
        with pytest.raises(ProtocolError):
            protocol.parse(data)
    with pytest.raises(ProtocolError):
        protocol.parse(packed, limit=len(packed) - 9)


def test_a_reader_limits_each_message_before_reading_it():
    r, w = os.pipe()
    try:
        os.write(w, protocol.pack({"id": 1}, [bytes(100)]))
        with pytest.raises(ProtocolError, match="over the limit"):
            protocol.Reader(r, limit=50).read(deadline=time.monotonic() + 10)
    finally:
        os.close(w)
        os.close(r)


def test_a_non_blocking_reader_returns_what_is_complete_and_then_sees_eof():
    r, w = os.pipe()
    os.set_blocking(r, False)
    reader = protocol.Reader(r)
    try:
        assert reader.read_ready() == []  # nothing yet: no wait
        data = protocol.pack({"id": 1}, []) + protocol.pack({"id": 2}, [b"y"])
        os.write(w, data[:-3])
        assert reader.read_ready() == [({"id": 1}, [])]
        os.write(w, data[-3:])
        assert reader.read_ready() == [({"id": 2}, [b"y"])]
        os.close(w)
        with pytest.raises(protocol.ChannelClosed):
            reader.read_ready()
    finally:
        os.close(r)


def npy_header(descr, shape) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False,
                                                  "shape": shape})
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("tree", "blobs"),
    [({"t": "ndarray", "blob": 0, "dtype": "|V0", "shape": [10**9, 10**9]}, [b""]),  # no bytes
     ({"t": "ndarray", "blob": 0, "dtype": "|V0", "shape": [0, 10**30]}, [b""]),
     ({"t": "ndarray", "blob": 0, "dtype": "|V0", "shape": [1] * 65}, [b""]),
     ({"t": "ndarray", "blob": 0}, [npy_header([], (10**9, 10**9))]),  # a structured V0
     ({"t": "ndarray", "blob": 0},  # 10**9 zero-size elements in each one-byte record
      [npy_header([("a", "|V0", (10**9,)), ("b", "|u1")], (1,)) + b"\0"]),
     ({"t": "list", "v": [0] * (codec.MAX_ITEMS + 1)}, []),
     ({"t": "dict", "v": [[0, 0]] * (codec.MAX_ITEMS + 1)}, []),
     ("x" * (codec.MAX_STRING + 1), [])],
)
def test_values_over_the_element_and_item_limits_are_refused_before_they_are_built(tree, blobs):
    started = time.process_time()  # this process's work, whatever else the machine runs
    with pytest.raises(ProtocolError):
        codec.decode_value(tree, blobs)
    assert time.process_time() - started < 1


def test_an_array_at_the_element_limit_still_travels():
    zero_size = np.empty(1000, dtype="V0")
    assert roundtrip(zero_size).shape == (1000,)
    assert roundtrip(np.zeros((2, 3), dtype=[("a", "<f8", (2,)), ("b", "u1")])).shape == (2, 3)


@pytest.mark.parametrize("values", [b"{}," * 3_000_000 + b"{}", b"[]," * 600_000 + b"1",
                                    b'"a":1,' * 600_000 + b'"b":1'])
def test_a_header_of_too_many_values_is_refused_before_it_is_parsed(values):
    head = b'{"v": [' + values + b'], "blobs": []}' if not values.startswith(b'"') \
        else b'{"v": {' + values + b'}, "blobs": []}'
    started = time.process_time()  # this process's work, whatever else the machine runs
    with pytest.raises(ProtocolError, match="values"):
        protocol.unpack(struct.pack(">I", len(head)) + head)
    assert time.process_time() - started < 1


def test_commas_inside_strings_are_not_values():
    text = "a," * (protocol.MAX_HEADER_VALUES + 10)
    assert roundtrip([text, 1]) == [text, 1]
