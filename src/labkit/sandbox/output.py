"""What a worker prints: drained from its pipe so it never blocks, kept bounded, shown short.

Output is never parsed for results; the student sees an excerpt of it per check.
"""

from __future__ import annotations

import os
import selectors
import threading

OUTPUT_EXCERPT = 2000  # bytes of output shown to the student, per check
OUTPUT_KEEP = 32 * 1024  # bytes of output kept per worker; the rest is counted, then dropped


class Capture:
    """What one worker printed: the first `OUTPUT_KEEP` bytes, and how many were dropped."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.kept = bytearray()
        self.dropped = 0
        self.eof = False
        self.finished = False
        self.lock = threading.Lock()

    def pump(self, reads: int = 16) -> None:
        """Read what is waiting in the pipe (at most `reads` chunks); never blocks."""
        with self.lock:
            for _ in range(reads):
                if self.eof or self.finished:
                    return
                try:
                    chunk = os.read(self.fd, 65536)
                except BlockingIOError:
                    return
                except OSError:
                    chunk = b""
                if not chunk:
                    self.eof = True
                    return
                room = max(0, OUTPUT_KEEP - len(self.kept))
                self.kept += chunk[:room]
                self.dropped += len(chunk) - min(room, len(chunk))

    def snapshot(self) -> tuple[bytes, int]:
        self.pump(reads=64)
        with self.lock:
            return bytes(self.kept), self.dropped

    def restart(self) -> None:
        """Forget what was read so far (after reading what is waiting): what comes next
        is kept and counted afresh, e.g. for another check served by the same worker."""
        self.pump(reads=64)
        with self.lock:
            self.kept, self.dropped = bytearray(), 0

    def finish(self) -> None:
        """Read what is left, then leave the pipe to the drain thread, which closes it
        when it next looks: at the latest when the worker's end closes, as it dies."""
        self.pump(reads=64)
        with self.lock:
            self.finished = True


class _Drain(threading.Thread):
    """One thread per process that keeps every worker's output pipe empty.

    A worker that prints more than the pipe holds would otherwise block; the drain keeps
    the first bytes of each and counts the rest, so a flood costs the grader no memory.
    """

    def __init__(self) -> None:
        super().__init__(name="labkit-output", daemon=True)
        self.pid = os.getpid()
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()  # not inherited by what we start
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        self.pending: list[Capture] = []
        self.watched: set[Capture] = set()
        self.lock = threading.Lock()

    def watch(self, fd: int) -> Capture:
        os.set_blocking(fd, False)
        capture = Capture(fd)
        with self.lock:
            self.pending.append(capture)
        self.wake()
        return capture

    def wake(self) -> None:
        try:
            os.write(self.wake_w, b"x")
        except BlockingIOError:
            pass

    def run(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    try:
                        while os.read(self.wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    key.data.pump()
            with self.lock:
                pending, self.pending = self.pending, []
            for capture in pending:
                self.selector.register(capture.fd, selectors.EVENT_READ, capture)
                self.watched.add(capture)
            for capture in [c for c in self.watched if c.eof or c.finished]:
                self.selector.unregister(capture.fd)
                self.watched.discard(capture)
                with capture.lock:
                    os.close(capture.fd)
                    capture.eof = capture.finished = True


_DRAIN: _Drain | None = None
_DRAIN_LOCK = threading.Lock()


def drain() -> _Drain:
    """The drain thread of this process (started anew after a fork)."""
    global _DRAIN
    with _DRAIN_LOCK:
        if _DRAIN is None or _DRAIN.pid != os.getpid() or not _DRAIN.is_alive():
            _DRAIN = _Drain()
            _DRAIN.start()
        return _DRAIN


def excerpt(data: bytes, dropped: int, limit: int = OUTPUT_EXCERPT) -> str:
    """A short, printable excerpt of captured output, saying how much is not shown."""
    shown = data[:limit]
    text = shown.decode("utf-8", "replace")
    text = "".join(c if c in "\n\t" or c.isprintable() else "\ufffd" for c in text)
    hidden = len(data) - len(shown) + dropped
    if hidden:
        text += f"\n[... {hidden} more bytes not shown]"
    return text

