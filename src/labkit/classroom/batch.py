"""Grade a whole class: `grade_many(lab, submissions_dir, out)` (the CLI's `labkit batch`).

The parent process stays small: it never imports pytest or NumPy. It walks the
submissions folder one entry at a time, reads each entry safely (`labkit.classroom.submissions`),
skips the ones the gradebook already has with the same files and grading setup, and
hands the rest to N long-lived grading processes (`labkit.classroom.gradeserver`): each keeps the
trusted side warm (pytest, NumPy, hypothesis imported; graders collected; one zygote
forking the workers that run student code). Requests and results travel as framed
messages over pipes (`labkit.sandbox.protocol`), each submission's files as blobs: they
stay in memory from the moment they are read, and nothing of a submission is written
under OUT. Every result is written to the gradebook in its own transaction as soon as
it arrives, so memory stays flat in N and a killed batch loses nothing it recorded.

A grading process that dies, or a grading that runs past a hard wall limit, is
replaced; that student is recorded as `error` (marked for retry) and the batch goes on.

Where the gradings run is a `Pool`: the local grading processes here (`_Pool`), or a Dask
cluster's workers (`labkit.classroom.cluster`, passed in as `pool`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from labkit import __version__, fileset, i18n, platform
from labkit.classroom import layouts, submissions
from labkit.classroom import roster as rosters
from labkit.classroom.gradebook import FILE_NAME, Gradebook, Previous
from labkit.course.catalogue import LabSpec, lab_checks
from labkit.errors import EnglishError
from labkit.results import LabResult, Status
from labkit.sandbox import levels, protocol
from labkit.sandbox.backend import ONE_MATH_THREAD
from labkit.sandbox.errors import IsolationError
from labkit.sandbox.facade import isolation_level
from labkit.student import handin

DEFAULT_OUT = Path("labkit-out")
GRADEBOOK_NAME = FILE_NAME
STARTUP_LIMIT = 180.0  # s for a grading process to import, collect and get ready
WALL_SLACK = 15.0  # s beyond the lab's own limits before a grading is cut off
NO_ISOLATION = "none"  # the isolation recorded when nothing of the student's ran
# The least a class is graded in: student code that cannot leave its processes behind
# or outlive the grading (the portable level may; see `labkit doctor`).
NEEDED_ISOLATION = "process"


class BatchError(EnglishError):
    """The batch as a whole cannot go on (one line, for the CLI)."""


@dataclass(frozen=True)
class BatchEvent:
    """Progress: `kind` is "start" (total known), "graded", "skipped" or "error"."""

    kind: str
    done: int
    total: int
    student: str = ""
    result: LabResult | None = None


@dataclass(frozen=True)
class BatchSummary:
    lab: str
    out: Path
    gradebook: Path
    total: int
    graded: int
    skipped: int
    errors: int
    ignored: tuple[layouts.Ignored, ...]
    duration_s: float
    run_id: int
    layout: str = "folders"
    unlisted: tuple[str, ...] = ()  # entries the roster does not name (graded all the same)
    missing: tuple[str, ...] = ()  # roster ids with no entry
    jobs: int = 1  # submissions graded at once (see `jobs_for`)
    inside: str = ""  # the folder of SUBMISSIONS the download was read in, if wrapped in one
    not_students: tuple[str, ...] = ()  # roster rows left out: staff, the LMS's test student
    # (student, why): hand-ins whose `labkit submit` receipt claims another grade
    receipts: tuple[tuple[str, str], ...] = ()


Sink = Callable[[str, LabResult], None]
Finished = tuple["_Task", dict[str, Any] | None, str]  # (task, result document, failure text)


class Pool(Protocol):
    """Where a batch's gradings run. `jobs` is how many are in flight at most; `wait`
    blocks until some finish and gives each one's result document, or (document None)
    the text of the kit's failure that stopped it."""

    jobs: int

    @property
    def load(self) -> int: ...

    def submit(self, task: _Task) -> None: ...

    def wait(self) -> list[Finished]: ...

    def close(self) -> None: ...


