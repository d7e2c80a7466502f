import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

# `labkit grade` would leave warm grading daemons behind; tests that want one say so
# (tests/test_daemon.py), in a runtime folder of their own.
os.environ["LABKIT_DAEMON"] = "0"


@pytest.fixture()
def daemons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Daemons on, in a private runtime folder of this test; all stopped afterwards."""
    from kit import wait_gone

    from labkit.student import daemon

    run = tmp_path / "run"
    monkeypatch.setenv("LABKIT_DAEMON", "1")
    monkeypatch.setenv("LABKIT_RUNTIME_DIR", str(run))
    yield run
    for info in daemon.stop_all():
        wait_gone(info.pid)


@pytest.fixture
def token() -> Iterator[str]:
    """A number no other process's command line holds: the `sleep` an attack leaves."""
    value = str(10**6 + os.getpid() % 10**5 + int(time.time()) % 1000)
    yield value
    subprocess.run(["pkill", "-KILL", "-f", f"sleep {value}"], check=False)
