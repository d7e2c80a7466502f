"""The one framing of every message between labkit's processes: a length, a JSON header,
raw blobs.

The trusted grader and its workers, the grader and its zygote (control socket and job
bundle), `labkit batch` and its grading processes, `labkit grade` and its daemon all
send messages framed here. A message is an 8-byte length, a 4-byte header length, the
header (a JSON object, which lists the sizes of the blobs) and the blobs. Nothing is
ever unpickled, and what the other side sent is checked against limits before it is
allocated or parsed: the whole length (before it is read), the header's length and
bracket depth (before `json.loads`, which would otherwise raise `RecursionError`) and
number of values (before `json.loads` builds them: a 16 MiB header of `{},` would be
millions of objects, gigabytes of them), the number of blobs and their sizes. Malformed
input is a `ProtocolError`, never a `MemoryError` or a `RecursionError`.

Standard library only: the batch's parent process frames messages too, and it never
imports NumPy (values are encoded in `labkit.sandbox.codec`).
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import time
from itertools import accumulate
from types import CodeType
from typing import Any

MAX_MESSAGE = 64 * 1024 * 1024  # one reply may carry large arrays, but not unbounded
MAX_HEADER = 16 * 1024 * 1024  # values travel in the header; arrays' data in blobs
MAX_BLOBS = 1 << 20
MAX_DATAGRAM = 64 * 1024  # a message sent as one datagram (the zygote's control socket)
# Room for a value tree of `codec.MAX_DEPTH` containers (up to three JSON levels each)
# inside a message's header; json.loads is never asked to go deeper.
MAX_HEADER_DEPTH = 256
# Values in one header (so in one decoded value tree): each costs the trusted side some
# 60 bytes once parsed, so this bounds a header's objects to tens of MiB.
MAX_HEADER_VALUES = 1 << 20
_LEN = struct.Struct(">Q")
_HEAD = struct.Struct(">I")
# Bytes asked for by a message's first read (a buffer this size is allocated for every
# read: kept under malloc's mmap threshold) and by the reads of a large message's rest.
_FIRST_READ = 64 * 1024
_READ_SIZE = 1 << 20
# A JSON string (what json.dumps writes, and the only way JSON hides a bracket).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SEPARATORS = (b",", b":", b"[", b"{")  # what comes before every JSON value but the first
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEP = tuple({ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}.get(b, 0)
              for b in range(256))

Message = tuple[dict[str, Any], list[bytes]]


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class ChannelClosed(Exception):
    """The other side closed the channel (for a worker: it exited or died)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


# Compact, and without the check for cycles: every header is a tree built fresh by
# this kit (a value's tree by `codec.encode_value`, which bounds its depth).
_ENCODER = json.JSONEncoder(check_circular=False, separators=(",", ":"))


def pack(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    """One message: JSON header (with blob sizes) followed by the blobs."""
    header = {**header, "blobs": [len(b) for b in blobs]}
    head = _ENCODER.encode(header).encode()
    body = _HEAD.pack(len(head)) + head + b"".join(blobs)
    return _LEN.pack(len(body)) + body


def unpack(body: bytes) -> Message:
    """Split a message body (what follows the length) into its header and blobs,
    checking every size, and the header's depth, before it is parsed."""
    if len(body) < _HEAD.size:
        raise ProtocolError("malformed message: no header length")
    (head_len,) = _HEAD.unpack_from(body)
    if head_len > MAX_HEADER or _HEAD.size + head_len > len(body):
        raise ProtocolError(f"malformed message: a header of {head_len} bytes")
    head = body[_HEAD.size : _HEAD.size + head_len]
    # Every value and bracket takes a byte: a header shorter than a limit is within it.
    if head_len > MAX_HEADER_VALUES and not _few_values(head):  # first: counting is cheaper
        raise ProtocolError(f"malformed message: a header of over {MAX_HEADER_VALUES} values")
    if head_len > MAX_HEADER_DEPTH and not _shallow(head):
        raise ProtocolError("malformed message: header nested too deeply")
    try:
        header = json.loads(head.decode())  # UTF-8, as `pack` wrote it
    except ValueError as exc:
        raise ProtocolError(f"malformed message: {exc}") from None
    sizes = header.pop("blobs", None) if type(header) is dict else None
    if (type(sizes) is not list or len(sizes) > MAX_BLOBS
            or not all(type(s) is int and s >= 0 for s in sizes)):
        raise ProtocolError("malformed message: bad blob sizes")
    offset = _HEAD.size + head_len
    if offset + sum(sizes) != len(body):
        raise ProtocolError("message length does not match its blobs")
    blobs = []
    for size in sizes:
        blobs.append(body[offset : offset + size])
        offset += size
    return header, blobs


def parse(data: bytes, limit: int = MAX_MESSAGE) -> Message:
    """One whole message, length and all, as `pack` made it (a datagram, a sealed file)."""
    if len(data) < _LEN.size:
        raise ProtocolError("malformed message: no length")
    (size,) = _LEN.unpack_from(data)
    if size > limit or _LEN.size + size != len(data):
        raise ProtocolError(f"message of {size} bytes in {len(data)} (limit {limit})")
    return unpack(data[_LEN.size :])


def _shallow(head: bytes) -> bool:
    """Whether the JSON text `head` nests at most `MAX_HEADER_DEPTH` brackets deep.

    Few brackets cannot nest deeply (the usual header); otherwise brackets inside
    strings are dropped and the depth counted. For text that is not JSON the count
    still bounds how deep json.loads gets before it fails: up to the first point where
    the two disagree, they read the same strings.
    """
    if head.count(b"[") + head.count(b"{") <= MAX_HEADER_DEPTH:
        return True
    brackets = _STRING.sub(b"", head).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) <= MAX_HEADER_DEPTH


