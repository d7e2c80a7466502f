"""The trusted side's handle on one forked worker: requests and replies over pipes, a
deadline on every wait, stretched by what the machine kept the worker waiting.

Linux only in what it reads (`/proc`'s run-queue wait and usage, see `procfs`); what it
offers the engine is `labkit.sandbox.backend.WorkerHandle`.
"""

from __future__ import annotations

import mmap
import os
import time
from typing import Any, Protocol

from labkit.sandbox import protocol
from labkit.sandbox.backend import Deadline, Usage
from labkit.sandbox.errors import (
    GradingTimeout,
    KitFault,
    WorkerCrashed,
    WorkerFailure,
    WorkerStarved,
    WorkerTimeout,
)
from labkit.sandbox.linux import procfs
from labkit.sandbox.output import Capture, excerpt

# A call's time limit counts the time its worker could run: time spent waiting on the run
# queue while other processes had the CPU is added on, up to this many times the limit in
# all; past that, the machine starved it (`WorkerStarved`), unless it ran for a whole limit.
MAX_STRETCH = 4.0


class Forker(Protocol):
    """What a handle asks of the zygote that forked its worker (`zygote.Zygote`)."""

    def host_pid(self, pid: int) -> int | None: ...

    def given_up(self, generations: set[int]) -> str | None: ...

    def stop_worker(self, pid: int, generation: int | None = None) -> dict[str, Any]: ...

    def release_worker(self, pid: int, generation: int) -> None: ...


class WorkerHandle:
    """One forked worker, serving a check (or a lab's passing checks in a row, see
    `GradingPlugin.student`) over a request and a reply pipe; implements
    `labkit.sandbox.backend.WorkerHandle` for the zygote that forked it."""

    def __init__(self, zygote: Forker, deadline: Deadline, pid: int, wfd: int, rfd: int,
                 capture: Capture, generation: int = 0, sent: int = 0,
                 arena: mmap.mmap | None = None) -> None:
        self.zygote, self.deadline, self.pid, self.wfd, self.rfd = zygote, deadline, pid, wfd, rfd
        self.capture, self.generation = capture, generation
        self.arena = arena  # this side's mapping of the memory shared with the worker
        self.reader = protocol.Reader(rfd)
        self._sent, self._answered = sent, 0  # requests sent (or made at start), answered
        self.ended: dict[str, Any] | None = None
        self._host_pid: int | None = None  # `pid` as this process sees it, once needed
        self._waited: float | None = 0.0  # its threads' run-queue wait when a call began

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
            self._mark_waited()
        try:
            protocol.write_all(self.wfd, data, deadline)
        except (protocol.ChannelTimeout, protocol.ChannelClosed) as exc:
            raise self._failed(exc, error) from None
        return True

    def receive(self, timeout: float, since: float | None = None) -> Any:
        """The reply to the oldest request not yet answered (the first may be the one
        the worker was started with, see `Zygote.spawn`), or a question the call asks
        of a grader's callable (a header with "callback"): the request is still open,
        to be answered with `answer` and received again. `since` (a `time.monotonic()`
        value, default now) is when the `timeout` started, so a call's questions and
        its reply share one limit."""
        deadline, error = self._deadline(timeout, since)
        started = time.monotonic() if since is None else since
        while True:
            try:
                reply, reply_blobs = self.reader.read(deadline)
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
            self._mark_waited()
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
            protocol.write_message(self.wfd, header, blobs, deadline)
        except (protocol.ChannelTimeout, protocol.ChannelClosed) as exc:
            raise self._failed(exc, error) from None

    def usage(self) -> Usage:
        """What the worker process has used so far, read from `/proc` by this side (see
        `procfs.usage`). `WorkerCrashed` if the worker is gone."""
        if self._host_pid is None:
            self._host_pid = self.zygote.host_pid(self.pid)
        pid = self._host_pid
        try:
            if pid is None:
                raise FileNotFoundError("no such process")
            return procfs.usage(pid)
        except OSError as exc:
            raise WorkerCrashed(None, f"cannot read the worker's /proc: {exc}") from None

    def watch(self) -> procfs.ThreadSampler | None:
        """The worker's threads sampled from `/proc` while a call runs (see
        `procfs.ThreadSampler`); None if the worker is not to be found."""
        if self._host_pid is None:
            self._host_pid = self.zygote.host_pid(self.pid)
        return procfs.ThreadSampler(self._host_pid) if self._host_pid is not None else None

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
            why = self.zygote.given_up({self.generation})
            if why is not None:  # the kit ended it, with the zygote it gave up on
                return KitFault(why)
            return WorkerCrashed(ended["exitcode"])
        self.stop()
        return WorkerCrashed(None, str(exc))

    def _mark_waited(self) -> None:
        """Note how long the worker's threads have waited on the run queue so far: a call's
        time limit is stretched by what they wait from here (`_stretch`)."""
        try:
            if self._host_pid is None:
                self._host_pid = self.zygote.host_pid(self.pid)
            self._waited = (None if self._host_pid is None
                            else procfs.run_queue_waited(self._host_pid))
        except (OSError, ValueError, IndexError):
            self._waited = None

    def _stretch(self, error: WorkerFailure, started: float) -> float | WorkerFailure:
        """At a call's time limit: a later deadline if other processes kept the worker
        from running, else what to raise.

        The limit counts the time the call could run: what its threads waited on the
        kernel's run queue since the call began is added on (a busy machine slows honest
        code down; it must not make it time out), up to `MAX_STRETCH` times the limit in
        all. A call still short of its time then was starved by the machine: the kit's
        failure (`WorkerStarved`), unless its processes did run for a whole limit (code
        that starves itself with threads or processes of its own). Code that sleeps or
        deadlocks waits on no queue: its timeout comes at the limit, as before. The
        grading's own deadline is never stretched.
        """
        if not isinstance(error, WorkerTimeout) or isinstance(error, GradingTimeout) \
                or self._waited is None or error.limit <= 0:
            return error
        try:
            waited, ran = procfs.run_queue_wait(self._host_pid or 0)
        except (OSError, ValueError, IndexError):
            return error
        now, limit = time.monotonic(), error.limit
        could_run = (now - started) - (waited - self._waited)
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
            self.ended = self.zygote.stop_worker(self.pid, self.generation)
        return self.ended

    def close(self) -> None:
        """End the worker at the end of its check, without waiting to hear how it ended.

        Nobody asks then: the grader goes on while the zygote stops the worker, and the
        zygote finishes the stop (process tree killed, folder swept) before it forks
        the next worker.
        """
        if self.ended is None:
            self._hang_up()
            self.ended = {"killed": None, "exitcode": None}
            self.zygote.release_worker(self.pid, self.generation)

    def _hang_up(self) -> None:
        for fd in (self.wfd, self.rfd):
            os.close(fd)
        self.capture.finish()
        if self.arena is not None:
            try:
                self.arena.close()
            except BufferError:  # a grader still holds arrays over it: unmapped with them
                pass
            self.arena = None

