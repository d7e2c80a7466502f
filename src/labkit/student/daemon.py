"""Warm grading for `labkit grade`: one background grading process per user and lab.

A cold `labkit grade` spends most of its time importing pytest, NumPy and hypothesis,
collecting the graders and starting the sandbox, which is the same work every time. So
after grading in-process, `labkit grade` leaves a daemon behind: a grading process that
has done that work once (`labkit.engine.warm`, as `labkit batch` uses) and waits on a
local socket (`labkit.student.channel`). The next `labkit grade` of that lab only
collects the files, sends them (one framed message, `labkit.sandbox.protocol`: the files
as blobs), and renders the result it gets back (one framed message too). Whatever goes
wrong with a daemon (none running, busy past its limit, dead, stale, or an answer that
does not fit the files sent), the client grades in-process as before; a daemon can make
grading faster, never different. It grades as a batch does, so a student sees the grade
their instructor's batch would give.

Safety and lifetime:
- the socket lives in a directory only its user can enter (checked by the client and the
  daemon), and the daemon answers only processes of its own user (the kernel's word for
  a Unix socket where it gives one; a token from that folder for loopback TCP, Windows');
- the socket's name carries a fingerprint of the kit, the Python, the isolation setting
  and the lab's graders, so a changed kit or grader is never served by an old daemon;
- a lock file makes a second daemon for the same socket exit at once;
- a daemon exits after `LABKIT_DAEMON_IDLE` seconds (default 900) without a request, or
  on `labkit daemon stop`;
- every wait on a daemon has a deadline: the client's grade (the lab's limits and
  `REPLY_SLACK`), a ping (`PING_SECONDS`). A daemon that does not answer a ping in time
  (busy grading, or stuck) is still listed, by the pid of the process listening (see
  `channel.connect`), and `labkit daemon stop` kills it if it does not answer a stop.

Where no socket can be had (no private folder, a path too long), there is no daemon, and
`labkit grade` grades in-process, saying nothing of it.

`LABKIT_DAEMON=0` turns it off, `=1` on; unset, it is on except where `CI` is set.
`LABKIT_RUNTIME_DIR` moves the sockets (default `$XDG_RUNTIME_DIR/labkit`, else
`/tmp/labkit-UID`; on Windows `%LOCALAPPDATA%\\labkit`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import __version__, fileset, platform, settings
from labkit.course.catalogue import LabSpec
from labkit.results import LabResult
from labkit.sandbox import protocol
from labkit.student import channel

IDLE_SECONDS = 900.0
CONNECT_SECONDS = 0.5
PING_SECONDS = 2.0  # for a daemon to answer a ping or a stop; past it, busy or stuck
REPLY_SLACK = 15.0  # s beyond the lab's grading limit before the client stops waiting
REQUEST_SECONDS = 10.0  # for a client to send its files
MAX_REQUEST = 64 * 1024 * 1024
HANGUP_POLL = 0.05  # s between looks for a client that left while it is being graded
_PASSED_ENV = (settings.ISOLATION, "TMPDIR", "PATH")  # they change how grading runs


# --- policy and places ----------------------------------------------------------------


def enabled() -> bool:
    """Whether `labkit grade` may use (and leave behind) a daemon."""
    value = settings.get(settings.DAEMON).strip().lower()
    if value in ("0", "off", "no", "false"):
        return False
    if value in ("1", "on", "yes", "true"):
        return True
    return not settings.in_ci()


def idle_seconds() -> float:
    """`LABKIT_DAEMON_IDLE` if it is a positive number of seconds, else the default."""
    try:
        idle = float(settings.get(settings.DAEMON_IDLE) or IDLE_SECONDS)
    except ValueError:
        return IDLE_SECONDS
    return idle if 0 < idle < float("inf") else IDLE_SECONDS


def _runtime_path() -> Path:
    if settings.get(settings.RUNTIME_DIR):
        return Path(settings.get(settings.RUNTIME_DIR))
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "labkit"
    return platform.user_runtime_dir()


def runtime_dir() -> Path | None:
    """The user's private socket directory, made if missing; None if it is not private."""
    path = _runtime_path()
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return path if platform.private_folder(path) else None


