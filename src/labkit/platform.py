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
