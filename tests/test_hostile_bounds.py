"""The trusted side is bounded in time and memory whatever a worker sends (issue 14).

A hostile submission returns values no decoder should walk (an array of a zero-size
dtype and 10**18 elements, a list past the item limit), writes its own reply on its
worker's reply pipe (a header of millions of empty objects, brackets nested 100,000
deep), or raises exceptions that never finish describing themselves. Each is graded as
`labkit grade` grades in-process, in a subprocess that reports its peak memory: the
attacked checks are `error` (or `fail`), the grading ends well within 30 s, and the
trusted process stays under 512 MiB. The
waits on a child that are not a worker's (a notebook cell's `labkit grade`, a daemon
that does not answer) have deadlines too.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batchkit import LAB02, LAB02_FULL, SOLUTION

from labkit.interop import nbcell
from labkit.student import daemon

MAX_SECONDS = 30.0
MAX_PEAK = 512 * 1024 * 1024

# Writes a crafted reply on the worker's own reply pipe (the one pipe it holds open
# for writing besides its output), then waits for the trusted side to give up. What
# the framing refuses is refused before the reply's id is read, so none is needed.
RAW_REPLY = '''
import os, stat, struct, time

def _reply(head):
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            info = os.fstat(fd)
            with open(f"/proc/self/fdinfo/{fd}") as handle:
                flags = int(next(f for f in handle if f.startswith("flags:")).split()[1], 8)
        except OSError:
            continue
        if fd > 2 and stat.S_ISFIFO(info.st_mode) and flags & os.O_WRONLY:
            break
    body = struct.pack(">I", len(head)) + head
    data = memoryview(struct.pack(">Q", len(body)) + body)
    os.set_blocking(fd, True)
    while data:
        data = data[os.write(fd, data):]
    time.sleep(60)

def safe_mse(y_true, y_pred):
    _reply(@HEAD@)
'''

ATTACKS = {
    "zero_size_dtype": SOLUTION + '''
def safe_mse(y_true, y_pred):
    return np.empty((10**9, 10**9), dtype="V0")
''',
    "millions_of_empty_objects": SOLUTION + RAW_REPLY.replace(
        "@HEAD@", 'b\'{"id": 2, "ok": [\' + b"{}," * 5_000_000 + b\'{}], "blobs": []}\''),
    "deep_nesting": SOLUTION + RAW_REPLY.replace(
        "@HEAD@", 'b\'{"id": 2, "ok": \' + b"[" * 100_000 + b"]" * 100_000'
                  ' + b\', "blobs": []}\''),
    "a_list_past_the_item_limit": SOLUTION + '''
def safe_mse(y_true, y_pred):
    return [0] * (1 << 20) + [0]
''',
    "looping_exception_text": SOLUTION + '''
class Unending(ValueError):
    def __str__(self):
        while True:
            pass

def safe_mse(y_true, y_pred):
    raise Unending()

def broadcast_shape(a, b):
    raise Unending()

def c_strides(shape, itemsize):
    raise Unending()
''',
}

# Grades each attack in this interpreter, as `labkit grade` does in-process, and
# prints its statuses and time, then the process's peak resident memory.
GRADER = '''
import json, sys, time
from labkit.course.catalogue import get_lab
from labkit.engine.cold import grade_files

attacks = json.loads(sys.stdin.read())
report = {}
for name, source in attacks.items():
    if name == "solution":
        continue
    started = time.monotonic()
    result = grade_files(get_lab("lab02"), {"broadcasting.py": source.encode()})
    report[name] = {"seconds": time.monotonic() - started, "score": result.score,
                    "checks": {c.id: [c.status.value, c.message] for c in result.checks}}
    after = grade_files(get_lab("lab02"), {"broadcasting.py": attacks["solution"].encode()})
    report[name]["next"] = after.score  # the correct submission graded right after
with open("/proc/self/status") as handle:
    peak = next(line for line in handle if line.startswith("VmHWM:"))
report["peak"] = int(peak.split()[1]) * 1024
print(json.dumps(report))
'''


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_no_reply_costs_the_trusted_side_time_or_memory(mode):
    if mode == "bwrap" and subprocess.run(["which", "bwrap"], capture_output=True).returncode:
        pytest.skip("bwrap is not installed")
    env = {**os.environ, "LABKIT_ISOLATION": mode}
    sent = json.dumps({**ATTACKS, "solution": SOLUTION})
    done = subprocess.run([sys.executable, "-c", GRADER], input=sent,
                          capture_output=True, text=True, env=env, timeout=300, check=True)
    report = json.loads(done.stdout)
    assert report.pop("peak") < MAX_PEAK
    for name, graded in report.items():
        assert graded["seconds"] < MAX_SECONDS, name
        assert graded["next"] == LAB02_FULL, name
        mse = graded["checks"]["safe_mse.aligned_pairs"]
        if name == "looping_exception_text":
            # described by its type alone, at once: a failure, not the call's timeout
            assert mse == ["fail", "safe_mse raised Unending: <unprintable>"]
            assert graded["seconds"] < 10
            continue
        assert mse[0] == "error", (name, mse)
        assert "malformed" in mse[1], (name, mse)


def test_a_notebook_cell_stops_waiting_at_the_labs_limits(tmp_path, monkeypatch):
    seen = {}

    def run(command, **kwargs):
        seen["timeout"] = kwargs["timeout"]
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(nbcell.subprocess, "run", run)
    notebook = tmp_path / "lab02.ipynb"
    notebook.write_text("{}")
    with pytest.raises(nbcell.NotebookCheckFailed, match="did not finish within"):
        nbcell.grade_notebook("lab02", notebook, "en")
    with pytest.raises(nbcell.NotebookCheckFailed, match="no terminó en"):
        nbcell.grade_notebook("lab02", notebook, "es")
    assert seen["timeout"] == LAB02.grade_timeout + LAB02.call_timeout + nbcell.START_SLACK


STUCK = '''
import socket, sys, time
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(16)
print("listening", flush=True)
time.sleep(600)  # a daemon stuck in a grading: it never accepts again
'''


def test_a_daemon_that_does_not_answer_is_listed_and_stopped(short_dir, monkeypatch):
    monkeypatch.setenv("LABKIT_DAEMON", "1")
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(short_dir / "run"))
    path = daemon.socket_path(LAB02)
    assert path is not None
    stuck = subprocess.Popen([sys.executable, "-c", STUCK, str(path)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert stuck.stdout is not None and stuck.stdout.readline() == "listening\n"
        started = time.monotonic()
        (found,) = daemon.running()
        assert (found.busy, found.pid, found.lab) == (True, stuck.pid, "lab02")
        from click.testing import CliRunner

        from labkit.cli.student import daemon_group

        shown = CliRunner().invoke(daemon_group, ["status"]).output
        assert f"pid {stuck.pid}" in shown and "busy or stuck" in shown
        assert [info.pid for info in daemon.stop_all()] == [stuck.pid]
        assert stuck.wait(timeout=10) == -signal.SIGKILL
        assert not path.exists() and daemon.running() == []
        assert time.monotonic() - started < 20
    finally:
        stuck.kill()
        stuck.wait()
        stuck.stdout.close()  # type: ignore[union-attr]


def test_a_socket_nobody_listens_on_is_not_a_daemon(short_dir, monkeypatch):
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(short_dir / "run"))
    path = daemon.socket_path(LAB02)
    assert path is not None
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # bound, never listened: what a daemon killed by -9 leaves
    assert daemon.running() == [] and Path(path).exists()