# The longest lab id and fingerprint a daemon's endpoint is named by ("lab02-" + 20 hex).
_LONGEST_NAME = "x" * 12 + "-" + "0" * 20


def why_off() -> tuple[str, dict[str, str]] | None:
    """Why `labkit grade` would grade without a daemon here, as a message key of the
    catalogue and its parameters (`labkit doctor` says it); None when a daemon can run.
    Each reason names the folder and what would mend it."""
    if not enabled():
        return "daemon_off", {}
    path = _runtime_path()
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        return "daemon_off_no_folder", {"where": str(path), "detail": exc.strerror or str(exc)}
    if not platform.private_folder(path):
        return "daemon_off_not_private", {"where": str(path)}
    if channel.endpoint(path, _LONGEST_NAME) is None:
        return "daemon_off_path_too_long", {"where": str(path)}
    return None


def fingerprint(lab: LabSpec) -> str:
    """What a daemon must share with the client to grade for it.

    File sizes and modification times stand for contents: cheap enough to compute on
    every `labkit grade`, and any edit of a grader or of the kit changes them.
    """
    h = hashlib.sha256()
    setup = [__version__, sys.executable, lab.to_dict(),
             {k: settings.get(k) for k in _PASSED_ENV}]
    h.update(json.dumps(setup, sort_keys=True).encode())
    roots = (lab.grader_dir, lab.grader_dir.parent / "pytest.ini", Path(__file__).parents[1])
    for root in roots:
        paths = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in paths:
            if "__pycache__" in path.parts:
                continue
            with contextlib.suppress(OSError):
                info = path.stat()
                h.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def socket_path(lab: LabSpec) -> Path | None:
    """Where the daemon for `lab` (as this kit and environment would grade it) listens."""
    root = runtime_dir()
    if root is None:
        return None
    return channel.endpoint(root, f"{lab.id}-{fingerprint(lab)}")


# --- the client -------------------------------------------------------------------------


