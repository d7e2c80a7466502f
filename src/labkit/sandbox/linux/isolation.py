"""Which isolation the student's processes get, and how the sandboxed zygote is started.

Two modes (see the threat model in the README):

- `bwrap`: the zygote, and so every worker it forks, runs inside bubblewrap: new user,
  PID, network, IPC, UTS and cgroup namespaces; a read-only view of only the system
  libraries, the Python runtime and the kit's own package; a size-limited private
  `/tmp` (where each worker's files live) and `/dev/shm` (multiprocessing's
  semaphores); no capability; an unprivileged uid; a pids cgroup where the host has one.
- `process`: no namespaces; the workers get resource limits and their whole process
  tree is killed when the grader is done with them, but they run as the user who
  grades (never as root: as uid 65534 when root grades, see `unprivileged`).

`LABKIT_ISOLATION` (or `SandboxConfig.isolation` / `Zygote(isolation=...)`) picks one:
`auto` (the default: bwrap when it works here, else process), `bwrap` or `process`.
"""

from __future__ import annotations

import compileall
import functools
import json
import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from labkit import settings
from labkit.sandbox import levels, unprivileged
from labkit.sandbox.errors import IsolationError
from labkit.sandbox.linux import pids

ENV_VAR = settings.ISOLATION  # the setting that picks the mode
MODES = ("auto", "bwrap", "process")
SANDBOX_UID = unprivileged.NOBODY
TMP_BYTES = 256 * 1024**2  # the sandbox's private /tmp, where workers' files live
# The sandbox's private /dev/shm: multiprocessing's locks and queues are POSIX semaphores,
# files there; emptied with /tmp by the zygote's reset.
SHM_BYTES = 64 * 1024**2
SANDBOX_NPROC = 128  # processes and threads; counted per sandbox (its user namespace)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/alternatives")
_PASSWD = f"nobody:x:{SANDBOX_UID}:{SANDBOX_UID}:labkit sandbox:/tmp:/usr/sbin/nologin\n"
_GROUP = f"nogroup:x:{SANDBOX_UID}:\n"
_HANDSHAKE_SECONDS = 10.0

_broken: dict[str, str] = {}  # bwrap path -> why it could not start a sandbox here


@dataclass(frozen=True)
class Isolation:
    """The mode that will be used (`bwrap` or `process`) and why."""

    mode: str
    reason: str
    bwrap: str | None = None


def requested(value: str | None = None) -> str:
    """The requested mode: `value`, else `$LABKIT_ISOLATION`, else `auto`; one of this
    back end's (`IsolationError` for `portable`: the facade gives that one)."""
    mode = levels.requested(value)
    if mode not in MODES:
        raise IsolationError(f"{mode} isolation is not the Linux back end's")
    return mode


def choose(value: str | None = None) -> Isolation:
    """What `value` (or the environment) asks for, as it can be had on this machine.

    `auto` falls back to `process` when bwrap is missing or failed to start a sandbox
    earlier in this process; an explicit `bwrap` raises `IsolationError` instead.
    """
    mode = requested(value)
    source = levels.source(value)
    if mode == "process":
        return Isolation("process", f"requested ({source})")
    path = shutil.which("bwrap")
    problem: str | None
    if path is None:
        problem = "bwrap not found on PATH (Debian/Ubuntu package: bubblewrap)"
    else:
        problem = _broken.get(path)
    if problem is None:
        why = "requested" if mode == "bwrap" else "auto: bwrap is installed"
        return Isolation("bwrap", f"{why} ({path})", path)
    if mode == "bwrap":
        raise IsolationError(problem)
    return Isolation("process", f"auto: {problem}")


def mark_broken(isolation: Isolation, reason: str) -> None:
    """Remember that bwrap could not start a sandbox, so `auto` stops trying it."""
    if isolation.bwrap:
        _broken[isolation.bwrap] = f"bwrap could not start a sandbox: {reason}"


def runtime_paths() -> list[str]:
    """What the zygote needs from the host, read-only: Python and the kit's package.

    Only these are bound (plus the system's library folders): not the home folder,
    not a source checkout beyond `src/labkit`, not the graders, not `/etc`.
    """
    import site

    import labkit

    candidates = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix,
                  *site.getsitepackages(), str(Path(labkit.__file__).resolve().parent),
                  str(Path(sys.executable).parent)]
    chosen: list[str] = []
    for candidate in candidates:
        path = os.path.abspath(candidate)
        if not os.path.isdir(path) or any(_under(path, root) for root in _SYSTEM_DIRS):
            continue
        if any(_under(path, kept) for kept in chosen):
            continue
        chosen = [kept for kept in chosen if not _under(kept, path)] + [path]
    return chosen


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.cache
def precompile() -> None:
    """Write the kit's own bytecode if it is missing or stale.

    Inside bwrap the runtime is read-only, so Python could not cache what it compiles;
    site-packages are compiled at install time, but an editable install's `src/labkit`
    is compiled only by running it. Quiet no-op where the folder is not writable; once
    per process.
    """
    import labkit

    package = Path(labkit.__file__).resolve().parent
    # The whole kit, not only what a sandboxed process imports: where bytecode is not
    # written by default (PYTHONDONTWRITEBYTECODE), every `labkit grade` client would
    # otherwise compile its own modules on every run.
    for source in package.rglob("*.py"):
        try:
            compileall.compile_file(str(source), quiet=2)
        except OSError:
            pass


@functools.cache
def bwrap_options(bwrap: str) -> frozenset[str]:
    """The options this bwrap knows (older releases lack some we use when present)."""
    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(word for word in (shown.stdout + shown.stderr).split()
                     if word.startswith("--"))


