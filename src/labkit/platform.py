"""What labkit asks of the operating system outside the sandbox, in one place.

Outside `labkit.sandbox.linux` and the sandbox's fork server, the calls only some
systems have (`fcntl`, `SO_PEERCRED`, `sched_getaffinity`, `prctl`, `SIGKILL`) appear
only here, each behind a wrapper that says what it is for, so that a port changes this
module rather than the batch, the daemon or the engine (an architecture test keeps it
so). Modules that only some systems have are imported where they are used, never when
this module is.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys
from typing import IO

# The signal that ends a process without giving it a say. Windows' `signal` lacks the
# name; its `os.kill` terminates the process whatever the number, and an exit code
# of -9 still reads as this kill.
KILL_SIGNAL: int = getattr(signal, "SIGKILL", 9)
_PR_SET_CHILD_SUBREAPER = 36


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def kill(pid: int) -> None:
    """End process `pid` at once (`ProcessLookupError` if it is gone)."""
    os.kill(pid, KILL_SIGNAL)


def lock_exclusive(handle: IO[str]) -> None:
    """Lock the open file `handle` for this process alone, without waiting:
    `BlockingIOError` if another holds it. Released when the file is closed."""
    import fcntl

    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


def peer_credentials(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of the Unix socket `conn`, as the
    kernel saw it when it connected (the peer cannot forge them)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", creds)
    return pid, uid


def become_subreaper() -> None:
    """Make this process a child subreaper (Linux): the orphans of its descendants
    become its children, not init's, so that it can end them whatever they did to
    escape (a double fork, a new session)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def new_process_group() -> dict[str, object]:
    """`subprocess.Popen` arguments that start a process in a group of its own, so that
    it and what it starts can be ended together (`kill_group`) and a Ctrl-C at the
    terminal reaches the grader, never the student's code directly."""
    if sys.platform == "win32":
        import subprocess

        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def kill_group(pid: int) -> None:
    """End the process group that process `pid` leads (POSIX; a no-op on Windows,
    where a Job Object holds the tree instead)."""
    if os.name != "nt":
        try:
            os.killpg(pid, KILL_SIGNAL)
        except (ProcessLookupError, PermissionError):
            pass


def is_root() -> bool:
    """Whether this process has the POSIX superuser's rights (never on Windows, where an
    administrator's rights are not asked for by the kit)."""
    return os.name != "nt" and os.geteuid() == 0


def readable(fd: int, timeout: float) -> bool:
    """Whether the pipe `fd` has bytes to read (or its writer has closed it) within
    `timeout` seconds: a read then does not block. POSIX waits in `select`; Windows,
    whose `select` takes only sockets, asks the pipe how much it holds, every few ms."""
    if sys.platform != "win32":
        import select

        return bool(select.select([fd], [], [], timeout)[0])
    import ctypes
    import msvcrt
    import time

    peek = ctypes.WinDLL("kernel32", use_last_error=True).PeekNamedPipe
    handle, held = msvcrt.get_osfhandle(fd), ctypes.c_uint32(0)
    deadline = time.monotonic() + timeout
    while True:
        if not peek(handle, None, 0, None, ctypes.byref(held), None) or held.value:
            return True  # bytes, or a broken pipe: the read says which
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
