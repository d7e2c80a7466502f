"""The trusted side's handle on one forked worker: requests and replies over pipes that
`select` waits on, usage and threads read from `/proc`, and a call's time limit
stretched by the run-queue wait the kernel counted for the worker's threads.

What it offers the engine is `labkit.sandbox.backend.WorkerHandle` (the common part in
`labkit.sandbox.calls`).
"""

from __future__ import annotations

import mmap
import os
from typing import Any, Protocol

from labkit.sandbox import protocol
from labkit.sandbox.backend import Deadline, Usage
from labkit.sandbox.calls import CallHandle
from labkit.sandbox.errors import WorkerCrashed
from labkit.sandbox.linux import procfs
from labkit.sandbox.output import Capture
from labkit.sandbox.watching import ThreadSampler


class Forker(Protocol):
    """What a handle asks of the zygote that forked its worker (`zygote.Zygote`)."""

    def host_pid(self, pid: int) -> int | None: ...

    def given_up(self, generations: set[int]) -> str | None: ...

    def stop_worker(self, pid: int, generation: int | None = None) -> dict[str, Any]: ...

    def release_worker(self, pid: int, generation: int) -> None: ...


class WorkerHandle(CallHandle):
    """One forked worker, serving a check (or a lab's passing checks in a row, see
    `GradingPlugin.student`) over a request and a reply pipe."""

    def __init__(self, zygote: Forker, deadline: Deadline, pid: int, wfd: int, rfd: int,
                 capture: Capture, generation: int = 0, sent: int = 0,
                 arena: mmap.mmap | None = None) -> None:
        super().__init__(deadline, generation, capture, sent, arena)
        self.zygote, self.pid, self.wfd, self.rfd = zygote, pid, wfd, rfd
        self.reader = protocol.Reader(rfd)
        self._host_pid: int | None = None  # `pid` as this process sees it, once needed
        self._waited: float | None = 0.0  # its threads' run-queue wait when a call began

    def _write(self, data: bytes, deadline: float) -> None:
        protocol.write_all(self.wfd, data, deadline)

    def _read(self, deadline: float) -> protocol.Message:
        return self.reader.read(deadline)

    def _pid(self) -> int | None:
        if self._host_pid is None:
            self._host_pid = self.zygote.host_pid(self.pid)
        return self._host_pid

    def usage(self) -> Usage:
        """What the worker process has used so far, read from `/proc` by this side (see
        `procfs.usage`). `WorkerCrashed` if the worker is gone."""
        pid = self._pid()
        try:
            if pid is None:
                raise FileNotFoundError("no such process")
            return procfs.usage(pid)
        except OSError as exc:
            raise WorkerCrashed(None, f"cannot read the worker's /proc: {exc}") from None

    def watch(self) -> ThreadSampler | None:
        """The worker's threads sampled from `/proc`'s schedstat while a call runs (its
        own thread is the one whose id is its pid); None if it is not to be found."""
        pid = self._pid()
        if pid is None:
            return None
        return ThreadSampler(lambda: procfs.thread_times(pid),
                             lambda before: pid if pid in before else None)

    def _mark(self) -> None:
        """Note how long the worker's threads have waited on the run queue so far."""
        try:
            pid = self._pid()
            self._waited = None if pid is None else procfs.run_queue_waited(pid)
        except (OSError, ValueError, IndexError):
            self._waited = None

    def _could_run(self, elapsed: float) -> tuple[float, float] | None:
        """The call's time less what its threads waited on the kernel's run queue since
        it began; and what the process ran in all."""
        if self._waited is None:
            return None
        waited, ran = procfs.run_queue_wait(self._host_pid or 0)
        return elapsed - (waited - self._waited), ran

    def _given_up(self) -> str | None:
        return self.zygote.given_up({self.generation})

    def _end(self) -> dict[str, Any]:
        return self.zygote.stop_worker(self.pid, self.generation)

    def _release(self) -> None:
        """The zygote finishes the stop (process tree killed, folder swept) before it
        forks the next worker; nobody waits for it."""
        self.zygote.release_worker(self.pid, self.generation)

    def _close_channels(self) -> None:
        for fd in (self.wfd, self.rfd):
            os.close(fd)
