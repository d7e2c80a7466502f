"""Trusted side of the worker processes: start the zygote, fork workers, enforce time.

The student's code only ever runs in processes started here. Each check gets a fresh
worker (or, in a lab that shares workers, the one a passing check handed on) forked
from a zygote that has NumPy and the probes already imported; the worker runs in a new
directory holding copies of only the lab's files, which the zygote writes from the
bytes the grader holds (the trusted side writes none). The grader talks to it through pipes,
with a deadline on every call (and on the whole grading), drains what it prints into a
bounded buffer, and has the zygote kill its whole process tree when it is done with it
or a deadline passes. The zygote runs inside bubblewrap when it is available
(see `labkit.sandbox.isolation`); closing the zygote kills everything it started.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.sandbox import isolation as isolation_mod
from labkit.sandbox import pids, protocol

OUTPUT_EXCERPT = 2000  # bytes of output shown to the student, per check
OUTPUT_KEEP = 32 * 1024  # bytes of output kept per worker; the rest is counted, then dropped
DEFAULT_LIMITS = {
    "RLIMIT_CPU": 120,
    "RLIMIT_AS": 2 * 1024**3,
    "RLIMIT_FSIZE": 64 * 1024**2,
    "RLIMIT_NOFILE": 256,
    "RLIMIT_CORE": 0,
}
MAX_PROBES_BYTES = 4 * 1024**2
ARENA_BYTES = 16 * 1024**2  # memory a worker shares with the grader (only what is written costs)
CHILD_MODULE = "labkit.sandbox.child.worker"  # what the zygote runs
MARKER = "LABKIT_SANDBOX"  # in the environment of the zygote and of everything it starts
_PASSED_ENV = ("PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_START_SECONDS = 30.0
# A call's time limit counts the time its worker could run: time spent waiting on the run
# queue while other processes had the CPU is added on, up to this many times the limit in
# all; past that, the machine starved it (`WorkerStarved`), unless it ran for a whole limit.
MAX_STRETCH = 4.0
# How long the zygote has to answer anything once started (a ping, a spawn, a stop). One
# that answers later is given up on (its replies would come out of turn): the kit's
# failure, which no check's code is blamed for (`Zygote.given_up`).
ANSWER_SECONDS = 30.0
DYING_SECONDS = 0.5


class WorkerFailure(Exception):
    """The worker could not answer: base of the timeout and crash outcomes."""

    where: str = ""  # what the grader asked for when it failed (set by the engine's proxy)


class WorkerTimeout(WorkerFailure):
    """The worker did not answer within the call's time limit (`limit`, s) and was killed."""

    def __init__(self, message: str, limit: float = 0.0) -> None:
        super().__init__(message)
        self.limit = limit


class GradingTimeout(WorkerTimeout):
    """The whole grading ran past its limit (`Sandbox.deadline`)."""


class WorkerCrashed(WorkerFailure):
    """The worker exited, was killed by a signal, or sent something unreadable."""

    def __init__(self, exitcode: int | None, detail: str = "") -> None:
        super().__init__(detail or f"exit code {exitcode}")
        self.exitcode = exitcode
        self.detail = detail


class KitFault(WorkerFailure):
    """The kit, not the student's code, could not grade a check: a worker or zygote ended
    from outside the student's code, a worker the machine starved, or a measurement the
    machine was too busy to make. A check that meets one is run again on a fresh worker
    (`labkit.engine.plugin.Retrying`); one that meets it twice makes the grading the
    kit's failure, never a point the student lost. Not a `WorkerCrashed`.

    `detail` says what happened (English, for logs); a grader may instead name one of
    its lab's bilingual messages, `key` with `params` (see `labkit.engine.api.kit_fault`).
    """

    def __init__(self, detail: str = "", key: str = "", **params: Any) -> None:
        super().__init__(detail or key)
        self.detail, self.key, self.params = detail, key, params


class WorkerStarved(KitFault):
    """The worker missed its deadline because the machine gave it too little CPU: it
    waited to run for most of the time limit and ran for little of it (`_stretch`)."""