# (lab, --jobs or None, scratch folder, logs folder) -> the pool a batch grades with
PoolFactory = Callable[[LabSpec, int | None, Path, Path], Pool]


def default_jobs() -> int:
    return platform.usable_cores()


def jobs_for(lab: LabSpec, jobs: int | None) -> int:
    """How many submissions are graded at once: `jobs`, by default one per core; for a
    lab whose checks time calls (`timed` in its catalogue entry) never more than one per
    core, so that each grading has a core to itself and its measurements hold."""
    cores = default_jobs()
    chosen = jobs or cores
    return min(chosen, cores) if lab.timed else chosen


def grader_key(lab: LabSpec, lang: str) -> str:
    """Fingerprint of everything besides the files that decides a grade."""
    h = hashlib.sha256()
    setup = {"labkit": __version__, "lab": lab.id, "files": lab.files, "modules": lab.modules,
             "call_timeout": lab.call_timeout, "grade_timeout": lab.grade_timeout,
             "share_worker": lab.share_worker, "lang": lang}
    h.update(json.dumps(setup, sort_keys=True).encode())
    graders = [lab.grader_dir.parent / "pytest.ini", *sorted(
        p for p in lab.grader_dir.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )]
    for path in graders:
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + h.hexdigest()


def _refuse_weak_isolation(accepted: str | None) -> None:
    """`BatchError` if the grading processes would get a level under `NEEDED_ISOLATION`
    that the instructor did not accept by name (none at all: each grading says why)."""
    try:
        level = isolation_level()
    except IsolationError:
        return
    try:
        levels.require(level, NEEDED_ISOLATION, accepted, "a class's grading")
    except IsolationError as exc:
        raise BatchError(str(exc)) from None


