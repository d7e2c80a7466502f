"""A worker's threads sampled by the trusted side while a call runs, whatever reads them.

Each back end says how to read a worker's threads now (`read`: {thread id: (seconds it
ran, seconds it waited for a CPU)}; Linux's from `/proc`'s schedstat, the portable one's
through psutil) and which thread runs the call; the sampling, in a thread of the grading
process that the worker cannot see or change, is the same for both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from labkit.sandbox.backend import ThreadSeen

Reading = dict[int, tuple[float, float]]


class ThreadSampler:
    """Samples every `INTERVAL_S` until `finish`: a `labkit.sandbox.backend.ThreadWatch`.
    `main` picks, from the first reading, the thread that runs the call (None: unknown)."""

    INTERVAL_S = 0.002

    def __init__(self, read: Callable[[], Reading],
                 main: Callable[[Reading], int | None]) -> None:
        self.read, self.before = read, read()
        self.main = main(self.before)
        self.seen: dict[int, tuple[float, float, float]] = {}
        self.stop = threading.Event()
        self.started = time.perf_counter()
        self.thread = threading.Thread(target=self._run, name="labkit-watch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.INTERVAL_S):
            self._sample()

    def _sample(self) -> Reading:
        now, threads = time.perf_counter() - self.started, self.read()
        for tid, (run, ready) in threads.items():
            if tid not in self.before:
                self.seen[tid] = (run, ready, now)
        return threads

    def finish(self) -> tuple[float | None, tuple[ThreadSeen, ...]]:
        self.stop.set()
        self.thread.join()
        after = self._sample()
        main = None
        if self.main is not None and self.main in self.before and self.main in after:
            main = after[self.main][0] - self.before[self.main][0]
        return main, tuple(ThreadSeen(run, ready, at) for run, ready, at in self.seen.values())
