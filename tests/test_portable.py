"""The portable back end (issue 28): a worker per check started with `subprocess`, on any
system. These tests run it on Linux, as CI can; `.github/workflows/portable.yml` runs
them on macOS and Windows for those who have such runners."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from kit import REPO, TESTS, daemon_pids, read_screen_until, solution_files, wait_gone

from labkit.course.catalogue import get_lab, lab_checks
from labkit.sandbox import codec, levels
from labkit.sandbox.backend import SandboxConfig
from labkit.sandbox.errors import IsolationError, WorkerCrashed, WorkerTimeout
from labkit.sandbox.facade import Sandbox, isolation_level, open_backend
from labkit.sandbox.output import OUTPUT_KEEP
from labkit.sandbox.portable.arena import make_arena
from labkit.sandbox.portable.backend import PortableBackend
from labkit.sandbox.shared import Arena

CODE = b'''
import os, subprocess, sys, time
def double(x):
    print("doubling", x)
    return 2 * x
def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return True
def nap(seconds):
    time.sleep(seconds)
def leave_a_child():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid
def flood(n):
    for _ in range(n):
        sys.stdout.write("x" * 1000)
def scale(a):
    a *= 2
def bye():
    os._exit(3)
'''


def config(**extra) -> SandboxConfig:
    return SandboxConfig(files={"student.py": CODE}, modules=("student",),
                         isolation="portable", **extra)


def call(worker, name: str, *args, timeout: float = 10.0):
    blobs: list[bytes] = []
    header = {"op": "call", "name": name, "args": codec.encode_value(list(args), blobs)}
    reply, reply_blobs = worker.request(header, blobs, timeout)
    assert "ok" in reply, reply
    return codec.decode_value(reply["ok"], reply_blobs)


@pytest.fixture
def sandbox():
    with Sandbox(config()) as box:
        yield box


def test_the_portable_level_is_asked_for_by_name_and_said():
    assert isolation_level("portable") == "portable"
    assert isinstance(open_backend("portable"), PortableBackend)
    assert PortableBackend().describe().name == "portable"


def test_elsewhere_auto_is_portable_and_a_linux_level_is_refused(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert levels.portable_reason("auto") == "auto: this system has no Linux sandbox (darwin)"
    with pytest.raises(IsolationError, match="needs Linux"):
        levels.portable_reason("bwrap")
    assert levels.at_least("bwrap", "process") and not levels.at_least("portable", "process")


def test_an_unsupported_system_gets_one_sentence(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "platform", "aix7")
    with pytest.raises(IsolationError, match="Linux, macOS and Windows; aix7"):
        open_backend("auto")
    monkeypatch.undo()
    (tmp_path / "broadcasting.py").write_bytes(solution_files(get_lab("lab02"))["broadcasting.py"])
    code = ("import sys, runpy; sys.platform = 'aix7'; sys.argv = ['labkit', 'grade', 'lab02']; "
            "runpy.run_module('labkit', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "labkit: labkit grades on Linux, macOS and Windows; aix7 is not one of them"]


def test_a_worker_answers_prints_and_is_measured_from_outside(sandbox):
    worker = sandbox.spawn("student")
    worker.receive(10)
    assert call(worker, "double", 21) == 42
    assert "doubling 21" in worker.output()
    before = worker.usage()
    assert call(worker, "spin", 0.3)
    after = worker.usage()
    assert after.cpu_s - before.cpu_s >= 0.25  # counted by the system, not the worker
    assert worker.tree.cpu() >= after.cpu_s  # what each call's start reads: the same clock
    worker.close()


def test_each_worker_starts_in_a_new_folder_with_only_the_jobs_files(sandbox):
    first = sandbox.spawn("student")
    first.receive(10)
    folder = Path(first.workdir)
    assert sorted(p.name for p in folder.iterdir() if p.name != "__pycache__") == ["student.py"]
    first.close()
    assert not folder.exists()
    second = sandbox.spawn("student")
    assert second.workdir != first.workdir
    second.close()


def test_a_call_past_its_limit_times_out_and_its_tree_is_ended(sandbox):
    worker = sandbox.spawn("student")
    worker.receive(10)
    child = call(worker, "leave_a_child")
    assert psutil.pid_exists(child)
    started = time.monotonic()
    with pytest.raises(WorkerTimeout):
        call(worker, "nap", 30, timeout=0.5)
    assert time.monotonic() - started < 10
    assert worker.ended is not None and worker.ended["killed"]
    assert not _running(child)


def test_a_worker_that_exits_is_a_crash_with_its_code(sandbox):
    worker = sandbox.spawn("student")
    worker.receive(10)
    with pytest.raises(WorkerCrashed):
        call(worker, "bye")
    assert worker.ended["exitcode"] == 3


def test_a_flood_of_output_is_kept_bounded(sandbox):
    worker = sandbox.spawn("student")
    worker.receive(10)
    call(worker, "flood", 5000)  # 5 MB through the pipe
    time.sleep(0.2)
    text = worker.output()
    assert len(text) < 3000 and "more bytes not shown" in text
    assert len(worker.capture.kept) <= OUTPUT_KEEP
    worker.close()


def test_reset_ends_whatever_a_submission_left(sandbox):
    worker = sandbox.spawn("student")
    worker.receive(10)
    child = call(worker, "leave_a_child")
    psutil.Process(child)  # still there, in the worker's tree
    sandbox.backend.reset()
    assert not _running(child)


@pytest.mark.parametrize("kind", ["memfd", "shm"])
def test_memory_shared_with_the_worker_is_seen_changed_here(kind, monkeypatch):
    import labkit.sandbox.portable.backend as backend

    monkeypatch.setattr(backend, "make_arena", lambda: make_arena(kind))
    with Sandbox(config()) as box:
        worker = box.spawn("student")
        worker.receive(10)
        placed = Arena(worker.arena).place(np.arange(4.0))
        call(worker, "scale", placed)
        assert placed.array.tolist() == [0.0, 2.0, 4.0, 6.0]
        worker.close()


def test_a_lab_graded_on_the_portable_back_end_says_so(monkeypatch):
    from labkit.engine.cold import grade_files

    monkeypatch.setenv("LABKIT_ISOLATION", "portable")
    lab = get_lab("lab02")
    result = grade_files(lab, solution_files(lab))
    assert result.isolation == "portable"
    assert result.score == result.max_score


def _running(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            return False
        time.sleep(0.05)
    return True


# --- the student's loop where only what every system has is there ------------------------

BWRAP = shutil.which("bwrap")


def _without_linux(args: list[str], cwd: Path, env: dict[str, str], **popen) -> list[str]:
    """`labkit ARGS` in a process where the calls only Linux has are gone (`nolinux.py`)
    and `/proc` is not mounted (an empty one over it)."""
    assert BWRAP is not None
    return [BWRAP, "--dev-bind", "/", "/", "--tmpfs", "/proc", "--chdir", str(cwd),
            sys.executable, str(TESTS / "nolinux.py"), *args]


@pytest.mark.skipif(BWRAP is None, reason="needs bwrap to hide /proc (scripts/test.sh installs it)")
def test_the_student_loop_runs_without_any_linux_only_call(tmp_path, short_dir):
    """fetch, grade (stub zero, solution full, the level said), hint, list and watch,
    with none of what only Linux has."""
    lab = get_lab("lab02")
    full = lab_checks(lab).max_score
    runtime = short_dir  # a daemon's socket path must fit in 108 bytes
    runtime.chmod(0o700)
    env = {**os.environ, "LABKIT_STATE_DIR": str(tmp_path / "state"), "LANG": "C.UTF-8",
           "LABKIT_DAEMON": "1", "LABKIT_RUNTIME_DIR": str(runtime)}
    env.pop("LABKIT_ISOLATION", None)

    def labkit(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        done = subprocess.run(_without_linux(list(args), cwd, env), env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    assert labkit("fetch", "lab02").returncode == 0
    ws = tmp_path / "lab02"
    stub = labkit("grade", "lab02", "--json", cwd=ws)
    graded = json.loads(stub.stdout)
    assert (graded["isolation"], graded["score"]) == ("portable", 0), stub.stderr
    (ws / "broadcasting.py").write_bytes(solution_files(lab)["broadcasting.py"])
    try:
        _graded_by_its_daemon_then_the_rest(labkit, ws, runtime, env, lab, full)
    finally:  # `watch` may have started one again
        labkit("daemon", "stop")
        left = [pid for pid in daemon_pids(under=runtime) if not wait_gone(pid, 10)]
        for pid in left:
            os.kill(pid, 9)
    assert not left, "labkit daemon stop left its daemon running"


def _graded_by_its_daemon_then_the_rest(labkit, ws: Path, runtime: Path, env: dict,
                                         lab, full: float) -> None:
    """The solution graded cold (leaving a daemon), then warm; hint, list, reset, watch."""
    for warm in (False, True):
        solved = json.loads(labkit("grade", "lab02", "--json", cwd=ws).stdout)
        assert (solved["isolation"], solved["score"]) == ("portable", full)
        if not warm:  # its channel appears once it is warm (slow on a busy machine)
            deadline = time.monotonic() + 120
            while not [*runtime.glob("*.sock"), *runtime.glob("*.port")]:
                assert time.monotonic() < deadline, "no daemon came up"
                time.sleep(0.2)
    assert labkit("hint", "lab02", cwd=ws).returncode == 0
    listed = labkit("list")
    assert listed.returncode == 0 and "lab02" in listed.stdout
    mine = (ws / "broadcasting.py").read_bytes()
    assert labkit("reset", "lab02", "broadcasting.py", cwd=ws).returncode == 0
    assert (ws / "broadcasting.py").read_bytes() == (lab.exercise_dir / "broadcasting.py"
                                                     ).read_bytes()
    assert mine in [p.read_bytes() for p in ws.rglob("broadcasting*") if p.is_file()]  # kept
    (ws / "broadcasting.py").write_bytes(mine)

    master, slave = pty.openpty()
    watch = subprocess.Popen(_without_linux(["watch", "lab02"], ws, env), env=env, cwd=ws,
                             stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    try:
        seen = read_screen_until(master, f"Total: {full:g} / {full:g} points", 120, [])
        assert "Traceback" not in seen
        os.write(master, b"q")
        assert watch.wait(timeout=30) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        os.close(master)


def test_the_repository_has_a_workflow_for_macos_and_windows():
    workflow = (REPO / ".github" / "workflows" / "portable.yml").read_text()
    assert "macos-latest" in workflow and "windows-latest" in workflow
    assert "LABKIT_ISOLATION: portable" in workflow


def _job_from(messages: list[tuple[dict, list[bytes]]]):
    """What a portable worker makes of `messages` as the first it reads."""
    from labkit.sandbox import protocol
    from labkit.sandbox.child.portable import _job

    rfd, wfd = os.pipe()
    os.write(wfd, b"".join(protocol.pack(header, blobs) for header, blobs in messages))
    os.close(wfd)
    try:
        return _job(protocol.Reader(rfd))
    finally:
        os.close(rfd)


PROBES = b"import os\nLOADED_BY = os.getpid()\ndef where():\n    return 'probes'\n"


def test_probes_sent_ahead_serve_the_job_that_names_them():
    job = {"job": {}, "files": ["student.py"], "probes": "lab/probes.py", "preloaded": True}
    _, files, probes = _job_from([({"preload": "lab/probes.py"}, [PROBES]), (job, [CODE])])
    assert files == {"student.py": CODE} and probes.where() == "probes"
    # sent with the job instead: the same probes
    job = {**job, "preloaded": False}
    _, _, probes = _job_from([(job, [CODE, PROBES])])
    assert probes.LOADED_BY == os.getpid()
    # a job that names probes it was never sent is refused, not served without them
    with pytest.raises(ValueError, match="not sent"):
        _job_from([({"preload": "other/probes.py"}, [PROBES]), ({**job, "preloaded": True},
                                                                 [CODE])])
