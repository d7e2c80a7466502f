"""A real Dask cluster on loopback for the cluster tests: `dask scheduler` and two
`dask worker` processes (one thread each) on 127.0.0.1, and the mixed class they grade."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from batchkit import LOOPS, SOLUTION, STUB, folder, zipped
from kit import TESTS, variants

DASK = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
WORKER = [sys.executable, "-m", "distributed.cli.dask_worker"]
START_SECONDS = 60.0
# One grading per worker thread (no task waits on a worker behind another, so a worker's
# death makes only the grading it ran suspect), and a submission is tried on two workers
# at most: Dask's `allowed-failures` (3 by default) is the bound the batch relies on.
ENV = {"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0",
       "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1",
       # as the README recommends:
       "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
       "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
       "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s"}
# Loaded into every worker: a submission holding workerfault.MARK takes its worker down.
PRELOAD = TESTS / "workerfault.py"


def certificates(folder: Path) -> dict[str, str]:
    """A self-signed certificate and key (the CA too) for a TLS cluster on loopback, as
    files; returns Dask's client configuration for them."""
    from distributed.security import Security

    made = Security.temporary()  # PEM texts in memory
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.pem").write_text(made.tls_ca_file)
    (folder / "cert.pem").write_text(made.tls_client_cert)
    (folder / "key.pem").write_text(made.tls_client_key)
    return {"distributed.comm.tls.ca-file": str(folder / "ca.pem"),
            "distributed.comm.tls.client.cert": str(folder / "cert.pem"),
            "distributed.comm.tls.client.key": str(folder / "key.pem")}


class LoopbackCluster:
    """The scheduler and its workers, each its own process group (killed as a node dies);
    over TLS when given `certs` (the folder `certificates` wrote)."""

    def __init__(self, root: Path, certs: Path | None = None, workers: int = 2) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.file = root / "scheduler.json"
        self.file.unlink(missing_ok=True)  # a scheduler of before would be taken for this one
        self.env = {**os.environ, **ENV}
        self.env.pop("PYTEST_ADDOPTS", None)
        self.tls = [] if certs is None else [
            "--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / "cert.pem"),
            "--tls-key", str(certs / "key.pem")]
        self.security = None
        if certs is not None:
            from distributed.security import Security

            self.security = Security(
                tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "cert.pem"),
                tls_client_key=str(certs / "key.pem"), require_encryption=True)
        protocol = ["--protocol", "tls"] if certs is not None else []
        self.scheduler = self._spawn("scheduler", [*DASK, *protocol, *self.tls, "--host",
                                                   "127.0.0.1", "--port", "0",
                                                   "--no-dashboard", "--scheduler-file",
                                                   str(self.file)])
        deadline = time.monotonic() + START_SECONDS
        while not self.file.exists():
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                self.scheduler.kill()
                raise AssertionError(self.log("scheduler"))
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]
        self.port = int(self.address.rsplit(":", 1)[1])
        self.workers: dict[str, subprocess.Popen] = {}
        try:
            self.wait_for(workers)
        except BaseException:
            self.close()
            raise

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        with open(self.root / f"{name}.log", "ab") as log:
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=self.env, cwd=self.root, start_new_session=True)

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")[-3000:]

    def start_worker(self, name: str) -> None:
        self.workers[name] = self._spawn(name, [
            *WORKER, self.address, *self.tls, "--nthreads", "1", "--host", "127.0.0.1",
            "--name", name, "--no-dashboard", "--preload", str(PRELOAD), "--death-timeout", "60",
            "--local-directory", str(self.root / name)])

    def kill_worker(self, name: str) -> None:
        """SIGKILL the worker's whole process group: its nanny, itself, its graders."""
        process = self.workers.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def worker_addresses(self) -> list[str]:
        from distributed import Client

        with Client(self.address, timeout=30, security=self.security,
                    set_as_default=False) as client:
            return list(client.nthreads())

    def wait_for(self, count: int) -> None:
        """Until `count` workers are connected: those killed are started again, and so is
        one that exited on its own (a nanny can fail to start its worker on a busy machine)."""
        from distributed import Client

        deadline = time.monotonic() + START_SECONDS
        with Client(self.address, timeout=30, security=self.security,
                    set_as_default=False) as client:
            while True:
                for name in ("w1", "w2")[:count]:
                    if name not in self.workers or self.workers[name].poll() is not None:
                        self.workers.pop(name, None)
                        self.start_worker(name)
                try:
                    client.wait_for_workers(count, timeout=5)
                    return
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise

    def close(self) -> None:
        for process in [*getattr(self, "workers", {}).values(), self.scheduler]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def network_probe(ports: list[int]) -> str:
    """A correct solution that tries to connect to each of `ports` on 127.0.0.1 at import,
    and breaks buggy_mse if any connection worked: full marks prove they all failed."""
    return SOLUTION + f'''
import socket as _socket

_REACHED = []
for _port in {ports!r}:
    try:
        _socket.create_connection(("127.0.0.1", _port), timeout=0.3).close()
        _REACHED.append(_port)
    except OSError:
        pass
_buggy_mse = buggy_mse


def buggy_mse(y_true, y_pred):
    if _REACHED:
        raise RuntimeError(f"reached the cluster on ports {{_REACHED}}")
    return _buggy_mse(y_true, y_pred)
'''


EXITS_AT_IMPORT = SOLUTION + "\nimport os\nos._exit(3)\n"


def mixed_class(root: Path, probe: str) -> dict[str, str]:
    """62 lab02 submissions: correct (folders and zips), every mutant of
    tests/mutants/lab02.toml, stubs, one that loops, two hostile ones (`probe`, one that
    exits at import) and a corrupt zip; each file unique. Returns student -> kind.
    Not one that kills its zygote: which checks that costs depends on timing, on either
    back end, so two gradings of it need not agree."""
    root.mkdir(parents=True, exist_ok=True)
    kinds: dict[str, str] = {}

    def add(student: str, kind: str, source: str, as_zip: bool = False) -> None:
        source += f"\n# {student}\n"
        if as_zip:
            zipped(root, student, {f"{student}/broadcasting.py": source})
        else:
            folder(root, student, source)
        kinds[student] = kind

    for i in range(25):
        add(f"correct{i:02d}", "correct", SOLUTION, as_zip=i % 5 == 4)
    for mutant in variants("mutants"):
        if mutant.lab == "lab02":
            add(f"mutant-{mutant.name}", "mutant", mutant.files()["broadcasting.py"].decode())
    for i in range(10):
        add(f"stub{i:02d}", "stub", STUB)
    add("loops", "loops", LOOPS)
    add("probe", "hostile", probe)
    add("exits", "hostile", EXITS_AT_IMPORT)
    (root / "corrupt.zip").write_bytes(b"PK\x03\x04 not a zip")
    kinds["corrupt"] = "corrupt"
    return kinds
