"""`labkit batch --scheduler`: the batch's gradings on a Dask distributed cluster.

The batch process stays where it is and does what it always does (reads the
submissions, skips what the gradebook holds, records each result in its own
transaction); `on_cluster(address)` only changes where the gradings run. Each
submission's files travel to the cluster as bytes; each Dask worker grades with warm
grading processes of its own, in its own bubblewrap sandbox
(`labkit.classroom.clusterworker`); what comes back is the JSON text of a result
document. A worker that dies mid-grading has its submissions graded again elsewhere by
the scheduler; one that stops every worker it lands on (more than the scheduler's
`distributed.scheduler.allowed-failures` times) is recorded as its own `error`.

Student code must never reach the cluster (a scheduler runs whatever it is sent): the
sandbox has no network, and the batch talks to a scheduler beyond this machine only
over TLS with certificates (Dask's `distributed.comm.tls.*` configuration).

Dask is the optional extra `labkit[dask]`, imported only once a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from labkit import i18n
from labkit.classroom import batch
from labkit.course.catalogue import LabSpec, lab_checks

if TYPE_CHECKING:
    from distributed import Future
    from distributed.security import Security

INSTALL = "labkit batch --scheduler needs Dask: pip install 'labkit[dask]'"
CONNECT_TIMEOUT = 30.0  # s to reach the scheduler, and for it to have a worker
POLL = 5.0  # s between checks that the scheduler is still there while gradings run
PLUGIN = "labkit-grading-{lab}"  # one per lab: a new batch's replaces the last one's


def on_cluster(address: str, security: Security | None = None) -> batch.PoolFactory:
    """The pool for `batch.grade_many(pool=...)` that grades on the scheduler at
    `address` (`tls://HOST:PORT`, or `tcp://` on this machine's loopback only).
    `security` defaults to Dask's configured certificates (required for `tls://`)."""
    address = checked_address(address)
    try:
        import distributed  # noqa: F401 - only to know it is there
    except ImportError:
        raise batch.BatchError(INSTALL) from None
    if security is None and address.startswith("tls://"):
        security = configured_security()

    def make(lab: LabSpec, jobs: int | None, _scratch: Path, _logs: Path) -> DaskPool:
        return DaskPool(address, lab, jobs, security)

    return make


def checked_address(address: str) -> str:
    """`address` as Dask takes it, refused unless it is TLS or this machine's loopback."""
    address = address.strip()
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("tcp", "tls") or not parts.hostname or port is None:
        raise batch.BatchError(f"{address!r} is not a Dask scheduler address (tls://HOST:PORT, "
                               "or tcp://127.0.0.1:PORT for a cluster on this machine)")
    if parts.scheme == "tcp" and not _loopback(parts.hostname):
        raise batch.BatchError(
            f"the scheduler {parts.hostname} is not this machine: a cluster beyond it is "
            f"reached over TLS (tls://{parts.netloc}, see the README), never plain tcp://")
    return f"{parts.scheme}://{parts.netloc}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def configured_security() -> Security:
    """Dask's configured TLS certificates, which `tls://` cannot do without."""
    import dask.config
    from distributed.security import Security

    tls = dask.config.get("distributed.comm.tls", default={}) or {}
    if not (tls.get("ca-file") and (tls.get("client") or {}).get("cert")):
        raise batch.BatchError(
            "tls:// needs the cluster's CA and a client certificate in Dask's configuration: "
            "distributed.comm.tls.ca-file, .client.cert and .client.key (e.g. the variables "
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT, ..._CLIENT__KEY)")
    return Security(require_encryption=True)  # reads the same configuration


class DaskPool:
    """The batch's pool on a Dask cluster: `jobs` gradings in flight (default: the
    cluster's threads), the rest queued here, so submissions are read only as needed."""

    def __init__(self, address: str, lab: LabSpec, jobs: int | None,
                 security: Security | None) -> None:
        from distributed import Client

        from labkit.classroom import clusterworker

        self.address, self.lab = address, lab
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT, security=security,
                                 set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise batch.BatchError(f"cannot reach the Dask scheduler at {address}: "
                                   f"{_line(exc)}") from None
        try:
            self.client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
            self.jobs = jobs or sum(self.client.nthreads().values())
            self.plugin = PLUGIN.format(lab=lab.id)
            self.client.register_plugin(
                clusterworker.GradingPlugin(lab.id, lab.call_timeout), name=self.plugin)
        except TimeoutError:
            self.client.close()
            raise batch.BatchError(f"the Dask scheduler at {address} has no worker") from None
        except Exception as exc:  # noqa: BLE001 - a worker refused; it says why
            self.client.close()
            raise batch.BatchError(f"a Dask worker cannot grade: {_line(exc)}") from None
        self.grade = clusterworker.grade
        self.max_score = lab_checks(lab).max_score
        self.keys: dict[str, str] = {}
        self.queue: deque[batch._Task] = deque()
        self.running: dict[Future, batch._Task] = {}

    @property
    def load(self) -> int:
        return len(self.queue) + len(self.running)

    def submit(self, task: batch._Task) -> None:
        self.queue.append(task)
        self._dispatch()

    def _dispatch(self) -> None:
        while self.queue and len(self.running) < self.jobs:
            task = self.queue.popleft()
            if task.lang not in self.keys:
                self.keys[task.lang] = batch.grader_key(self.lab, task.lang)
            future = self.client.submit(self.grade, self.plugin, task.serial, task.lang,
                                        self.keys[task.lang], task.files, pure=False)
            self.running[future] = task

    def wait(self) -> list[batch.Finished]:
        from distributed import wait

        finished: list[batch.Finished] = []
        while not finished and self.running:
            try:
                with self.client.as_current():  # `wait` asks for the current client
                    done, _ = wait(list(self.running), timeout=POLL,
                                   return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            if not done and self.client.status != "running":
                raise batch.BatchError(f"lost the Dask scheduler at {self.address}")
            tasks = [(self.running.pop(future), future) for future in done]
            # a result held by a worker that died before it was fetched: the grading went
            # well, so it is simply made again
            lost = [(task, future) for task, future in tasks
                    if future.status == "lost" and self.client.status == "running"]
            for task, future in lost:
                future.release()
                self.queue.appendleft(task)
            again = {id(future) for _, future in lost}
            self._dispatch()  # the next gradings start before these results are fetched
            for task, future in tasks:
                if id(future) not in again:
                    finished.append(self._outcome(task, future))
                    future.release()
        return finished

    def _outcome(self, task: batch._Task, future: Future) -> batch.Finished:
        from distributed import KilledWorker

        if future.status == "finished":
            outcome: dict[str, Any] = json.loads(future.result())
            if "fatal" in outcome:
                raise batch.BatchError(str(outcome["fatal"]))
            task.kit_fault = outcome.get("kit") is True
            return task, outcome.get("result"), str(outcome.get("failure", ""))
        if future.status != "error":  # cancelled or lost: the scheduler went away
            raise batch.BatchError(f"lost the Dask scheduler at {self.address}")
        error = future.exception()
        if isinstance(error, KilledWorker):  # the scheduler's bound of tries: it is the submission
            text = i18n.t("cluster_killed_workers", task.lang, detail=type(error).__name__)
            result = batch.error_result(self.lab, text, task.lang, task.files_digest,
                                        self.max_score)
            return task, result.to_dict(), ""
        detail = f"{type(error).__name__}: {_line(error)}"[:200]
        return task, None, i18n.t("kit_failed", task.lang, detail=detail)

    def close(self) -> None:
        for future in self.running:
            future.cancel()
        self.running.clear()
        with contextlib.suppress(Exception):  # the workers stop their grading processes
            self.client.unregister_worker_plugin(self.plugin)
        self.client.close()


def _line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__
