"""Trusted side of the worker processes: start the zygote, fork workers, enforce time.

The student's code only ever runs in processes started here. Each check gets a fresh
worker forked from a zygote that has NumPy and the probes already imported; the grader
talks to it through pipes, with a deadline on every call, and kills its whole process
group when the check ends or the deadline passes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit import protocol

OUTPUT_EXCERPT = 2000
DEFAULT_LIMITS = {
    "RLIMIT_AS": 2 * 1024**3,
    "RLIMIT_FSIZE": 64 * 1024**2,
    "RLIMIT_NOFILE": 256,
    "RLIMIT_CORE": 0,
}
_PASSED_ENV = ("PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class WorkerFailure(Exception):
    """The worker could not answer: base of the timeout and crash outcomes."""


class WorkerTimeout(WorkerFailure):
    """The worker did not answer within the call's time limit and was killed."""


class WorkerCrashed(WorkerFailure):
    """The worker exited, was killed by a signal, or sent something unreadable."""

    def __init__(self, exitcode: int | None, detail: str = "") -> None:
        super().__init__(detail or f"exit code {exitcode}")
        self.exitcode = exitcode
        self.detail = detail


@dataclass(frozen=True)
class SandboxConfig:
    """What a sandbox needs: the copied files, where to import from, and the limits."""

    workdir: Path
    modules: tuple[str, ...]
    sys_path: tuple[str, ...] = ()
    probes: Path | None = None
    limits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))


class Worker:
    """One forked worker, serving one check over a request and a reply pipe."""

    def __init__(self, sandbox: Sandbox, pid: int, wfd: int, rfd: int, out: Path) -> None:
        self.sandbox, self.pid, self.wfd, self.rfd, self.out = sandbox, pid, wfd, rfd, out
        self._next_id = 0
        self.ended: dict[str, Any] | None = None

    def request(self, header: dict[str, Any], blobs: list[bytes], timeout: float) -> Any:
        """Send one request and return the decoded reply header and blobs."""
        self._next_id += 1
        deadline = time.monotonic() + timeout
        try:
            protocol.write_message(self.wfd, {**header, "id": self._next_id}, blobs, deadline)
            reply, reply_blobs = protocol.read_message(self.rfd, deadline)
        except protocol.ChannelTimeout:
            self.stop()
            raise WorkerTimeout(f"no answer within {timeout:g} s") from None
        except protocol.ChannelClosed:
            ended = self.stop()
            raise WorkerCrashed(ended["exitcode"]) from None
        except protocol.ProtocolError as exc:
            self.stop()
            raise WorkerCrashed(None, str(exc)) from None
        if reply.get("id") != self._next_id:
            self.stop()
            raise WorkerCrashed(None, "reply out of order")
        return reply, reply_blobs

    def output(self) -> str:
        """A short excerpt of what the worker printed (never parsed for results)."""
        try:
            with open(self.out, "rb") as handle:
                return handle.read(OUTPUT_EXCERPT).decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> dict[str, Any]:
        """End the worker (idempotent) and report how it ended."""
        if self.ended is None:
            for fd in (self.wfd, self.rfd):
                os.close(fd)
            self.ended = self.sandbox.stop_worker(self.pid)
        return self.ended


class Zygote:
    """The pre-warmed process that forks workers; one can serve many gradings."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._ready = False

    def start(self) -> None:
        """Start the zygote without waiting for it, so its imports overlap ours."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env.update(LANG="C.UTF-8", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-m", "labkit.worker", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self._control = ours
        self._ready = False

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def ask(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        if not self.alive:
            self.close()
            self.start()
        assert self._control is not None
        if not self._ready:
            self._receive()
            self._ready = True
        data = json.dumps(message).encode()
        try:
            if fds:
                socket.send_fds(self._control, [data], fds)
            else:
                self._control.send(data)
        except OSError as exc:
            raise WorkerCrashed(None, f"the sandbox stopped: {exc}") from None
        return self._receive()

    def _receive(self) -> dict[str, Any]:
        assert self._control is not None
        self._control.settimeout(30)
        try:
            data = self._control.recv(65536)
        except OSError as exc:
            raise WorkerCrashed(None, f"the sandbox did not answer: {exc}") from None
        if not data:
            raise WorkerCrashed(None, "the sandbox stopped")
        return json.loads(data)

    def close(self) -> None:
        """Stop the zygote; it kills the workers it still has."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            try:
                self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._process.wait()
            self._process = None


class Sandbox:
    """The workers of one grading; use as a context manager.

    Pass a running `Zygote` to share it across gradings (batch); otherwise the
    sandbox starts its own and stops it at the end.
    """

    def __init__(self, config: SandboxConfig, zygote: Zygote | None = None) -> None:
        self.config = config
        self._scratch = tempfile.TemporaryDirectory(prefix="labkit-out-")
        self._own = zygote is None
        self.zygote = zygote or Zygote()
        self._count = 0

    def __enter__(self) -> Sandbox:
        if self._own:
            self.zygote.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._own:
            self.zygote.close()
        self._scratch.cleanup()

    def _job(self) -> dict[str, Any]:
        workdir = self.config.workdir
        return {
            "workdir": str(workdir),
            "modules": list(self.config.modules),
            "sys_path": [str(workdir / p) for p in self.config.sys_path] or [str(workdir)],
            "probes": str(self.config.probes) if self.config.probes else None,
            "limits": self.config.limits,
        }

    def spawn(self) -> Worker:
        """Fork a fresh worker for one check."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self._count += 1
        out = Path(self._scratch.name) / f"worker-{self._count}.out"
        out_fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            reply = self.zygote.ask({"op": "spawn", "job": self._job()}, [req_r, rep_w, out_fd])
        except BaseException:
            for fd in (req_w, rep_r):
                os.close(fd)
            raise
        finally:
            for fd in (req_r, rep_w, out_fd):
                os.close(fd)
        for fd in (req_w, rep_r):
            os.set_blocking(fd, False)
        return Worker(self, int(reply["pid"]), req_w, rep_r, out)

    def stop_worker(self, pid: int) -> dict[str, Any]:
        try:
            return self.zygote.ask({"op": "stop", "pid": pid})
        except (OSError, WorkerCrashed):
            return {"killed": True, "exitcode": None}
