"""What every back end's worker handle does the same way: requests and replies in order,
callback questions, a deadline on every wait, stretched by what the machine kept the
worker from running, and how a failed wait is reported.

A back end's handle (`linux.handle`, `portable.handle`) supplies the rest: how bytes
reach the worker and come back (`_write`, `_read`), how long the worker could run since
a call began (`_mark`, `_could_run`), and how it is ended (`_end`, `_release`).
"""

from __future__ import annotations

import mmap
import time
from typing import Any

from labkit.sandbox import protocol
from labkit.sandbox.backend import Deadline
from labkit.sandbox.errors import (
    GradingTimeout,
    KitFault,
    WorkerCrashed,
    WorkerFailure,
    WorkerStarved,
    WorkerTimeout,
)
from labkit.sandbox.output import excerpt

# A call's time limit counts the time its worker could run: time spent waiting while
# other processes had the CPU is added on, up to this many times the limit in all; past
# that, the machine starved it (`WorkerStarved`), unless it ran for a whole limit.
MAX_STRETCH = 4.0


class CallHandle:
    """The part of `labkit.sandbox.backend.WorkerHandle` common to every back end."""

    # The code of its waits for a worker (see `labkit.sandbox.backend.Backend.waits`),
    # filled in below the class.
    waits: frozenset = frozenset()

    def __init__(self, deadline: Deadline, generation: int, capture: Any, sent: int = 0,
                 arena: mmap.mmap | None = None) -> None:
        self.deadline, self.generation, self.capture = deadline, generation, capture
        self.arena = arena  # this side's mapping of the memory shared with the worker
        self._sent, self._answered = sent, 0  # requests sent (or made at start), answered
        self.ended: dict[str, Any] | None = None

    # --- what a back end supplies ------------------------------------------------------

    def _write(self, data: bytes, deadline: float) -> None:
        """Write packed messages (`ChannelTimeout`, `ChannelClosed`)."""
        raise NotImplementedError

    def _read(self, deadline: float) -> protocol.Message:
        """The next message (`ChannelTimeout`, `ChannelClosed`, `ProtocolError`)."""
        raise NotImplementedError

    def _mark(self) -> None:
        """A call begins: note what `_could_run` counts from."""

    def _could_run(self, elapsed: float) -> tuple[float, float] | None:
        """Of the `elapsed` seconds since `_mark`, how long the worker could have run,
        and how long its processes did run; None when the system cannot say."""
        return None

    def _end(self) -> dict[str, Any]:
        """End the worker and all it started, waiting to hear how it ended."""
        raise NotImplementedError

    def _release(self) -> None:
        """End the worker and all it started, without waiting."""
        raise NotImplementedError

    def _given_up(self) -> str | None:
        """Why the kit itself ended this worker's back end, if it did."""
        return None

    def _close_channels(self) -> None:
        raise NotImplementedError

    # --- the calls ---------------------------------------------------------------------

    def request(self, header: dict[str, Any], blobs: list[bytes], timeout: float) -> Any:
        """Send one request and return the decoded reply header and blobs.

        The wait ends at `timeout` or at the grading's deadline, whichever comes first.
        """
        self.send([(header, blobs)], timeout)
        return self.receive(timeout)

    def send(self, requests: list[tuple[dict[str, Any], list[bytes]]], timeout: float,
             limit: int | None = None) -> bool:
        """Send requests, in one write, without waiting for their replies (`receive`).

        False, and nothing sent, if together they are over `limit` bytes.
        """
        deadline, error = self._deadline(timeout)
        data = b"".join(protocol.pack({**header, "id": self._sent + number}, blobs)
                        for number, (header, blobs) in enumerate(requests, 1))
        if limit is not None and len(data) > limit:
            return False
        self._sent += len(requests)
        if self._answered == self._sent - len(requests):  # the first of these starts now
            self._mark()
        try:
            self._write(data, deadline)
        except (protocol.ChannelTimeout, protocol.ChannelClosed) as exc:
            raise self._failed(exc, error) from None
        return True

    def receive(self, timeout: float, since: float | None = None) -> Any:
        """The reply to the oldest request not yet answered (the first may be the one
        the worker was started with), or a question the call asks of a grader's
        callable (a header with "callback"): the request is still open, to be answered
        with `answer` and received again. `since` (a `time.monotonic()` value, default
        now) is when the `timeout` started, so a call's questions and its reply share
        one limit."""
        deadline, error = self._deadline(timeout, since)
        started = time.monotonic() if since is None else since
        while True:
            try:
                reply, reply_blobs = self._read(deadline)
                break
            except protocol.ChannelTimeout as exc:
                later = self._stretch(error, started)
                if isinstance(later, float):
                    deadline = later
                    continue
                self._answered += 1
                self.stop()
                raise later from exc
            except (protocol.ChannelClosed, protocol.ProtocolError) as exc:
                self._answered += 1
                raise self._failed(exc, error) from None
        if self._answered + 1 < self._sent:  # requests sent ahead: the next one's wait begins
            self._mark()
        if reply.get("id") != self._answered + 1:
            self.stop()
            raise WorkerCrashed(None, "reply out of order")
        if "callback" not in reply:
            self._answered += 1
        return reply, reply_blobs

    def answer(self, header: dict[str, Any], blobs: list[bytes], timeout: float,
               since: float) -> None:
        """Answer the question a call asked (see `receive`), under the call's limit."""
        deadline, error = self._deadline(timeout, since)
        try:
            self._write(protocol.pack(header, blobs), deadline)
        except (protocol.ChannelTimeout, protocol.ChannelClosed) as exc:
            raise self._failed(exc, error) from None

    def _deadline(self, timeout: float, since: float | None = None
                  ) -> tuple[float, WorkerFailure]:
        """When waiting ends: at `timeout` (counted from `since`, default now), or at the
        grading's deadline if sooner."""
        deadline = (time.monotonic() if since is None else since) + timeout
        grading = self.deadline.at
        if grading is not None and grading < deadline:
            return grading, GradingTimeout("the grading ran out of time")
        return deadline, WorkerTimeout(f"no answer within {timeout:g} s", timeout)

    def _failed(self, exc: Exception, error: WorkerFailure) -> WorkerFailure:
        """The worker is stopped; what to raise for `exc`."""
        if isinstance(exc, protocol.ChannelTimeout):
            self.stop()
            return error
        if isinstance(exc, protocol.ChannelClosed):
            ended = self.stop()
            why = self._given_up()
            if why is not None:  # the kit ended it, with the back end it gave up on
                return KitFault(why)
            return WorkerCrashed(ended["exitcode"])
        self.stop()
        return WorkerCrashed(None, str(exc))

    def _stretch(self, error: WorkerFailure, started: float) -> float | WorkerFailure:
        """At a call's time limit: a later deadline if other processes kept the worker
        from running, else what to raise.

        The limit counts the time the call could run (`_could_run`): a busy machine
        slows honest code down; it must not make it time out. Up to `MAX_STRETCH` times
        the limit in all; a call still short of its time then was starved by the
        machine: the kit's failure (`WorkerStarved`), unless its processes did run for
        a whole limit (code that starves itself with threads or processes of its own).
        Code that sleeps or deadlocks on a machine with room to run it times out at the
        limit. The grading's own deadline is never stretched.
        """
        if not isinstance(error, WorkerTimeout) or isinstance(error, GradingTimeout) \
                or error.limit <= 0:
            return error
        now, limit = time.monotonic(), error.limit
        try:
            measured = self._could_run(now - started)
        except (OSError, ValueError, IndexError):
            measured = None
        if measured is None:
            return error
        could_run, ran = measured
        if could_run >= limit or ran >= limit:
            return error
        grading = self.deadline.at
        if grading is not None and now >= grading:
            return GradingTimeout("the grading ran out of time")
        if now - started < MAX_STRETCH * limit:
            later = now + max(limit - could_run, 0.05)
            return later if grading is None else min(later, grading)
        return WorkerStarved(f"the machine was too busy: in {now - started:.1f} s the worker "
                             f"could run for {could_run:.1f} s of its {limit:g} s")

    @property
    def idle(self) -> bool:
        """Alive as far as the grader knows, with every request sent answered."""
        return self.ended is None and self._answered == self._sent

    def output(self) -> str:
        """A short excerpt of what the worker printed (since `next_output`); never parsed
        for results."""
        return excerpt(*self.capture.snapshot())

    def next_output(self) -> None:
        """Start the output afresh, with room for its own excerpt: another check begins."""
        self.capture.restart()

    def stop(self) -> dict[str, Any]:
        """End the worker and its whole process tree (idempotent); report how it ended."""
        if self.ended is None:
            self._hang_up()
            self.ended = self._end()
        return self.ended

    def close(self) -> None:
        """End the worker at the end of its check, without waiting to hear how it ended."""
        if self.ended is None:
            self._hang_up()
            self.ended = {"killed": None, "exitcode": None}
            self._release()

    def _hang_up(self) -> None:
        self._close_channels()
        self.capture.finish()
        if self.arena is not None:
            try:
                self.arena.close()
            except BufferError:  # a grader still holds arrays over it: unmapped with them
                pass
            self.arena = None


CallHandle.waits = frozenset({CallHandle.receive.__code__, CallHandle.send.__code__,
                              CallHandle.answer.__code__})
