"""What labkit asks of the operating system outside the sandbox, in one place.

Outside `labkit.sandbox.linux` and the sandbox's fork server, the calls only some
systems have (`fcntl`, `SO_PEERCRED`, `AF_UNIX`, `getuid`, `sched_getaffinity`, `prctl`,
`SIGKILL`, `SIGUSR1`, `termios`, `msvcrt`) appear only here, each behind a wrapper that
says what it is for, so that a port changes this module rather than the batch, the
daemon or the engine (an architecture test keeps it so). Modules that only some systems
have are imported where they are used, never when this module is.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO

# The signal that ends a process without giving it a say. Windows' `signal` lacks the
# name; its `os.kill` terminates the process whatever the number, and an exit code
# of -9 still reads as this kill.
KILL_SIGNAL: int = getattr(signal, "SIGKILL", 9)
_PR_SET_CHILD_SUBREAPER = 36
# Where a thread can interrupt the main thread's blocking wait: a signal sent to it alone.
_WAKE_SIGNAL: int | None = (getattr(signal, "SIGUSR1", None)
                            if hasattr(signal, "pthread_kill") else None)
# macOS's <sys/un.h>: the level and options of a Unix socket's peer credentials.
_SOL_LOCAL, _LOCAL_PEERCRED, _LOCAL_PEERPID = 0, 1, 2
_XUCRED = struct.Struct("=II")  # struct xucred begins: cr_version (0), cr_uid
_XUCRED_SIZE = 76  # with cr_ngroups and cr_groups[16]


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def kill(pid: int) -> None:
    """End process `pid` at once (`ProcessLookupError` if it is gone)."""
    os.kill(pid, KILL_SIGNAL)


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
# --- locks --------------------------------------------------------------------------------


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[bool]:
    """While open, hold the lock file `path` for this holder alone, if nobody holds it
    (no waiting): yields whether we do. The lock goes with its holder (this context
    closed, or its process gone); the file stays where the system allows, for the
    holder alone to remove (a lock taken on a file removed meanwhile counts as not
    taken). `OSError` if the file cannot be opened at all."""
    from filelock import FileLock, Timeout  # only where a lock is taken (not a warm grade)

    lock = FileLock(path)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


# --- this user ----------------------------------------------------------------------------


def user_id() -> int | None:
    """This process's user id, where the system numbers users (not Windows)."""
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def user_runtime_dir() -> Path:
    """Where this user's runtime files go when nothing says where: `labkit-UID` in the
    temporary folder, which all users share (hence the uid); on Windows, `labkit` in the
    user's local application data (inside their profile)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or tempfile.gettempdir()  # per user there
        return Path(base) / "labkit"
    return Path(tempfile.gettempdir()) / f"labkit-{user_id()}"


def private_folder(folder: Path) -> bool:
    """Whether `folder` is a real folder (not a link) that only this user may enter.

    With numbered users: theirs, and closed to group and others. On Windows, where a
    folder's access is a list rather than bits: a folder that is no link or junction,
    inside the user's own profile (which only they, and the system, may enter).
    """
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        return False
    if sys.platform == "win32":
        if getattr(info, "st_file_attributes", 0) & stat.FILE_ATTRIBUTE_REPARSE_POINT:
            return False
        profile = os.environ.get("USERPROFILE") or str(Path.home())
        try:
            return Path(folder).resolve().is_relative_to(Path(profile).resolve())
        except OSError:
            return False
    return info.st_uid == user_id() and not info.st_mode & 0o077


# --- local sockets ------------------------------------------------------------------------


def has_unix_sockets() -> bool:
    """Whether local (Unix) stream sockets are there to use: not on Windows, whose
    Python lacks them (and whose own kind knows no peer credentials)."""
    return hasattr(socket, "AF_UNIX") and sys.platform != "win32"


def unix_socket() -> socket.socket:
    """A new local (Unix) stream socket (`has_unix_sockets` first)."""
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)


def peer_credentials(conn: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of the Unix socket `conn`, as the
    kernel saw it when it connected (the peer cannot forge them); None where the system
    does not tell (then only the socket's folder keeps others out)."""
    try:
        if hasattr(socket, "SO_PEERCRED"):  # Linux
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
            pid, uid, _ = struct.unpack("3i", creds)
            return pid, uid
        if sys.platform == "darwin":
            version, uid = _XUCRED.unpack_from(
                conn.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE))
            pid = conn.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID)
            return (pid, uid) if version == 0 else None
    except (OSError, struct.error):
        return None
    return None