def grade_many(
    lab: LabSpec,
    submissions_dir: Path,
    out: Path = DEFAULT_OUT,
    *,
    gradebook: Path | None = None,
    jobs: int | None = None,
    timeout: float | None = None,
    regrade: bool = False,
    lang: str = "en",
    on_event: Callable[[BatchEvent], None] | None = None,
    sinks: Sequence[Sink] = (),
    max_unpacked: int = submissions.MAX_UNPACKED_BYTES,
    layout: str = "auto",
    roster: Path | None = None,
    pool: PoolFactory | None = None,
    accept_isolation: str | None = None,
) -> BatchSummary:
    """Grade every entry of `submissions_dir` into the gradebook under `out`.

    `timeout` replaces the lab's per-call limit (s). `sinks` are called with
    (student, result) after each grading is recorded (e.g. another gradebook).
    `layout` is how the download is laid out (`labkit.classroom.layouts`; "auto" tells
    by its names); `roster` (an LMS's CSV) names the students and lists who sent nothing.
    `pool` makes where the gradings run (default: `jobs` local grading processes), which
    refuse an isolation weaker than `NEEDED_ISOLATION` unless it is `accept_isolation`.
    """
    started = time.monotonic()
    submissions_dir, out = Path(submissions_dir), Path(out)
    if not submissions_dir.is_dir():
        raise BatchError(f"{submissions_dir} is not a folder of submissions")
    if timeout is not None:
        if timeout <= 0:
            raise BatchError("--timeout must be a positive number of seconds")
        lab = dataclasses.replace(lab, call_timeout=float(timeout))
    if jobs is not None and jobs < 1:
        raise BatchError("--jobs must be at least 1")
    if pool is None:  # here, a lab that times its checks grades one per core at most
        jobs = jobs_for(lab, jobs)
        _refuse_weak_isolation(accept_isolation)
    emit = on_event or (lambda _event: None)
    out.mkdir(parents=True, exist_ok=True)
    found = layouts.discover(submissions_dir, lab, layout)
    if found.mostly_ignored:
        shown = ", ".join(f"{i.name} ({i.reason})" for i in found.ignored[:3])
        raise BatchError(
            f"{len(found.ignored)} of {len(found.ignored) + len(found.entries)} items of "
            f"{submissions_dir} could not be placed as a {found.layout} download, e.g. "
            f"{shown}; pass --layout {'|'.join(layouts.LAYOUTS)}")
    if not found.entries and found.ignored:  # all of it known not to be code, say
        shown = ", ".join(f"{i.name} ({i.reason})" for i in found.ignored[:3])
        raise BatchError(
            f"nothing of {submissions_dir} could be graded as a {found.layout} download: "
            f"{len(found.ignored)} items, none a submission of files, e.g. {shown}")
    entries, unlisted, missing, not_students = found.entries, [], [], []
    if roster is not None:
        people = rosters.read(roster)
        placed = rosters.place(entries, people)
        if entries and placed.missing and len(placed.unlisted) == len(entries):
            raise BatchError(
                f"none of the {len(entries)} submissions of {submissions_dir} matches anyone "
                f"on the roster {roster}: {', '.join(placed.unlisted[:3])}; is it this "
                f"class's download and roster, read as the right --layout?")
        entries, unlisted, missing = placed.entries, placed.unlisted, placed.missing
        not_students = [f"{p.name} ({p.id})" if p.name else p.id for p in placed.not_students]
    ids = {entry.student for entry in entries}
    key = grader_key(lab, lang)
    max_score = lab_checks(lab).max_score
    counts = {"graded": 0, "skipped": 0, "errors": 0}
    receipts: list[tuple[str, str]] = []
    with _exclusive(out), Gradebook(gradebook or out / GRADEBOOK_NAME) as book:
        scratch = (out / ".scratch").resolve()  # the grading processes' TMPDIR
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        workers = (pool or _Pool)(lab, jobs, scratch, out / "logs")
        run_id = book.begin_run(lab.id, str(submissions_dir.resolve()), workers.jobs,
                                lab.call_timeout, __version__, found.layout)
        emit(BatchEvent("start", 0, len(entries)))
        done = 0

        def finish(task: _Task, result: LabResult, retry: bool = False) -> None:
            nonlocal done
            book.record(run_id=run_id, student=task.entry.student, source=task.entry.source,
                        kind=task.entry.kind, digest=task.digest, grader_key=key,
                        result=result, retry=retry, late=task.entry.late)
            for sink in sinks:
                sink(task.entry.student, result)
            done += 1
            claimed = handin.parse_receipt(task.receipt) if task.receipt else None
            differs = claimed and result.status is not Status.ERROR and handin.difference(
                claimed, result, lang)
            if differs:
                receipts.append((task.entry.student, differs))
            kind = "error" if result.status is Status.ERROR else "graded"
            counts["errors" if kind == "error" else "graded"] += 1
            emit(BatchEvent(kind, done, len(entries), task.entry.student, result))

        try:
            pending = iter(entries)
            serials = itertools.count(1)
            exhausted = False
            while True:
                while not exhausted and workers.load < 2 * workers.jobs:  # a few ready, never all
                    entry = next(pending, None)
                    if entry is None:
                        exhausted = True
                        break
                    task = _read(lab, entry, lang, max_unpacked, next(serials))
                    book.set_person(entry.student, entry.person, entry.email, entry.section)
                    previous = _previous(book, lab.id, entry, task.digest, key, ids)
                    if (not regrade and previous is not None and not previous.retry
                            and previous.digest == task.digest and previous.grader_key == key):
                        done += 1
                        counts["skipped"] += 1
                        emit(BatchEvent("skipped", done, len(entries), entry.student))
                    elif task.error:
                        finish(task, error_result(lab, task.error, lang, max_score=max_score))
                    else:
                        task.retried = (previous is not None and previous.retry
                                        and previous.digest == task.digest
                                        and previous.grader_key == key)
                        workers.submit(task)
                if exhausted and workers.load == 0:
                    break
                for task, document, failure in workers.wait():
                    if document is not None:
                        result = LabResult.from_dict(document)
                        if task.note:
                            message = " ".join(filter(None, (result.message, task.note)))
                            result = dataclasses.replace(result, message=message)
                        finish(task, result)
                    elif task.kit_fault and not task.regraded:  # once more, now
                        task.kit_fault, task.regraded = False, True
                        workers.submit(task)
                    elif task.kit_fault:  # not graded, never a loss: again on the next run
                        finish(task, error_result(lab, failure, lang, task.files_digest,
                                                  max_score), retry=True)
                    elif task.retried:  # the second time in a row: it is the submission
                        text = i18n.t("kit_failed_twice", task.lang, detail=failure)
                        finish(task, error_result(lab, text, lang, task.files_digest,
                                                  max_score))
                    else:
                        finish(task, error_result(lab, failure, lang, task.files_digest,
                                                  max_score), retry=True)
        finally:
            workers.close()
            shutil.rmtree(scratch, ignore_errors=True)
        for person in missing:
            book.set_person(person.id, person.name, person.email, person.section)
            if not book.is_missing(lab.id, person.id):
                text = i18n.t("batch_missing", lang)
                book.record(run_id=run_id, student=person.id, source="", kind="none",
                            digest="", grader_key=key, missing=True,
                            result=error_result(lab, text, lang, max_score=max_score))
        book.finish_run(run_id, counts["graded"], counts["skipped"], counts["errors"])
    return BatchSummary(lab.id, out, Path(gradebook or out / GRADEBOOK_NAME), len(entries),
                        counts["graded"], counts["skipped"], counts["errors"],
                        tuple(found.ignored), time.monotonic() - started, run_id, found.layout,
                        tuple(unlisted), tuple(p.id for p in missing), workers.jobs,
                        found.inside, tuple(not_students), tuple(receipts))


