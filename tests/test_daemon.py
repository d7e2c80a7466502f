"""The warm grading daemon behind `labkit grade`: faster, never different, never unsafe."""

from __future__ import annotations

import dataclasses
import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kit import (
    daemon_pids,
    solution_files,
    stub_files,
    variants,
    write_files,
)
from kit import wait_gone as _wait_gone
from kit import wait_ready as _wait_ready

from labkit.cli import main
from labkit.course.catalogue import get_lab
from labkit.engine.cold import grade_files
from labkit.results import LabResult
from labkit.sandbox import protocol
from labkit.student import channel, daemon, policy

LAB = get_lab("lab02")


def _workspace(tmp_path: Path, name: str, files: dict[str, bytes]) -> Path:
    return write_files(files, tmp_path / name)


def _same_grade(a: LabResult, b: LabResult) -> None:
    assert (a.score, a.status, a.digest, a.isolation) == (b.score, b.status, b.digest, b.isolation)
    assert [(c.id, c.status, c.points, c.message) for c in a.checks] == \
        [(c.id, c.status, c.points, c.message) for c in b.checks]


def test_later_grades_are_served_warm_and_agree_with_in_process(daemons, tmp_path):
    mutant = next(v for v in variants("mutants") if v.lab == "lab02")
    hostile = {v.name: v for v in variants("hostile") if v.lab == "lab02"}
    cases = {"stub": stub_files(LAB), "mutant": mutant.files()}
    for name in ("loop_in_one_function", "kill_the_zygote", "double_forked_setsid_daemon",
                 "leaves_state_in_tmp", "rewrites_the_graders_and_the_kit"):
        cases[name] = hostile[name].files()
    cases["solution"] = solution_files(LAB)  # still full marks after all of the above
    first = policy.grade(LAB, _workspace(tmp_path, "first", cases["solution"]), use_daemon=True)
    assert first.score == first.max_score  # graded in-process, and a daemon started
    assert _wait_ready().graded == 0
    for number, (name, files) in enumerate(cases.items(), start=1):
        path = _workspace(tmp_path, name, files)
        warm = policy.grade(LAB, path, "es", use_daemon=True)
        assert _wait_ready().graded == number, f"{name} was not graded by the daemon"
        _same_grade(warm, grade_files(LAB, files, "es"))
    assert warm.score == warm.max_score
    assert len(daemon.running()) == 1


def test_a_wrong_answer_is_never_used(daemons, tmp_path):
    """Garbage, another lab's or another submission's result: the client grades itself."""
    path = daemon.socket_path(LAB)
    files = solution_files(LAB)
    honest = grade_files(LAB, stub_files(LAB))
    other = grade_files(LAB, files)
    replies = [b"not json", b"[]", struct.pack(">QI", 6, 2) + b"[]",  # framed, not an object
               protocol.pack({"error": "boom"}, []),
               protocol.pack({"result": {**honest.to_dict(), "score": 99}}, []),
               protocol.pack({"result": honest.to_dict()}, []),  # not these files
               protocol.pack({"result": {**other.to_dict(), "lab": "lab01"}}, [])]
    with _FakeDaemon(path, replies) as fake:
        for _ in replies:
            assert daemon.grade(LAB, files, "en") is None
    assert fake.served == len(replies)
    genuine = protocol.pack({"result": other.to_dict()}, [])
    with _FakeDaemon(path, [genuine]):
        assert daemon.grade(LAB, files, "en").to_dict() == other.to_dict()


class _FakeDaemon:
    """A socket at `path` that answers each connection with the next canned reply."""

    def __init__(self, path: Path, replies: list[bytes]) -> None:
        self.path, self.replies = path, list(replies)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.served = 0

    def __enter__(self) -> _FakeDaemon:
        self.listener.bind(str(self.path))
        self.listener.listen()
        self.thread.start()
        return self

    def _serve(self) -> None:
        for reply in self.replies:
            conn, _ = self.listener.accept()
            with conn:
                channel.receive(conn, daemon.MAX_REQUEST, time.monotonic() + 30)
                conn.sendall(reply)
            self.served += 1

    def __exit__(self, *_: object) -> None:
        self.thread.join(timeout=10)
        self.listener.close()
        self.path.unlink()


def test_the_socket_name_follows_the_kit_the_graders_and_the_isolation(daemons, tmp_path,
                                                                       monkeypatch):
    graders = tmp_path / "grader"
    (graders / "lab02").mkdir(parents=True)
    for item in LAB.grader_dir.iterdir():
        if item.is_file():
            (graders / "lab02" / item.name).write_bytes(item.read_bytes())
    lab = dataclasses.replace(LAB, grader_dir=graders / "lab02")
    before = daemon.socket_path(lab)
    assert before == daemon.socket_path(lab)
    checks = graders / "lab02" / "checks.toml"
    os.utime(checks, ns=(0, checks.stat().st_mtime_ns + 1_000_000))
    edited = daemon.socket_path(lab)
    assert edited != before
    monkeypatch.setenv("LABKIT_ISOLATION", "process")
    assert daemon.socket_path(lab) not in (before, edited)
    assert daemon.socket_path(dataclasses.replace(lab, call_timeout=9.0)) != edited


