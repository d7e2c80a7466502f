"""The student loop's own calls to the system, as they run where Linux's are missing:
the daemon's loopback TCP channel (Windows'), the lock files, the cancellation of a warm
grading without a signal, and `labkit watch`'s keys."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import socket
import stat
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from kit import solution_files, stub_files, wait_gone, wait_ready, write_files

from labkit import platform
from labkit.course.catalogue import get_lab
from labkit.engine import warm
from labkit.engine.cold import grade_files
from labkit.sandbox import protocol
from labkit.student import channel, daemon, policy

LAB = get_lab("lab02")


@pytest.fixture()
def tcp(daemons: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Daemons on Windows' channel: loopback TCP and a token, here on Linux."""
    monkeypatch.setenv("LABKIT_DAEMON_CHANNEL", "tcp")
    return daemons


# --- the TCP channel ----------------------------------------------------------------------


def test_a_daemon_over_tcp_grades_and_admits_only_who_shows_its_token(tcp, tmp_path):
    files = solution_files(LAB)
    first = policy.grade(LAB, write_files(files, tmp_path / "ws"), use_daemon=True)
    assert first.score == first.max_score  # graded in-process, and a daemon started
    info = wait_ready()
    assert info.socket == daemon.socket_path(LAB) and info.socket.suffix == ".port"
    assert not list(tcp.glob("*.sock"))
    entry = json.loads(info.socket.read_text())
    assert stat.S_IMODE(info.socket.stat().st_mode) == 0o600  # the tokens are this user's
    assert entry["pid"] == info.pid and len(entry["secret"]) == 64

    for wrong in (b"0" * 64, entry["proof"].encode(), b"{}"):
        with socket.create_connection(("127.0.0.1", entry["port"]), timeout=30) as sock:
            with contextlib.suppress(OSError):  # the daemon may have dropped it already
                sock.sendall(wrong + protocol.pack({"op": "ping"}, []))
                sock.shutdown(socket.SHUT_WR)
            assert _all_of(sock) == b""  # dropped unheard: not even the daemon's token
    stubs = stub_files(LAB)
    warm_grade = daemon.grade(LAB, stubs, "es")
    assert warm_grade is not None and wait_ready().graded == 1
    cold = grade_files(LAB, stubs, "es")
    assert [(c.id, c.status, c.points) for c in warm_grade.checks] == \
        [(c.id, c.status, c.points) for c in cold.checks]

    assert [i.pid for i in daemon.stop_all()] == [info.pid]
    assert wait_gone(info.pid) and not info.socket.exists()


def _all_of(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(1 << 16):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_a_client_tells_nothing_to_a_port_that_does_not_know_the_daemons_token(tcp):
    """A dead daemon's port, taken by another process: it hears the first token (which
    opens nothing now), and gets neither the request nor the files."""
    tcp.mkdir(mode=0o700)
    heard: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as impostor:
        path = daemon.socket_path(LAB)
        path.write_text(json.dumps({"port": impostor.getsockname()[1], "secret": "a" * 64,
                                    "proof": "b" * 64, "pid": os.getpid()}))

        def serve() -> None:
            conn, _ = impostor.accept()
            with conn:
                conn.sendall(b"c" * 64)
                heard.append(_all_of(conn))

        thread = threading.Thread(target=serve)
        thread.start()
        assert daemon.grade(LAB, solution_files(LAB), "en") is None
        thread.join(timeout=30)
        assert heard == [b"a" * 64]
        # nor is it listed as a busy daemon to be killed: the pid it names is no daemon
        assert daemon.running() == []


@pytest.mark.parametrize("text", ["", "not json", "[]", "{}", '{"port": "x", "secret": 1}'])
def test_a_broken_endpoint_file_is_no_daemon(tcp, text):
    tcp.mkdir(mode=0o700)
    daemon.socket_path(LAB).write_text(text)
    assert daemon.grade(LAB, stub_files(LAB), "en") is None and daemon.running() == []


def test_the_channel_is_chosen_by_what_the_system_has(monkeypatch, tmp_path):
    monkeypatch.delenv("LABKIT_DAEMON_CHANNEL", raising=False)
    assert channel.kind() == channel.UNIX
    assert channel.endpoint(tmp_path, "lab02-x") == tmp_path / "lab02-x.sock"
    assert channel.endpoint(tmp_path / ("d" * 120), "lab02-x") is None  # too long for Unix
    monkeypatch.setattr(platform, "has_unix_sockets", lambda: False)  # Windows
    assert channel.kind() == channel.TCP
    assert channel.endpoint(tmp_path / ("d" * 120), "lab02-x").suffix == ".port"


def test_without_a_channel_grading_is_in_process_and_quiet(daemons, tmp_path, monkeypatch,
                                                           capfd):
    daemons.mkdir(mode=0o700)
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(daemons / ("d" * 120)))  # private, too long
    assert daemon.socket_path(LAB) is None
    result = policy.grade(LAB, write_files(stub_files(LAB), tmp_path / "ws"), use_daemon=True)
    assert result.lab == "lab02" and daemon.running() == []
    assert capfd.readouterr() == ("", "")


