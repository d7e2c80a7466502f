"""Processes inside the sandbox (issue 17, lab05): multiprocessing works in both
isolation modes, its `/dev/shm` is private (bwrap) or swept (process) with the rest of a
submission's state, and a fork bomb stops at the sandbox's pids cgroup.

Each claim is checked from inside a worker, through a probe, as in tests/test_sandbox.py.
"""

from __future__ import annotations

import os
import secrets
import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from labkit.cli import doctor
from labkit.sandbox import codec
from labkit.sandbox.backend import SandboxConfig
from labkit.sandbox.facade import Sandbox
from labkit.sandbox.linux import pids
from labkit.sandbox.linux.procfs import marked_processes
from labkit.sandbox.linux.zygote import Zygote

NEEDS_BWRAP = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
MODES = [pytest.param("bwrap", marks=NEEDS_BWRAP), "process"]
NEEDS_PIDS = pytest.mark.skipif(not pids.available(), reason="no writable pids cgroup here")

PROBES = textwrap.dedent('''
    import multiprocessing
    import os
    import time


    def pool_map(module, items):
        with multiprocessing.get_context("fork").Pool(2) as pool:
            return pool.map(abs, items)


    def leave_in_shm(module, name):
        """A file in /dev/shm (what a POSIX semaphore or shared memory leaves) and what
        /dev/shm holds now."""
        with open(f"/dev/shm/{name}", "wb") as handle:
            handle.write(b"x" * 4096)
        return sorted(os.listdir("/dev/shm"))


    def shm_listing(module):
        return sorted(os.listdir("/dev/shm"))


    def fork_bomb(module, seconds):
        """Start sleeping processes through multiprocessing until the kernel refuses;
        how many were started."""
        started, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                multiprocessing.get_context("fork").Process(target=time.sleep,
                                                            args=(60,)).start()
                started += 1
            except OSError:
                return started
        return -started
''')


@pytest.fixture
def job(tmp_path):
    (tmp_path / "probes.py").write_text(PROBES)
    return SandboxConfig(files={"m.py": b"VALUE = 1\n"}, modules=("m",),
                         probes=tmp_path / "probes.py")


def call(worker, name, *args):
    blobs: list[bytes] = []
    header = {"op": "probe", "module": "m", "name": name,
              "args": codec.encode_value(list(args), blobs)}
    reply, reply_blobs = worker.request(header, blobs, 30.0)
    assert "ok" in reply, reply
    return codec.decode_value(reply["ok"], reply_blobs)


@pytest.mark.parametrize("mode", MODES)
def test_multiprocessing_works_and_dev_shm_is_emptied_between_submissions(job, mode):
    name = f"labkit-test-{secrets.token_hex(6)}"
    zygote = Zygote(mode)
    zygote.start()
    try:
        with Sandbox(job, zygote) as sandbox:
            worker = sandbox.spawn()
            assert call(worker, "pool_map", [-1, 2, -3]) == [1, 2, 3]
            assert name in call(worker, "leave_in_shm", name)
            worker.stop()
        if mode == "bwrap":  # the sandbox's own /dev/shm: the host's never saw it
            assert name not in os.listdir("/dev/shm")
        assert zygote.ask({"op": "reset"})["clean"] is True
        with Sandbox(job, zygote) as sandbox:
            worker = sandbox.spawn()
            assert name not in call(worker, "shm_listing")
            worker.stop()
    finally:
        zygote.close()
    assert name not in os.listdir("/dev/shm")  # process mode: swept from the host's


@NEEDS_PIDS
@pytest.mark.parametrize("mode", MODES)
def test_a_fork_bomb_through_multiprocessing_stops_at_the_pids_limit(job, mode):
    with Sandbox(SandboxConfig(**{**job.__dict__, "isolation": mode})) as sandbox:
        marker = sandbox.backend.marker
        worker = sandbox.spawn()
        started = call(worker, "fork_bomb", 20.0)
        assert 0 < started < pids.LIMIT  # refused by the kernel, not cut by the deadline
        worker.stop()
        group = sandbox.backend._group
        assert group is not None
        # what is left in the group: the zygote (and bwrap's two), not the bomb
        assert int((group.path / "pids.current").read_text()) <= 5
    assert marked_processes(marker) == []
    assert not group.path.exists()


def test_doctor_says_whether_process_mode_can_bound_a_fork_bomb(monkeypatch):
    monkeypatch.setattr(pids, "parent", lambda: None)
    result = CliRunner().invoke(doctor.doctor, ["--isolation", "process"])
    assert result.exit_code == 0, result.output
    assert "process mode CANNOT bound a fork bomb" in result.output
    monkeypatch.setattr(pids, "parent", lambda: Path("/sys/fs/cgroup/pids"))
    described = {label: key for label, key, _ in Zygote("process").describe().lines}
    assert described["processes"] == "doctor_pids_cgroup"


def test_a_pids_group_wraps_a_command_in_a_shell_that_joins_it(tmp_path):
    group = pids.PidsGroup(tmp_path / "g")
    argv = group.wrap(["python", "-c", "pass"])
    assert argv[:2] == ["/bin/sh", "-c"] and argv[-3:] == ["python", "-c", "pass"]
    assert str(tmp_path / "g") in argv


def test_process_mode_sweeps_only_what_no_living_process_holds_in_dev_shm():
    from labkit.sandbox.linux import cleanup, procfs

    before = set(procfs.dev_shm())
    held, left = (os.path.join(procfs.DEV_SHM, f"labkit-test-{secrets.token_hex(6)}")
                  for _ in range(2))
    with open(held, "wb") as handle, open(left, "wb"):
        pass
    if os.geteuid() == 0:  # as the workers made them: 65534 when root grades
        for path in (held, left):
            os.chown(path, 65534, 65534)
    with open(held, "rb") as handle:  # a neighbour's entry in use stays
        cleanup.clear_dev_shm(before)
        assert os.path.exists(held) and not os.path.exists(left)
        assert handle.read() == b""
    cleanup.clear_dev_shm(before)
    assert not os.path.exists(held)