def _few_values(head: bytes) -> bool:
    """Whether the JSON text `head` holds at most `MAX_HEADER_VALUES` values.

    A JSON value other than the first follows a comma, a colon or an opening bracket,
    so their number outside strings bounds the values `json.loads` would build (a
    string is one value, whatever it holds). The usual header has few of them at all.
    """
    if sum(map(head.count, _SEPARATORS)) <= MAX_HEADER_VALUES:
        return True
    return sum(map(_STRING.sub(b"", head).count, _SEPARATORS)) <= MAX_HEADER_VALUES


def _wait(fd: int, deadline: float | None, write: bool = False) -> None:
    if deadline is None:
        return
    left = max(0.0, deadline - time.monotonic())
    ready = select.select([], [fd], [], left) if write else select.select([fd], [], [], left)
    if not (ready[1] if write else ready[0]):
        raise ChannelTimeout()


def wait_code() -> CodeType:
    """The code of the one place a channel blocks (for a handler that must tell a wait
    from anything else, see `labkit.engine.warm.Cancel`)."""
    return _wait.__code__


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
    waited on only when full (a descriptor that can be full needs a deadline)."""
    data = memoryview(packed)
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            _wait(fd, deadline, write=True)
        except BrokenPipeError:
            raise ChannelClosed() from None


class Reader:
    """Reads the messages arriving on one descriptor, in order, each of at most `limit`
    bytes (checked as soon as its length has come, before the rest is read).

    A message usually comes in one read, length and all. Bytes read beyond it belong
    to the next message (a sender may send several ahead, see `proxy.Session.send_ahead`)
    and are kept for the next `read`.
    """

    def __init__(self, fd: int, limit: int = MAX_MESSAGE) -> None:
        self.fd, self.limit = fd, limit
        self._chunks: list[bytes] = []  # read, not yet returned
        self._have = 0  # their total length
        self._size: int | None = None  # of the message they begin, once its length came

    def read(self, deadline: float | None = None) -> Message:
        """The next message; `deadline` is a `time.monotonic()` value or None to wait."""
        while (message := self.take()) is None:
            self.add(self._chunk(deadline))
        return message

    def read_ready(self) -> list[Message]:
        """For a non-blocking descriptor a selector found readable: read once, and return
        the messages now complete (perhaps none). `ChannelClosed` once the sender has
        closed its end."""
        try:
            chunk = os.read(self.fd, self.wanted())
        except BlockingIOError:
            return []
        if not chunk:
            raise ChannelClosed()
        self.add(chunk)
        messages = []
        while (message := self.take()) is not None:
            messages.append(message)
        return messages

    def wanted(self) -> int:
        """How many bytes the next read should ask for."""
        if self._size is None:
            return _FIRST_READ
        return min(_LEN.size + self._size - self._have, _READ_SIZE)

    def add(self, chunk: bytes) -> None:
        """Bytes read from the channel by the caller (where the system cannot wait on
        the descriptor, a thread reads it); see `take`."""
        self._chunks.append(chunk)
        self._have += len(chunk)

    def take(self) -> Message | None:
        """The first message of what was read, if it is all there."""
        if self._size is None:
            if self._have < _LEN.size:
                return None
            if len(self._chunks) > 1:
                self._chunks = [b"".join(self._chunks)]
            (size,) = _LEN.unpack_from(self._chunks[0])
            if size > self.limit:
                raise ProtocolError(f"message of {size} bytes is over the limit")
            self._size = size
        end = _LEN.size + self._size
        if self._have < end:
            return None
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        rest = data[end:]
        self._chunks, self._have, self._size = [rest] if rest else [], len(rest), None
        return unpack(data[_LEN.size : end])

    def _chunk(self, deadline: float | None) -> bytes:
        while True:
            _wait(self.fd, deadline)
            try:
                chunk = os.read(self.fd, self.wanted())
            except BlockingIOError:
                continue
            if not chunk:
                raise ChannelClosed()
            return chunk