# --- the private folder ---------------------------------------------------------------------


def test_a_private_folder_is_a_real_folder_of_this_user_closed_to_others(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert platform.private_folder(mine)
    (tmp_path / "link").symlink_to(mine)
    assert not platform.private_folder(tmp_path / "link")
    (tmp_path / "file").write_text("")
    (tmp_path / "file").chmod(0o600)
    assert not platform.private_folder(tmp_path / "file")
    mine.chmod(0o750)
    assert not platform.private_folder(mine)
    assert not platform.private_folder(tmp_path / "missing")


# --- lock files -----------------------------------------------------------------------------


_HOLD = """
import sys, time
from pathlib import Path
from labkit import platform
with platform.exclusive_lock(Path(sys.argv[1])) as mine:
    print(mine, flush=True)
    sys.stdin.read()
"""


def _holder(lock: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock)], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == "True\n"
    return holder


def test_a_lock_has_one_holder_and_is_free_once_closed(tmp_path):
    lock = tmp_path / "a.lock"
    with platform.exclusive_lock(lock) as mine:
        assert mine
        with platform.exclusive_lock(lock) as second:
            assert not second  # not even this process again
    with platform.exclusive_lock(lock) as again:
        assert again
    holder = _holder(lock)
    try:
        with platform.exclusive_lock(lock) as other:
            assert not other
    finally:
        holder.communicate("")
    with platform.exclusive_lock(lock) as after:
        assert after  # the holder is gone: so is its lock


def test_prune_removes_only_the_files_of_daemons_that_are_gone(tmp_path):
    names = ("live", "gone", "mine")
    for name in names:
        for suffix in (".lock", ".log", ".port", ".sock"):
            (tmp_path / f"{name}{suffix}").write_text("")
    holder = _holder(tmp_path / "live.lock")
    try:
        daemon._prune(tmp_path, keep=tmp_path / "mine.lock")
    finally:
        holder.communicate("")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(f"{n}{s}" for n in ("live", "mine")
                          for s in (".lock", ".log", ".port", ".sock"))


def test_a_batch_refuses_a_gradebook_another_batch_holds(tmp_path):
    from labkit.classroom import batch

    holder = _holder(tmp_path / ".lock")
    try:
        with pytest.raises(batch.BatchError, match="another labkit batch"):
            with batch._exclusive(tmp_path):
                pass
    finally:
        holder.communicate("")
    with batch._exclusive(tmp_path):
        pass


# --- cancelling a warm grading without a signal -------------------------------------------


def test_where_no_signal_reaches_the_main_thread_a_cancel_moves_the_deadline(monkeypatch):
    monkeypatch.setattr(platform, "_WAKE_SIGNAL", None)  # Windows
    before = signal.getsignal(signal.SIGUSR1)
    far = time.monotonic() + 3600
    grading = SimpleNamespace(deadline=far, sandbox=SimpleNamespace(deadline=far))
    plugin = SimpleNamespace(_grading=grading)
    cancel = warm.Cancel()
    with cancel.guarding(plugin):
        assert signal.getsignal(signal.SIGUSR1) is before  # nothing installed
        setter = threading.Thread(target=cancel.set)
        setter.start()
        deadline = time.monotonic() + 10
        while grading.sandbox.deadline == far and time.monotonic() < deadline:
            time.sleep(0.01)
        assert grading.deadline < far and grading.sandbox.deadline < far
        assert setter.is_alive()  # `set` returns once the grading is over
        cancel.finish()
    setter.join(timeout=10)
    assert not setter.is_alive() and cancel.is_set()


# --- the keys of `labkit watch` -----------------------------------------------------------


def test_keys_come_one_at_a_time_from_a_terminal_and_it_is_restored(tmp_path):
    master, slave = pty.openpty()
    saved = termios.tcgetattr(slave)
    try:
        with open(slave, encoding="utf-8", closefd=False) as stdin:
            with platform.keys(stdin) as key:
                assert not termios.tcgetattr(slave)[3] & termios.ICANON  # cbreak
                started = time.monotonic()
                assert key(0.2) == ""
                assert time.monotonic() - started >= 0.19
                os.write(master, b"qx")  # no Enter: keys count as they are pressed
                assert key(5) == "q" and key(5) == "x"
            assert termios.tcgetattr(slave) == saved
    finally:
        os.close(master)
        os.close(slave)


def test_without_a_terminal_there_are_no_keys_only_waits(tmp_path):
    with open(tmp_path / "input", "w+", encoding="utf-8") as stdin:
        stdin.write("q")
        stdin.seek(0)
        with platform.keys(stdin) as key:
            started = time.monotonic()
            assert key(0.2) == ""
            assert time.monotonic() - started >= 0.19
