"""Pipes to a worker, waited on with a deadline on every system.

POSIX lets the Linux back end `select` on its pipes; Windows cannot wait on a pipe that
way. Here a thread per pipe does the blocking reads and writes, and the grader waits for
them with a deadline. The reading thread reads one chunk, then waits until the grader
has taken it before it reads the next: whatever the worker sends, the trusted side
holds one chunk of it beyond the message being framed (`protocol.Reader`, with its
limits). A worker that stops reading costs the writing thread, blocked until the worker
is ended, never the grader's time.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from labkit import platform
from labkit.sandbox import protocol
from labkit.sandbox.output import OUTPUT_KEEP

_CHUNK = 256 * 1024  # bytes one read asks for (the framing reader is the grader's alone)


class Channel:
    """The request (`wfd`) and reply (`rfd`) pipes of one worker, as framed messages."""

    def __init__(self, wfd: int, rfd: int, limit: int = protocol.MAX_MESSAGE) -> None:
        self.wfd, self.rfd = wfd, rfd
        self.reader = protocol.Reader(rfd, limit)
        self._chunks: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._room = threading.Event()  # the last chunk was taken: read the next
        self._room.set()
        self._requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._written: queue.SimpleQueue[OSError | None] = queue.SimpleQueue()
        self._closed = self._stuck = self._closing = False
        self._ahead = 0  # messages written ahead whose writing no one has waited for
        self._threads = [threading.Thread(target=target, daemon=True, name=name)
                         for target, name in ((self._read_replies, "labkit-replies"),
                                              (self._write_requests, "labkit-requests"))]
        for thread in self._threads:
            thread.start()

    def _read_replies(self) -> None:
        while True:
            self._room.wait()
            self._room.clear()
            if self._closing:
                return
            try:
                chunk = os.read(self.rfd, _CHUNK)
            except OSError:
                chunk = b""
            self._chunks.put(chunk)
            if not chunk:
                return

    def _write_requests(self) -> None:
        while (data := self._requests.get()) is not None:
            try:
                _write_all(self.wfd, data)
                self._written.put(None)
            except OSError as exc:  # the worker's end is closed: it ended
                self._written.put(exc)
                return

    def read(self, deadline: float | None) -> protocol.Message:
        """The next message; `ChannelTimeout` at `deadline`, `ChannelClosed` once the
        worker's end is closed, `ProtocolError` for what is not a message."""
        while (message := self.reader.take()) is None:
            if self._closed:
                raise protocol.ChannelClosed()
            try:
                chunk = self._chunks.get(timeout=_left(deadline))
            except queue.Empty:
                raise protocol.ChannelTimeout() from None
            if not chunk:
                self._closed = True
                raise protocol.ChannelClosed()
            self.reader.add(chunk)
            self._room.set()
        return message

    def write(self, data: bytes, deadline: float | None) -> None:
        """Write packed messages; `ChannelTimeout` if the worker has not taken them all
        by `deadline` (the write goes on until the worker is ended, and no other is
        made), `ChannelClosed` if the worker is gone."""
        if self._stuck:
            raise protocol.ChannelTimeout()
        self._requests.put(data)
        while True:
            try:
                error = self._written.get(timeout=_left(deadline))
            except queue.Empty:
                self._stuck = True
                raise protocol.ChannelTimeout() from None
            if error is not None:
                self._stuck = True
                raise protocol.ChannelClosed()
            if not self._ahead:
                return
            self._ahead -= 1

    def write_ahead(self, data: bytes) -> None:
        """Queue packed messages without waiting for the worker to take them: the next
        `write` waits for these too, and fails if they failed."""
        self._requests.put(data)
        self._ahead += 1

    def close(self, wait: float = 1.0) -> None:
        """Close both pipes, once the worker has ended: a read or write still under way
        ends then (end of file, broken pipe). A pipe whose thread has not ended within
        `wait` s stays open: closing it under a blocked thread could give its number
        to the next pipe opened, and the thread would read or write that one."""
        self._closing = True
        self._room.set()
        self._requests.put(None)
        for thread, fd in zip(self._threads, (self.rfd, self.wfd), strict=True):
            thread.join(wait)
            if not thread.is_alive():
                try:
                    os.close(fd)
                except OSError:
                    pass


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:_CHUNK]):]


class StreamCapture:
    """What one worker prints: the first `OUTPUT_KEEP` bytes, and how many more were
    dropped (as `output.Capture`). A thread of its own keeps the pipe empty; a snapshot
    first reads what is waiting, so what a call printed before its reply is in it.
    Both read only what the pipe holds (`platform.readable`), under one lock."""

    READS = 64  # chunks one snapshot reads at most: a flood cannot keep it reading

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.kept = bytearray()
        self.dropped = 0
        self.eof = False
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, daemon=True,
                                        name="labkit-output")
        self._thread.start()

    def _drain(self) -> None:
        while not self.eof:
            if platform.readable(self.fd, 0.1):
                self.pump()

    def pump(self, reads: int = READS) -> None:
        """Read what is waiting (at most `reads` chunks); never blocks."""
        with self.lock:
            for _ in range(reads):
                if self.eof or not platform.readable(self.fd, 0):
                    return
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    self.eof = True
                    os.close(self.fd)
                    return
                room = max(0, OUTPUT_KEEP - len(self.kept))
                self.kept += chunk[:room]
                self.dropped += len(chunk) - min(room, len(chunk))

    def snapshot(self) -> tuple[bytes, int]:
        self.pump()
        with self.lock:
            return bytes(self.kept), self.dropped

    def restart(self) -> None:
        self.pump()
        with self.lock:
            self.kept, self.dropped = bytearray(), 0

    def finish(self) -> None:
        """Read what is left; the thread reads the rest until the worker's end closes
        (at the latest as it dies), then closes the pipe."""
        self.pump()
