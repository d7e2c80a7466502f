"""`labkit batch --scheduler` on a real Dask cluster on loopback (`dask scheduler` and two
single-thread `dask worker` processes, started here): the same class grades to the same
result documents as the local batch; a worker SIGKILLed half-way loses nothing and
records nobody twice; a submission that takes down every worker it lands on is its own
`error` after the scheduler's bound of tries; a killed batch resumes; student code
cannot reach the scheduler; an unreachable scheduler, a plain-tcp address beyond this
machine and a missing Dask are each one line and exit 2."""

from __future__ import annotations

import collections
import contextlib
import json
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from batchkit import LAB02, SOLUTION, folder
from batchkit import LAB02_FULL as FULL
from click.testing import CliRunner
from clusterkit import LoopbackCluster, certificates, mixed_class, network_probe
from workerfault import MARK

from labkit import i18n
from labkit.classroom import batch, cluster
from labkit.cli import main
from labkit.results import SCHEMA_FILE, LabResult, Status

VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
TIMEOUT = 0.5  # s per call: the looping submission costs little


def rows(db: Path, sql: str) -> list[tuple]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def current(db: Path) -> dict[str, dict]:
    return {student: json.loads(doc) for student, doc in
            rows(db, "SELECT student_id, document FROM latest_submissions")}


def where_free(document: dict) -> dict:
    """A result document without what says when and where it was graded."""
    return {k: v for k, v in document.items() if k not in ("duration_s", "host")}


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    pytest.importorskip("distributed")
    root = tmp_path_factory.mktemp("cluster")
    running = LoopbackCluster(root)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def mixed(loopback, tmp_path_factory):
    """The mixed class and its local batch's gradebook (the reference)."""
    root = tmp_path_factory.mktemp("mixed")
    ports = [loopback.port, *(int(a.rsplit(":", 1)[1]) for a in loopback.worker_addresses())]
    kinds = mixed_class(root / "class", network_probe(ports))
    local = batch.grade_many(LAB02, root / "class", root / "local", jobs=2, timeout=TIMEOUT)
    return root, kinds, current(local.gradebook)


# --- no cluster needed ----------------------------------------------------------------------


def test_without_dask_the_scheduler_option_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    folder(tmp_path / "class", "alice", SOLUTION)
    result = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "class"), "--out",
                                       str(tmp_path / "out"), "--scheduler", "tcp://127.0.0.1:1"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"labkit: {cluster.INSTALL}"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("address, words", [
    ("tcp://10.1.2.3:8786", "reached over TLS"),
    ("192.168.0.7:8786", "reached over TLS"),
    ("inproc://x", "not a Dask scheduler address"),
    ("tcp://127.0.0.1", "not a Dask scheduler address"),
    ("tls://cluster.example:8786", "needs the cluster's CA"),
])
def test_plain_tcp_beyond_loopback_and_tls_without_certificates_are_refused(address, words):
    pytest.importorskip("distributed")
    with pytest.raises(batch.BatchError, match=words):
        cluster.on_cluster(address)


def test_loopback_addresses_are_taken_as_dask_spells_them():
    assert cluster.checked_address("127.0.0.1:8786") == "tcp://127.0.0.1:8786"
    assert cluster.checked_address(" tcp://localhost:1 ") == "tcp://localhost:1"
    assert cluster.checked_address("tcp://[::1]:8786") == "tcp://[::1]:8786"


def test_a_worker_without_bubblewrap_refuses_to_grade(monkeypatch):
    pytest.importorskip("distributed")
    from labkit.classroom import clusterworker
    from labkit.sandbox.errors import IsolationError
    from labkit.sandbox.linux import isolation

    def no_bwrap(mode: str | None = None) -> isolation.Isolation:
        raise IsolationError("bwrap not found on PATH")

    monkeypatch.setattr(isolation, "choose", no_bwrap)
    plugin = clusterworker.GradingPlugin("lab02", TIMEOUT)
    worker = SimpleNamespace(address="tcp://127.0.0.1:1234", state=SimpleNamespace(nthreads=1))
    with pytest.raises(RuntimeError, match="grades only in bubblewrap, and here bwrap not found"):
        plugin.setup(worker)


class _Future:
    """A Dask future as the pool sees it: its status, and the result it holds."""

    def __init__(self, status: str, result: str = "") -> None:
        self.status, self._result, self.released = status, result, False

    def result(self) -> str:
        return self._result

    def release(self) -> None:
        self.released = True