def grade(lab: LabSpec, files: dict[str, bytes], lang: str, only: str | None = None,
          progress: Callable[[int, int], None] | None = None) -> LabResult | None:
    """The daemon's grade of `files` (of `only` that function's checks), or None when no
    daemon gave a usable one; `progress(k, n)` as the daemon begins each check."""
    path = socket_path(lab)
    if path is None:
        return None
    names, blobs = fileset.as_blobs(files)
    reply = _ask(path, {"op": "grade", "lang": lang, "files": names, "only": only},
                 lab.grade_timeout + REPLY_SLACK, blobs, progress=progress)
    try:
        result = LabResult.from_dict(reply["result"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        return None
    if result.lab != lab.id or result.digest != fileset.digest(files) or result.lang != lang:
        return None  # not an answer to what was asked
    return result


def start(lab: LabSpec, idle: float | None = None) -> bool:
    """Start a daemon for `lab` in the background (it exits at once if one is running);
    it outlives the `labkit grade` that started it (`platform.start_detached`)."""
    path = socket_path(lab)
    if path is None:
        return False
    if idle is None:
        idle = idle_seconds()
    command = [sys.executable, "-m", "labkit.student.daemon", str(path),
               json.dumps(lab.to_dict()), str(idle)]
    try:  # a grade is never lost for want of a daemon (a full disk, no /bin/sh ...)
        with open(path.with_suffix(".log"), "ab") as log:
            return platform.start_detached(command, log, path.parent)
    except OSError:
        return False


@dataclass(frozen=True)
class DaemonInfo:
    socket: Path
    pid: int
    lab: str
    graded: int
    idle_s: float
    busy: bool = False  # did not answer within `PING_SECONDS`: graded and idle_s unknown


def running() -> list[DaemonInfo]:
    """The daemons of this user: those that answer, and those that listen but do not
    answer in time (`busy`)."""
    root = runtime_dir()
    found = []
    for path in channel.endpoints(root) if root else []:
        peer: list[int] = []
        reply = _ask(path, {"op": "ping"}, PING_SECONDS, peer=peer)
        if reply is None:
            if peer:  # listening, not answering
                lab = path.name.rsplit("-", 1)[0]
                found.append(DaemonInfo(path, peer[0], lab, 0, 0.0, busy=True))
            continue
        try:
            found.append(DaemonInfo(path, int(reply["pid"]), str(reply["lab"]),
                                    int(reply["graded"]), float(reply["idle_s"])))
        except (KeyError, TypeError, ValueError):
            continue  # not one of ours
    return found


def stop_all(wait: float = 5.0) -> list[DaemonInfo]:
    """Stop every daemon of this user; returns them. One that does not answer the
    stop within `PING_SECONDS` is killed (its zygote then ends its sandbox), and its
    socket removed."""
    stopped = running()
    for info in stopped:
        if info.busy or _ask(info.socket, {"op": "stop"}, PING_SECONDS) is None:
            with contextlib.suppress(OSError):
                platform.kill(info.pid)
                info.socket.unlink()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(i.socket.exists() for i in stopped):
        time.sleep(0.02)
    return stopped


def _ask(path: Path, request: dict[str, Any], timeout: float,
         blobs: list[bytes] | None = None, peer: list[int] | None = None,
         progress: Callable[[int, int], None] | None = None) -> dict[str, Any] | None:
    """One framed request, one framed reply within `timeout` s in all; None for anything
    but a well-formed message of at most `MAX_REQUEST` bytes in reply. A grade's reply
    may follow messages `{"progress": [k, n]}`, each told to `progress`.

    `peer` gets the pid of the process listening on `path`, if it is this user's daemon,
    which holds even when that process does not answer (`channel.connect`).
    """
    deadline = time.monotonic() + timeout
    try:
        with channel.connect(path, CONNECT_SECONDS, deadline, peer) as sock:
            channel.send(sock, request, blobs, deadline)  # and nothing after (`_watch_hangup`)
            reply, _ = channel.receive(sock, MAX_REQUEST, deadline)
            while "progress" in reply:
                done, total = (int(n) for n in reply["progress"])
                if progress is not None:
                    progress(done, total)
                reply, _ = channel.receive(sock, MAX_REQUEST, deadline)
    except (OSError, protocol.ProtocolError, protocol.ChannelClosed, protocol.ChannelTimeout,
            TypeError, ValueError):
        return None
    return reply


# --- the daemon -------------------------------------------------------------------------


def serve(path: Path, lab: LabSpec, idle: float) -> None:
    """Serve gradings of `lab` on `path` until idle for `idle` s or asked to stop."""
    if not platform.private_folder(path.parent):
        return
    with _exclusive(path.with_suffix(".lock")) as mine:
        if not mine:
            return  # another daemon has this socket
        _prune(path.parent, keep=path.with_suffix(".lock"))
        from labkit.engine import warm  # the server side only: pytest and NumPy

        warm.run_warm(lab, lambda grade: _listen(path, lab, grade, idle))


def _prune(root: Path, keep: Path) -> None:
    """Remove the files of daemons that are gone (older kits or graders): only while
    holding their lock, the lock file last. One that opened the lock file before it was
    removed and locks it after finds it removed (`platform.exclusive_lock`), and leaves."""
    for lock in root.glob("*.lock"):
        if lock == keep:
            continue
        with _exclusive(lock) as unused:
            if unused:
                for suffix in (".log", *channel.SUFFIXES.values(), ".lock"):
                    with contextlib.suppress(OSError):
                        lock.with_suffix(suffix).unlink()


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[bool]:
    """`platform.exclusive_lock`, where a lock file that cannot be opened is another's."""
    with contextlib.ExitStack() as stack:
        try:
            mine = stack.enter_context(platform.exclusive_lock(lock))
        except OSError:
            mine = False
        yield mine


def _listen(path: Path, lab: LabSpec, grade: Callable, idle: float) -> None:
    """Accept one client at a time; bound only now that grading is warm (we hold the
    lock: a socket already there is a dead daemon's)."""
    listener = channel.Listener(path)
    graded, last = 0, time.monotonic()
    try:
        while True:
            try:
                conn = listener.accept(idle, REQUEST_SECONDS)
            except TimeoutError:
                return
            if conn is None:
                continue
            with conn:
                request, blobs = _receive(conn)
                op = request.get("op")
                if op == "stop":
                    _reply(conn, {"stopping": True})
                    return
                if op == "ping":
                    _reply(conn, {"pid": os.getpid(), "lab": lab.id, "graded": graded,
                                  "idle_s": round(time.monotonic() - last, 3)})
                elif op == "grade":
                    if not _grade(conn, lab, grade, request, blobs):
                        return  # the warm state may be broken: let the next client restart us
                    graded, last = graded + 1, time.monotonic()
    finally:
        listener.close()


def _grade(conn: socket.socket, lab: LabSpec, grade: Callable, request: dict[str, Any],
           blobs: list[bytes]) -> bool:
    """Grade one request and reply; False if grading itself failed."""
    try:
        files = fileset.from_blobs(request["files"], blobs)
        lang = str(request["lang"])
        only = request.get("only")
        if only is not None and not isinstance(only, str):
            raise ValueError(only)
    except (KeyError, ValueError):
        _reply(conn, {"error": "malformed request"})
        return True
    if not set(files) <= set(lab.files):
        _reply(conn, {"error": "files that are not the lab's"})
        return True
    from labkit.engine import warm

    cancel = warm.Cancel()
    watcher = threading.Thread(target=_watch_hangup, args=(conn, cancel), daemon=True)
    watcher.start()
    try:
        result = grade(files, lang, cancel=cancel, only=only,
                       progress=lambda done, total: _reply(conn, {"progress": [done, total]}))
    except warm.GradingCancelled:
        return True  # the client left (Ctrl-C): nobody to answer, and ready for the next
    except Exception as exc:  # noqa: BLE001 - told to the client, who grades in-process
        _reply(conn, {"error": f"{type(exc).__name__}: {exc}"})
        return False
    finally:
        cancel.finish()
        watcher.join()
    _reply(conn, {"result": result.to_dict()})
    return True


def _watch_hangup(conn: socket.socket, cancel: Any) -> None:
    """Cancel the grading as soon as the client closes its end (it was interrupted). A
    client sends nothing after its request, so its socket turns readable only then, on
    every system and channel (a half-close would tell TCP's peer nothing of a hang-up)."""
    while not cancel.finished():
        readable, _, failed = select.select([conn], [], [conn], HANGUP_POLL)
        if readable or failed:
            cancel.set()
            return


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[bytes]]:
    """The client's one request, if it sends a well-formed one in time (else no op)."""
    try:
        return channel.receive(conn, MAX_REQUEST, time.monotonic() + REQUEST_SECONDS)
    except (OSError, protocol.ProtocolError, protocol.ChannelClosed, protocol.ChannelTimeout):
        return {}, []


def _reply(conn: socket.socket, message: dict[str, Any]) -> None:
    """One framed reply (ASCII JSON: any text can be sent); a client that gave up or
    stopped reading costs at most `REQUEST_SECONDS`."""
    with contextlib.suppress(OSError, protocol.ChannelClosed, protocol.ChannelTimeout):
        channel.send(conn, message, [], time.monotonic() + REQUEST_SECONDS)


def main() -> None:
    path, lab, idle = Path(sys.argv[1]), LabSpec.from_dict(json.loads(sys.argv[2])), \
        float(sys.argv[3])
    serve(path, lab, idle)


if __name__ == "__main__":
    main()
