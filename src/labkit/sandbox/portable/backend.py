"""The portable back end: a worker process per check, started with `subprocess`.

Only what Python offers on macOS and Windows as well as Linux: no fork server, no
namespaces, no `/proc` read by name. Each worker is a fresh interpreter
(`labkit.sandbox.child.portable`) in a new folder of its own; it is started while the
previous check runs (`_Spare`), so a check rarely waits for Python and NumPy to load,
and it learns its job (files, probes, modules, limits) from its first message. Its
whole process tree is ended when the grader is done with it or a deadline passes
(`tree`), and `reset` sweeps what a submission left.

What it does not contain, and says so (`describe`): the student's code runs as the
user who grades, seeing their files and the network; macOS does not enforce memory
limits; on POSIX a process that leaves the worker's group and tree and clears its
environment can outlive the grading. It never runs student code as root: started by
root on POSIX, workers run as 65534.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from labkit import fsutil, platform
from labkit.sandbox import protocol, unprivileged
from labkit.sandbox.backend import (
    DEFAULT_LIMITS,
    MARKER,
    WORKER_ENV,
    Deadline,
    Description,
    SandboxConfig,
)
from labkit.sandbox.calls import CallHandle
from labkit.sandbox.errors import SandboxFailure
from labkit.sandbox.portable.arena import make_arena
from labkit.sandbox.portable.channel import Channel, StreamCapture
from labkit.sandbox.portable.handle import PortableHandle
from labkit.sandbox.portable.tree import Tree, sweep
from labkit.sandbox.unprivileged import NOBODY

NAME = "portable"
CHILD_MODULE = "labkit.sandbox.child.portable"
START_SECONDS = 30.0  # for a worker to load Python and NumPy and say it is ready
PROCESSES = 64  # a worker's processes at once, where the system counts them (Windows)
MAX_PROBES_BYTES = 4 * 1024**2
_PASSED_ENV = ("PATH", "SYSTEMROOT", "WINDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class _Spare:
    """A worker started ahead of its job, in its own new folder: it loads Python, NumPy
    and the call loop, says it is ready, and waits for its first message. It loads the
    lab's probes as soon as it is sent them (`preload`), still ahead of its job."""

    def __init__(self, root: str, marker: str, limits: dict[str, int],
                 probes: tuple[str, bytes] | None) -> None:
        self.workdir = tempfile.mkdtemp(prefix="work-", dir=root)
        as_nobody = platform.is_root()
        if as_nobody:
            os.chown(self.workdir, NOBODY, NOBODY)
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env.update(LANG="C.UTF-8", PYTHONIOENCODING="utf-8", **WORKER_ENV,
                   **{MARKER: marker}, **dict.fromkeys(
                       ("HOME", "TMPDIR", "TEMP", "TMP", "USERPROFILE"), self.workdir))
        self.arena = make_arena()
        options: dict[str, Any] = dict(platform.new_process_group())
        if self.arena.fd is not None:
            options["pass_fds"] = (self.arena.fd,)
        if as_nobody:
            options.update(user=NOBODY, group=NOBODY, extra_groups=[])
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-B", "-m", CHILD_MODULE], cwd=self.workdir, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                **options)
        except BaseException:
            self.arena.mapping.close()
            self.arena.started()
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        self.arena.started()
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self.tree = Tree(self.process, limits, PROCESSES)
        self.channel = Channel(os.dup(self.process.stdin.fileno()),
                               os.dup(self.process.stdout.fileno()))
        for stream in (self.process.stdin, self.process.stdout):
            stream.close()
        self.capture = StreamCapture(os.dup(self.process.stderr.fileno()))
        self.process.stderr.close()
        self.is_ready = False
        self.preloaded: str | None = None
        if probes is not None:
            self.preload(*probes)

    def preload(self, name: str, source: bytes) -> None:
        """Send the lab's probes now, without waiting: the worker loads them before its
        job comes (the job then only names them)."""
        self.channel.write_ahead(protocol.pack({"preload": name}, [source]))
        self.preloaded = name

    def ready(self) -> None:
        """Wait for its word that it is ready; `SandboxFailure` if it does not come."""
        if self.is_ready:
            return
        try:
            header, _ = self.channel.read(time.monotonic() + START_SECONDS)
            if header.get("ready") is not True:
                raise protocol.ProtocolError("no ready message")
        except (protocol.ChannelClosed, protocol.ChannelTimeout, protocol.ProtocolError):
            self.end()
            data, _ = self.capture.snapshot()
            tail = data.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
            raise SandboxFailure(f"a portable worker did not start: {tail[0][:300]}") from None
        self.is_ready = True

    def end(self) -> dict[str, Any]:
        ended = self.tree.end()
        self.channel.close()
        self.capture.finish()
        try:
            self.arena.mapping.close()
        except BufferError:
            pass
        fsutil.remove_tree(self.workdir)
        return ended