def test_an_unsafe_runtime_folder_is_not_used(daemons, tmp_path):
    daemons.mkdir(mode=0o700)
    daemons.chmod(0o777)
    assert daemon.runtime_dir() is None and daemon.socket_path(LAB) is None
    result = policy.grade(LAB, _workspace(tmp_path, "ws", solution_files(LAB)), use_daemon=True)
    assert result.score == result.max_score
    assert list(daemons.iterdir()) == []  # no daemon started, nothing written


def test_a_daemon_that_cannot_start_costs_nothing(daemons, tmp_path, monkeypatch):
    def broken(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(daemon.platform, "start_detached", broken)
    result = policy.grade(LAB, _workspace(tmp_path, "ws", solution_files(LAB)), use_daemon=True)
    assert result.score == result.max_score and daemon.start(LAB) is False


def test_a_daemon_does_not_listen_in_a_folder_others_can_enter(daemons):
    daemons.mkdir(mode=0o700)
    path = daemon.socket_path(LAB)
    daemons.chmod(0o755)
    daemon.serve(path, LAB, idle=1.0)  # returns at once, before importing anything heavy
    assert not path.exists() and not path.with_suffix(".lock").exists()


@pytest.mark.parametrize("value", ["abc", "-5", "nan", "inf", ""])
def test_a_bad_idle_setting_falls_back_to_the_default(value, monkeypatch):
    monkeypatch.setenv("LABKIT_DAEMON_IDLE", value)
    assert daemon.idle_seconds() == daemon.IDLE_SECONDS
    monkeypatch.setenv("LABKIT_DAEMON_IDLE", "2.5")
    assert daemon.idle_seconds() == 2.5


def test_off_means_no_daemon(daemons, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_DAEMON", "0")
    policy.grade(LAB, _workspace(tmp_path, "ws", stub_files(LAB)), use_daemon=True)
    monkeypatch.delenv("LABKIT_DAEMON")
    monkeypatch.setenv("CI", "true")
    assert not daemon.enabled()
    assert not daemons.exists() or not list(daemons.glob("*.sock"))


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to become another user")
def test_other_users_cannot_reach_the_socket(daemons):
    daemon.start(LAB)
    info = _wait_ready()
    pid = os.fork()
    if pid == 0:  # the child becomes nobody and tries the socket
        code = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as other:
                other.connect(str(info.socket))
            code = 0
        except PermissionError:
            code = 3
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] >> 8 == 3


def test_one_daemon_per_socket_and_it_leaves_when_idle(daemons):
    assert daemon.start(LAB, idle=3.0) and daemon.start(LAB, idle=3.0)
    info = _wait_ready()
    deadline = time.monotonic() + 60
    while len(daemon_pids(info.socket)) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemon_pids(info.socket) == {info.pid}  # the second one saw the lock and left
    assert _wait_gone(info.pid, timeout=60)  # idle for 3 s: it went away by itself
    assert not info.socket.exists() and daemon.running() == []


def test_cli_status_and_stop(daemons):
    cli = CliRunner()
    assert "no grading daemon" in cli.invoke(main, ["daemon", "status", "--lang", "en"]).output
    assert "ningún daemon" in cli.invoke(main, ["daemon", "status", "--lang", "es"]).output
    daemon.start(LAB)
    info = _wait_ready()
    status = cli.invoke(main, ["daemon", "status", "--lang", "en"])
    assert f"lab02  pid {info.pid}" in status.output
    stopped = cli.invoke(main, ["daemon", "stop", "--lang", "en"])
    assert stopped.exit_code == 0 and "stopped 1" in stopped.output
    assert _wait_gone(info.pid) and daemon.running() == []


def test_doctor_says_why_the_daemon_is_off_and_how_to_mend_it(tmp_path, monkeypatch):
    """Issue 30: a runtime folder that others may enter (mode 755), or whose path is too
    long for a socket, turned the daemon off without a word."""
    from labkit.cli.doctor import _daemon_line

    monkeypatch.setenv("LABKIT_DAEMON", "1")
    monkeypatch.delenv("LABKIT_DAEMON_CHANNEL", raising=False)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(shared))
    assert daemon.why_off() == ("daemon_off_not_private", {"where": str(shared)})
    assert f"chmod 700 {shared}" in _daemon_line("en")
    assert f"chmod 700 {shared}" in _daemon_line("es")
    deep = tmp_path / ("d" * 100)
    deep.mkdir(mode=0o700)
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(deep))
    assert daemon.why_off()[0] == "daemon_off_path_too_long"
    assert "too long" in _daemon_line("en")
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(shared / "file"))
    (shared / "file").write_text("")
    assert daemon.why_off()[0] == "daemon_off_no_folder"
    monkeypatch.setenv("LABKIT_DAEMON", "0")
    assert daemon.why_off() == ("daemon_off", {})
