"""Pipes to a worker, waited on with a deadline on every system.

POSIX lets the Linux back end `select` on its pipes; Windows cannot wait on a pipe that
way. Here each blocking read or write runs in a helper thread and the grader waits for
it with a deadline: one read (of at most one chunk) and one write are outstanding at a
time, so whatever the worker sends, the trusted side holds one chunk of it beyond the
message being framed (`protocol.Reader`, with its limits), and a worker that stops
reading costs a thread blocked until the worker is ended, never the grader's time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from labkit import platform
from labkit.sandbox import protocol
from labkit.sandbox.output import OUTPUT_KEEP

_CHUNK = 1 << 20


class _Pending:
    """One blocking call running in a helper thread, and what it gave."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        threading.Thread(target=self._run, args=(call,), daemon=True,
                         name="labkit-pipe").start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.value = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self.error = exc
        self.done.set()

    def wait(self, deadline: float | None) -> Any:
        """Its value once done; `ChannelTimeout` at `deadline` (the call goes on)."""
        if not self.done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            raise protocol.ChannelTimeout()
        if self.error is not None:
            raise self.error
        return self.value


class Channel:
    """The request (`wfd`) and reply (`rfd`) pipes of one worker, as framed messages."""

    def __init__(self, wfd: int, rfd: int, limit: int = protocol.MAX_MESSAGE) -> None:
        self.wfd, self.rfd = wfd, rfd
        self.reader = protocol.Reader(rfd, limit)
        self._read: _Pending | None = None
        self._write: _Pending | None = None

    def read(self, deadline: float | None) -> protocol.Message:
        """The next message; `ChannelTimeout` at `deadline`, `ChannelClosed` once the
        worker's end is closed, `ProtocolError` for what is not a message."""
        while (message := self.reader.take()) is None:
            if self._read is None:
                self._read = _Pending(lambda: os.read(self.rfd, self.reader.wanted()))
            chunk = self._read.wait(deadline)
            self._read = None
            if not chunk:
                raise protocol.ChannelClosed()
            self.reader.add(chunk)
        return message

    def write(self, data: bytes, deadline: float | None) -> None:
        """Write packed messages; `ChannelTimeout` if the worker has not taken them all
        by `deadline` (the write goes on until the worker is ended)."""
        if self._write is not None and not self._write.done.is_set():
            raise protocol.ChannelTimeout()  # an earlier write is still stuck
        self._write = _Pending(lambda: _write_all(self.wfd, data))
        try:
            self._write.wait(deadline)
        except OSError:  # the worker's end is closed: it ended
            raise protocol.ChannelClosed() from None

    def close(self, wait: float = 1.0) -> None:
        """Close both pipes, once the worker has ended: a read or write still pending
        ends then (end of file, broken pipe). One that does not within `wait` s keeps
        its pipe open: closing it under a blocked thread could give its number to the
        next pipe opened, and the thread would read that one."""
        for pending, fd in ((self._read, self.rfd), (self._write, self.wfd)):
            if pending is None or pending.done.wait(wait):
                try:
                    os.close(fd)
                except OSError:
                    pass


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
