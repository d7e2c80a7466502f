"""One portable worker's process tree, as the trusted side sees and ends it: what it
used (psutil, or the Job Object's accounting on Windows), its threads while a call
runs, and its end.

On Windows the worker and all it starts are held in a Job Object (`winjob`): memory,
CPU time and process count limited from outside, the whole tree ended at once. On POSIX
the worker leads a process group of its own; its descendants are found (psutil) and
ended with the group, and a sweep by the marker in their environment (`reset`) finds
those that left both (a double fork) as long as they keep it.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import psutil

from labkit import platform
from labkit.sandbox.backend import MARKER, Usage


def _job(limits: dict[str, int], processes: int | None) -> Any:
    """A Windows Job Object for a worker's `limits` (None elsewhere)."""
    if os.name != "nt":
        return None
    from labkit.sandbox.portable.winjob import JobObject

    return JobObject(memory_bytes=limits.get("RLIMIT_AS"),
                     cpu_seconds=limits.get("RLIMIT_CPU"), processes=processes)


class Tree:
    """A started worker and everything it starts."""

    def __init__(self, process: subprocess.Popen, limits: dict[str, int],
                 processes: int | None) -> None:
        self.process = process
        self.pid = process.pid
        self.job = _job(limits, processes)
        if self.job is not None:
            self.job.assign(int(process._handle))  # type: ignore[attr-defined]  # Windows' Popen
        try:
            self._ps: psutil.Process | None = psutil.Process(process.pid)
        except psutil.Error:  # the system will not say (Linux without /proc): ended by pid
            self._ps = None

    def usage(self) -> Usage:
        """The worker process's own CPU time (every thread, ended ones included; not its
        children's: a grader tells work done in them from work done here), its threads,
        and its descendants' pids. `OSError` if gone."""
        if self._ps is None:
            raise OSError("this system does not report the worker's usage")
        try:
            times = self._ps.cpu_times()
            threads = self._ps.num_threads()
            children = tuple(child.pid for child in self._ps.children(recursive=True))
        except psutil.Error as exc:
            raise OSError(str(exc)) from None
        return Usage(times.user + times.system, threads, children)

    def cpu(self) -> float:
        """The worker process's own CPU time so far (as in `usage`), without the walk of
        its descendants: read at every call's start. `OSError` if it is gone."""
        if self._ps is None:
            raise OSError("this system does not report the worker's usage")
        try:
            times = self._ps.cpu_times()
        except psutil.Error as exc:
            raise OSError(str(exc)) from None
        return times.user + times.system

    def threads(self) -> dict[int, tuple[float, float]]:
        """{thread id: (CPU seconds, 0)} of the worker process now, for
        `labkit.sandbox.watching.ThreadSampler` (no system tells a thread's wait for a
        CPU portably); empty if unknown."""
        try:
            return ({} if self._ps is None else
                    {t.id: (t.user_time + t.system_time, 0.0) for t in self._ps.threads()})
        except psutil.Error:
            return {}

    def main_thread(self, before: dict[int, tuple[float, float]]) -> int | None:
        """The thread that runs calls: the one whose id is the process's (Linux), else
        the one that had used the most CPU when the watch began (it imported NumPy and
        the student's modules)."""
        if self.pid in before:
            return self.pid
        return max(before, key=lambda tid: before[tid][0], default=None)

    def end(self) -> dict[str, Any]:
        """End the worker and its descendants; how it ended (`exitcode`, `killed`)."""
        killed = self.process.poll() is None
        doomed = _descendants(self._ps) if self._ps is not None else []
        if self.job is not None:
            self.job.terminate()
        platform.kill_group(self.pid)
        if killed:
            self.process.kill()
        for process in doomed:
            try:
                process.kill()
            except psutil.Error:
                pass
        try:
            code = self.process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        psutil.wait_procs(doomed, timeout=1)
        if self.job is not None:
            self.job.close()
        return {"killed": killed, "exitcode": code}



def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def sweep(marker: str) -> list[int]:
    """End every process of this user whose environment holds `marker` (whatever a
    worker started that left its tree); the pids that could not be ended."""
    try:
        mine = psutil.Process().username()
    except psutil.Error:  # the system will not list processes (Linux without /proc)
        return []
    found = []
    for process in psutil.process_iter(["username"]):
        try:
            if process.info["username"] != mine or process.pid == os.getpid():
                continue
            if process.environ().get(MARKER) == marker:
                found.append(process)
        except psutil.Error:
            continue
    for process in found:
        try:
            process.kill()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(found, timeout=2)
    return [process.pid for process in alive]
