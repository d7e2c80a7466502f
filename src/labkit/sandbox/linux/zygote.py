"""The Linux back end: a pre-warmed zygote that forks a worker per check.

The student's code only ever runs in processes started here. Each check gets a fresh
worker (or, in a lab that shares workers, the one a passing check handed on) forked
from a zygote that has NumPy and the probes already imported; the worker runs in a new
directory holding copies of only the lab's files, which the zygote writes from the
bytes the grader holds (the trusted side writes none). The grader talks to it through
pipes (`handle`), with a deadline on every call (and on the whole grading), drains what
it prints into a bounded buffer, and has the zygote kill its whole process tree when it
is done with it or a deadline passes. The zygote runs inside bubblewrap when it is
available (see `isolation`); closing the zygote kills everything it started.
"""

from __future__ import annotations

import mmap
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
from typing import Any

from labkit import fsutil
from labkit.sandbox import protocol, unprivileged
from labkit.sandbox.backend import (
    DEFAULT_LIMITS,
    MARKER,
    WORKER_ENV,
    Deadline,
    Description,
    SandboxConfig,
)
from labkit.sandbox.errors import IsolationError, SandboxFailure, WorkerCrashed
from labkit.sandbox.linux import cleanup, memfd, pids, procfs
from labkit.sandbox.linux import isolation as isolation_mod
from labkit.sandbox.linux.handle import WorkerHandle
from labkit.sandbox.output import drain

