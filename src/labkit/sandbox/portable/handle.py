"""The trusted side's handle on one portable worker: framed messages over its standard
streams (waited on by helper threads, `channel`), usage and threads read through psutil,
and a call's time limit stretched by what the machine was too busy to give it.

No system offers a process's run-queue wait portably, so it is estimated: of the time
a call has taken, a worker that ran could have run for its own CPU time plus the CPU
time the machine left idle meanwhile (on a saturated machine it is given more time). A
worker that hardly ran at all (under `SLEEPING_SHARE` of the time) was waiting on
something (a sleep, a lock), not on the machine: it times out at its limit. So a busy
machine may still starve a call that gets less than that share of a core: coarser than
the Linux back end's count, which the kernel keeps per thread.
"""

from __future__ import annotations

import mmap
from typing import Any, Protocol

import psutil

from labkit.sandbox import protocol
from labkit.sandbox.backend import Deadline, Usage
from labkit.sandbox.calls import CallHandle
from labkit.sandbox.errors import WorkerCrashed
from labkit.sandbox.portable.channel import Channel, StreamCapture
from labkit.sandbox.portable.tree import Tree
from labkit.sandbox.watching import ThreadSampler

SLEEPING_SHARE = 0.05


class Ender(Protocol):
    """What a handle asks of the back end that started its worker."""

    def end_worker(self, handle: PortableHandle, wait: bool) -> dict[str, Any]: ...


class PortableHandle(CallHandle):
    """One portable worker, serving a check (or a lab's passing checks in a row)."""

    def __init__(self, backend: Ender, deadline: Deadline, tree: Tree, channel: Channel,
                 capture: StreamCapture, workdir: str, generation: int = 0, sent: int = 0,
                 arena: mmap.mmap | None = None) -> None:
        super().__init__(deadline, generation, capture, sent, arena)
        self.backend, self.tree, self.channel, self.workdir = backend, tree, channel, workdir
        self.pid = tree.pid
        self._marked: tuple[float, float] | None = None  # (idle CPU, worker CPU) at a call

    def _write(self, data: bytes, deadline: float) -> None:
        self.channel.write(data, deadline)

    def _read(self, deadline: float) -> protocol.Message:
        return self.channel.read(deadline)

    def usage(self) -> Usage:
        """What the worker's tree has used so far, as the system counts it.
        `WorkerCrashed` if the worker is gone."""
        try:
            return self.tree.usage()
        except OSError as exc:
            raise WorkerCrashed(None, f"cannot read the worker's usage: {exc}") from None

    def watch(self) -> ThreadSampler | None:
        """The worker's threads sampled while a call runs (their CPU time; see
        `Tree.threads`); None where the system does not let this user read them."""
        sampler = ThreadSampler(self.tree.threads, self.tree.main_thread)
        if not sampler.before:
            sampler.finish()
            return None
        return sampler

    def _mark(self) -> None:
        try:
            self._marked = (psutil.cpu_times().idle, self.tree.cpu())
        except (OSError, psutil.Error):
            self._marked = None

    def _could_run(self, elapsed: float) -> tuple[float, float] | None:
        if self._marked is None:
            return None
        try:
            idle = psutil.cpu_times().idle - self._marked[0]
            ran = self.tree.cpu() - self._marked[1]
        except psutil.Error:
            return None
        if ran < SLEEPING_SHARE * elapsed:  # waiting on something, not on the machine
            return elapsed, ran
        return min(elapsed, ran + max(idle, 0.0)), ran

    def _end(self) -> dict[str, Any]:
        return self.backend.end_worker(self, wait=True)

    def _release(self) -> None:
        self.backend.end_worker(self, wait=False)

    def _close_channels(self) -> None:
        """Nothing yet: the back end closes the channel once the worker has ended (see
        `Channel.close`)."""
