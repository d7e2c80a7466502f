"""Every attack class of issue 14 through every path that grades (issue 14).

The classes are the bounds attacks of `test_hostile_bounds` (replies no decoder should
walk) and the isolation attacks of `test_hostile_isolation` (a filled /tmp with IPC
leftovers, an escape that kills its zygote). The paths are a batch with --jobs 2
(attackers first, then correct submissions in the same grading processes), the grading
daemon behind `labkit grade` (the attacker, then a correct submission, by the same
daemon) and `labkit grade` in-process. `test_hostile_bounds` grades the bounds attacks
in-process, and `test_hostile_isolation` the filled /tmp in a batch under bwrap and the
escape in-process in both modes; this module grades the rest.

With bwrap the victims check their sandbox from inside (`VICTIM`); in `process` mode the
filled /tmp is the host's, which that mode does not contain (README, threat model), so
only the escape is graded there, followed by the plain solution. Whatever the attack,
no lab02 grading takes more than `MAX_SECONDS`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from batchkit import LAB02, LAB02_FULL, SOLUTION, folder
from click.testing import CliRunner
from kit import wait_ready
from test_hostile_bounds import ATTACKS, MAX_SECONDS
from test_hostile_isolation import ESCAPE, FILL_AND_KEEP, VICTIM, host_shm, sleepers, with_token

from labkit.cli import main
from labkit.results import LabResult, Status
from labkit.student import policy

MODES = ["bwrap", "process"]
IDLE_CPU = 0.25  # CPU seconds a daemon may spend in a second of waiting for work
SWEEPS = {"bwrap": ("fill_and_keep", "escape"), "process": ("escape",)}


def skip_without(mode: str) -> None:
    if mode == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed")


def sweeps(mode: str, token: str) -> dict[str, str]:
    """The isolation attacks that apply in `mode`, by name."""
    sources = {"fill_and_keep": FILL_AND_KEEP, "escape": ESCAPE}
    return {name: with_token(sources[name], token) for name in SWEEPS[mode]}


def victim(mode: str, token: str) -> str:
    return with_token(VICTIM, token) if mode == "bwrap" else SOLUTION


def assert_bounded(name: str, result: LabResult) -> None:
    """A bounds attack graded as `test_hostile_bounds` expects: the attacked check is
    the submission's own failure, the grading well within its limits."""
    assert result.duration_s < MAX_SECONDS, name
    mse = next(c for c in result.checks if c.id == "safe_mse.aligned_pairs")
    if name == "looping_exception_text":
        assert (mse.status, mse.message) == (Status.FAIL, "safe_mse raised Unending: <unprintable>")
    else:
        assert mse.status is Status.ERROR and "malformed" in mse.message, (name, mse)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` itself."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_attack_in_a_batch_leaves_the_next_students_full_marks(mode, tmp_path, token,
                                                                    monkeypatch):
    from labkit.classroom import batch

    skip_without(mode)
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    attackers = {**ATTACKS, **sweeps(mode, token)}
    subs = tmp_path / "class"
    for name, source in attackers.items():
        folder(subs, f"a_{name}", source)
    for index in range(4):
        folder(subs, f"b_victim{index}", victim(mode, token))
    started = time.monotonic()
    summary = batch.grade_many(LAB02, subs, tmp_path / "out", jobs=2)
    assert time.monotonic() - started < 2 * MAX_SECONDS
    with sqlite3.connect(summary.gradebook) as db:
        rows = db.execute("SELECT student_id, document, retry FROM latest_submissions")
        results = {s: (LabResult.from_dict(json.loads(d)), r) for s, d, r in rows.fetchall()}
    for index in range(4):
        graded, retry = results[f"b_victim{index}"]
        assert (graded.status, graded.score, retry) == (Status.PASS, LAB02_FULL, 0), graded.failed
    for name in attackers:
        graded, retry = results[f"a_{name}"]
        assert graded.status is not Status.ERROR and retry == 0, (name, graded.message)
        assert graded.duration_s < MAX_SECONDS, name
        if name in ATTACKS:
            assert_bounded(name, graded)
    assert sleepers(token) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_attack_through_the_daemon_leaves_it_healthy(mode, daemons, tmp_path, token,
                                                           monkeypatch):
    skip_without(mode)
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    shm = host_shm()
    after = victim(mode, token)

    def grade(name: str, source: str) -> LabResult:
        path = folder(tmp_path, name, source)
        started = time.monotonic()
        result = policy.grade(LAB02, path, use_daemon=True)
        assert time.monotonic() - started < MAX_SECONDS, name
        return result

    assert grade("first", after).score == LAB02_FULL  # graded in-process; a daemon starts
    served = wait_ready()
    cpu = cpu_seconds(served.pid)
    attackers = {**ATTACKS, **sweeps(mode, token)}
    for number, (name, source) in enumerate(attackers.items()):
        attacked = grade(name, source)
        assert attacked.isolation == mode
        if name in ATTACKS:
            assert_bounded(name, attacked)
        assert sleepers(token) == [], name
        assert grade(f"after_{name}", after).score == LAB02_FULL, name
        info = wait_ready()
        assert (info.pid, info.graded) == (served.pid, 2 * number + 2), f"{name}: not by the daemon"
    assert host_shm() <= shm
    assert cpu_seconds(served.pid) - cpu < MAX_SECONDS
    idle = cpu_seconds(served.pid)
    time.sleep(1.0)
    assert cpu_seconds(served.pid) - idle < IDLE_CPU  # it waits for work; it does not spin
    status = CliRunner().invoke(main, ["daemon", "status", "--lang", "en"]).output
    assert f"lab02  pid {served.pid}" in status and "busy or stuck" not in status


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_isolation_attack_through_labkit_grade(mode, tmp_path, token, monkeypatch):
    skip_without(mode)
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    shm = host_shm()
    cli = CliRunner()

    def grade(name: str, source: str) -> LabResult:
        path = folder(tmp_path, name, source)
        shown = cli.invoke(main, ["grade", "lab02", "--dir", str(path), "--json",
                                    "--lang", "en"])
        result = LabResult.from_dict(json.loads(shown.output))
        assert (result.isolation, result.duration_s < MAX_SECONDS) == (mode, True), name
        return result

    for name, source in sweeps(mode, token).items():
        assert grade(name, source).status is not Status.ERROR, name
        assert sleepers(token) == [], name
        assert grade(f"after_{name}", victim(mode, token)).score == LAB02_FULL, name
    assert host_shm() <= shm
