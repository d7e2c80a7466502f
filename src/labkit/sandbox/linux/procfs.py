"""What the trusted side reads of processes from `/proc` (Linux only).

The kernel keeps these numbers, so no worker can change them: its CPU time, threads and
children, its run-queue wait, its pid seen from outside a PID namespace, the cgroup it
runs in, the marker in its environment, and what the host's shared memory holds.
"""

from __future__ import annotations

import os

from labkit.sandbox.backend import MARKER, Usage
from labkit.sandbox.linux.pids import PidsGroup


def mounted() -> bool:
    """Whether `/proc` shows this process (a container may not mount it)."""
    return os.path.isdir(f"/proc/{os.getpid()}")


def usage(pid: int) -> Usage:
    """What process `pid` has used so far (see `Usage`): CPU time in clock ticks (10 ms
    on most kernels), its threads, and its children. `OSError` if it is gone."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    threads = os.listdir(f"/proc/{pid}/task")
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return Usage(cpu, len(threads), tuple(_task_children(pid, threads)))


def _task_children(pid: int, threads: list[str]) -> list[int]:
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
                if process_stat(int(name))[0] == pid:
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
    return _task_children(pid, threads)


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


def nspid(pid: int) -> list[int]:
    """`pid`'s pids in its PID namespace and each one above it, innermost last."""
    with open(f"/proc/{pid}/status", "rb") as handle:
        for line in handle:
            if line.startswith(b"NSpid:"):
                return [int(n) for n in line.split()[1:]]
    return [pid]



def process_stat(pid: int) -> tuple[int, int, str]:
    """(parent pid, start time in clock ticks since boot, state letter) of `pid`."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), int(fields[19]), fields[0].decode()


def in_group(pid: int, group: PidsGroup) -> bool:
    """Whether process `pid` (a zombie too) is in `group`, by its /proc cgroup list."""
    try:
        with open(f"/proc/{pid}/cgroup", "rb") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return False
    name = b"/" + group.path.name.encode()
    return any(line.rstrip().endswith(name) for line in lines)


def host_shm() -> list[tuple[int, int, int, int]]:
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


DEV_SHM = "/dev/shm"


def dev_shm() -> list[str]:
    """What the host's /dev/shm holds (POSIX semaphores and shared memory)."""
    try:
        return os.listdir(DEV_SHM)
    except OSError:
        return []


def held_open(paths: set[str]) -> set[str]:
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


def marker_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(MARKER.encode() + b"="):
            return entry.split(b"=", 1)[1].decode(errors="replace")
    return None


def schedstats(pid: int) -> dict[int, tuple[int, int]]:
    """{tid: (ns run, ns waited on the run queue)} of process `pid`'s threads now."""
    found: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as handle:
                fields = handle.read().split()
            found[int(tid)] = (int(fields[0]), int(fields[1]))
        except (OSError, IndexError, ValueError):
            continue  # ended in the meantime
    return found


def thread_times(pid: int) -> dict[int, tuple[float, float]]:
    """{tid: (seconds run, seconds waited on the run queue)} of process `pid`'s threads,
    for `labkit.sandbox.watching.ThreadSampler` (the thread whose id is `pid` runs calls)."""
    return {tid: (run / 1e9, ready / 1e9) for tid, (run, ready) in schedstats(pid).items()}