def loopback_listener() -> socket.socket:
    """A TCP socket listening on 127.0.0.1, on a port the system chose, that no other
    process can take over while it is open (Windows lets a second socket bind a port in
    use unless the first asked for it alone)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if sys.platform == "win32":
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
    except OSError:
        listener.close()
        raise
    return listener


# --- processes ----------------------------------------------------------------------------


def start_detached(command: list[str], log: IO[bytes], cwd: Path) -> bool:
    """Start `command` in the background, in a session (process group) of its own, and
    return at once; whether it was started. Its output goes to `log`.

    With POSIX a shell starts it and exits, so the process is nobody's child: no caller
    has to wait for it, and it outlives the one that started it. On Windows a process
    is reaped by nobody anyway; it is only detached from the console.
    """
    if sys.platform == "win32":
        flags = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # it outlives its handle
            subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             cwd=cwd, creationflags=flags)
        return True
    launcher = subprocess.run(["/bin/sh", "-c", '"$@" &', "sh", *command],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=cwd,
                              start_new_session=True, check=False)
    return launcher.returncode == 0


def interrupt(child: subprocess.Popen[bytes]) -> None:
    """Stop `child` as Ctrl-C would (SIGINT). Windows cannot send that to one process: it
    is terminated, and the channels it held close as they would after a Ctrl-C."""
    if sys.platform == "win32":
        child.terminate()
    else:
        child.send_signal(signal.SIGINT)


def interrupt_self() -> None:
    """A Ctrl-C to this process, from any of its threads, as the terminal sends it: the
    main thread sees `KeyboardInterrupt`. With POSIX the kernel gives the signal to the
    main thread, ending a blocking wait at once; Windows' `os.kill` would terminate the
    process, so the handler is called there, at the main thread's next instruction."""
    if sys.platform == "win32":
        signal.raise_signal(signal.SIGINT)
    else:
        os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def main_thread_wakes(handler: Callable[[int, FrameType | None], None]) -> Iterator[bool]:
    """While open, `wake_main_thread` runs `handler(signum, frame)` in the main thread
    at once, even inside a blocking wait (which it may end by raising). Yields False
    where the system cannot (no `pthread_kill` or `SIGUSR1`: Windows): then nothing is
    installed. Main thread only."""
    if _WAKE_SIGNAL is None:
        yield False
        return
    previous = signal.signal(_WAKE_SIGNAL, handler)
    try:
        yield True
    finally:
        signal.signal(_WAKE_SIGNAL, previous)


def wake_main_thread() -> None:
    """Run the handler `main_thread_wakes` installed, in the main thread (from any)."""
    main = threading.main_thread().ident
    if _WAKE_SIGNAL is not None and main is not None:
        signal.pthread_kill(main, _WAKE_SIGNAL)


# --- the terminal -------------------------------------------------------------------------


@contextlib.contextmanager
def keys(stdin: IO[str]) -> Iterator[Callable[[float], str]]:
    """`key(timeout)`: the key pressed within `timeout` s, or "". Keys come one at a
    time as they are pressed (a POSIX terminal is in cbreak mode while this is open, as
    it was afterwards; Windows' console is asked). When `stdin` is no terminal there
    are no keys: `key` only waits."""
    if not stdin.isatty():
        yield _no_key
        return
    if sys.platform == "win32":
        yield _console_key
        return
    import termios
    import tty

    fd = stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def key(timeout: float) -> str:
        ready, _, _ = select.select([fd], [], [], timeout)
        return os.read(fd, 1).decode(errors="replace") if ready else ""

    try:
        yield key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _no_key(timeout: float) -> str:
    time.sleep(timeout)
    return ""


_KEY_POLL = 0.02  # s between looks at Windows' console, which cannot be waited on here

if sys.platform == "win32":

    def _console_key(timeout: float) -> str:
        import msvcrt

        deadline = time.monotonic() + timeout
        while not msvcrt.kbhit():
            if time.monotonic() >= deadline:
                return ""
            time.sleep(_KEY_POLL)
        return msvcrt.getwch()