def _previous(book: Gradebook, lab: str, entry: submissions.Entry, digest: str, key: str,
              ids: set[str]) -> Previous | None:
    """The entry's last grading. One filed under another id (the entry's name, before a
    roster named it) with the same files and setup moves to the new id: no regrading.
    An id this run still grades keeps its own (a group's folder is each member's)."""
    previous = book.previous(lab, entry.student)
    if previous is None and entry.source:
        moved = book.previous_of_source(lab, entry.source)
        if moved is not None:
            old, previous = moved
            if (old not in ids and previous.digest == digest and previous.grader_key == key
                    and not previous.retry):
                book.reassign(lab, old, entry.student)
            else:
                previous = None
    return previous


# --- one submission ---------------------------------------------------------------------


@dataclass
class _Task:
    entry: submissions.Entry
    digest: str  # what the gradebook compares on a rerun
    files_digest: str = ""  # of the graded files ("" when they could not be read)
    files: dict[str, bytes] = field(default_factory=dict)  # read, in memory, until sent
    note: str = ""
    receipt: bytes = b""  # a `labkit submit` receipt in the entry's zip: shown, never graded
    error: str = ""
    serial: int = 0
    lang: str = "en"
    retried: bool = False  # its last grading, of the same files and setup, was the kit's failure
    kit_fault: bool = False  # its grading just now failed, and the kit knew it for its own
    regraded: bool = False  # sent again in this run after such a failure


def _read(lab: LabSpec, entry: submissions.Entry, lang: str, max_unpacked: int,
          serial: int) -> _Task:
    """An entry's task, with its files (none, and `task.error` set, if it cannot be graded)."""
    try:
        collected = submissions.read(lab, entry, lang, max_unpacked)
    except submissions.SubmissionError as exc:
        return _Task(entry, submissions.error_digest(entry), error=exc.text(lang),
                     serial=serial, lang=lang)
    return _Task(entry, collected.digest, collected.digest, files=collected.files,
                 note=collected.note, receipt=collected.receipt, serial=serial, lang=lang)