class SandboxFailure(KitFault):
    """The sandbox could not start a worker, even in a fresh zygote: the kit failed,
    not the submission (see `Sandbox.failure`)."""


@dataclass(frozen=True)
class SandboxConfig:
    """What a sandbox needs: the graded files, where to import from, and the limits.

    `files` are the graded files, `{relative path: bytes}` as they were read: they stay
    in memory, and each worker gets its own copy in its fresh folder (the one copy
    written anywhere). `isolation` is the requested mode for a sandbox that starts its
    own zygote (None: `$LABKIT_ISOLATION`, else `auto`).
    """

    files: Mapping[str, bytes]
    modules: tuple[str, ...]
    sys_path: tuple[str, ...] = ()
    probes: Path | None = None
    limits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    isolation: str | None = None


# --- output ----------------------------------------------------------------------------


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
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
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


def _drain() -> _Drain:
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


# --- workers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """A worker's use of the machine at one moment, as `/proc` shows it (`WorkerHandle.usage`)."""

    cpu_s: float
    threads: int
    children: tuple[int, ...]


def _children(pid: int, threads: list[str]) -> list[int]:
    """The children of process `pid` (whose threads are `threads`): from each thread's
    `children` file, or, on a kernel without them, from every process's parent."""
    found: list[int] = []
    try:
        for thread in threads:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as handle:
                found += map(int, handle.read().split())
        return found
    except FileNotFoundError:  # no CONFIG_PROC_CHILDREN
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if _process_stat(int(name))[0] == pid:
                    found.append(int(name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def children(pid: int) -> list[int]:
    """The children of process `pid` (none if it is gone)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return _children(pid, threads)


def run_queue_waited(pid: int) -> float:
    """Seconds process `pid`'s threads have waited on the run queue, summed, from `/proc`
    (`schedstat`: kernels with schedstats). Read at every request a worker is sent: one
    directory listing and one small file a thread."""
    waited = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/schedstat", "rb") as handle:
            waited += int(handle.read().split()[1])
    return waited / 1e9


def run_queue_wait(pid: int) -> tuple[float, float]:
    """`run_queue_waited`, and seconds process `pid` and its children have run."""
    waited = run_queue_waited(pid)
    ran = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for process in (pid, *children(pid)):
        try:
            with open(f"/proc/{process}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        ran += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
    return waited, ran


def _nspid(pid: int) -> list[int]:
    """`pid`'s pids in its PID namespace and each one above it, innermost last."""
    with open(f"/proc/{pid}/status", "rb") as handle:
        for line in handle:
            if line.startswith(b"NSpid:"):
                return [int(n) for n in line.split()[1:]]
    return [pid]


class WorkerHandle:
    """One forked worker, serving a check (or a lab's passing checks in a row, see
    `GradingPlugin.student`) over a request and a reply pipe."""

    def __init__(self, sandbox: Sandbox, pid: int, wfd: int, rfd: int, capture: Capture,
                 generation: int = 0, sent: int = 0, arena: mmap.mmap | None = None) -> None:
        self.sandbox, self.pid, self.wfd, self.rfd = sandbox, pid, wfd, rfd
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
        the worker was started with, see `Sandbox.spawn`), or a question the call asks
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
        """What the worker process has used so far, read from `/proc` by this side.

        The worker cannot change these numbers (the kernel keeps them), so a grader may
        judge them: CPU time (user + system, every thread, exited ones included; in clock
        ticks, 10 ms on most kernels), its threads, and its children's pids as this
        process sees them. `WorkerCrashed` if the worker is gone.
        """
        if self._host_pid is None:
            self._host_pid = self.sandbox.zygote.host_pid(self.pid)
        pid = self._host_pid
        try:
            if pid is None:
                raise FileNotFoundError("no such process")
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError as exc:
            raise WorkerCrashed(None, f"cannot read the worker's /proc: {exc}") from None
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return Usage(cpu, len(threads), tuple(_children(pid, threads)))

    def _deadline(self, timeout: float, since: float | None = None
                  ) -> tuple[float, WorkerFailure]:
        """When waiting ends: at `timeout` (counted from `since`, default now), or at the
        grading's deadline if sooner."""
        deadline = (time.monotonic() if since is None else since) + timeout
        grading = self.sandbox.deadline
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
            why = self.sandbox.given_up({self.generation})
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
                self._host_pid = self.sandbox.zygote.host_pid(self.pid)
            self._waited = None if self._host_pid is None else run_queue_waited(self._host_pid)
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
            waited, ran = run_queue_wait(self._host_pid or 0)
        except (OSError, ValueError, IndexError):
            return error
        now, limit = time.monotonic(), error.limit
        could_run = (now - started) - (waited - self._waited)
        if could_run >= limit or ran >= limit:
            return error
        grading = self.sandbox.deadline
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
            self.ended = self.sandbox.stop_worker(self.pid, self.generation)
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
            self.sandbox.release_worker(self.pid, self.generation)

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


# --- the zygote --------------------------------------------------------------------------


class Zygote:
    """The pre-warmed process that forks workers; one can serve many gradings.

    `isolation` asks for a mode (`auto`, `bwrap`, `process`; None: `$LABKIT_ISOLATION`);
    the attribute `isolation` afterwards names the mode in use. `auto` falls back to
    `process` if bwrap cannot start a sandbox here.
    """

    def __init__(self, isolation: str | None = None) -> None:
        self.requested = isolation_mod.requested(isolation)
        self.choice = isolation_mod.choose(isolation)
        self.generation = 0
        self.marker = ""
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._scratch: str | None = None  # process mode: where the workers' folders go
        self._log: Any = None  # the zygote's stderr (bwrap's complaints), an unnamed file
        self._ready = False
        self._unread = 0  # replies to `post`ed requests not yet read
        self._since = 0  # process mode: when the zygote started (clock ticks since boot)
        self._shm_before: set[int] = set()  # process mode: System V segments before it
        self._dev_shm_before: set[str] = set()  # process mode: what /dev/shm held before it
        self._group: pids.PidsGroup | None = None  # the pids cgroup it runs in, if any
        # generation -> why the kit itself ended that zygote while it ran (`give_up`)
        self.given_up: dict[int, str] = {}

    @property
    def isolation(self) -> str:
        return self.choice.mode

    def start(self) -> None:
        """Start the zygote without waiting for it, so its imports overlap ours."""
        self.generation += 1
        self.marker = f"{os.getpid()}-{secrets.token_hex(8)}"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env.update(LANG="C.UTF-8", **isolation_mod.ONE_MATH_THREAD, **{MARKER: self.marker})
        command = [sys.executable, "-I", "-B", "-m", CHILD_MODULE, str(theirs.fileno())]
        if self.choice.mode == "process":  # the zygote removes it when it ends, whatever we do
            self._scratch = tempfile.mkdtemp(prefix="labkit-zygote-")
            command += ["--scratch", self._scratch, "--remove-scratch", "1"]
        else:
            command += ["--scratch", "/tmp", "--private", "1"]  # the sandbox's own, gone with it
        self._close_log()
        self._log = tempfile.TemporaryFile(prefix="labkit-zygote-")
        self._group = pids.make()
        if self.choice.mode == "process":  # before the zygote can make anything there
            self._dev_shm_before = set(_dev_shm())
        try:
            self._process = isolation_mod.launch(
                self.choice, command, env=env, pass_fds=[theirs.fileno()],
                stderr=self._log.fileno(), cwd=self._scratch or "/", group=self._group,
            )
        except (OSError, isolation_mod.IsolationError) as exc:
            ours.close()
            self._cleanup_scratch()
            self._remove_group()
            if not self._fall_back(str(exc)):
                raise SandboxFailure(f"the sandbox did not start: {exc}") from None
            self.start()
            return
        finally:
            theirs.close()
        self._control = ours
        self._ready = False
        self._unread = 0
        if self.choice.mode == "process":
            _become_subreaper()
            _LIVE_ZYGOTES.add(self._process.pid)
            self._since = _process_stat(self._process.pid)[1]
            self._shm_before = {seg[0] for seg in _host_shm()}

    def host_pid(self, pid: int) -> int | None:
        """The pid this process knows the zygote's worker `pid` by (with bwrap, the
        zygote lives in a PID namespace of its own: found among the sandbox's
        descendants by its innermost pid); None if there is no such process."""
        if self._process is None:
            return None
        if self.choice.mode == "process":
            return pid
        # the zygote's descendants first (a few, found from their parents' `children`)
        seen, todo = 0, [self._process.pid]
        while todo and seen < 64:
            candidate = todo.pop()
            seen += 1
            try:
                inner = _nspid(candidate)
                if len(inner) > 1 and inner[-1] == pid:
                    return candidate
            except (OSError, IndexError):
                continue
            todo += children(candidate)
        parents: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    parents[int(name)] = _process_stat(int(name))[0]
                except (OSError, IndexError, ValueError):
                    continue
        for candidate in parents:
            ancestor = candidate
            while ancestor in parents and ancestor != self._process.pid:
                ancestor = parents[ancestor]
            try:
                inner = _nspid(candidate) if ancestor == self._process.pid else []
            except OSError:
                continue
            if len(inner) > 1 and inner[-1] == pid:
                return candidate
        return None

    def _fall_back(self, reason: str) -> bool:
        """After bwrap failed to start: use `process` if the request was `auto`."""
        if self.choice.mode != "bwrap":
            return False
        isolation_mod.mark_broken(self.choice, reason)
        if self.requested != "auto":
            return False
        self.choice = isolation_mod.choose("auto")
        return True

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def ask(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        self._settle()
        if not self.alive:
            self.close()
            self.start()
        assert self._control is not None
        if not self._ready:
            self._await_ready()
        data = protocol.pack(message, [])
        try:
            if fds:
                socket.send_fds(self._control, [data], fds)
            else:
                self._control.send(data)
        except OSError as exc:
            raise WorkerCrashed(None, f"the sandbox stopped: {exc}") from None
        return self._receive()

    def answers(self) -> bool:
        """Whether the zygote running now still answers, without starting another.

        A worker can kill its zygote (its parent) and still reply before it dies with
        it: the kill is sent before the reply, so a zygote that was killed can no longer
        answer a ping made after the reply was read.
        """
        self._settle()
        if self._control is None or not self.alive:
            return False
        try:
            self._control.send(protocol.pack({"op": "ping"}, []))
            return bool(self._receive().get("pong"))
        except (OSError, WorkerCrashed) as exc:
            self.give_up(f"the sandbox did not answer a ping: {exc}")
            return False

    def post(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        """Send a request without waiting for its reply (read before the next `ask`).

        A zygote that is gone has nothing left to act on: its workers died with it.
        """
        if self._control is None or not self.alive:
            return
        try:
            if fds:
                socket.send_fds(self._control, [protocol.pack(message, [])], fds)
            else:
                self._control.send(protocol.pack(message, []))
        except OSError:
            self.close()
            return
        self._unread += 1

    def preload(self, bundle: int) -> None:
        """Have the zygote load the probes of a job bundle (see `make_bundle`) now, while
        we import pytest, rather than at the first spawn, which would wait for it."""
        self.post({"op": "load"}, [bundle])

    def _settle(self) -> None:
        """Read the replies to posted requests; a zygote that failed one is replaced."""
        if self._unread and self._control is not None and not self._ready:
            self._await_ready()  # its first words: posted before it was up
        while self._unread and self._control is not None:
            self._unread -= 1
            try:
                reply = self._receive()
            except WorkerCrashed as exc:  # it may not have killed a worker's tree: end it all
                self.give_up(str(exc))
                continue
            if reply.get("dirty") or reply.get("clean") is False:  # a sweep left something
                self.give_up("the sandbox could not clear what a worker left: "
                             f"{reply.get('dirty') or reply.get('why')}")
            elif reply.get("clean") and self.choice.mode == "process":
                _clear_host_shm(self._shm_before)  # the host's IPC: the zygote cannot tell
                _clear_dev_shm(self._dev_shm_before)

    def reset(self) -> None:
        """After a submission, before the next one: have the zygote end every process and
        empty its scratch area (with bwrap: the sandbox's /tmp and IPC namespace) and
        prove it (`clean`), without waiting; a zygote that cannot is replaced by a fresh
        one at the next request (`_settle`), so no submission meets another's leftovers.
        """
        if not self.alive:  # killed by a worker: end what it left now, not at the next ask
            self.close()
        self.post({"op": "reset"})

    def _await_ready(self) -> None:
        try:
            self._receive(_START_SECONDS)
        except WorkerCrashed as failure:
            reason = self._log_excerpt() or str(failure)
            self.close()
            if not self._fall_back(reason):
                raise SandboxFailure(f"the sandbox did not start: {reason}") from None
            self.start()
            self._receive(_START_SECONDS)
        self._ready = True

    def give_up(self, reason: str) -> None:
        """Close a zygote that still runs because the kit cannot go on with it (it answered
        late or out of turn, or could not clear a worker's leftovers): whatever this ends
        (the workers it forked) ends for the kit's reason, kept in `given_up` for its
        generation. A zygote that is dead, or dies within `DYING_SECONDS` (a closed socket
        is often the first sign of a kill), is only closed: who ended it is not known, and
        a worker can kill its zygote."""
        if self._process is not None and not _wait_exit(self._process.pid, DYING_SECONDS):
            self.given_up[self.generation] = reason[:200]
        self.close()

    def _receive(self, timeout: float | None = None) -> dict[str, Any]:
        assert self._control is not None
        self._control.settimeout(ANSWER_SECONDS if timeout is None else timeout)
        try:
            data = self._control.recv(protocol.MAX_DATAGRAM)
        except OSError as exc:
            raise WorkerCrashed(None, f"the sandbox did not answer: {exc}") from None
        if not data:
            raise WorkerCrashed(None, "the sandbox stopped")
        try:
            reply, _ = protocol.parse(data, protocol.MAX_DATAGRAM)
        except protocol.ProtocolError as exc:
            raise WorkerCrashed(None, f"the sandbox sent garbage: {exc}") from None
        if "error" in reply:
            raise WorkerCrashed(None, f"the sandbox refused: {reply['error']}")
        return reply

    def _log_excerpt(self) -> str:
        try:
            text = os.pread(self._log.fileno(), 4000, 0) if self._log else b""
        except OSError:
            return ""
        lines = text.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def close(self) -> None:
        """Stop the zygote and everything it started.

        Closing the control socket makes the zygote kill all its descendants and exit
        (with bwrap, the sandbox's PID namespace then ends too). A zygote that does not
        exit in time is killed, and any process still carrying its marker with it.
        """
        if self._control is not None:
            self._control.close()
            self._control = None
        process, self._process = self._process, None
        if process is not None:
            clean = _wait_exit(process.pid, 2.0)
            if self.choice.mode == "process":
                try:
                    os.killpg(process.pid, signal.SIGKILL)  # not yet reaped: the group is ours
                except (ProcessLookupError, PermissionError):
                    pass
            else:
                process.kill()
            process.wait()
            if not clean or process.returncode != 0:
                kill_marked(self.marker)
            if self.choice.mode == "process":
                _LIVE_ZYGOTES.discard(process.pid)
                _kill_orphans(self._since, self._group, self.marker)
                _clear_host_shm(self._shm_before)
                _clear_dev_shm(self._dev_shm_before)
        self._cleanup_scratch()
        self._remove_group()
        self._close_log()
        self._ready = False
        self._unread = 0

    def _remove_group(self) -> None:
        if self._group is not None:
            self._group.remove()
            self._group = None

    def _cleanup_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, onerror=_writable_and_retry)
            self._scratch = None


def _writable_and_retry(function: Any, path: str, _: Any) -> None:
    """`rmtree`'s error handler: a folder a worker made unwritable is ours; open it up
    and try once more (anything else is left, in a folder nobody uses again)."""
    try:
        os.chmod(os.path.dirname(path), 0o700)
        if function is os.rmdir or function is os.unlink:
            function(path)
        elif function is os.scandir or function is os.open:
            os.chmod(path, 0o700)
            shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass


# --- process mode: what the trusted side ends itself -----------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_CHILD_SUBREAPER = 36
_IPC_RMID = 0
_LIVE_ZYGOTES: set[int] = set()  # this process's running process-mode zygotes


def _become_subreaper() -> None:
    """Make this (trusted) grading process a child subreaper.

    The zygote is one too, but in `process` mode a worker can kill it (same user); its
    orphans then become our children, not init's, and `_kill_orphans` ends them.
    Nothing the student can change decides that (the environment marker can be dropped).
    """
    _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _process_stat(pid: int) -> tuple[int, int, str]:
    """(parent pid, start time in clock ticks since boot, state letter) of `pid`."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), int(fields[19]), fields[0].decode()


def _kill_orphans(since: int, group: pids.PidsGroup | None = None, marker: str = "") -> None:
    """SIGKILL and reap, with all its descendants, every child of ours that a zygote's
    tree left behind: one started after `since` that is not a running zygote and, where
    the zygote had a pids group, that is in that group or carries its `marker` (the
    grading process's own other children are not the zygote's: a helper, a daemon it
    started, busy processes a test runs beside it). Without a group, every such child,
    since a process can drop the marker."""
    me = os.getpid()
    for attempt in range(200):
        table = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    table[int(name)] = _process_stat(int(name))
                except (OSError, IndexError, ValueError):
                    continue
        children: dict[int, list[int]] = {}
        for pid, (parent, _, _) in table.items():
            children.setdefault(parent, []).append(pid)
        roots = [pid for pid in children.get(me, [])
                 if pid not in _LIVE_ZYGOTES and table[pid][1] >= since
                 and (group is None or _in_group(pid, group) or _marker_of(pid) == marker)]
        if not roots:
            return
        stack = list(roots)
        while stack:
            pid = stack.pop()
            stack.extend(children.get(pid, []))
            if table[pid][2] not in "ZX":
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for pid in roots:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if attempt:
            time.sleep(0.005)


def _in_group(pid: int, group: pids.PidsGroup) -> bool:
    """Whether process `pid` (a zombie too) is in `group`, by its /proc cgroup list."""
    try:
        with open(f"/proc/{pid}/cgroup", "rb") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return False
    name = b"/" + group.path.name.encode()
    return any(line.rstrip().endswith(name) for line in lines)


def _host_shm() -> list[tuple[int, int, int, int]]:
    """The host's System V shared memory segments: (id, creator pid, attached, creator uid)."""
    try:
        with open("/proc/sysvipc/shm") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 10:
            found.append((int(fields[1]), int(fields[4]), int(fields[6]), int(fields[9])))
    return found


def _clear_host_shm(before: set[int]) -> None:
    """Remove the System V segments a process-mode grading left (best effort: the host's
    IPC namespace is shared with everything else of this user).

    A segment goes if it is new since the zygote started, made by this user, attached
    nowhere and its creator is gone (all the grading's processes have been killed).
    """
    for ident, creator, attached, owner in _host_shm():
        if ident in before or owner != os.geteuid() or attached:
            continue
        if creator and os.path.exists(f"/proc/{creator}"):
            continue
        _LIBC.shmctl(ident, _IPC_RMID, None)


DEV_SHM = "/dev/shm"


def _dev_shm() -> list[str]:
    """What the host's /dev/shm holds (POSIX semaphores and shared memory)."""
    try:
        return os.listdir(DEV_SHM)
    except OSError:
        return []


def _held_open(paths: set[str]) -> set[str]:
    """Those of `paths` that a living process has open or mapped (from every /proc)."""
    held: set[str] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{name}/fd"):
                try:
                    target = os.readlink(f"/proc/{name}/fd/{fd}")
                except OSError:
                    continue
                if target in paths:
                    held.add(target)
            with open(f"/proc/{name}/maps", "rb") as handle:
                for line in handle:
                    path = line.rstrip().rpartition(b" ")[2].decode(errors="replace")
                    if path in paths:
                        held.add(path)
        except OSError:
            continue
    return held


def _clear_dev_shm(before: set[str]) -> None:
    """Remove what a process-mode zygote's workers left in the host's /dev/shm: entries
    that are new since it started, ours, and held by no living process (its processes
    are gone by now; a neighbour's entry in use is kept). Usually there is none, and then
    this costs one listing."""
    uid = os.getuid()
    new = set()
    for name in set(_dev_shm()) - before:
        path = os.path.join(DEV_SHM, name)
        try:
            if os.lstat(path).st_uid == uid:
                new.add(path)
        except OSError:
            continue
    if not new:
        return
    for path in new - _held_open(new):
        try:
            os.unlink(path)
        except OSError:
            pass


def _wait_exit(pid: int, timeout: float) -> bool:
    """Wait for `pid` to exit without reaping it; False if it is still running."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def marked_processes(prefix: str) -> list[int]:
    """Pids of the live processes whose `LABKIT_SANDBOX` marker starts with `prefix`.

    Every zygote's marker starts with the grading process's pid (`f"{os.getpid()}-"`).
    Processes of other users are skipped (their environment is not readable).
    """
    wanted = f"{MARKER}={prefix}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and any(v.startswith(wanted) for v in environ.split(b"\0")):
            found.append(int(name))
    return found


def kill_marked(marker: str, timeout: float = 2.0) -> None:
    """SIGKILL every process carrying exactly this zygote's marker, until none is left."""
    if not marker:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in marked_processes(marker) if _marker_of(p) == marker]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def _marker_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(MARKER.encode() + b"="):
            return entry.split(b"=", 1)[1].decode(errors="replace")
    return None


# --- one grading --------------------------------------------------------------------------


class Sandbox:
    """The workers of one grading; use as a context manager.

    Pass a running `Zygote` to share it across gradings (batch); otherwise the
    sandbox starts its own and stops it at the end. `deadline` (a `time.monotonic()`
    value, or None) bounds every call of the grading; `isolation` is the mode in use.
    """

    def __init__(self, config: SandboxConfig, zygote: Zygote | None = None) -> None:
        self.config = config
        self._own = zygote is None
        self.zygote = zygote or Zygote(config.isolation)
        self.deadline: float | None = None
        self._bundle: int | None = None
        # set when the kit failed the grading: a worker could not be started, or a check
        # met a `KitFault` twice (`labkit.engine.plugin.Retrying`)
        self.failure: KitFault | None = None

    @property
    def isolation(self) -> str:
        return self.zygote.isolation

    def __enter__(self) -> Sandbox:
        if self._own:
            self.zygote.start()
        if self.config.probes is not None:
            self.zygote.preload(self._job_files())
        return self

    def __exit__(self, *_: object) -> None:
        if self._bundle is not None:
            os.close(self._bundle)
            self._bundle = None
        if self._own:
            self.zygote.close()
        else:
            self.zygote.reset()

    def _job(self) -> dict[str, Any]:
        limits = dict(self.config.limits)
        if self.isolation == "bwrap":  # counted per sandbox there; per user (or not) here
            limits.setdefault("RLIMIT_NPROC", isolation_mod.SANDBOX_NPROC)
        return {
            "modules": list(self.config.modules),
            "sys_path": list(self.config.sys_path) or ["."],
            "limits": limits,
        }

    def _job_files(self) -> int:
        """The graded files and the probe source, in a sealed memfd (built once)."""
        if self._bundle is None:
            self._bundle = make_bundle(self.config.files, self.config.probes)
        return self._bundle

    def spawn(self, module: str | None = None) -> WorkerHandle:
        """Fork a fresh worker (see `WorkerHandle` for what it serves).

        With `module`, the worker imports it as it starts, as if asked first thing:
        its reply is then read with `WorkerHandle.receive`.
        """
        bundle = self._job_files()
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        arena = make_arena()
        try:
            reply = self._ask_spawn(module, [req_r, rep_w, out_w, bundle, arena])
            mapping = mmap.mmap(arena, ARENA_BYTES)
        except BaseException:
            for fd in (req_w, rep_r, out_r):
                os.close(fd)
            raise
        finally:
            for fd in (req_r, rep_w, out_w, arena):
                os.close(fd)
        for fd in (req_w, rep_r):
            os.set_blocking(fd, False)
        return WorkerHandle(self, int(reply["pid"]), req_w, rep_r, _drain().watch(out_r),
                      self.zygote.generation, sent=1 if module else 0, arena=mapping)

    def _ask_spawn(self, module: str | None, fds: list[int]) -> dict[str, Any]:
        """The zygote's reply to a spawn; a zygote that cannot spawn is replaced once.

        A refusal (a full scratch area, say) or a lost zygote gets a fresh sandbox; if
        that one fails too, the kit cannot grade here: `SandboxFailure`, kept in
        `failure` so that the grading as a whole is reported as the kit's failure.
        """
        message = {"op": "spawn", "job": self._job(), "import": module}
        try:
            return self.zygote.ask(message, fds)
        except SandboxFailure as failure:
            self.failure = failure
            raise
        except WorkerCrashed as exc:
            self.zygote.give_up(str(exc))
        try:
            return self.zygote.ask(message, fds)
        except (WorkerCrashed, SandboxFailure) as exc:
            self.failure = SandboxFailure(str(exc))
            raise self.failure from None

    def stop_worker(self, pid: int, generation: int | None = None) -> dict[str, Any]:
        """Have the zygote kill worker `pid` and its descendants; how it ended.

        A worker of an earlier zygote (one that died and was restarted) died with it.
        """
        if generation is not None and generation != self.zygote.generation:
            return {"killed": True, "exitcode": None}
        try:
            ended = self.zygote.ask({"op": "stop", "pid": pid})
            if ended.get("dirty"):  # its folder could not be swept: never fork beside it
                self.zygote.give_up(f"the sandbox could not sweep a worker's folder: "
                                    f"{ended['dirty']}")
            return ended
        except (OSError, WorkerCrashed, SandboxFailure) as exc:
            # it cannot be trusted to have killed the tree: end it all
            self.zygote.give_up(f"the sandbox did not stop a worker: {exc}")
            return {"killed": True, "exitcode": None}


    def outlived(self, generations: set[int]) -> bool:
        """Whether the zygote that forked workers of `generations` (a check's) is the one
        running, and answers (`Zygote.answers`): if not, one of them killed it, unless
        the kit gave up on it (`given_up`)."""
        return generations <= {self.zygote.generation} and self.zygote.answers()

    def given_up(self, generations: set[int]) -> str | None:
        """Why the kit itself ended a zygote of `generations` (a check's), if it did: a
        check whose workers ended with it failed for the kit's reason, not its code's."""
        return next((self.zygote.given_up[g] for g in sorted(generations)
                     if g in self.zygote.given_up), None)

    def release_worker(self, pid: int, generation: int) -> None:
        """Have the zygote end worker `pid` and its descendants, without waiting."""
        if generation == self.zygote.generation:
            self.zygote.post({"op": "stop", "pid": pid})


def make_arena() -> int:
    """A memfd of `ARENA_BYTES` that a worker and the grader both map (see
    `labkit.sandbox.shared`), sealed at that size, seals included: a worker that could
    shrink it would make the grader's reads fault, one that could grow it would spend
    memory, one that could seal it against writes would freeze the grader's inputs.
    """
    fd = os.memfd_create("labkit-shared", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, ARENA_BYTES)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_bundle(files: Mapping[str, bytes], probes: Path | None) -> int:
    """A sealed memfd holding the graded files and the probe source, as one framed
    message: their names in the header, their contents as blobs (the probe source last).

    The zygote reads it for every worker; being sealed, no worker can change what the
    next one gets.
    """
    names = sorted(files)
    blobs = [files[name] for name in names]
    probe_name = None
    if probes is not None:
        source = probes.read_bytes()
        if len(source) > MAX_PROBES_BYTES:
            raise ValueError(f"{probes} is over {MAX_PROBES_BYTES} bytes")
        probe_name = str(probes)
        blobs.append(source)
    packed = protocol.pack({"files": names, "probes": probe_name}, blobs)
    fd = os.memfd_create("labkit-job", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with os.fdopen(os.dup(fd), "wb") as handle:
            handle.write(packed)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd
