"""What a sandbox back end offers a grading: the one interface the engine, `doctor`, the
daemon and the batch's workers hold.

A back end starts the processes that run the student's code, gives each check a worker
serving the job's files, stops them, reports what they used, and clears everything
between submissions. Linux's (`labkit.sandbox.linux`: a zygote in bubblewrap or as
plain processes) is one implementation; one that starts a worker per check with
`subprocess` and reads usage through psutil would be another, with nothing here or
in the engine changed. Each method says what the engine relies on, not how.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any, Protocol

# In the environment of every process a back end starts (the value names the start),
# so that what left a worker's tree is still found (`labkit.sandbox.linux.cleanup`,
# `labkit.sandbox.portable.tree.sweep`).
MARKER = "LABKIT_SANDBOX"

DEFAULT_LIMITS = {
    "RLIMIT_CPU": 120,
    "RLIMIT_AS": 2 * 1024**3,
    "RLIMIT_FSIZE": 64 * 1024**2,
    "RLIMIT_NOFILE": 256,
    "RLIMIT_CORE": 0,
}
# NumPy's BLAS and OpenMP pools start one thread per core, which then spin after each
# call; a worker or a batch's grading process is one of many sharing the cores.
ONE_MATH_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# What every worker's environment holds besides: one math thread, and matplotlib drawing
# into files only (no window, on any system), chosen before anything imports it.
WORKER_ENV = {**ONE_MATH_THREAD, "MPLBACKEND": "Agg"}


@dataclass(frozen=True)
class SandboxConfig:
    """What a sandbox needs: the graded files, where to import from, and the limits.

    `files` are the graded files, `{relative path: bytes}` as they were read: they stay
    in memory, and each worker gets its own copy in its fresh folder (the one copy
    written anywhere). `isolation` is the requested level for a sandbox that opens its
    own back end (None: `$LABKIT_ISOLATION`, else `auto`).
    """

    files: Mapping[str, bytes]
    modules: tuple[str, ...]
    sys_path: tuple[str, ...] = ()
    probes: Path | None = None
    limits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    isolation: str | None = None


@dataclass(frozen=True)
class Usage:
    """A worker's use of the machine at one moment, as the system counts it (the worker
    cannot change these numbers, so a grader may judge them): CPU time in seconds (user
    and system, every thread, exited ones included; at the system's clock resolution),
    its threads, and its children's pids as the grading process sees them."""

    cpu_s: float
    threads: int
    children: tuple[int, ...]


@dataclass(frozen=True)
class ThreadSeen:
    """A thread a worker started during a watched call (`WorkerHandle.watch`), as the
    trusted side last saw it (on Linux, its `schedstat`, kept by the kernel): the CPU
    time it had run, the time it had waited on the run queue for a CPU, and when that
    was, in seconds after the watch began. The last sample may be up to a few
    milliseconds before the thread ended (more on a busy machine), so the figures can
    only be short of what the thread did."""

    run_s: float
    ready_s: float
    at_s: float


class ThreadWatch(Protocol):
    """A worker's threads sampled by the trusted side while a call runs."""

    def finish(self) -> tuple[float | None, tuple[ThreadSeen, ...]]:
        """Stop sampling: the CPU time the worker's own thread ran meanwhile (None if
        unknown), and each thread started meanwhile."""
        ...


class Deadline:
    """When the whole grading must end (a `time.monotonic()` value), or None: set by the
    grading as it goes, read by each of its workers at every wait."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at: float | None = None


@dataclass(frozen=True)
class Description:
    """What `labkit doctor` says of a back end: the level in use and why, and what it
    does and does not contain, as lines of (label key, message key, parameters) of the
    message catalogue (the sandbox renders no text: `doctor` does, in the reader's
    language)."""

    name: str
    reason: str
    lines: tuple[tuple[str, str, dict[str, Any]], ...]


class WorkerHandle(Protocol):
    """One worker, serving a check (or a lab's passing checks in a row), as the engine
    talks to it. Every wait ends at its time limit or at the grading's `Deadline`; a
    worker that cannot answer raises a `labkit.sandbox.errors.WorkerFailure`."""

    generation: int  # which start of the back end forked it (see `Backend.outlived`)
    arena: mmap.mmap | None  # memory shared with the worker (`labkit.sandbox.shared`)

    def request(self, header: dict[str, Any], blobs: list[bytes], timeout: float) -> Any:
        """Send one request; its reply (header, blobs)."""
        ...

    def send(self, requests: list[tuple[dict[str, Any], list[bytes]]], timeout: float,
             limit: int | None = None) -> bool:
        """Send requests ahead of their replies; False, nothing sent, past `limit` bytes."""
        ...

    def receive(self, timeout: float, since: float | None = None) -> Any:
        """The oldest reply not yet read, or a callback question (see `answer`)."""
        ...

    def answer(self, header: dict[str, Any], blobs: list[bytes], timeout: float,
               since: float) -> None:
        """Answer a callback question the current call asked."""
        ...

    def usage(self) -> Usage:
        """What the worker has used so far, read by the trusted side."""
        ...

    def watch(self) -> ThreadWatch | None:
        """Start sampling the worker's threads from outside it (None where the back end
        cannot see them)."""
        ...

    @property
    def idle(self) -> bool:
        """Alive as far as the grader knows, with every request answered."""
        ...

    def output(self) -> str:
        """A short excerpt of what it printed since `next_output`."""
        ...

    def next_output(self) -> None:
        """Start the output afresh: another check begins on this worker."""
        ...

    def stop(self) -> dict[str, Any]:
        """End it and all it started, waiting to hear how it ended (`exitcode`, `killed`)."""
        ...

    def close(self) -> None:
        """End it and all it started at the end of its check, without waiting."""
        ...


class Backend(Protocol):
    """Where a grading's workers come from; one back end can serve many gradings in turn
    (a batch's or the daemon's), each opened as a `labkit.sandbox.facade.Sandbox`."""

    @property
    def name(self) -> str:
        """The isolation level in use ("bwrap", "process"), named in every result."""
        ...

    @property
    def generation(self) -> int:
        """How many times it was started: a worker of an earlier start died with it."""
        ...

    @property
    def waits(self) -> frozenset[CodeType]:
        """The code of its handles' waits for a worker (a reply, a write, an answer): a
        `protocol.ChannelTimeout` raised inside one, by a signal handler that cancels
        the grading (`labkit.engine.warm.Cancel`), ends that wait as a timeout."""
        ...

    @property
    def blocking(self) -> frozenset[CodeType]:
        """The code in which a wait for a worker blocks (the innermost frame then): only
        there is it safe to end the wait by raising `protocol.ChannelTimeout`."""
        ...

    def start(self) -> None:
        """Start without waiting, so that its start-up overlaps the grader's imports."""
        ...

    def ready(self) -> None:
        """Wait until it can spawn; `SandboxFailure` if it cannot start here."""
        ...

    def prepare(self, config: SandboxConfig) -> None:
        """Begin loading what the workers of `config` share (the lab's probes), early."""
        ...

    def spawn(self, config: SandboxConfig, deadline: Deadline,
              module: str | None = None) -> WorkerHandle:
        """A fresh worker for the job `config`, in a new folder holding only its files
        (with `module`, importing it first, its reply read like a request's);
        `SandboxFailure` if none can be started, even after a restart."""
        ...

    def outlived(self, generations: set[int]) -> bool:
        """Whether the start that forked workers of `generations` still runs and answers."""
        ...

    def given_up(self, generations: set[int]) -> str | None:
        """Why the kit itself ended a start of `generations`, if it did."""
        ...

    def reset(self) -> None:
        """After a submission: end all its processes and clear what they left."""
        ...

    def close(self) -> None:
        """Stop it and everything it started."""
        ...

    def describe(self) -> Description:
        """What it contains and does not, for `labkit doctor`."""
        ...