def _bwrap_args(bwrap: str, as_root: bool, info_fd: int, block_fd: int,
                passwd_fd: int, group_fd: int) -> list[str]:
    known = bwrap_options(bwrap)
    args = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL"]
    if as_root:
        # The caller writes the uid map (0 and 65534 to themselves, see `launch`); the
        # zygote forbids nested user namespaces, then drops to 65534 with these
        # capabilities and loses all of them (`labkit.sandbox.child.forkserver._drop_privileges`).
        args += ["--userns-block-fd", str(block_fd), "--info-fd", str(info_fd)]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_SYS_RESOURCE"):
            args += ["--cap-add", cap]
    else:
        args += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        if "--disable-userns" in known:  # no nested user namespaces (newer bwrap)
            args.append("--disable-userns")
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    args += ["--perms", "0644", "--ro-bind-data", str(passwd_fd), "/etc/passwd",
             "--perms", "0644", "--ro-bind-data", str(group_fd), "/etc/group"]
    # The private /tmp comes before the runtime's binds, so that a Python (a virtualenv,
    # say) living under the host's /tmp is bound on top of it rather than hidden by it.
    size = ["--size", str(TMP_BYTES)] if "--size" in known else []  # not in older bwrap
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", *size, "--tmpfs", "/tmp"]
    shm_size = ["--size", str(SHM_BYTES)] if size else []
    args += ["--perms", "1777", *shm_size, "--tmpfs", "/dev/shm"]
    if "--mqueue" in known:  # the IPC namespace's message queues, for the zygote to empty
        args += ["--mqueue", "/dev/mqueue"]
    made = {"/", "/tmp"}
    for path in runtime_paths():
        parents = []
        parent = os.path.dirname(path)
        while parent not in made and parent != "/":
            parents.append(parent)
            parent = os.path.dirname(parent)
        for parent in reversed(parents):  # readable parents, whatever the host's are
            args += ["--perms", "0755", "--dir", parent]
            made.add(parent)
        args += ["--ro-bind", path, path]
        made.add(path)
    args += ["--chdir", "/tmp", "--"]
    return args


class _PopenCommon(TypedDict):
    """The Popen arguments `launch` passes in both modes."""

    env: dict[str, str]
    stdin: int
    stdout: int
    stderr: int
    start_new_session: bool


def _data_pipe(text: str) -> int:
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    return read


def launch(isolation: Isolation, command: list[str], *, env: dict[str, str],
           pass_fds: list[int], stderr: int, cwd: str,
           group: pids.PidsGroup | None = None) -> subprocess.Popen:
    """Start `command` (the zygote) under `isolation`; it is its own session leader,
    inside the pids cgroup `group` when there is one (see `labkit.sandbox.linux.pids`).

    With bwrap, started as root, the sandbox's user namespace maps uid 0 (needed while
    bwrap builds the mounts) and 65534 to themselves, and the zygote is told to become
    65534 (`--uid`): the host then sees an unprivileged process, which cannot read
    root's files, cannot write the read-only binds even after remounting, and is
    bound by RLIMIT_NPROC. Started by anyone else, bwrap maps the caller's own uid.
    """
    common = _PopenCommon(env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=stderr, start_new_session=True)
    wrap = group.wrap if group is not None else list
    if isolation.mode == "process":
        if os.geteuid() == 0:
            command = _as_nobody(command)
        return subprocess.Popen(wrap(command), pass_fds=pass_fds, cwd=cwd, **common)
    precompile()
    as_root = os.geteuid() == 0
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    passwd_fd, group_fd = _data_pipe(_PASSWD), _data_pipe(_GROUP)
    if as_root:
        command = [*command, "--uid", str(SANDBOX_UID)]
    args = _bwrap_args(isolation.bwrap or "bwrap", as_root, info_w, block_r, passwd_fd, group_fd)
    try:
        process = subprocess.Popen(
            wrap(args + command), pass_fds=[*pass_fds, info_w, block_r, passwd_fd, group_fd],
            cwd="/", umask=0o022, **common,
        )
    finally:
        for fd in (info_w, block_r, passwd_fd, group_fd):
            os.close(fd)
    try:
        if as_root:
            child = _read_info(info_r, process)
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{child}/{name}", "w") as handle:
                    handle.write(f"0 0 1\n{SANDBOX_UID} {SANDBOX_UID} 1\n")
            os.write(block_w, b"1")
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        os.close(info_r)
        os.close(block_w)
    return process


def _as_nobody(command: list[str]) -> list[str]:
    """Process mode started as root: the zygote drops to 65534 before it serves
    anything, so the student's code cannot write the kit or the results; it gets its
    scratch folder (`--scratch`, made where that user can reach it, see
    `unprivileged.temp_base`) to write in, and is told it shares the machine (no
    machine-wide setting is changed for it)."""
    scratch = command[command.index("--scratch") + 1]
    os.chown(scratch, SANDBOX_UID, SANDBOX_UID)
    return [*command, "--uid", str(SANDBOX_UID), "--unsandboxed", "1"]


def _read_info(fd: int, process: subprocess.Popen) -> int:
    """The sandbox's first process, from bwrap's `--info-fd` JSON."""
    data = b""
    deadline = time.monotonic() + _HANDSHAKE_SECONDS
    while True:
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError, TypeError):
            pass
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise IsolationError("bwrap did not report its sandbox in time")
        chunk = os.read(fd, 4096)
        if not chunk:
            process.wait()
            raise IsolationError(f"bwrap stopped before starting (exit {process.returncode})")
        data += chunk
