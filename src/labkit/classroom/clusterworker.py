"""The worker side of `labkit batch --scheduler`: runs inside a Dask worker, never in the batch.

The batch (`labkit.classroom.cluster`) registers a `GradingPlugin`, which the scheduler
sets up on every worker, those that join later included. Setting up checks that this
worker can sandbox with bubblewrap (a cluster grades in no other mode: its workers hold
a connection to a scheduler that runs whatever it is sent) and starts one warm grading
process (`labkit.classroom.gradeserver`) per worker thread, with this worker's own
labkit, graders and sandbox. `grade` is the task the batch submits: it takes a free
grading process, hands it the submission's files (bytes from the batch: the worker
shares no disk with it) and returns what happened as JSON text, never an object.

Imported only where Dask is installed (the `labkit[dask]` extra).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import queue
import select
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from distributed import Worker, get_worker
from distributed.diagnostics.plugin import WorkerPlugin

from labkit import fileset, i18n, settings
from labkit.classroom import batch
from labkit.course.catalogue import get_lab
from labkit.sandbox.errors import IsolationError
from labkit.sandbox.facade import isolation_level

MODE = "bwrap"  # the only isolation a cluster grades in


class GradingPlugin(WorkerPlugin):
    """Warm grading processes of one lab on one worker (one per worker thread)."""

    def __init__(self, lab_id: str, call_timeout: float) -> None:
        self.lab_id, self.call_timeout = lab_id, call_timeout

    def setup(self, worker: Worker) -> None:
        self.host = f"{socket.gethostname()} {worker.address}"
        try:
            isolation_level(MODE)
        except IsolationError as exc:
            raise RuntimeError(f"{self.host} cannot grade: a cluster grades only in "
                               f"bubblewrap, and here {exc}") from None
        self.lab = dataclasses.replace(get_lab(self.lab_id), call_timeout=self.call_timeout)
        self.wall = self.lab.grade_timeout + self.lab.call_timeout + batch.WALL_SLACK
        self.work = Path(tempfile.mkdtemp(prefix=f"labkit-{self.lab_id}-"))
        self.keys: dict[str, str] = {}
        self.serials = itertools.count(1)
        self.lock = threading.Lock()
        self.graders: set[batch._Grader] = set()
        self.idle: queue.SimpleQueue[batch._Grader] = queue.SimpleQueue()
        for _ in range(max(1, worker.state.nthreads)):
            self.idle.put(self._start())

    def teardown(self, worker: Worker) -> None:
        with self.lock:
            graders, self.graders = self.graders, set()
        for grader in graders:
            grader.stop(kill=True)
        shutil.rmtree(self.work, ignore_errors=True)

    def _start(self) -> batch._Grader:
        grader = batch._Grader(self.lab, next(self.serials), self.work / "scratch",
                               self.work / "logs", env={settings.ISOLATION: MODE},
                               host=self.host)
        with self.lock:
            self.graders.add(grader)
        return grader

    def _replace(self, grader: batch._Grader, kill: bool) -> None:
        with self.lock:
            self.graders.discard(grader)
        grader.stop(kill=kill)
        self.idle.put(self._start())

    def grade(self, serial: int, lang: str, key: str, files: fileset.Files) -> dict[str, Any]:
        """One submission's outcome: {"result": document}, {"failure": the kit's failure,
        in `lang`} or {"fatal": why this worker cannot grade at all}."""
        if lang not in self.keys:
            self.keys[lang] = batch.grader_key(self.lab, lang)
        if key != self.keys[lang]:
            return {"fatal": f"{self.host} grades {self.lab_id} with other graders or another "
                             "labkit than the batch's: install the same labkit on every worker"}
        grader = self.idle.get()
        if not grader.ready and _reply(grader, None) != "ready":
            tail = grader.log_tail()
            self._replace(grader, kill=True)
            return {"fatal": f"a grading process for {self.lab_id} on {self.host} failed to "
                             f"start" + (f": {tail}" if tail else "")}
        grader.deadline = time.monotonic() + self.wall
        names, blobs = fileset.as_blobs(files)
        grader.send({"op": "grade", "id": serial, "lang": lang, "files": names}, blobs)
        reply = _reply(grader, serial)
        if isinstance(reply, dict) and "result" in reply:
            if reply["result"].get("isolation") != MODE:  # asked for above: cannot happen
                self._replace(grader, kill=True)
                return {"fatal": f"{self.host} graded outside bubblewrap"}
            self.idle.put(grader)
            return {"result": reply["result"]}
        if isinstance(reply, dict):  # an error reply: that process ends after it
            detail = str(reply.get("error") or "").splitlines()
            self._replace(grader, kill=False)
            return {"failure": i18n.t("kit_failed", lang, detail=detail[0][:200] if detail else ""),
                    "kit": reply.get("kit") is True}
        self._replace(grader, kill=True)
        if reply == "overran":
            return {"failure": i18n.t("batch_wall_limit", lang, seconds=f"{self.wall:g}")}
        code = grader.process.returncode
        return {"failure": i18n.t("kit_failed", lang, detail=i18n.t(
            "batch_grader_died", lang, detail=f"exit code {code}"))}


def _reply(grader: batch._Grader, serial: int | None) -> dict[str, Any] | str:
    """Wait for the reply to `serial` (None: for the process to be ready) until the
    grader's deadline: the reply, "ready", "closed" (the process died) or "overran"."""
    while True:
        left = grader.deadline - time.monotonic()
        if left <= 0:
            return "overran"
        if not select.select([grader.replies], [], [], left)[0]:
            continue
        messages, closed = grader.messages()
        for message in messages:
            if message.get("ready"):
                grader.ready = True
                if serial is None:
                    return "ready"
            elif serial is not None and message.get("id") == serial:
                return message
        if closed:
            with contextlib.suppress(Exception):
                grader.process.wait(timeout=5)
            return "closed"


def grade(plugin: str, serial: int, lang: str, key: str, files: fileset.Files) -> str:
    """The task the batch submits: a submission's outcome, as JSON text (see
    `GradingPlugin.grade`)."""
    here = get_worker()
    grading = here.plugins.get(plugin)
    if not isinstance(grading, GradingPlugin):
        return json.dumps({"fatal": f"the Dask worker {here.address} has no labkit grading "
                                    "set up (see its log)"})
    return json.dumps(grading.grade(serial, lang, key, files))