def error_result(lab: LabSpec, message: str, lang: str, digest: str = "",
                 max_score: float | None = None) -> LabResult:
    """The result of a submission that could not be graded (status `error`, no checks)."""
    if max_score is None:
        max_score = lab_checks(lab).max_score
    return LabResult(
        lab=lab.id, status=Status.ERROR, score=0.0, max_score=max_score, duration_s=0.0,
        labkit_version=__version__, digest=digest, lang=lang, isolation=NO_ISOLATION,
        checks=(), message=message,
    )


@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One batch at a time per output folder."""
    with platform.exclusive_lock(out / ".lock") as mine:
        if not mine:
            raise BatchError(f"another labkit batch is writing to {out}")
        yield


# --- the grading processes ---------------------------------------------------------------


class _Grader:
    """One `labkit.classroom.gradeserver` process and the submission it is grading, if any
    (a Dask worker keeps some too: `labkit.classroom.clusterworker`). `env` adds to the
    process's environment; `host` is what its results name as the grading machine
    (default: this machine's name)."""

    def __init__(self, lab: LabSpec, index: int, scratch: Path, logs: Path,
                 env: dict[str, str] | None = None, host: str = "") -> None:
        self.index = index
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        tmp = scratch / f"grader-{index}"
        tmp.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        self.log = logs / f"grader-{index}.log"
        env = {**os.environ, **(env or {}), "TMPDIR": str(tmp), **ONE_MATH_THREAD}
        env.pop("PYTEST_ADDOPTS", None)
        with open(self.log, "wb") as log:  # this run's log replaces the last one's
            self.process = subprocess.Popen(
                [sys.executable, "-m", "labkit.classroom.gradeserver", str(req_r), str(rep_w)],
                pass_fds=(req_r, rep_w), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env, cwd=str(tmp),
            )
        os.close(req_r)
        os.close(rep_w)
        for fd in (req_w, rep_r):  # every wait on them is the selector's or has a deadline
            os.set_blocking(fd, False)
        self.requests = os.fdopen(req_w, "wb", buffering=0)
        self.replies = rep_r
        self.reader = protocol.Reader(rep_r)
        self.ready = False
        self.task: _Task | None = None
        self.deadline = time.monotonic() + STARTUP_LIMIT
        self.send({"op": "init", "lab": lab.to_dict(), **({"host": host} if host else {})})

    def send(self, header: dict[str, Any], blobs: list[bytes] | None = None) -> None:
        """Write one request, by the process's deadline at the latest. One that died or
        stopped reading is found by `_Pool.wait`: its pipe closes, or its deadline passes."""
        if self.requests.closed:
            return
        with contextlib.suppress(OSError, protocol.ChannelClosed, protocol.ChannelTimeout):
            protocol.write_message(self.requests.fileno(), header, blobs, self.deadline)

    def messages(self) -> tuple[list[dict[str, Any]], bool]:
        """The messages complete so far (one read of the pipe the selector found ready),
        and whether the process closed its end. One that sends something that is not a
        message is killed, and counts as closed."""
        try:
            return [header for header, _ in self.reader.read_ready()], False
        except protocol.ChannelClosed:
            return [], True
        except protocol.ProtocolError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            return [], True

    def log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def stop(self, kill: bool = False) -> None:
        with contextlib.suppress(OSError):
            self.requests.close()
        if kill:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self.replies)


