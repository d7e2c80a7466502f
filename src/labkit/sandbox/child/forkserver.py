"""The Linux fork server (the zygote) that forks the workers running the student's code.

Runs as `python -I -B -m labkit.sandbox.child.forkserver CONTROL_FD --scratch DIR
[--uid UID] [--unsandboxed 1] [--remove-scratch 1] [--private 1]`, inside the sandbox
when there is one (see `labkit.sandbox.linux.isolation`).
The zygote imports NumPy and the lab's trusted probes once, never the student's code;
for each worker the grader sends it a pair of pipes, an output pipe, the job's files and
the memory the worker shares with the grader over a Unix socket, and it forks a worker
that runs in a fresh directory holding only those files, imports the student's modules
and answers calls with plain data (`worker.Worker`). Forking after the imports is what
keeps a fresh worker cheap.

The zygote is a child subreaper: whatever a worker starts, even a double-forked daemon
in its own session, stays its descendant, and it is killed with the worker.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # CPython's C module behind `signal`: no stubs
import array
import ctypes
import gc
import io
import json
import mmap
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time
import traceback
import types
import warnings
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    ModuleSpec,
    PathFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from typing import Any, NamedTuple

from labkit.sandbox import codec, protocol
from labkit.sandbox.child import limits
from labkit.sandbox.child.files import write_files
from labkit.sandbox.child.worker import Worker, load_probes, preload

MAX_PRECOMPILED = 256 * 1024  # bytes of one source file the zygote compiles for its workers
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
_LIBC = ctypes.CDLL(None, use_errno=True)
_PRCTL = _LIBC.prctl
_PRCTL.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
_PRCTL.restype = ctypes.c_int


def _prctl(option: int, value: int) -> bool:
    return _PRCTL(option, value, 0, 0, 0) == 0


def _drop_privileges(uid: int, sandboxed: bool = True) -> None:
    """Become `uid` with no capability at all (started as root: the sandbox's, or the
    machine's in process mode).

    First, in a sandbox, no more user namespaces in it (the limit is the sandbox's own):
    a new one would give the student's code capabilities over new namespaces. Outside
    one (`sandboxed` False) that limit is the whole machine's, and is left alone.
    """
    if sandboxed:
        try:
            with open("/proc/sys/user/max_user_namespaces", "w") as handle:
                handle.write("0\n")
        except OSError:  # a read-only /proc/sys: the sandbox still holds, with less margin
            pass
    for cap in range(64):
        _prctl(_PR_CAPBSET_DROP, cap)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    _LIBC.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)())  # clear inheritable too
    with open("/proc/self/status") as handle:
        caps = [line.split()[1] for line in handle if line.startswith(("CapEff", "CapPrm",
                                                                       "CapInh", "CapBnd"))]
    if os.getuid() != uid or os.geteuid() != uid or any(int(c, 16) for c in caps):
        raise SystemExit("labkit.sandbox.child.forkserver: could not drop privileges")


def _read_bundle(fd: int) -> tuple[dict[str, bytes], tuple[str, bytes] | None]:
    """The job's files (and probe source) from the sealed memfd the grader sent: one
    framed message, the files' names in its header and their contents as its blobs."""
    size = os.fstat(fd).st_size
    if size > protocol.MAX_MESSAGE:
        raise ValueError(f"a job bundle of {size} bytes")
    header, blobs = protocol.parse(os.pread(fd, size, 0))
    names, probes = header["files"], header["probes"]
    if len(names) + (probes is not None) != len(blobs):
        raise ValueError("the job bundle's names do not match its files")
    files = dict(zip(names, blobs[: len(names)], strict=True))
    return files, ((probes, blobs[-1]) if probes is not None else None)


def _new_workdir(scratch: str) -> str:
    """A new, empty `work-N` directory, with the lowest N not in use.

    Successive workers of a grading thus get the same path, so the code the zygote
    compiled for the first one (keyed by path, see `_precompile`) serves them all.
    The directory is always created here (never reused): a name a worker planted is
    skipped, and after a few such names a random one is taken.
    """
    names = [f"work-{index}" for index in range(16)]
    while True:
        workdir = os.path.join(scratch, names.pop(0) if names else f"work-{os.urandom(8).hex()}")
        try:
            os.mkdir(workdir, 0o700)
        except FileExistsError:
            continue
        return workdir


def _make_workdir(scratch: str, files: dict[str, bytes]) -> str:
    """A new directory holding only the job's files."""
    workdir = _new_workdir(scratch)
    write_files(workdir, files)
    return workdir


# Source path -> (source, code) of the current job's Python files, compiled by the
# zygote (which never runs them) and inherited by every worker it forks.
_COMPILED: dict[str, tuple[bytes, types.CodeType]] = {}


def _compile(source: bytes, path: str) -> types.CodeType | None:
    """`source` compiled as the import system would, or None if it fails or warns:
    the worker then compiles it itself, and what it reports stays the same."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return compile(source, path, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - SyntaxError, a warning, a source too deep to compile
        return None


def _precompile(workdir: str, files: dict[str, bytes]) -> None:
    """Compile the job's Python files for the workers about to be forked.

    Each worker would otherwise parse and compile the same modules again; what
    was compiled for the same path and source is kept, so a grading compiles once.
    """
    compiled = {}
    for rel, source in files.items():
        if not rel.endswith(".py") or len(source) > MAX_PRECOMPILED:
            continue
        path = os.path.join(workdir, *rel.split("/"))
        entry = _COMPILED.get(path)
        if entry is None or entry[0] != source:
            code = _compile(source, path)
            if code is None:
                continue
            entry = (source, code)
        compiled[path] = entry
    _COMPILED.clear()
    _COMPILED.update(compiled)


class _PrecompiledLoader(SourceFileLoader):
    """Loads a job's module with the code the zygote compiled, if the file read now holds
    exactly the source that was compiled (the student's code may have rewritten it)."""

    # typeshed has InspectLoader's static source_to_code; SourceFileLoader's (CPython's
    # SourceLoader) is an instance method taking `_optimize`, the one this overrides
    def source_to_code(  # type: ignore[override]
        self, data: Any, path: Any, *, _optimize: int = -1,
    ) -> Any:
        entry = _COMPILED.get(path)
        if entry is not None and entry[0] == data and _optimize == -1:
            return entry[1]
        return super().source_to_code(data, path, _optimize=_optimize)


_LOADERS = ((ExtensionFileLoader, EXTENSION_SUFFIXES), (_PrecompiledLoader, SOURCE_SUFFIXES),
            (SourcelessFileLoader, BYTECODE_SUFFIXES))


def _close_other_descriptors(keep: tuple[int, int]) -> None:
    """Close every descriptor but the three standard streams and `keep`."""
    low, high = sorted(keep)
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, os.sysconf("SC_OPEN_MAX"))


class _Setup(NamedTuple):
    """What a worker sets up before serving, prepared by the zygote before the fork.

    Every page a worker writes that it shares with the zygote is copied first, so the
    objects it needs (streams, import finders, limits) are made once in the zygote and
    the worker only installs them.
    """

    workdir: str
    folders: tuple[str, ...]
    finders: dict[str, FileFinder]
    limits: tuple[tuple[int, tuple[int, int]], ...]
    streams: tuple[io.TextIOWrapper, io.TextIOWrapper]
    stdin: int
    specs: dict[str, ModuleSpec]


_FINDERS: dict[str, FileFinder] = {}
_SPECS: dict[tuple[str, ...], dict[str, ModuleSpec]] = {}
_LIMITS: dict[str, tuple[tuple[int, tuple[int, int]], ...]] = {}
_STREAMS: list[Any] = []  # [stdout, stderr, /dev/null descriptor]


def _find_specs(modules: list[str], folders: tuple[str, ...]) -> dict[str, ModuleSpec]:
    """Where a worker's import of each module would find it: the search the import
    system makes, done once here. Only for top-level modules that are not already
    imported (NumPy's own) and that no finder before the path's claims (built-ins)."""
    if PathFinder not in sys.meta_path:
        return {}
    before = sys.meta_path[: sys.meta_path.index(PathFinder)]
    specs = {}
    for name in modules:
        if "." in name or name in sys.modules:
            continue
        if any(finder.find_spec(name, None) is not None for finder in before):
            continue
        for folder in folders:
            spec = _FINDERS[folder].find_spec(name)
            if spec is not None:
                if spec.loader is not None:  # not a namespace portion: the search ends here
                    specs[name] = spec
                break
    return specs


def _setup(job: dict[str, Any], workdir: str, files: dict[str, bytes]) -> _Setup:
    """The setup of a worker of `job` in `workdir` (a new folder holding just `files`);
    the zygote's environment gets the worker's HOME and TMPDIR."""
    folders = tuple(os.path.normpath(os.path.join(workdir, rel))
                    for rel in job.get("sys_path") or ["."])
    for folder in folders:
        if folder not in _FINDERS:
            _FINDERS[folder] = FileFinder(folder, *_LOADERS)
    key = json.dumps(job.get("limits", {}), sort_keys=True)
    if key not in _LIMITS:
        _LIMITS[key] = tuple(limits.limit(name, int(value))
                             for name, value in job.get("limits", {}).items())
    if not _STREAMS:
        # Unbuffered, as with `python -u`: a worker is killed, never flushed, at the end.
        _STREAMS.extend(io.TextIOWrapper(open(fd, "wb", 0, closefd=False), write_through=True)
                        for fd in (1, 2))
        _STREAMS.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
    if os.environ.get("HOME") != workdir or os.environ.get("TMPDIR") != workdir:
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir
    # What a folder holds decides what is found there, and the zygote made it: holding
    # the same file names, the same folder gives the same answers for the same modules.
    found = (*folders, "", *sorted(files), "", *job["modules"])
    if found not in _SPECS:
        _SPECS.clear()
        _SPECS[found] = _find_specs(job["modules"], folders)
    return _Setup(workdir, folders, {f: _FINDERS[f] for f in folders}, _LIMITS[key],
                  (_STREAMS[0], _STREAMS[1]), _STREAMS[2], _SPECS[found])


def _child(setup: _Setup, job: dict[str, Any], probes: Any, rfd: int, wfd: int,
           ofd: int, arena_fd: int) -> None:
    """In the forked worker: detach, move into its own files, limit, then serve."""
    os.setsid()
    _prctl(_PR_SET_DUMPABLE, 1)  # the zygote is not; the student's own process may be
    os.dup2(setup.stdin, 0)
    os.dup2(ofd, 1)
    os.dup2(ofd, 2)
    size = os.fstat(arena_fd).st_size
    if size > protocol.MAX_MESSAGE:
        raise ValueError(f"shared memory of {size} bytes")
    codec.serve_shared(memoryview(mmap.mmap(arena_fd, size)))  # the mapping outlives the fd
    _close_other_descriptors((rfd, wfd))
    sys.stdout, sys.stderr = setup.streams
    os.chdir(setup.workdir)
    sys.path[:0] = setup.folders
    sys.path_importer_cache.update(setup.finders)
    for kind, values in setup.limits:
        resource.setrlimit(kind, values)
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)  # `_signal`: no enum conversions
    _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    Worker(job["modules"], probes, dict(setup.specs)).serve(rfd, wfd, job["import"])


def _processes() -> dict[int, tuple[int, str]]:
    """Every visible process: pid -> (parent pid, state letter)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        found[int(name)] = (int(fields[1]), fields[0].decode())
    return found


def _reap(workers: dict[int, Any]) -> None:
    """Collect every child that has ended: workers keep their status, others vanish."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in workers and workers[pid]["status"] is None:
            workers[pid]["status"] = status


_WALL = 0x40000000  # __WALL (linux/wait.h): children of any kind, even clone()'s


def _has_children() -> bool:
    """Whether the zygote has any child at all, running or not yet reaped."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT | _WALL)
    except ChildProcessError:
        return False
    return True


def _kill_strays(workers: dict[int, Any]) -> None:
    """SIGKILL every descendant that is not a running worker or inside one's tree.

    As a subreaper the zygote inherits whatever a killed worker left behind (daemons
    that called setsid, processes that ignore SIGTERM, a fork bomb's children), so
    they are all found among its descendants; repeat until none is left. With no
    worker running, a zygote without children has no descendant at all: the usual end
    of a check, which then costs no scan of /proc.
    """
    me = os.getpid()
    _reap(workers)
    keep = {pid for pid, w in workers.items() if w["status"] is None and not w["stopping"]}
    if not keep and not _has_children():
        return
    for attempt in range(200):
        table = _processes()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in table.items():
            children.setdefault(parent, []).append(pid)
        doomed, stack = [], [p for p in children.get(me, []) if p not in keep]
        while stack:
            pid = stack.pop()
            doomed.append(pid)
            stack.extend(children.get(pid, []))
        living = [pid for pid in doomed if table[pid][1] not in "ZX"]
        for pid in living:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap(workers)
        if not living and not any(table[p][1] in "ZX" for p in children.get(me, [])):
            return
        if attempt:
            time.sleep(0.005)


# What the scratch folder held before any worker ran: with bwrap, the binds of a runtime
# that lives under the host's /tmp (a virtualenv); read-only, and never swept.
_PRESERVED: set[str] = set()


def _sweep(scratch: str, workers: dict[int, Any]) -> str:
    """Remove whatever ended workers left in the scratch folder (with bwrap: all of the
    sandbox's /tmp), so nothing a check wrote reaches the next one.

    Returns what could not be removed ("" when all was): the trusted side then replaces
    this zygote rather than fork another worker beside the leftovers.
    """
    keep = {os.path.basename(w["workdir"]) for w in workers.values()} | _PRESERVED
    try:
        entries = list(os.scandir(scratch))
    except OSError as exc:
        return f"cannot list {scratch}: {exc.strerror}"
    left = []
    for entry in entries:
        if entry.name in keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            _remove_folder(entry.path)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass
        if os.path.lexists(entry.path):
            left.append(entry.name)
    return f"could not remove {', '.join(sorted(left)[:3])} from {scratch}" if left else ""


def _remove_folder(path: str) -> None:
    """Remove a folder; one holding only files (a check's usual leftovers) the cheap way.

    Folders a worker made unwritable (to keep hard links of its files, say) are made
    writable first: the zygote runs as the same user, so it owns them.
    """
    try:
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))  # a folder inside: IsADirectoryError
        os.rmdir(path)
    except OSError:
        for root, folders, _ in os.walk(path):
            for name in [root, *(os.path.join(root, f) for f in folders)]:
                try:
                    os.chmod(name, 0o700, follow_symlinks=False)
                except OSError:
                    pass
        shutil.rmtree(path, ignore_errors=True)


_IPC_RMID = 0
_IPC_REMOVE = (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl"))
_MQUEUE = "/dev/mqueue"  # the sandbox's POSIX message queues (bwrap mounts it)
_SHM = "/dev/shm"  # the sandbox's POSIX semaphores and shared memory (its own tmpfs)


def _ipc_objects() -> list[tuple[str, int]]:
    """The System V objects of this IPC namespace, as (kind, id)."""
    found = []
    for kind, _ in _IPC_REMOVE:
        try:
            with open(f"/proc/sysvipc/{kind}") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        found += [(kind, int(line.split()[1])) for line in lines if line.strip()]
    return found


def _clear_ipc() -> list[str]:
    """Remove every System V object and POSIX message queue of the sandbox's own IPC
    namespace (all of them the workers'); what is left afterwards."""
    calls = dict(_IPC_REMOVE)
    for kind, ident in _ipc_objects():
        if kind == "sem":
            _LIBC.semctl(ident, 0, _IPC_RMID)
        else:
            _LIBC[calls[kind]](ident, _IPC_RMID, None)
    left = [f"System V {kind} {ident}" for kind, ident in _ipc_objects()]
    try:
        queues = os.listdir(_MQUEUE)
    except OSError:
        queues = []
    for name in queues:
        try:
            os.unlink(os.path.join(_MQUEUE, name))
        except OSError:
            left.append(f"message queue {name}")
    return left


def _reset(workers: dict[int, Any], scratch: str, private: bool) -> dict[str, Any]:
    """Between two submissions: end every process, empty the scratch folder and (in a
    sandbox of its own, `private`) its IPC namespace and `/dev/shm`, then prove it.

    `clean` is true only when nothing is left: no process but this one (and bwrap's
    init), nothing in the scratch folder, with a private /tmp all its space free, no
    System V object or message queue. Anything else and the trusted side replaces
    this zygote before it grades anyone else.
    """
    for worker in workers.values():
        worker["stopping"] = True
    _kill_strays(workers)
    for pid in [pid for pid, worker in workers.items() if worker["status"] is not None]:
        if workers[pid]["pidfd"] is not None:
            os.close(workers[pid]["pidfd"])
        del workers[pid]
    problems = [why for why in [_sweep(scratch, {})] if why]
    if workers or _has_children():
        problems.append("processes survived")
    if private:
        others = set(_processes()) - {1, os.getpid()}
        if others:
            problems.append(f"{len(others)} processes survived")
        problems += _clear_ipc()
        problems += [why for why in [_sweep(_SHM, {})] if why]
        for folder in (scratch, _SHM):
            space = os.statvfs(folder)
            if space.f_bfree != space.f_blocks:
                problems.append(f"{folder} is not empty")
    return {"clean": not problems, "why": "; ".join(problems)[:500]}


def _await_exit(worker: dict[str, Any], workers: dict[int, Any], seconds: float) -> None:
    """Wait up to `seconds` for `worker` to end, woken by its pidfd as soon as it does."""
    deadline = time.monotonic() + seconds
    _reap(workers)
    while worker["status"] is None and (left := deadline - time.monotonic()) > 0:
        if worker["pidfd"] is not None:
            select.select([worker["pidfd"]], [], [], left)
        else:  # a kernel without pidfds
            time.sleep(0.001)
        _reap(workers)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _stop(pid: int, workers: dict[int, Any], scratch: str) -> dict[str, Any]:
    """Return how worker `pid` ended, killing its whole process tree if still alive."""
    worker = workers.get(pid)
    if worker is None:
        return {"killed": True, "exitcode": None}
    worker["stopping"] = True
    _await_exit(worker, workers, 0.05)  # its pipes are closed: an idle worker exits now
    killed = worker["status"] is None
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _kill_strays(workers)
    if worker["status"] is None:
        _, worker["status"] = os.waitpid(pid, 0)
    del workers[pid]
    if worker["pidfd"] is not None:
        os.close(worker["pidfd"])
    ended = {"killed": killed, "exitcode": os.waitstatus_to_exitcode(worker["status"])}
    dirty = _sweep(scratch, workers)
    return {**ended, "dirty": dirty} if dirty else ended


def zygote(control_fd: int, scratch: str, private: bool = False) -> None:
    """Fork workers on request until the control socket closes.

    `private`: the scratch folder is the sandbox's own /tmp and the IPC namespace its
    own, so that `reset` may empty both entirely.

    Each spawn request carries its job (modules, limits) and the job's files and probe
    source in a sealed memfd, so one zygote can serve many gradings; probe modules are
    loaded here once per distinct source, before any fork: as a grading starts (`load`,
    sent while the grader imports pytest), else at its first spawn.
    """
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)  # nothing started from here gains privileges (setuid)
    _prctl(_PR_SET_DUMPABLE, 0)  # workers cannot ptrace or read the zygote's memory
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=control_fd)
    try:
        _PRESERVED.update(os.listdir(scratch))
    except OSError:
        pass
    probes: dict[bytes, Any] = {}
    workers: dict[int, dict[str, Any]] = {}
    control.send(protocol.pack({"ready": True, "pid": os.getpid()}, []))
    while True:
        fds = array.array("i")
        try:
            message, ancillary, _, _ = control.recvmsg(protocol.MAX_DATAGRAM,
                                                       socket.CMSG_LEN(5 * fds.itemsize))
        except OSError:
            break
        if not message:
            break
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        _reap(workers)
        try:
            request, _ = protocol.parse(message, protocol.MAX_DATAGRAM)
            reply = _serve(request, list(fds), probes, workers, control, scratch, private)
        except Exception as exc:  # noqa: BLE001 - report, and keep serving
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        control.send(protocol.pack(reply, []))
    for worker in workers.values():
        worker["stopping"] = True
    _kill_strays(workers)


def _loaded(name: str, source: bytes) -> Any:
    """The lab's probes, and what they ask a zygote to import once for every worker."""
    probes = load_probes(name, source)
    preload(probes)
    return probes


def _serve(request: dict[str, Any], fds: list[int], probes: dict[bytes, Any],
           workers: dict[int, dict[str, Any]], control: socket.socket,
           scratch: str, private: bool) -> dict[str, Any]:
    if request["op"] == "spawn":
        if len(fds) != 5:
            raise ValueError("a spawn needs five descriptors")
        job = {**request["job"], "import": request.get("import")}
        if not isinstance(job["import"], str | None):
            raise ValueError("the module to import must be a name")
        files, probe_source = _read_bundle(fds[3])
        probe_module = None
        if probe_source is not None:
            if probe_source[1] not in probes:
                probes[probe_source[1]] = _loaded(*probe_source)
            probe_module = probes[probe_source[1]]
        workdir = _make_workdir(scratch, files)
        _precompile(workdir, files)
        setup = _setup(job, workdir, files)
        gc.freeze()  # a worker's collections never walk (and copy) what it inherits
        pid = os.fork()
        if pid == 0:
            control.close()
            try:
                _child(setup, job, probe_module, fds[0], fds[1], fds[2], fds[4])
            except BaseException:  # noqa: BLE001 - the worker must never return to the loop
                traceback.print_exc()
            finally:
                os._exit(0)
        workers[pid] = {"status": None, "stopping": False, "workdir": workdir,
                        "pidfd": _pidfd(pid)}
        return {"pid": pid}
    if request["op"] == "load":  # the probes, ahead of the first spawn
        if len(fds) != 1:
            raise ValueError("a load needs one descriptor")
        probe_source = _read_bundle(fds[0])[1]
        if probe_source is not None and probe_source[1] not in probes:
            try:
                probes[probe_source[1]] = _loaded(*probe_source)
            except Exception:  # noqa: BLE001 - the first spawn loads again, and says why
                return {"loaded": False}
        return {"loaded": True}
    if request["op"] == "stop":
        return _stop(int(request["pid"]), workers, scratch)
    if request["op"] == "reset":
        return _reset(workers, scratch, private)
    if request["op"] == "ping":
        return {"pong": True, "workers": len(workers)}
    return {"error": f"unknown op {request['op']!r}"}


def main() -> None:
    args = sys.argv[1:]
    options = dict(zip(args[1::2], args[2::2], strict=False))
    if "--uid" in options:
        _drop_privileges(int(options["--uid"]), sandboxed=not options.get("--unsandboxed"))
    scratch = options["--scratch"]
    zygote(int(args[0]), scratch, bool(options.get("--private")))
    if options.get("--remove-scratch"):
        shutil.rmtree(scratch, ignore_errors=True)
    os._exit(0)  # nothing to flush; skipping interpreter teardown lets the grader finish sooner


if __name__ == "__main__":
    main()
