"""Nothing of one submission reaches the next, and nothing survives a grading (issue 14).

Each attacker is a hostile submission of its own, graded before correct submissions in
the same grading process (a batch with --jobs 2, the warm path of `labkit batch` and of
the daemon) or alone (`grade_files`, what `labkit grade` runs); the victims check, from
inside their own workers, that the sandbox they got is untouched, so a victim's full
marks prove it. After each, no process and no System V segment of the attack is left.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from batchkit import LAB02, LAB02_FULL, SOLUTION, folder

from labkit.classroom import batch
from labkit.engine.cold import grade_files
from labkit.interop import nbcell
from labkit.results import LabResult, Status

NEEDS_BWRAP = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")

# Fills /tmp, keeps hard links of its own file in a folder it makes unwritable, and
# leaves System V shared memory, a semaphore, a message queue and a POSIX queue.
FILL_AND_KEEP = '''
import ctypes, os

def _attack():
    keep = "/tmp/keep-@TOKEN@"
    os.makedirs(keep, exist_ok=True)
    for i in range(20):
        try:
            os.link(__file__, f"{keep}/link-{i}")
        except OSError:
            pass
    try:
        with open(f"{keep}/fill", "wb") as handle:
            while True:
                handle.write(b"x" * (1 << 20))
    except OSError:
        pass
    os.chmod(keep, 0o500)
    libc = ctypes.CDLL(None)
    libc.shmget(0, 1 << 20, 0o1000 | 0o666)
    libc.semget(0, 1, 0o1000 | 0o666)
    libc.msgget(0, 0o1000 | 0o666)
    if hasattr(libc, "mq_open"):
        libc.mq_open(b"/labkit-@TOKEN@", os.O_CREAT | os.O_RDWR, 0o600, None)

_attack()
'''

# Drops the marker, double-forks a sleeper in its own session, then kills the zygote.
ESCAPE = '''
import os, signal, time

def _escape():
    os.environ.pop("LABKIT_SANDBOX", None)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve("/bin/sleep", ["sleep", "@TOKEN@"], dict(os.environ))
        os._exit(0)
    time.sleep(0.1)
    os.kill(os.getppid(), signal.SIGKILL)

_escape()
'''

# A correct submission that refuses to import in a sandbox someone else touched. It
# reads /proc by a path it builds: lab02's checks that rest on a probe refuse a source
# holding a literal one (`engine.static`), and a victim must earn full marks.
VICTIM = '''
import linecache, os

def _proc(*parts):
    return linecache.getlines(os.path.join(os.sep, "proc", *parts))

def _untouched():
    # The sandbox's own read-only binds of a runtime or checkout under the host's /tmp
    # (a CI clone, a virtualenv) are mount points there: not anyone's leftovers.
    mounts = [line.split()[4] for line in _proc("self", "mountinfo")]
    left = [n for n in os.listdir("/tmp") if not n.startswith("work-")
            and not any(m.startswith(f"/tmp/{n}/") or m == f"/tmp/{n}" for m in mounts)]
    if left:
        raise RuntimeError(f"an earlier submission left {left} in /tmp")
    for kind in ("shm", "sem", "msg"):
        if _proc("sysvipc", kind)[1:]:
            raise RuntimeError(f"an earlier submission left System V {kind}")
    if os.path.isdir("/dev/mqueue") and os.listdir("/dev/mqueue"):
        raise RuntimeError("an earlier submission left a message queue")

_untouched()
'''


def with_token(text: str, token: str) -> str:
    return SOLUTION + "\n" + text.replace("@TOKEN@", token)


def host_shm() -> set[int]:
    with open("/proc/sysvipc/shm") as handle:
        return {int(line.split()[1]) for line in handle.read().splitlines()[1:]}


def sleepers(token: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", f"sleep {token}"], capture_output=True, text=True)
    return found.stdout.split()


def current(gradebook: Path) -> dict[str, tuple[LabResult, int]]:
    """Each student's current result and its `retry` flag."""
    with sqlite3.connect(gradebook) as db:
        rows = db.execute("SELECT student_id, document, retry FROM latest_submissions").fetchall()
    return {student: (LabResult.from_dict(json.loads(document)), retry)
            for student, document, retry in rows}


