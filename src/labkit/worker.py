"""The untrusted side: a zygote that forks one worker per check.

Runs as `python -I -m labkit.worker CONTROL_FD` inside the sandbox. The zygote imports
NumPy and the lab's trusted probes once, never the student's code; for each check the
grader sends it a pair of pipes over a Unix socket, and it forks a worker that imports
the student's modules and answers calls with plain data (see `protocol`). Forking after
the imports is what keeps a fresh worker per check cheap.
"""

from __future__ import annotations

import array
import importlib
import importlib.util
import io
import json
import os
import resource
import signal
import socket
import sys
import time
import traceback
from typing import Any

import numpy as np

from labkit import protocol

# Bound before any student module is imported (see Worker.observe).
_SHARES = np.shares_memory
_NDARRAY = np.ndarray

MAX_EXCEPTION_TEXT = 500


def _load_probes(path: str | None) -> Any:
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("labkit_probes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _describe_exception(exc: BaseException) -> dict[str, Any]:
    """The exception as data; `builtin` is the nearest built-in class in its MRO."""
    builtin = next(
        (
            cls.__name__
            for cls in type(exc).__mro__
            if cls.__module__ == "builtins" and issubclass(cls, Exception)
        ),
        None,
    )
    try:
        message = str(exc)[:MAX_EXCEPTION_TEXT]
    except Exception:  # a student's __str__ may itself raise
        message = "<unprintable>"
    return {"type": type(exc).__qualname__, "builtin": builtin, "message": message}


class Worker:
    """Serves one check: imports student modules on demand and runs requests."""

    def __init__(self, modules: list[str], probes: Any) -> None:
        self.modules = modules
        self.probes = probes

    def module(self, name: str | None) -> Any:
        return importlib.import_module(name or self.modules[0])

    def handle(self, request: dict[str, Any], blobs: list[bytes]) -> Any:
        op = request["op"]
        args = protocol.decode_value(request.get("args", {"t": "list", "v": []}), blobs)
        kwargs = protocol.decode_value(request.get("kwargs", {"t": "dict", "v": []}), blobs)
        if op == "import":
            self.module(request.get("module"))
            return None
        if op == "value":
            return getattr(self.module(request.get("module")), request["name"])
        if op == "call":
            return getattr(self.module(request.get("module")), request["name"])(*args, **kwargs)
        if op == "observe":
            return self.observe(request, args, kwargs)
        if op == "probe":
            if self.probes is None or request["name"].startswith("_"):
                raise LookupError(f"no probe {request['name']!r}")
            return getattr(self.probes, request["name"])(self.module(None), *args, **kwargs)
        raise LookupError(f"unknown request {op!r}")

    def observe(self, request: dict[str, Any], args: list, kwargs: dict) -> dict[str, Any]:
        """Call a function and report what it did to its array arguments.

        `shares_memory` is taken from NumPy before the student's code runs, so a module
        that patches `np.shares_memory` does not change this report.
        """
        function = getattr(self.module(request.get("module")), request["name"])
        result = function(*args, **kwargs)
        shares = [
            bool(_SHARES(result, arg)) if isinstance(result, _NDARRAY) and isinstance(arg, _NDARRAY)
            else None
            for arg in args
        ]
        return {
            "result": result,
            "args_after": list(args),
            "shares": shares,
            "result_is_arg": [result is arg for arg in args],
            "writeable": bool(result.flags.writeable) if isinstance(result, _NDARRAY) else None,
        }

    def serve(self, rfd: int, wfd: int) -> None:
        while True:
            try:
                request, blobs = protocol.read_message(rfd)
            except protocol.ChannelClosed:
                return
            reply_blobs: list[bytes] = []
            try:
                result = self.handle(request, blobs)
                reply = {"ok": protocol.encode_value(result, reply_blobs)}
            except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: B036 - reported as data
                reply_blobs = []
                reply = {"raised": _describe_exception(exc)}
                if not isinstance(exc, Exception):
                    reply["raised"]["builtin"] = None
            protocol.write_message(wfd, {"id": request.get("id"), **reply}, reply_blobs)


def _limit(name: str, value: int) -> None:
    kind = getattr(resource, name)
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard if hard != resource.RLIM_INFINITY else value))


def _apply_limits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        _limit(name, int(value))


def _child(job: dict[str, Any], probes: Any, rfd: int, wfd: int, ofd: int) -> None:
    """In the forked worker: detach, move into the job's files, limit, then serve."""
    os.setsid()
    os.dup2(ofd, 1)
    os.dup2(ofd, 2)
    os.close(ofd)
    # Unbuffered, as with `python -u`: a worker is killed, never flushed, at the end.
    sys.stdout = io.TextIOWrapper(open(1, "wb", 0, closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(open(2, "wb", 0, closefd=False), write_through=True)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.chdir(job["workdir"])
    os.environ["HOME"] = job["workdir"]
    for path in reversed(job["sys_path"]):
        sys.path.insert(0, path)
    _apply_limits(job.get("limits", {}))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    Worker(job["modules"], probes).serve(rfd, wfd)


def _reap(workers: dict[int, int | None]) -> None:
    for pid in list(workers):
        if workers[pid] is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                workers[pid] = status


def _stop(pid: int, workers: dict[int, int | None]) -> dict[str, Any]:
    """Return how worker `pid` ended, killing its whole process group if still alive."""
    deadline = time.monotonic() + 0.05
    while workers.get(pid) is None and time.monotonic() < deadline:
        _reap(workers)
        if workers.get(pid) is None:
            time.sleep(0.002)
    killed = workers.get(pid) is None
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    status = workers.pop(pid, None)
    if status is None:
        _, status = os.waitpid(pid, 0)
    return {
        "killed": killed,
        "exitcode": os.waitstatus_to_exitcode(status),
    }


def zygote(control_fd: int) -> None:
    """Fork workers on request until the control socket closes.

    Each spawn request names its job (files, modules, probes, limits), so one zygote
    can serve many gradings; probe modules are loaded here once, before any fork.
    """
    control = socket.socket(fileno=control_fd)
    probes: dict[str, Any] = {}
    workers: dict[int, int | None] = {}
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    while True:
        fds = array.array("i")
        message, ancillary, _, _ = control.recvmsg(65536, socket.CMSG_LEN(3 * fds.itemsize))
        if not message:
            break
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        request = json.loads(message)
        _reap(workers)
        if request["op"] == "spawn":
            job = request["job"]
            if job.get("probes") and job["probes"] not in probes:
                probes[job["probes"]] = _load_probes(job["probes"])
            pid = os.fork()
            if pid == 0:
                control.close()
                try:
                    _child(job, probes.get(job.get("probes")), *fds)
                except BaseException:  # noqa: BLE001 - the worker must never return to the loop
                    traceback.print_exc()
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)
            workers[pid] = None
            reply = {"pid": pid}
        elif request["op"] == "stop":
            reply = _stop(int(request["pid"]), workers)
        else:
            reply = {"error": f"unknown op {request['op']!r}"}
        control.send(json.dumps(reply).encode())
    for pid in list(workers):
        _stop(pid, workers)


def main() -> None:
    zygote(int(sys.argv[1]))
    os._exit(0)  # nothing to flush; skipping interpreter teardown lets the grader finish sooner


if __name__ == "__main__":
    main()
