import contextlib
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

# `labkit grade` would leave warm grading daemons behind; tests that want one say so
# (tests/test_daemon.py), in a runtime folder of their own.
os.environ["LABKIT_DAEMON"] = "0"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that grade a lab whose checks time calls (`timed` in the catalogue) are
    dealt round-robin into one xdist group per core (`--dist loadgroup` runs a group's
    tests one after another on one worker), so that at most one timed grading runs per
    core, as `labkit batch` grades such a lab; the rest spread over every worker. The
    deal depends only on the collection order, the same on every worker."""
    from labkit.course.catalogue import catalogue

    timed = [lab.id for lab in catalogue() if lab.timed]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    dealt = 0
    for item in items:
        if any(lab_id in item.nodeid for lab_id in timed):
            item.add_marker(pytest.mark.xdist_group(f"timed-{dealt % (cores or 1)}"))
            dealt += 1


@pytest.fixture(autouse=True)
def remembered_workspaces(tmp_path_factory: pytest.TempPathFactory,
                          monkeypatch: pytest.MonkeyPatch) -> Path:
    """What the kit remembers of a user's workspaces (`labkit list` from anywhere): each
    test's own, never the tester's nor another test's."""
    folder = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("LABKIT_STATE_DIR", str(folder))
    return folder


@pytest.fixture()
def short_dir() -> Iterator[Path]:
    """A fresh folder with a short path: a daemon's socket path must fit in 108 bytes,
    and an xdist worker's `tmp_path` (…/popen-gwN/test_name0/) can be longer."""
    path = Path(tempfile.mkdtemp(prefix="lk-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture()
def daemons(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Daemons on, in a private runtime folder of this test; all stopped afterwards."""
    from kit import wait_gone

    from labkit.student import daemon

    run = short_dir / "run"
    monkeypatch.setenv("LABKIT_DAEMON", "1")
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(run))
    yield run
    for info in daemon.stop_all():
        wait_gone(info.pid)


@pytest.fixture
def token() -> Iterator[str]:
    """A number no other process's command line holds: the `sleep` an attack leaves."""
    value = str(10**8 + secrets.randbelow(9 * 10**8))  # tests run side by side: random
    yield value
    for pid in _processes_holding(["sleep", value]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _processes_holding(argv: list[str]) -> list[int]:
    """Processes whose command line is exactly `argv` (with a number no other holds)."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == wanted:
                found.append(int(entry.name))
    return found