@NEEDS_BWRAP
@pytest.mark.slow
def test_a_filled_tmp_and_leftover_ipc_never_reach_the_next_student(tmp_path, token, monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATION", "bwrap")
    subs = tmp_path / "class"
    folder(subs, "a_attacker", with_token(FILL_AND_KEEP, token))
    for index in range(5):
        folder(subs, f"b_victim{index}", with_token(VICTIM, token))
    summary = batch.grade_many(LAB02, subs, tmp_path / "out", jobs=2)
    results = current(summary.gradebook)
    for index in range(5):
        victim, retry = results[f"b_victim{index}"]
        assert (victim.status, victim.score, retry) == (Status.PASS, LAB02_FULL, 0), victim.failed
    attacker, retry = results["a_attacker"]
    # graded, not the kit's failure: its functions are correct, but the checks that rest
    # on a probe refuse a source that imports ctypes (`engine.static`)
    assert (attacker.status, retry) == (Status.FAIL, 0)


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=NEEDS_BWRAP), "process"])
def test_nothing_survives_a_grading_that_killed_its_zygote(mode, token, monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    before = host_shm()
    attack = {"broadcasting.py": with_token(ESCAPE, token).encode()}
    result = grade_files(LAB02, attack)
    assert result.status is not Status.ERROR  # graded, as honestly as it can be
    assert sleepers(token) == []
    assert host_shm() <= before


@pytest.mark.slow
def test_a_submission_that_kills_its_grading_process_is_retried_once(tmp_path, monkeypatch):
    """In process mode a worker of a user's own grading can kill the grading process
    itself: the first time is the kit's failure (retry), the second time the
    submission's; the others are graded. When root grades, the worker runs as 65534
    and the kill is refused: the submission is graded on what it did."""
    monkeypatch.setenv("LABKIT_ISOLATION", "process")
    subs = tmp_path / "class"
    kills = "\nimport os, signal\nos.kill(int(open(f'/proc/{os.getppid()}/stat').read()" \
            ".rsplit(')', 1)[1].split()[1]), signal.SIGKILL)\n"
    folder(subs, "a_killer", SOLUTION + kills)
    folder(subs, "b_fine", SOLUTION)
    out = tmp_path / "out"
    batch.grade_many(LAB02, subs, out, jobs=2)
    results = current(out / "gradebook.sqlite")
    killer, retry = results["a_killer"]
    assert results["b_fine"][0].score == LAB02_FULL
    if os.geteuid() == 0:
        assert retry == 0 and "labkit itself failed" not in killer.message
        assert killer.score < LAB02_FULL  # its module raised PermissionError as it loaded
        return
    assert (killer.status, retry) == (Status.ERROR, 1)
    assert "labkit itself failed" in killer.message
    assert results["b_fine"][0].score == LAB02_FULL
    again = batch.grade_many(LAB02, subs, out, jobs=2)
    assert again.skipped == 1  # b_fine
    killer, retry = current(out / "gradebook.sqlite")["a_killer"]
    assert (killer.status, retry) == (Status.ERROR, 0)
    assert "twice" in killer.message
    assert batch.grade_many(LAB02, subs, out, jobs=2).skipped == 2


def test_a_notebook_cell_never_grades_through_a_daemon(tmp_path, monkeypatch):
    seen = {}

    def run(command, **kwargs):
        seen.update(kwargs["env"])
        raise SystemExit

    monkeypatch.setattr(nbcell.subprocess, "run", run)
    notebook = tmp_path / "lab02.ipynb"
    notebook.write_text("{}")
    with pytest.raises(SystemExit):
        nbcell.grade_notebook("lab02", notebook)
    assert seen["LABKIT_DAEMON"] == "0"
