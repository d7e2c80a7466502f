"""The sandbox's claims, each checked from inside a worker.

A probe (trusted code loaded into the worker, like a lab's `probes.py`) reports what a
student's code would see: its user and capabilities, its limits, its folder, the
network, the files of the host. The claims for `bwrap` are those of the README's
threat model; `process` is checked for what it promises (limits, a fresh folder, the
process tree killed, output capped).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kit import REPO

import labkit
from labkit.cli import main
from labkit.sandbox import codec
from labkit.sandbox.backend import DEFAULT_LIMITS, SandboxConfig
from labkit.sandbox.errors import IsolationError, SandboxFailure
from labkit.sandbox.facade import Sandbox
from labkit.sandbox.linux import isolation
from labkit.sandbox.linux.procfs import marked_processes
from labkit.sandbox.linux.zygote import Zygote
from labkit.sandbox.output import OUTPUT_EXCERPT, OUTPUT_KEEP, excerpt

HAVE_BWRAP = shutil.which("bwrap") is not None
NEEDS_BWRAP = pytest.mark.skipif(not HAVE_BWRAP, reason="bwrap is not installed")
MODES = [pytest.param("bwrap", marks=NEEDS_BWRAP), "process"]

PROBES = textwrap.dedent('''
    import ctypes
    import os
    import resource
    import socket
    import sys
    import time

    def facts(module, paths):
        with open("/proc/self/status") as handle:
            status = dict(line.split(":", 1) for line in handle)

        def readable(path):
            try:
                with open(path, "rb") as handle:
                    handle.read(1)
                return True
            except OSError:
                return False

        libc = ctypes.CDLL(None, use_errno=True)
        # MS_REMOUNT | MS_BIND without MS_RDONLY: make a read-only bind writable
        remount = libc.mount(None, paths["usr"].encode(), None, 32 | 4096, None)
        try:
            socket.create_connection(("127.0.0.1", paths["port"]), timeout=0.5).close()
            connected = True
        except OSError:
            connected = False
        nested = libc.unshare(0x10000000)  # CLONE_NEWUSER: capabilities in a new namespace
        with open("/proc/net/dev") as handle:
            interfaces = sorted(line.split(":")[0].strip() for line in handle if ":" in line)
        return {
            "uid": (os.getuid(), os.geteuid(), os.getgid()),
            "caps": [int(status[k], 16)
                     for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")],
            "no_new_privs": status["NoNewPrivs"].strip(),
            "cwd": os.getcwd(),
            "listing": sorted(os.listdir(".")),
            "limits": {name: resource.getrlimit(getattr(resource, name))[0]
                       for name in paths["limits"]},
            "readable": {name: readable(path) for name, path in paths["secrets"].items()},
            "exists": {name: os.path.exists(path) for name, path in paths["hidden"].items()},
            "read_only": {path: bool(os.statvfs(path).f_flag & os.ST_RDONLY)
                          for path in paths["read_only"]},
            "remount": remount,
            "nested_userns": nested,
            "pid": os.getpid(),
            "processes": sum(name.isdigit() for name in os.listdir("/proc")),
            "interfaces": interfaces,
            "connected": connected,
            "tmp_bytes": os.statvfs("/tmp").f_blocks * os.statvfs("/tmp").f_frsize,
        }

    def write(module, name, text):
        with open(name, "w") as handle:
            handle.write(text)
        return os.getcwd()

    def exists(module, path):
        return os.path.exists(path)

    def spam(module, total, text):
        sys.stdout.write(text)
        line = "x" * 1023 + "\\n"
        for _ in range(total // 1024):
            sys.stdout.write(line)
        return total

    def leave_a_tree(module):
        """Files in a nested folder and a double-forked daemon: the daemon's pid."""
        os.makedirs("sub/deep")
        with open("sub/deep/file.txt", "w") as handle:
            handle.write("left behind")
        read, write = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(write, str(os.getpid()).encode())
                while True:
                    time.sleep(0.05)
            os._exit(0)
        os.wait()
        return [int(os.read(read, 32)), os.getcwd()]

    def daemon(module):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                while True:
                    time.sleep(0.05)
            os._exit(0)
        os.wait()
        return True
