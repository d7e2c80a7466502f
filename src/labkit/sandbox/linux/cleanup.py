"""Process mode's cleanup, done by the trusted side (Linux only).

Without namespaces a worker can kill its zygote (same user) and leave orphans, System V
segments or /dev/shm entries on the host; the grading process ends and removes them
itself. Also what ends a zygote that will not exit: every process carrying its marker.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

from labkit import platform
from labkit.sandbox import unprivileged
from labkit.sandbox.linux import procfs
from labkit.sandbox.linux.pids import PidsGroup

_LIBC = ctypes.CDLL(None, use_errno=True)
_IPC_RMID = 0
LIVE_ZYGOTES: set[int] = set()  # this process's running process-mode zygotes


def become_subreaper() -> None:
    """Make this (trusted) grading process a child subreaper.

    The zygote is one too, but in `process` mode a worker can kill it (same user); its
    orphans then become our children, not init's, and `kill_orphans` ends them.
    Nothing the student can change decides that (the environment marker can be dropped).
    """
    platform.become_subreaper()


def kill_orphans(since: int, group: PidsGroup | None = None, marker: str = "") -> None:
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
                    table[int(name)] = procfs.process_stat(int(name))
                except (OSError, IndexError, ValueError):
                    continue
        children: dict[int, list[int]] = {}
        for pid, (parent, _, _) in table.items():
            children.setdefault(parent, []).append(pid)
        roots = [pid for pid in children.get(me, [])
                 if pid not in LIVE_ZYGOTES and table[pid][1] >= since
                 and (group is None or procfs.in_group(pid, group)
                      or procfs.marker_of(pid) == marker)]
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


def workers_uids() -> set[int]:
    """Who a process-mode zygote's workers run as: this user, or `unprivileged.NOBODY`
    when root grades (its own objects stay its own)."""
    return {unprivileged.NOBODY} if os.geteuid() == 0 else {os.geteuid()}


def clear_host_shm(before: set[int]) -> None:
    """Remove the System V segments a process-mode grading left (best effort: the host's
    IPC namespace is shared with everything else of this user).

    A segment goes if it is new since the zygote started, made by this user, attached
    nowhere and its creator is gone (all the grading's processes have been killed).
    """
    for ident, creator, attached, owner in procfs.host_shm():
        if ident in before or owner not in workers_uids() or attached:
            continue
        if creator and os.path.exists(f"/proc/{creator}"):
            continue
        _LIBC.shmctl(ident, _IPC_RMID, None)


def clear_dev_shm(before: set[str]) -> None:
    """Remove what a process-mode zygote's workers left in the host's /dev/shm: entries
    that are new since it started, ours, and held by no living process (its processes
    are gone by now; a neighbour's entry in use is kept). Usually there is none, and then
    this costs one listing."""
    uids = workers_uids()
    new = set()
    for name in set(procfs.dev_shm()) - before:
        path = os.path.join(procfs.DEV_SHM, name)
        try:
            if os.lstat(path).st_uid in uids:
                new.add(path)
        except OSError:
            continue
    if not new:
        return
    for path in new - procfs.held_open(new):
        try:
            os.unlink(path)
        except OSError:
            pass


def wait_exit(pid: int, timeout: float) -> bool:
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


def kill_marked(marker: str, timeout: float = 2.0) -> None:
    """SIGKILL every process carrying exactly this zygote's marker, until none is left."""
    if not marker:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in procfs.marked_processes(marker) if procfs.marker_of(p) == marker]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