def test_a_result_lost_with_its_worker_is_graded_again_not_the_end_of_the_batch(monkeypatch):
    """Issue 27: a worker that dies after grading but before its result is fetched leaves
    the future `lost`; the batch used to stop with "lost the Dask scheduler". The grading
    is submitted again, and its second result is the one recorded."""
    distributed = pytest.importorskip("distributed")
    document = json.dumps({"result": {"score": 1}})
    submitted: list[str] = []
    outcomes = iter([_Future("lost"), _Future("finished", document)])

    def submit(*_args, **_kwargs):
        future = next(outcomes)
        submitted.append(future.status)
        return future

    pool = object.__new__(cluster.DaskPool)
    pool.address, pool.lab, pool.jobs, pool.plugin, pool.grade = "tcp://x", LAB02, 1, "p", None
    pool.keys, pool.queue, pool.running = {"en": "k"}, collections.deque(), {}
    pool.client = SimpleNamespace(status="running", submit=submit,
                                  as_current=contextlib.nullcontext)
    monkeypatch.setattr(distributed, "wait", lambda futures, **_: (set(futures), set()))
    task = SimpleNamespace(serial=1, lang="en", files={}, kit_fault=False)
    pool.submit(task)
    first = next(iter(pool.running))
    assert pool.wait() == [(task, {"score": 1}, "")]
    assert submitted == ["lost", "finished"] and first.released and not pool.running


