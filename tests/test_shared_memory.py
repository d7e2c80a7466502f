"""Memory the grader maps too (`labkit.sandbox.shared`): what a call does to a shared
input is read by the trusted side itself, and nothing of it outlives its check."""

from __future__ import annotations

import os
import shutil
import textwrap

import numpy as np
import pytest

from labkit.engine.proxy import Session, Student
from labkit.sandbox import codec, protocol
from labkit.sandbox.backend import SandboxConfig
from labkit.sandbox.facade import Sandbox
from labkit.sandbox.linux.memfd import ARENA_BYTES

MODES = [pytest.param("bwrap", marks=pytest.mark.skipif(not shutil.which("bwrap"),
                                                         reason="bwrap is not installed")),
         "process"]
MODULE = textwrap.dedent('''
    import numpy as np

    def halve_in_place(x):
        x /= 2
        return x

    def halved_copy(x):
        return x / 2

    def first_rows(x, n):
        return x[:n]

    def write_at(x, index, value):
        x[index] = value
        return None
''').encode()


@pytest.fixture(params=MODES)
def student(request):
    config = SandboxConfig(files={"m.py": MODULE}, modules=("m",), isolation=request.param)
    with Sandbox(config) as sandbox:
        session = Session(sandbox, 5.0, {})
        yield Student(session)
        session.close()


def test_the_trusted_side_sees_an_in_place_change(student):
    weights = student.shared(np.arange(6.0))
    result = student.halve_in_place(weights)
    assert np.array_equal(result, np.arange(6.0) / 2)
    assert np.array_equal(weights.array, np.arange(6.0) / 2)  # read here, not reported


def test_a_copy_leaves_the_shared_input_alone(student):
    weights = student.shared(np.arange(4.0))
    assert np.array_equal(student.halved_copy(weights), np.arange(4.0) / 2)
    assert np.array_equal(weights.array, np.arange(4.0))


def test_a_kept_result_that_lives_in_the_input_shows_what_this_side_wrote(student):
    matrix = student.shared(np.arange(12.0).reshape(3, 4))
    view = student.keep("first_rows", matrix, 2)
    matrix.array[...] = -1.0
    assert np.array_equal(view, np.arange(8.0).reshape(2, 4))
    assert np.array_equal(student.kept("first_rows"), np.full((2, 4), -1.0))
    copy = student.keep("halved_copy", matrix)
    matrix.array[...] = 7.0
    assert np.array_equal(student.kept("halved_copy"), copy)


def test_placements_are_aligned_and_bounded(student):
    first = student.shared(np.ones(3, dtype=np.int8))
    second = student.shared(np.ones(2))
    assert second.offset % 64 == 0 and second.offset >= first.offset + 3
    student.write_at(second, 1, 5.0)
    assert second.array.tolist() == [1.0, 5.0] and first.array.tolist() == [1, 1, 1]
    with pytest.raises(ValueError):
        student.shared(np.zeros(ARENA_BYTES // 8 + 1))
    with pytest.raises(ValueError):
        student.shared(np.array([object()]))


def test_the_next_check_of_a_shared_worker_starts_from_zeroed_memory(student):
    weights = student.shared(np.arange(1.0, 5.0))
    student.halve_in_place(weights)
    session = student._session
    session.next_check(5.0)
    assert not weights.array.any() and session.arena is not None and session.arena.used == 0


def test_the_arena_cannot_be_resized_or_sealed_by_the_worker():
    from labkit.sandbox.linux.memfd import make_arena

    fd = make_arena()
    try:
        assert os.fstat(fd).st_size == ARENA_BYTES
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 4096)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 2 * ARENA_BYTES)
    finally:
        os.close(fd)


@pytest.mark.parametrize("view", [lambda a: a.T, lambda a: a[::2, ::-1], lambda a: a[1:, 2]])
def test_a_view_of_a_shared_input_reaches_the_worker_as_that_view(student, view):
    base = np.arange(12.0).reshape(3, 4)
    shared = student.shared(base, view)
    expected = base.copy()
    view(expected)[(0,) * view(expected).ndim] = -1.0  # what writing through the view does
    assert student.write_at(shared, (0,) * view(base).ndim, -1.0) is None
    assert np.array_equal(shared.array, view(expected))
    assert np.array_equal(student.first_rows(shared, 1), view(expected)[:1])


def test_a_view_must_be_a_view():
    from labkit.sandbox.shared import Arena

    arena = Arena(memoryview(bytearray(4096)))
    with pytest.raises(ValueError, match="view"):
        arena.place_view(np.arange(4.0), lambda a: a[[0, 2]])


def test_a_trusted_decoder_refuses_a_shared_value():
    """Only a worker maps an arena: a reply naming shared memory is malformed."""
    tree = codec.encode_value(codec.Shared(0, "<f8", (2,)), [])
    assert tree["t"] == "shared"
    with pytest.raises(protocol.ProtocolError):
        codec.decode_value(tree, [])


@pytest.mark.parametrize("tree", [
    {"t": "shared", "offset": ARENA_BYTES - 8, "dtype": "<f8", "shape": [2]},
    {"t": "shared", "offset": -8, "dtype": "<f8", "shape": [1]},
    {"t": "shared", "offset": 4, "dtype": "<f8", "shape": [1]},
    {"t": "shared", "offset": 0, "dtype": "|O", "shape": [1]},
    {"t": "shared", "offset": 0, "dtype": "<f8", "shape": [-1]},
    {"t": "shared", "offset": 8, "dtype": "<f8", "shape": [2], "strides": [-16]},
    {"t": "shared", "offset": 0, "dtype": "<f8", "shape": [2], "strides": [ARENA_BYTES]},
    {"t": "shared", "offset": 0, "dtype": "<f8", "shape": [2], "strides": [8, 8]},
])
def test_a_worker_decodes_only_shared_values_inside_its_memory(tree):
    arena = memoryview(bytearray(ARENA_BYTES))
    codec.serve_shared(arena)
    try:
        with pytest.raises(protocol.ProtocolError):
            codec.decode_value(tree, [])
        good = codec.decode_value({"t": "shared", "offset": 8, "dtype": "<f8", "shape": [2]}, [])
        good[...] = 1.0
        assert arena[8:24].tobytes() == np.ones(2).tobytes()
    finally:
        codec.serve_shared(None)