class PortableBackend:
    """The portable implementation of `labkit.sandbox.backend.Backend`."""

    waits = CallHandle.waits
    blocking = frozenset({threading.Condition.wait.__code__})  # under `channel`'s waits

    def __init__(self, reason: str = "requested") -> None:
        self.reason = reason
        self.generation = 0
        self._root: str | None = None
        self._marker = ""
        self._spare: _Spare | None = None
        self._live: dict[int, tuple[_Spare, PortableHandle]] = {}
        self._probes: dict[str, bytes] = {}
        self._preload: tuple[str, bytes] | None = None  # the probes a spare loads ahead

    @property
    def name(self) -> str:
        return NAME

    def start(self) -> None:
        self.generation += 1
        base = unprivileged.temp_base(NAME) if platform.is_root() else None
        self._root = tempfile.mkdtemp(prefix="labkit-portable-", dir=base)
        if platform.is_root():
            os.chmod(self._root, 0o755)  # the workers' user reaches its own folder in it
        self._marker = f"{os.getpid()}-{secrets.token_hex(8)}"
        self._spare = self._start_spare()

    def _start_spare(self) -> _Spare:
        if self._root is None:
            self.start()
        assert self._root is not None
        try:
            return _Spare(self._root, self._marker, dict(DEFAULT_LIMITS), self._preload)
        except OSError as exc:
            raise SandboxFailure(f"a portable worker could not be started: {exc}") from None

    def ready(self) -> None:
        if self._spare is None:
            self._spare = self._start_spare()
        self._spare.ready()

    def prepare(self, config: SandboxConfig) -> None:
        """Have the spare, and every spare after it, load `config`'s probes ahead."""
        source = self._probe_source(config)
        self._preload = None if source is None else (str(config.probes), source)
        if self._preload is not None and self._spare is not None and not self._spare.preloaded:
            self._spare.preload(*self._preload)

    def _probe_source(self, config: SandboxConfig) -> bytes | None:
        if config.probes is None:
            return None
        key = str(config.probes)
        if key not in self._probes:
            source = config.probes.read_bytes()
            if len(source) > MAX_PROBES_BYTES:
                raise ValueError(f"{config.probes} is over {MAX_PROBES_BYTES} bytes")
            self._probes[key] = source
        return self._probes[key]

    def spawn(self, config: SandboxConfig, deadline: Deadline,
              module: str | None = None) -> PortableHandle:
        """Hand the ready worker its job, and start the next one (see `Backend.spawn`)."""
        spare = self._spare or self._start_spare()
        self._spare = None
        try:
            spare.ready()
            names = sorted(config.files)
            blobs = [config.files[name] for name in names]
            probes = self._probe_source(config)
            preloaded = probes is not None and spare.preloaded == str(config.probes)
            if probes is not None and not preloaded:
                blobs.append(probes)
            job = {"modules": list(config.modules), "sys_path": list(config.sys_path) or ["."],
                   "limits": dict(config.limits), "import": module}
            message = protocol.pack({"job": job, "files": names, "arena": spare.arena.place,
                                     "probes": str(config.probes) if probes else None,
                                     "preloaded": preloaded}, blobs)
            spare.channel.write(message, time.monotonic() + START_SECONDS)
        except (protocol.ChannelClosed, protocol.ChannelTimeout) as exc:
            spare.end()
            raise SandboxFailure(f"a portable worker did not take its job: {exc}") from None
        except SandboxFailure:
            raise
        finally:
            self._spare = self._start_spare()
        handle = PortableHandle(self, deadline, spare.tree, spare.channel, spare.capture,
                                spare.workdir, self.generation, sent=1 if module else 0,
                                arena=spare.arena.mapping)
        self._live[handle.pid] = (spare, handle)
        return handle

    def end_worker(self, handle: PortableHandle, wait: bool) -> dict[str, Any]:
        """End `handle`'s worker and its tree, close its channel, remove its folder."""
        spare, _ = self._live.pop(handle.pid, (None, None))
        if spare is None:
            return {"killed": True, "exitcode": None}
        return spare.end()

    def outlived(self, generations: set[int]) -> bool:
        """No process stands between the grader and its workers: a back end started
        once serves until closed."""
        return generations <= {self.generation}

    def given_up(self, generations: set[int]) -> str | None:
        return None

    def reset(self) -> None:
        """After a submission: end every worker and all they started, sweep what left
        their trees, and start a fresh spare (nothing the submission ran reaches it)."""
        for _, handle in list(self._live.values()):
            handle.stop()
        if self._spare is not None:
            self._spare.end()
            self._spare = None
        left = sweep(self._marker) if self._marker else []
        if left:
            raise SandboxFailure(f"{len(left)} processes of a submission could not be ended")
        self._spare = self._start_spare()

    def close(self) -> None:
        for _, handle in list(self._live.values()):
            handle.stop()
        if self._spare is not None:
            self._spare.end()
            self._spare = None
        if self._marker:
            sweep(self._marker)
        if self._root is not None:
            fsutil.remove_tree(self._root)
            self._root = None

    def describe(self) -> Description:
        """The level, and what it holds and does not."""
        limits = dict(DEFAULT_LIMITS)
        enforced = ("job" if os.name == "nt" else
                    "rlimits_no_memory" if sys.platform == "darwin" else "rlimits")
        lines: list[tuple[str, str, dict[str, Any]]] = [
            ("limits", "doctor_limits_line", {"limits": ", ".join(
                f"{k[7:].lower()}={v}" for k, v in limits.items())}),
            ("limits", f"doctor_portable_{enforced}", {"processes": PROCESSES}),
            ("processes", "doctor_portable_tree", {}),
            ("sandbox", "doctor_portable_contains", {"nobody": NOBODY}),
            ("between", "doctor_cleanup_portable", {}),
        ]
        return Description(NAME, self.reason, tuple(lines))