def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 2.0)
    monkeypatch.setenv("LABKIT_SCHEDULER", "tcp://127.0.0.1:9")  # discard: nobody listens
    folder(tmp_path / "class", "alice", SOLUTION)
    started = time.monotonic()
    result = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "class"), "--out",
                                       str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("labkit: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert time.monotonic() - started < 30
    assert rows(tmp_path / "out" / "gradebook.sqlite", "SELECT count(*) FROM runs") == [(0,)]


# --- on the loopback cluster ----------------------------------------------------------------


@pytest.mark.slow
def test_the_cluster_grades_a_mixed_class_exactly_like_the_local_batch(loopback, mixed):
    root, kinds, local = mixed
    assert len(kinds) >= 60 and set(local) == set(kinds)
    events: list[batch.BatchEvent] = []
    summary = batch.grade_many(LAB02, root / "class", root / "cluster", timeout=TIMEOUT,
                               pool=cluster.on_cluster(loopback.address), on_event=events.append)
    assert rows(summary.gradebook, "SELECT jobs FROM runs") == [(2,)]  # the cluster's threads
    graded = current(summary.gradebook)
    assert set(graded) == set(kinds)
    workers = set(loopback.worker_addresses())
    hosts = set()
    for student, document in graded.items():
        VALIDATOR.validate(document)
        assert where_free(document) == where_free(local[student]), student
        if kinds[student] != "corrupt":
            assert document["isolation"] == "bwrap"
            assert local[student]["host"] == socket.gethostname()
            hosts.add(document["host"].rsplit(" ", 1)[1])
        else:  # nothing was graded: no host
            assert "host" not in document and "host" not in local[student]
    assert hosts == workers  # both workers graded
    assert graded["correct00"]["score"] == FULL and graded["stub00"]["score"] == 0
    assert {c["status"] for c in graded["loops"]["checks"]} == {"timeout"}
    assert all(c["points"] == c["max_points"] for c in graded["probe"]["checks"])


@pytest.mark.slow
def test_student_code_cannot_reach_the_scheduler(loopback, mixed, tmp_path, monkeypatch):
    """The probe earned full marks above: each connection failed. Without the sandbox's
    network namespace (process isolation, never used on a cluster) the same probe reaches
    the scheduler and loses buggy_mse: the probe can tell."""
    root, kinds, local = mixed
    monkeypatch.setenv("LABKIT_ISOLATION", "process")
    shutil.copytree(root / "class" / "probe", tmp_path / "class" / "probe")
    unsandboxed = batch.grade_many(LAB02, tmp_path / "class", tmp_path / "out", jobs=1,
                                   timeout=TIMEOUT)
    probe = current(unsandboxed.gradebook)["probe"]
    lost = {c["id"]: c["message"] for c in probe["checks"] if c["points"] < c["max_points"]}
    assert list(lost) == ["buggy_mse.cross_differences"]
    assert f"reached the cluster on ports [{loopback.port}" in lost["buggy_mse.cross_differences"]
    assert local["probe"]["score"] == local["probe"]["max_score"]


@pytest.mark.slow
def test_a_worker_killed_half_way_loses_nothing_and_records_nobody_twice(loopback, mixed):
    root, kinds, local = mixed
    loopback.wait_for(2)
    killed = False

    def kill_half_way(event: batch.BatchEvent) -> None:
        nonlocal killed
        if not killed and event.done >= event.total // 2:
            loopback.kill_worker("w2")
            killed = True

    summary = batch.grade_many(LAB02, root / "class", root / "killed", timeout=TIMEOUT,
                               pool=cluster.on_cluster(loopback.address), on_event=kill_half_way)
    assert killed
    db = summary.gradebook
    assert rows(db, "SELECT count(*) FROM submissions") == [(len(kinds),)]  # nobody twice
    assert rows(db, "SELECT count(*) FROM submissions WHERE retry = 1") == [(0,)]
    graded = current(db)
    assert {s: where_free(d) for s, d in graded.items()} == {
        s: where_free(d) for s, d in local.items()}
    loopback.wait_for(2)


@pytest.mark.slow
def test_a_submission_that_kills_every_worker_is_an_error_after_bounded_tries(loopback, tmp_path):
    loopback.wait_for(2)
    folder(tmp_path / "class", "alice", SOLUTION)
    folder(tmp_path / "class", "mallory", SOLUTION + "\n" + MARK.decode() + "\n")
    folder(tmp_path / "class", "zoe", SOLUTION + "\n# zoe\n")
    summary = batch.grade_many(LAB02, tmp_path / "class", tmp_path / "out", timeout=TIMEOUT,
                               pool=cluster.on_cluster(loopback.address), lang="es")
    assert (summary.graded, summary.errors) == (2, 1)
    graded = {s: LabResult.from_dict(d) for s, d in current(summary.gradebook).items()}
    assert graded["alice"].score == graded["zoe"].score == FULL
    mallory = graded["mallory"]
    assert mallory.status is Status.ERROR and mallory.checks == () and mallory.score == 0
    assert mallory.message == i18n.t("cluster_killed_workers", "es", detail="KilledWorker")
    assert rows(summary.gradebook, "SELECT retry FROM submissions WHERE student_id = 'mallory'"
                ) == [(0,)]  # not tried again by the next run: it had its tries
    loopback.wait_for(2)


@pytest.mark.slow
def test_a_batch_killed_mid_batch_resumes_on_the_cluster(loopback, tmp_path):
    loopback.wait_for(2)
    n = 8
    for i in range(n):
        folder(tmp_path / "class", f"s{i:02d}", SOLUTION + f"\n# {i}\n")
    out = tmp_path / "out"
    db = out / "gradebook.sqlite"
    command = [sys.executable, "-m", "labkit", "batch", "lab02", str(tmp_path / "class"),
               "--out", str(out), "--scheduler", loopback.address]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        recorded = 0
        while time.monotonic() < deadline and proc.poll() is None and recorded < 2:
            try:
                recorded = rows(db, "SELECT count(*) FROM submissions")[0][0]
            except sqlite3.OperationalError:  # not created yet
                pass
            time.sleep(0.05)
        assert proc.poll() is None, "the batch ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    kept = len(current(db))
    assert 2 <= kept < n
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{n - kept} graded, {kept} unchanged (skipped)" in rerun.stdout
    assert rows(db, "SELECT count(*) FROM submissions") == [(n,)]
    assert all(d["score"] == FULL for d in current(db).values())


@pytest.mark.slow
def test_a_tls_cluster_is_reached_with_the_certificates_in_dasks_configuration(tmp_path):
    pytest.importorskip("cryptography")  # Security.temporary makes the certificates
    import dask.config

    configuration = certificates(tmp_path / "certs")
    tls = LoopbackCluster(tmp_path / "tls", certs=tmp_path / "certs", workers=1)
    try:
        assert tls.address.startswith("tls://127.0.0.1:")
        folder(tmp_path / "class", "alice", SOLUTION)
        with pytest.raises(batch.BatchError, match="needs the cluster's CA"):
            cluster.on_cluster(tls.address)  # no certificates configured yet
        with dask.config.set(configuration):
            summary = batch.grade_many(LAB02, tmp_path / "class", tmp_path / "out",
                                       timeout=TIMEOUT, pool=cluster.on_cluster(tls.address))
        (alice,) = current(summary.gradebook).values()
        assert alice["score"] == FULL and alice["isolation"] == "bwrap"
        assert " tls://127.0.0.1:" in alice["host"]  # the worker's own address is TLS too
    finally:
        tls.close()