class _Pool:
    """N grading processes, started on first use, replaced when one dies or hangs."""

    def __init__(self, lab: LabSpec, jobs: int | None, scratch: Path, logs: Path) -> None:
        self.lab, self.scratch, self.logs = lab, scratch, logs
        self.jobs = jobs or default_jobs()
        self.graders: list[_Grader] = []
        self.queue: deque[_Task] = deque()
        self.selector = selectors.DefaultSelector()
        self.wall = lab.grade_timeout + lab.call_timeout + WALL_SLACK
        self._started = 0

    @property
    def load(self) -> int:
        return len(self.queue) + sum(g.task is not None for g in self.graders)

    def _start(self) -> _Grader:
        self._started += 1
        grader = _Grader(self.lab, self._started, self.scratch, self.logs)
        self.selector.register(grader.replies, selectors.EVENT_READ, grader)
        self.graders.append(grader)
        return grader

    def _retire(self, grader: _Grader, kill: bool) -> None:
        self.selector.unregister(grader.replies)
        self.graders.remove(grader)
        grader.stop(kill=kill)

    def submit(self, task: _Task) -> None:
        if not self.graders:
            for _ in range(self.jobs):
                self._start()
        self.queue.append(task)
        self._dispatch()

    def _dispatch(self) -> None:
        for grader in self.graders:
            if not self.queue:
                return
            if grader.ready and grader.task is None:
                task = self.queue.popleft()
                grader.task = task
                grader.deadline = time.monotonic() + self.wall
                names, blobs = fileset.as_blobs(task.files)
                grader.send({"op": "grade", "id": task.serial, "lang": task.lang,
                             "files": names}, blobs)

    def wait(self) -> list[Finished]:
        """Block until something finishes; each item is (task, document, failure text)."""
        finished: list[Finished] = []
        while not finished and self.load:
            soonest = min((g.deadline for g in self.graders if g.task or not g.ready),
                          default=time.monotonic() + 1.0)
            events = self.selector.select(timeout=max(0.0, soonest - time.monotonic()))
            for selected, _ in events:
                grader: _Grader = selected.data
                messages, closed = grader.messages()
                failed = False
                for message in messages:
                    if message.get("ready"):
                        grader.ready = True
                    elif grader.task is not None and message.get("id") == grader.task.serial:
                        task, grader.task = grader.task, None
                        if "result" in message:
                            finished.append((task, message["result"], ""))
                        else:
                            task.kit_fault = message.get("kit") is True
                            finished.append((task, None, _died(task, str(message.get("error")))))
                            failed = True
                if failed:  # it ends after a failure: nobody else is graded there
                    self._retire(grader, kill=False)
                    self._start()
                elif closed:
                    self._lost(grader, finished, overran=False)
            now = time.monotonic()
            for grader in list(self.graders):
                if grader.deadline <= now and (grader.task is not None or not grader.ready):
                    self._lost(grader, finished, overran=True)
            self._dispatch()
        return finished

    def _lost(self, grader: _Grader, finished: list, overran: bool) -> None:
        """A grading process died or overran: record its task, start a replacement."""
        was_ready, task = grader.ready, grader.task
        self._retire(grader, kill=overran)
        if not was_ready:
            tail = grader.log_tail()
            raise BatchError(
                f"a grading process for {self.lab.id} failed to start"
                + (f": {tail}" if tail else f" (see {grader.log})")
            )
        if task is not None:
            if overran:
                text = i18n.t("batch_wall_limit", task.lang, seconds=f"{self.wall:g}")
            else:
                text = i18n.t("kit_failed", task.lang, detail=i18n.t(
                    "batch_grader_died", task.lang, detail=_exit_text(grader.process.returncode)))
            finished.append((task, None, text))
        self._start()

    def close(self) -> None:
        for grader in self.graders:  # all at once: idle ones end on their own at end of input
            with contextlib.suppress(OSError):
                grader.requests.close()
        for grader in list(self.graders):
            self._retire(grader, kill=grader.task is not None or not grader.ready)
        self.selector.close()


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-code).name
    return f"exit code {code}"


def _died(task: _Task, error: str) -> str:
    return i18n.t("kit_failed", task.lang, detail=error.splitlines()[0][:200] if error else "")
