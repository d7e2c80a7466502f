"""A pids cgroup per zygote: the bound on processes that holds for root too.

`RLIMIT_NPROC` counts the processes of a user and does not bind a process with
`CAP_SYS_RESOURCE` or `CAP_SYS_ADMIN`, which is root in `process` mode. The kernel's pids
controller counts every task of a cgroup, whoever runs it, so a fork bomb in a worker (one
through `multiprocessing`, say) stops at `pids.max` in both isolation modes. The zygote is
started inside its group (`wrap`), so everything it and its workers start is counted
there. Where the machine offers no pids controller this process may write to (a
container without cgroup delegation), `available` says so and nothing is wrapped:
`labkit doctor` and the README then say that `process` mode as root cannot bound a fork
bomb.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

LIMIT = 256  # tasks (processes and threads) of one zygote and all its workers
_V1 = "pids"


@dataclass(frozen=True)
class PidsGroup:
    """A cgroup made for one zygote, with `pids.max` set."""

    path: Path

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started by a shell that first moves itself into this group, so
        that the command and all it starts are counted from the first instruction."""
        return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path),
                *command]

    def remove(self, seconds: float = 1.0) -> None:
        """Remove the group once its last task has left it (killed tasks take a moment
        to exit); one still busy after `seconds` is left, an empty folder of a few
        files."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every cgroup file system."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) > 4 and len(tail) > 2 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], tail[0], tail[2]))
    return found


def _own_groups() -> dict[str, str]:
    """This process's cgroup per hierarchy: controller list ("" for v2) -> path."""
    groups = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            groups[parts[1]] = parts[2]
    return groups


def parent() -> Path | None:
    """Where a pids group for a zygote can be made here, or None: this process's own
    cgroup in the v1 `pids` hierarchy, else in the v2 hierarchy when it delegates `pids`
    to its children; only if writable."""
    own = _own_groups()
    for mount, kind, options in _mounts():
        if kind == "cgroup" and _V1 in options.split(","):
            path = next((p for names, p in own.items() if _V1 in names.split(",")), None)
        elif kind == "cgroup2":
            path = own.get("")
        else:
            continue
        if path is None:
            continue
        folder = Path(mount) / path.lstrip("/")
        if kind == "cgroup2":
            try:
                if "pids" not in (folder / "cgroup.subtree_control").read_text().split():
                    continue
            except OSError:
                continue
        if os.access(folder, os.W_OK):
            return folder
    return None


def available() -> bool:
    """Whether zygotes here get a pids group (see the module's docstring)."""
    return parent() is not None


def make(limit: int = LIMIT) -> PidsGroup | None:
    """A new pids group holding at most `limit` tasks, or None where none can be made."""
    folder = parent()
    if folder is None:
        return None
    path = folder / f"labkit-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        path.mkdir()
        (path / "pids.max").write_text(f"{limit}\n")
    except OSError:
        PidsGroup(path).remove()
        return None
    return PidsGroup(path)