CHILD_MODULE = "labkit.sandbox.child.forkserver"  # what the zygote runs
_PASSED_ENV = ("PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_START_SECONDS = 30.0
# How long the zygote has to answer anything once started (a ping, a spawn, a stop). One
# that answers later is given up on (its replies would come out of turn): the kit's
# failure, which no check's code is blamed for (`Zygote.given_up`).
ANSWER_SECONDS = 30.0
DYING_SECONDS = 0.5


class Zygote:
    """The pre-warmed process that forks workers; one can serve many gradings. The Linux
    implementation of `labkit.sandbox.backend.Backend`.

    `isolation` asks for a mode (`auto`, `bwrap`, `process`; None: `$LABKIT_ISOLATION`);
    `name` afterwards names the mode in use. `auto` falls back to `process` if bwrap
    cannot start a sandbox here.
    """

    waits = WorkerHandle.waits
    blocking = frozenset({protocol.wait_code()})

    def __init__(self, isolation: str | None = None) -> None:
        self.requested = isolation_mod.requested(isolation)
        self.choice = isolation_mod.choose(isolation)
        self.generation = 0
        self.marker = ""
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._scratch: str | None = None  # process mode: where the workers' folders go
        self._log: Any = None  # the zygote's stderr (bwrap's complaints), an unnamed file
        self._ready = False
        self._unread = 0  # replies to `post`ed requests not yet read
        self._since = 0  # process mode: when the zygote started (clock ticks since boot)
        self._shm_before: set[int] = set()  # process mode: System V segments before it
        self._dev_shm_before: set[str] = set()  # process mode: what /dev/shm held before it
        self._group: pids.PidsGroup | None = None  # the pids cgroup it runs in, if any
        # generation -> why the kit itself ended that zygote while it ran (`give_up`)
        self._given_up: dict[int, str] = {}
        self._bundle: tuple[SandboxConfig, int] | None = None  # a job's files, sealed

    @property
    def name(self) -> str:
        return self.choice.mode

    def start(self) -> None:
        """Start the zygote without waiting for it, so its imports overlap ours."""
        self.generation += 1
        self.marker = f"{os.getpid()}-{secrets.token_hex(8)}"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env.update(LANG="C.UTF-8", **WORKER_ENV, **{MARKER: self.marker})
        command = [sys.executable, "-I", "-B", "-m", CHILD_MODULE, str(theirs.fileno())]
        if self.choice.mode == "process":  # the zygote removes it when it ends, whatever we do
            base = unprivileged.temp_base("process") if os.geteuid() == 0 else None
            self._scratch = tempfile.mkdtemp(prefix="labkit-zygote-", dir=base)
            command += ["--scratch", self._scratch, "--remove-scratch", "1"]
        else:
            command += ["--scratch", "/tmp", "--private", "1"]  # the sandbox's own, gone with it
        self._close_log()
        self._log = tempfile.TemporaryFile(prefix="labkit-zygote-")
        self._group = pids.make()
        if self.choice.mode == "process":  # before the zygote can make anything there
            self._dev_shm_before = set(procfs.dev_shm())
        try:
            self._process = isolation_mod.launch(
                self.choice, command, env=env, pass_fds=[theirs.fileno()],
                stderr=self._log.fileno(), cwd=self._scratch or "/", group=self._group,
            )
        except (OSError, IsolationError) as exc:
            ours.close()
            self._cleanup_scratch()
            self._remove_group()
            if not self._fall_back(str(exc)):
                raise SandboxFailure(f"the sandbox did not start: {exc}") from None
            self.start()
            return
        finally:
            theirs.close()
        self._control = ours
        self._ready = False
        self._unread = 0
        if self.choice.mode == "process":
            cleanup.become_subreaper()
            cleanup.LIVE_ZYGOTES.add(self._process.pid)
            self._since = procfs.process_stat(self._process.pid)[1]
            self._shm_before = {seg[0] for seg in procfs.host_shm()}

    def host_pid(self, pid: int) -> int | None:
        """The pid this process knows the zygote's worker `pid` by (with bwrap, the
        zygote lives in a PID namespace of its own: found among the sandbox's
        descendants by its innermost pid); None if there is no such process."""
        if self._process is None:
            return None
        if self.choice.mode == "process":
            return pid
        # the zygote's descendants first (a few, found from their parents' `children`)
        seen, todo = 0, [self._process.pid]
        while todo and seen < 64:
            candidate = todo.pop()
            seen += 1
            try:
                inner = procfs.nspid(candidate)
                if len(inner) > 1 and inner[-1] == pid:
                    return candidate
            except (OSError, IndexError):
                continue
            todo += procfs.children(candidate)
        parents: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    parents[int(name)] = procfs.process_stat(int(name))[0]
                except (OSError, IndexError, ValueError):
                    continue
        for candidate in parents:
            ancestor = candidate
            while ancestor in parents and ancestor != self._process.pid:
                ancestor = parents[ancestor]
            try:
                inner = procfs.nspid(candidate) if ancestor == self._process.pid else []
            except OSError:
                continue
            if len(inner) > 1 and inner[-1] == pid:
                return candidate
        return None

    def _fall_back(self, reason: str) -> bool:
        """After bwrap failed to start: use `process` if the request was `auto`."""
        if self.choice.mode != "bwrap":
            return False
        isolation_mod.mark_broken(self.choice, reason)
        if self.requested != "auto":
            return False
        self.choice = isolation_mod.choose("auto")
        return True

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def ask(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        self._settle()
        if not self.alive:
            self._shut()
            self.start()
        assert self._control is not None
        if not self._ready:
            self._await_ready()
        data = protocol.pack(message, [])
        try:
            if fds:
                socket.send_fds(self._control, [data], fds)
            else:
                self._control.send(data)
        except OSError as exc:
            raise WorkerCrashed(None, f"the sandbox stopped: {exc}") from None
        return self._receive()

    def answers(self) -> bool:
        """Whether the zygote running now still answers, without starting another.

        A worker can kill its zygote (its parent) and still reply before it dies with
        it: the kill is sent before the reply, so a zygote that was killed can no longer
        answer a ping made after the reply was read.
        """
        self._settle()
        if self._control is None or not self.alive:
            return False
        try:
            self._control.send(protocol.pack({"op": "ping"}, []))
            return bool(self._receive().get("pong"))
        except (OSError, WorkerCrashed) as exc:
            self.give_up(f"the sandbox did not answer a ping: {exc}")
            return False

    def post(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        """Send a request without waiting for its reply (read before the next `ask`).

        A zygote that is gone has nothing left to act on: its workers died with it.
        """
        if self._control is None or not self.alive:
            return
        try:
            if fds:
                socket.send_fds(self._control, [protocol.pack(message, [])], fds)
            else:
                self._control.send(protocol.pack(message, []))
        except OSError:
            self._shut()
            return
        self._unread += 1

    def prepare(self, config: SandboxConfig) -> None:
        """Have the zygote load the probes of a job (see `memfd.make_bundle`) now, while
        we import pytest, rather than at the first spawn, which would wait for it."""
        if config.probes is not None:
            self.post({"op": "load"}, [self._job_files(config)])

    def _settle(self) -> None:
        """Read the replies to posted requests; a zygote that failed one is replaced."""
        if self._unread and self._control is not None and not self._ready:
            self._await_ready()  # its first words: posted before it was up
        while self._unread and self._control is not None:
            self._unread -= 1
            try:
                reply = self._receive()
            except WorkerCrashed as exc:  # it may not have killed a worker's tree: end it all
                self.give_up(str(exc))
                continue
            if reply.get("dirty") or reply.get("clean") is False:  # a sweep left something
                self.give_up("the sandbox could not clear what a worker left: "
                             f"{reply.get('dirty') or reply.get('why')}")
            elif reply.get("clean") and self.choice.mode == "process":
                cleanup.clear_host_shm(self._shm_before)  # the host's IPC: the zygote cannot tell
                cleanup.clear_dev_shm(self._dev_shm_before)

    def ready(self) -> None:
        """Wait until the zygote answers (starting it if it is not running)."""
        self.ask({"op": "ping"})

    def reset(self) -> None:
        """After a submission, before the next one: have the zygote end every process and
        empty its scratch area (with bwrap: the sandbox's /tmp and IPC namespace) and
        prove it (`clean`), without waiting; a zygote that cannot is replaced by a fresh
        one at the next request (`_settle`), so no submission meets another's leftovers.
        """
        self._drop_bundle()
        if not self.alive:  # killed by a worker: end what it left now, not at the next ask
            self._shut()
        self.post({"op": "reset"})

    def _await_ready(self) -> None:
        try:
            self._receive(_START_SECONDS)
        except WorkerCrashed as failure:
            reason = self._log_excerpt() or str(failure)
            self._shut()
            if not self._fall_back(reason):
                raise SandboxFailure(f"the sandbox did not start: {reason}") from None
            self.start()
            self._receive(_START_SECONDS)
        self._ready = True

    def give_up(self, reason: str) -> None:
        """Close a zygote that still runs because the kit cannot go on with it (it answered
        late or out of turn, or could not clear a worker's leftovers): whatever this ends
        (the workers it forked) ends for the kit's reason, kept in `given_up` for its
        generation. A zygote that is dead, or dies within `DYING_SECONDS` (a closed socket
        is often the first sign of a kill), is only closed: who ended it is not known, and
        a worker can kill its zygote."""
        if self._process is not None and not cleanup.wait_exit(self._process.pid, DYING_SECONDS):
            self._given_up[self.generation] = reason[:200]
        self._shut()

    def _receive(self, timeout: float | None = None) -> dict[str, Any]:
        assert self._control is not None
        self._control.settimeout(ANSWER_SECONDS if timeout is None else timeout)
        try:
            data = self._control.recv(protocol.MAX_DATAGRAM)
        except OSError as exc:
            raise WorkerCrashed(None, f"the sandbox did not answer: {exc}") from None
        if not data:
            raise WorkerCrashed(None, "the sandbox stopped")
        try:
            reply, _ = protocol.parse(data, protocol.MAX_DATAGRAM)
        except protocol.ProtocolError as exc:
            raise WorkerCrashed(None, f"the sandbox sent garbage: {exc}") from None
        if "error" in reply:
            raise WorkerCrashed(None, f"the sandbox refused: {reply['error']}")
        return reply

    def _log_excerpt(self) -> str:
        try:
            text = os.pread(self._log.fileno(), 4000, 0) if self._log else b""
        except OSError:
            return ""
        lines = text.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def close(self) -> None:
        """Stop the zygote and everything it started, and forget the job's files."""
        self._drop_bundle()
        self._shut()

    def _shut(self) -> None:
        """Stop the zygote and everything it started (another may start later).

        Closing the control socket makes the zygote kill all its descendants and exit
        (with bwrap, the sandbox's PID namespace then ends too). A zygote that does not
        exit in time is killed, and any process still carrying its marker with it.
        """
        if self._control is not None:
            self._control.close()
            self._control = None
        process, self._process = self._process, None
        if process is not None:
            clean = cleanup.wait_exit(process.pid, 2.0)
            if self.choice.mode == "process":
                try:
                    os.killpg(process.pid, signal.SIGKILL)  # not yet reaped: the group is ours
                except (ProcessLookupError, PermissionError):
                    pass
            else:
                process.kill()
            process.wait()
            if not clean or process.returncode != 0:
                cleanup.kill_marked(self.marker)
            if self.choice.mode == "process":
                cleanup.LIVE_ZYGOTES.discard(process.pid)
                cleanup.kill_orphans(self._since, self._group, self.marker)
                cleanup.clear_host_shm(self._shm_before)
                cleanup.clear_dev_shm(self._dev_shm_before)
        self._cleanup_scratch()
        self._remove_group()
        self._close_log()
        self._ready = False
        self._unread = 0

    def _remove_group(self) -> None:
        if self._group is not None:
            self._group.remove()
            self._group = None

    def _cleanup_scratch(self) -> None:
        if self._scratch is not None:
            fsutil.remove_tree(self._scratch)
            self._scratch = None

    # --- a grading's workers ---------------------------------------------------------

    def _job(self, config: SandboxConfig) -> dict[str, Any]:
        limits = dict(config.limits)
        if self.name == "bwrap":  # counted per sandbox there; per user (or not) here
            limits.setdefault("RLIMIT_NPROC", isolation_mod.SANDBOX_NPROC)
        return {
            "modules": list(config.modules),
            "sys_path": list(config.sys_path) or ["."],
            "limits": limits,
        }

    def _job_files(self, config: SandboxConfig) -> int:
        """The graded files and the probe source, in a sealed memfd (built once a job)."""
        if self._bundle is None or self._bundle[0] is not config:
            self._drop_bundle()
            self._bundle = (config, memfd.make_bundle(config.files, config.probes))
        return self._bundle[1]

    def _drop_bundle(self) -> None:
        if self._bundle is not None:
            os.close(self._bundle[1])
            self._bundle = None

    def spawn(self, config: SandboxConfig, deadline: Deadline,
              module: str | None = None) -> WorkerHandle:
        """Fork a fresh worker (see `WorkerHandle` for what it serves).

        With `module`, the worker imports it as it starts, as if asked first thing:
        its reply is then read with `WorkerHandle.receive`.
        """
        bundle = self._job_files(config)
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        arena = memfd.make_arena()
        try:
            reply = self._ask_spawn(config, module, [req_r, rep_w, out_w, bundle, arena])
            mapping = mmap.mmap(arena, memfd.ARENA_BYTES)
        except BaseException:
            for fd in (req_w, rep_r, out_r):
                os.close(fd)
            raise
        finally:
            for fd in (req_r, rep_w, out_w, arena):
                os.close(fd)
        for fd in (req_w, rep_r):
            os.set_blocking(fd, False)
        return WorkerHandle(self, deadline, int(reply["pid"]), req_w, rep_r,
                            drain().watch(out_r), self.generation, sent=1 if module else 0,
                            arena=mapping)

    def _ask_spawn(self, config: SandboxConfig, module: str | None,
                   fds: list[int]) -> dict[str, Any]:
        """The zygote's reply to a spawn; a zygote that cannot spawn is replaced once.

        A refusal (a full scratch area, say) or a lost zygote gets a fresh sandbox; if
        that one fails too, the kit cannot grade here: `SandboxFailure`.
        """
        message = {"op": "spawn", "job": self._job(config), "import": module}
        try:
            return self.ask(message, fds)
        except WorkerCrashed as exc:
            self.give_up(str(exc))
        try:
            return self.ask(message, fds)
        except (WorkerCrashed, SandboxFailure) as exc:
            raise SandboxFailure(str(exc)) from None

    def stop_worker(self, pid: int, generation: int | None = None) -> dict[str, Any]:
        """Have the zygote kill worker `pid` and its descendants; how it ended.

        A worker of an earlier zygote (one that died and was restarted) died with it.
        """
        if generation is not None and generation != self.generation:
            return {"killed": True, "exitcode": None}
        try:
            ended = self.ask({"op": "stop", "pid": pid})
            if ended.get("dirty"):  # its folder could not be swept: never fork beside it
                self.give_up(f"the sandbox could not sweep a worker's folder: "
                             f"{ended['dirty']}")
            return ended
        except (OSError, WorkerCrashed, SandboxFailure) as exc:
            # it cannot be trusted to have killed the tree: end it all
            self.give_up(f"the sandbox did not stop a worker: {exc}")
            return {"killed": True, "exitcode": None}

    def release_worker(self, pid: int, generation: int) -> None:
        """Have the zygote end worker `pid` and its descendants, without waiting."""
        if generation == self.generation:
            self.post({"op": "stop", "pid": pid})

    def outlived(self, generations: set[int]) -> bool:
        """Whether the zygote that forked workers of `generations` (a check's) is the one
        running, and answers (`answers`): if not, one of them killed it, unless the kit
        gave up on it (`given_up`)."""
        return generations <= {self.generation} and self.answers()

    def given_up(self, generations: set[int]) -> str | None:
        """Why the kit itself ended a zygote of `generations` (a check's), if it did: a
        check whose workers ended with it failed for the kit's reason, not its code's."""
        return next((self._given_up[g] for g in sorted(generations) if g in self._given_up),
                    None)

    def describe(self) -> Description:
        """The mode in use and why; for bwrap, what the sandbox holds; the limits, the
        bound on processes and what is cleared between submissions."""
        lines: list[tuple[str, str, dict[str, Any]]] = []
        limits = dict(DEFAULT_LIMITS)
        if self.name == "bwrap":
            limits["RLIMIT_NPROC"] = isolation_mod.SANDBOX_NPROC
            sized = "--size" in isolation_mod.bwrap_options(self.choice.bwrap or "bwrap")
            tmp = (("doctor_tmp_size", {"mib": isolation_mod.TMP_BYTES // 1024**2}) if sized
                   else ("doctor_tmp_unsized", {}))
            lines.append(("sandbox", "doctor_sandbox_line", {
                "uid": isolation_mod.SANDBOX_UID, "tmp": tmp,
                "paths": ", ".join(isolation_mod.runtime_paths())}))
        lines.append(("limits", "doctor_limits_line", {"limits": ", ".join(
            f"{k[7:].lower()}={v}" for k, v in limits.items())}))
        group = pids.parent()
        if group is not None:
            lines.append(("processes", "doctor_pids_cgroup", {"group": group, "limit": pids.LIMIT}))
        else:
            lines.append(("processes", f"doctor_pids_none_{self.name}", {}))
        lines.append(("between", f"doctor_cleanup_{self.name}", {}))
        return Description(self.name, self.choice.reason, tuple(lines))