''')


@pytest.fixture
def work(tmp_path):
    """The student's folder the graded files were read from."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "m.py").write_text("VALUE = 42\n")
    return folder


@pytest.fixture
def job(work, tmp_path):
    (tmp_path / "probes.py").write_text(PROBES)
    return SandboxConfig(files={"m.py": (work / "m.py").read_bytes()}, modules=("m",),
                         probes=tmp_path / "probes.py")


def call(worker, name, *args, op="probe"):
    blobs: list[bytes] = []
    header = {"op": op, "module": "m", "name": name,
              "args": codec.encode_value(list(args), blobs)}
    reply, reply_blobs = worker.request(header, blobs, 20.0)
    assert "ok" in reply, reply
    return codec.decode_value(reply["ok"], reply_blobs)


def with_mode(config: SandboxConfig, mode: str) -> SandboxConfig:
    from dataclasses import replace

    return replace(config, isolation=mode)


# --- choosing the isolation --------------------------------------------------------------


def test_the_mode_comes_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv(isolation.ENV_VAR, raising=False)
    assert isolation.requested() == "auto"
    monkeypatch.setenv(isolation.ENV_VAR, "process")
    assert isolation.requested() == "process"
    assert isolation.choose().mode == "process"
    assert isolation.requested("bwrap") == "bwrap"
    with pytest.raises(IsolationError, match="unknown isolation"):
        isolation.requested("docker")


def test_without_bwrap_auto_falls_back_and_bwrap_is_refused(monkeypatch):
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    chosen = isolation.choose("auto")
    assert chosen.mode == "process" and "bubblewrap" in chosen.reason
    with pytest.raises(IsolationError, match="bubblewrap"):
        isolation.choose("bwrap")


@NEEDS_BWRAP
def test_auto_falls_back_when_bwrap_cannot_start_a_sandbox(monkeypatch):
    monkeypatch.setattr(isolation, "_broken", {})
    monkeypatch.setattr(isolation, "_bwrap_args", lambda *args: ["/bin/false"])
    zygote = Zygote("auto")
    assert zygote.name == "bwrap"
    zygote.start()
    try:
        assert zygote.ask({"op": "ping"})["pong"]
        assert zygote.name == "process"
        assert "could not start" in zygote.choice.reason
    finally:
        zygote.close()
    assert isolation.choose("auto").mode == "process"  # remembered for this process
    monkeypatch.setattr(isolation, "_broken", {})
    strict = Zygote("bwrap")
    with pytest.raises(SandboxFailure, match="did not start"):
        strict.start()
        strict.ask({"op": "ping"})
    strict.close()


def test_doctor_says_which_isolation_and_why(monkeypatch):
    monkeypatch.setenv(isolation.ENV_VAR, "process")
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "isolation" in result.output and "process" in result.output
    assert "LABKIT_ISOLATION=process" in result.output and "as=2147483648" in result.output
    assert labkit.__version__ in result.output and sys.executable in result.output
    if HAVE_BWRAP:
        monkeypatch.setenv(isolation.ENV_VAR, "auto")
        result = CliRunner().invoke(main, ["doctor"])
        assert result.exit_code == 0 and "bwrap" in result.output
        assert "nproc=128" in result.output and "uid 65534" in result.output


# --- what a worker sees --------------------------------------------------------------------


def facts_in(config: SandboxConfig, mode: str, port: int, work: Path) -> dict:
    paths = {
        "usr": "/usr",
        "port": port,
        "limits": [*DEFAULT_LIMITS, "RLIMIT_NPROC"],
        "secrets": {"shadow": "/etc/shadow", "solution": str(REPO / "solutions" / "lab02" /
                                                            "broadcasting.py"),
                    "grader": str(REPO / "grader" / "lab02" / "test_broadcasting.py"),
                    "trusted_copy": str(work / "m.py")},
        "hidden": {"repo": str(REPO / "labs.toml"), "home": os.path.expanduser("~/.bashrc"),
                   "tests": str(REPO / "tests")},
        "read_only": ["/usr", sys.prefix, str(Path(labkit.__file__).parent)],
    }
    with Sandbox(with_mode(config, mode)) as sandbox:
        assert sandbox.isolation == mode
        worker = sandbox.spawn()
        try:
            return call(worker, "facts", paths)
        finally:
            worker.stop()


@NEEDS_BWRAP
def test_bwrap_worker_is_unprivileged_offline_and_sees_only_what_it_needs(job, work):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as listener:
        facts = facts_in(job, "bwrap", listener.getsockname()[1], work)
    assert facts["uid"] == (65534, 65534, 65534)  # an unprivileged user, on the host too
    assert facts["caps"] == [0, 0, 0, 0, 0]  # every capability dropped, bounding set too
    assert facts["no_new_privs"] == "1"
    assert facts["readable"] == {"shadow": False, "solution": False, "grader": False,
                                 "trusted_copy": False}
    assert not any(facts["exists"].values())  # no home, no checkout, no graders
    assert all(facts["read_only"].values())  # a read-only view of the system and runtime
    assert facts["remount"] != 0  # and it cannot be remounted writable
    assert facts["nested_userns"] != 0  # nor can it make itself root of a new namespace
    assert facts["interfaces"] == ["lo"] and not facts["connected"]  # no network
    assert facts["pid"] < 20 and facts["processes"] < 10  # a private PID namespace
    assert facts["tmp_bytes"] <= isolation.TMP_BYTES  # a size-limited private /tmp
    assert facts["cwd"].startswith("/tmp/work-") and facts["listing"] == ["m.py"]
    limits = dict(DEFAULT_LIMITS, RLIMIT_NPROC=isolation.SANDBOX_NPROC)
    assert facts["limits"] == limits


def test_process_worker_has_its_limits_and_only_the_lab_files(job, work):
    facts = facts_in(job, "process", 9, work)
    assert facts["listing"] == ["m.py"]
    assert "labkit-zygote-" in facts["cwd"] and facts["cwd"] != str(work)
    assert {k: facts["limits"][k] for k in DEFAULT_LIMITS} == DEFAULT_LIMITS
    assert facts["no_new_privs"] == "1"  # setuid programs (sudo) gain nothing


@pytest.mark.parametrize("mode", MODES)
def test_the_probes_load_while_the_grader_starts_not_at_the_first_spawn(work, tmp_path, mode):
    (tmp_path / "probes.py").write_text(
        "import time\nLOADED = time.monotonic()\n\n\ndef loaded(module):\n    return LOADED\n")
    config = SandboxConfig(files={"m.py": (work / "m.py").read_bytes()}, modules=("m",),
                           probes=tmp_path / "probes.py", isolation=mode)
    with Sandbox(config) as sandbox:
        assert sandbox.backend.answers()  # the replies before it read: the load's too
        asked = time.monotonic()  # one clock for every process of the machine
        worker = sandbox.spawn()
        assert call(worker, "loaded") < asked
        worker.stop()


def test_probes_that_fail_to_load_ahead_fail_the_spawn_saying_why(work, tmp_path):
    (tmp_path / "probes.py").write_text("raise RuntimeError('these probes are broken')\n")
    config = SandboxConfig(files={"m.py": (work / "m.py").read_bytes()}, modules=("m",),
                           probes=tmp_path / "probes.py", isolation="process")
    with Sandbox(config) as sandbox:
        assert sandbox.backend.answers()  # a failed load does not end the zygote
        with pytest.raises(SandboxFailure, match="these probes are broken"):
            sandbox.spawn()


@pytest.mark.parametrize("mode", MODES)
def test_each_worker_gets_a_fresh_folder_and_the_last_ones_is_gone(job, work, mode):
    with Sandbox(with_mode(job, mode)) as sandbox:
        first = sandbox.spawn()
        first_dir = call(first, "write", "note.txt", "from the first check")
        first.stop()
        second = sandbox.spawn()
        call(second, "write", "other.txt", "x")  # the same path, perhaps, but a new folder
        assert call(second, "exists", f"{first_dir}/note.txt") is False
        assert call(second, "exists", "note.txt") is False
        assert call(second, "VALUE", op="value") == 42
        second.stop()
    assert (work / "m.py").read_text() == "VALUE = 42\n"  # the folder they were read from
    assert sorted(p.name for p in work.iterdir()) == ["m.py"]


@pytest.mark.parametrize("mode", MODES)
def test_a_closed_check_is_cleaned_up_before_the_next_worker_starts(job, mode):
    """`close` does not wait for the zygote; the zygote still ends the worker's whole
    tree and empties its folder before it forks the next one."""
    with Sandbox(with_mode(job, mode)) as sandbox:
        first = sandbox.spawn()
        pid, folder = call(first, "leave_a_tree")
        first.close()
        second = sandbox.spawn()
        assert call(second, "exists", f"/proc/{pid}") is False  # same PID namespace
        assert call(second, "exists", f"{folder}/sub") is False  # the name may be reused
        second.close()


@pytest.mark.parametrize("mode", MODES)
def test_requests_sent_together_are_answered_in_turn(job, mode):
    with Sandbox(with_mode(job, mode)) as sandbox:
        worker = sandbox.spawn()
        values = [{"op": "value", "module": "m", "name": "VALUE"}] * 3
        assert worker.send([(v, []) for v in values], 20.0, limit=10) is False  # too large
        assert worker.send([(v, []) for v in values], 20.0) is True
        for _ in values:
            reply, _ = worker.receive(20.0)
            assert reply["ok"] == 42
        assert call(worker, "VALUE", op="value") == 42  # the next request, in order
        worker.close()


FIRST_IMPORTS = {  # module source -> what asking for VALUE gives, first and second time
    "import sys\nVALUE = [__name__, __spec__.name, __spec__.origin == __file__,"
    " __spec__.parent, __package__, __cached__.endswith(sys.implementation.cache_tag"
    " + '.pyc'), type(__loader__).__name__, sys.modules[__name__].__name__]\n":
        ["m", "m", True, "", "", True, "_PrecompiledLoader", "m"],
    "import sys, types\nsys.modules['m'] = types.SimpleNamespace(VALUE='replaced')\n":
        "replaced",
    "import m\nVALUE = m.OTHER\nOTHER = 1\n":
        "AttributeError: partially initialized module 'm' has no attribute 'OTHER' (most"
        " likely due to a circular import)",
    "print('importing')\nraise ValueError('at import')\n": "ValueError: at import",
}


@pytest.mark.parametrize("source", list(FIRST_IMPORTS))
def test_a_workers_first_import_is_the_import_systems(job, source):
    """The first import uses the spec the zygote found for the fresh folder, and is made
    as the worker starts; modules see what an ordinary import gives them."""
    job = dataclasses.replace(job, files={"m.py": source.encode()})
    expected = FIRST_IMPORTS[source]
    with Sandbox(with_mode(job, "process")) as sandbox:
        worker = sandbox.spawn("m")
        imported, _ = worker.receive(20.0)
        for _ in range(2):  # a failed import is tried again, as Python does
            blobs: list[bytes] = []
            reply, _ = worker.request({"op": "value", "module": "m", "name": "VALUE",
                                       "args": codec.encode_value([], blobs)}, blobs, 20.0)
            if isinstance(expected, str) and ":" in expected:
                raised = reply["raised"]
                assert f"{raised['type']}: {raised['message']}" == expected
                assert imported["raised"] == raised
            else:
                assert "ok" in imported and reply["ok"] == codec.encode_value(expected, [])
        output = worker.output()
        worker.close()
    assert output.count("importing") == (3 if "print" in source else 0)


@pytest.mark.parametrize("mode", MODES)
def test_output_is_captured_capped_counted_and_shown_as_a_short_excerpt(job, mode):
    total = 8 * 1024**2
    with Sandbox(with_mode(job, mode)) as sandbox:
        worker = sandbox.spawn()
        prefix = "\x1b[2J\x1b[31mred\r\n"
        assert call(worker, "spam", total, prefix) == total
        kept, dropped = worker.capture.snapshot()
        shown = worker.output()
        worker.stop()
    assert len(kept) == OUTPUT_KEEP and len(kept) + dropped == total + len(prefix)
    assert len(shown) <= OUTPUT_EXCERPT + 60 and "more bytes not shown" in shown
    assert "\x1b" not in shown and "\r" not in shown and "red" in shown


def test_an_excerpt_is_printable_and_says_what_it_hides():
    assert excerpt(b"ok\n", 0) == "ok\n"
    text = excerpt(b"a\x07b\xe2\x80\xaec" + b"z" * 5000, 10)
    assert text.startswith("a\ufffdb\ufffdc") and text.endswith("[... 3017 more bytes not shown]")


@pytest.mark.parametrize("mode", MODES)
def test_closing_the_zygote_kills_every_process_it_started(job, mode):
    zygote = Zygote(mode)
    zygote.start()
    try:
        with Sandbox(job, zygote) as sandbox:
            worker = sandbox.spawn()
            assert call(worker, "daemon") is True
            assert len(marked_processes(zygote.marker)) >= 2  # zygote (or bwrap) and daemon
            worker.stop()  # the daemon left the worker's session, yet it is gone now
            time.sleep(0.05)
            assert call(sandbox.spawn(), "daemon") is True  # another one, left running
    finally:
        marker = zygote.marker
        zygote.close()
    assert marked_processes(marker) == []


@pytest.mark.parametrize("mode", MODES)
def test_one_zygote_serves_gradings_of_different_files(job, mode):
    other = {"m.py": b"VALUE = 7\n"}
    zygote = Zygote(mode)
    zygote.start()
    try:
        for files, value in [(job.files, 42), (other, 7), (job.files, 42)]:
            config = SandboxConfig(files=files, modules=("m",), probes=job.probes)
            with Sandbox(config, zygote) as sandbox:
                assert sandbox.isolation == mode
                worker = sandbox.spawn()
                assert call(worker, "VALUE", op="value") == value
                worker.stop()
    finally:
        zygote.close()


def test_the_kits_bytecode_is_written_for_a_read_only_runtime():
    import importlib.util

    isolation.precompile()
    package = Path(labkit.__file__).parent
    for name in ("sandbox/child/forkserver.py", "sandbox/child/worker.py", "sandbox/protocol.py",
                 "__init__.py"):
        source = package / name
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not os.access(package, os.W_OK):
            pytest.skip("the installed kit is read-only")
        assert cached.is_file() and cached.stat().st_mtime >= source.stat().st_mtime - 1


def test_the_bwrap_command_binds_nothing_writable_and_no_home():
    for as_root in (False, True):
        args = isolation._bwrap_args("bwrap", as_root, 5, 6, 7, 8)
        needed = {"--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"}
        assert needed <= set(args)
        assert args[args.index("--cap-drop") + 1] == "ALL"
        assert "--bind" not in args and "--dev-bind" not in args  # no writable host path
        sources = [args[i + 1] for i, a in enumerate(args) if a in ("--ro-bind", "--ro-bind-try")]
        allowed = [*isolation._SYSTEM_DIRS, *isolation._ETC_FILES, *isolation.runtime_paths()]
        assert set(sources) <= set(allowed)
        assert str(REPO) not in sources and os.path.expanduser("~") not in sources
        assert "/etc/shadow" not in sources and "/etc/passwd" not in sources
        assert args[args.index("--tmpfs") + 1] == "/tmp"
        added = [args[i + 1] for i, a in enumerate(args) if a == "--cap-add"]
        if as_root:  # the zygote drops them (and to uid 65534) before anything else runs
            assert "--userns-block-fd" in args and added == ["CAP_SETUID", "CAP_SETGID",
                                                            "CAP_SETPCAP", "CAP_SYS_RESOURCE"]
        else:
            assert args[args.index("--uid") + 1] == "65534" and added == []


def test_a_runtime_under_tmp_is_bound_over_the_private_tmp(monkeypatch):
    """A virtualenv in the host's /tmp must stay visible inside the sandbox."""
    monkeypatch.setattr(isolation, "runtime_paths", lambda: ["/tmp/venv-x/lib", "/opt/py"])
    args = isolation._bwrap_args("bwrap", True, 5, 6, 7, 8)
    tmpfs = args.index("--tmpfs")
    binds = [i for i, a in enumerate(args) if a == "--ro-bind" and args[i + 1] == "/tmp/venv-x/lib"]
    assert binds and all(i > tmpfs for i in binds)


def test_the_sweep_keeps_what_the_scratch_held_before_any_worker(tmp_path, monkeypatch):
    """With bwrap, a runtime bound under /tmp sits in the sweep's folder: walking it on
    every check cost seconds per grading, and it is read-only anyway."""
    from labkit.sandbox.child import forkserver

    (tmp_path / "venv" / "lib").mkdir(parents=True)
    monkeypatch.setattr(forkserver, "_PRESERVED", {"venv"})
    (tmp_path / "left-by-a-check").mkdir()
    (tmp_path / "stray.txt").write_text("x")
    forkserver._sweep(str(tmp_path), {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv"]


def test_removing_a_workers_folder_opens_up_only_what_is_inside_it(tmp_path):
    """A folder the student's code locked is removed; the folder above is never changed,
    even when the tree is already gone (it once turned /tmp into 0700)."""
    from labkit.fsutil import remove_tree

    above = tmp_path / "above"
    above.mkdir(mode=0o755)
    above.chmod(0o755)
    tree = above / "work"
    (tree / "locked").mkdir(parents=True)
    (tree / "locked" / "kept.txt").write_text("x")
    (tree / "locked").chmod(0o500)
    remove_tree(tree)
    assert not tree.exists()
    remove_tree(tree)  # gone already
    assert stat.S_IMODE(above.stat().st_mode) == 0o755
