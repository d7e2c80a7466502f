"""Helpers shared by the kit's tests: read solutions and stubs, apply mutants, grade."""

from __future__ import annotations

import atexit
import os
import re
import select
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from labkit import fileset, settings
from labkit.course.catalogue import LabSpec, catalogue, get_lab
from labkit.fileset import digest
from labkit.results import LabResult
from labkit.sandbox import protocol
from labkit.sandbox.backend import ONE_MATH_THREAD
from labkit.student import daemon

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
READY_SECONDS = 120.0  # a daemon imports, collects and starts a zygote; CI machines are slow


def solution_files(lab: LabSpec) -> dict[str, bytes]:
    return {rel: (REPO / "solutions" / lab.id / rel).read_bytes() for rel in lab.files}


def stub_files(lab: LabSpec) -> dict[str, bytes]:
    return {rel: (lab.exercise_dir / rel).read_bytes() for rel in lab.files}


def write_files(files: dict[str, bytes], folder: Path) -> Path:
    """A student's folder holding `files` (the kit itself never writes a submission)."""
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return folder


@dataclass(frozen=True)
class Variant:
    """A solution changed by text edits: a mutant (honest bug), a hostile submission, or
    an alternative (a correct solution written differently)."""

    lab: str
    name: str
    breaks: tuple[str, ...]
    edits: tuple[dict, ...]
    entry: dict

    def files(self) -> dict[str, bytes]:
        lab = get_lab(self.lab)
        files = {rel: data.decode() for rel, data in solution_files(lab).items()}
        for edit in self.edits:
            rel = edit.get("file", lab.files[0])
            text = files[rel]
            if "replace" in edit:
                count = text.count(edit["replace"])
                if count != 1:
                    raise AssertionError(f"{self.name}: edit text found {count} times in {rel}")
                text = text.replace(edit["replace"], edit["with"])
            text = edit.get("prepend", "") + text + edit.get("append", "")
            files[rel] = text
        return {rel: text.encode() for rel, text in files.items()}


def variants(kind: str) -> list[Variant]:
    """Every variant under tests/<kind>/<lab>.toml (kind: mutants, hostile, or
    alternatives: natural correct solutions that must earn full marks)."""
    found = []
    for lab in catalogue():
        path = TESTS / kind / f"{lab.id}.toml"
        if not path.is_file():
            continue
        key = kind.removesuffix("s")  # [[mutant]] in mutants/, [[alternative]] in alternatives/
        for entry in tomllib.loads(path.read_text(encoding="utf-8"))[key]:
            edits = entry.get("edits") or [entry]
            found.append(
                Variant(lab.id, entry["name"], tuple(entry.get("breaks", ())), tuple(edits), entry)
            )
    return found


_GRADED: dict[tuple[str, str, str, str], LabResult] = {}


def grade_cached(lab: LabSpec, files: dict[str, bytes], lang: str = "en") -> LabResult:
    """Grade files once per test process, warm (the grader-quality tests and the kit's
    self-check both grade every solution and stub)."""
    key = (lab.id, digest(files), lang, settings.get(settings.ISOLATION))
    if key not in _GRADED:
        _GRADED[key] = grade_warm(lab, files, lang)
    return _GRADED[key]


def tiny_lab(root: Path, lab_id: str, catalogue_text: str, grader: str, checks: str) -> LabSpec:
    """A lab made in `root` for a test: its catalogue, one grader file, its checks."""
    (root / "labs.toml").write_text(catalogue_text)
    (root / "exercises" / lab_id).mkdir(parents=True)
    folder = root / "grader" / lab_id
    folder.mkdir(parents=True)
    (root / "grader" / "pytest.ini").write_bytes((REPO / "grader" / "pytest.ini").read_bytes())
    (folder / f"test_{lab_id}.py").write_text(grader)
    (folder / "checks.toml").write_text(checks)
    return get_lab(lab_id, root)


def grade_variant(variant: Variant, lang: str = "en") -> LabResult:
    """A variant graded as a class's submission is: by a warm grading process."""
    return grade_warm(get_lab(variant.lab), variant.files(), lang)


class WarmGrader:
    """One `labkit.classroom.gradeserver` process for a lab, as `labkit batch` starts
    them: pytest, NumPy and the lab's graders loaded once, one zygote, one submission
    graded per request. The grader-quality and hostile suites grade through it, so they
    test the path a class is graded by, at a tenth of a cold grading's cost."""

    def __init__(self, lab: LabSpec) -> None:
        self.lab = lab
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = {**os.environ, **ONE_MATH_THREAD}
        env.pop("PYTEST_ADDOPTS", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "labkit.classroom.gradeserver", str(req_r), str(rep_w)],
            pass_fds=(req_r, rep_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            env=env)
        os.close(req_r)
        os.close(rep_w)
        self.requests, self.replies = req_w, rep_r
        self.reader = protocol.Reader(rep_r)
        self.serial = 0
        protocol.write_message(self.requests, {"op": "init", "lab": lab.to_dict()})
        ready, _ = self.reader.read(time.monotonic() + READY_SECONDS)
        assert ready.get("ready"), ready

    def grade(self, files: dict[str, bytes], lang: str = "en") -> LabResult:
        self.serial += 1
        names, blobs = fileset.as_blobs(files)
        protocol.write_message(self.requests, {"op": "grade", "id": self.serial, "lang": lang,
                                               "files": names}, blobs)
        limit = self.lab.grade_timeout + self.lab.call_timeout + 60
        reply, _ = self.reader.read(time.monotonic() + limit)
        if "result" not in reply:  # the process ends after an error: the next one is fresh
            self.close()
            raise AssertionError(f"{self.lab.id}: the grading process failed: {reply}")
        return LabResult.from_dict(reply["result"])

    def close(self) -> None:
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_WARM: dict[tuple[str, str], WarmGrader] = {}


def grade_warm(lab: LabSpec, files: dict[str, bytes], lang: str = "en") -> LabResult:
    """`files` graded by this process's warm grading process for `lab` (one per lab and
    isolation mode, started on first use, ended with the test session)."""
    key = (lab.id, settings.get(settings.ISOLATION))
    grader = _WARM.get(key)
    if grader is None or grader.process.poll() is not None:
        grader = _WARM[key] = WarmGrader(lab)
    try:
        return grader.grade(files, lang)
    except (AssertionError, protocol.ChannelClosed, protocol.ChannelTimeout):
        _WARM.pop(key, None)
        grader.close()
        raise


@atexit.register
def _close_warm() -> None:
    for grader in _WARM.values():
        grader.close()
    _WARM.clear()


def lost_checks(result: LabResult) -> list[tuple[str, str, float, str]]:
    """Each check that lost points: (id, status, points, message), for an assertion to
    print, so that a failure says what was lost and why without running it again."""
    return [(c.id, c.status.value, c.points, c.message) for c in result.checks
            if c.points < c.max_points]


def daemon_pids(socket: Path | None = None, under: Path | None = None) -> set[int]:
    """Processes started as a grading daemon (`python -m labkit.student.daemon`), for `socket` only
    if given, or for a socket anywhere under `under`, whether serving or about to exit.
    (Tests run beside each other: a test counts only the daemons it could have started.)"""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"labkit.student.daemon" not in argv:
            continue
        if socket is not None and bytes(socket) not in argv:
            continue
        if under is not None and not any(arg.startswith(bytes(under) + b"/") for arg in argv):
            continue
        found.add(int(entry.name))
    return found


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Whether process `pid` ends within `timeout`. A test that graded in `process` mode
    is a child subreaper, so a daemon it started may end as its child: reaped here."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def wait_ready(lab: LabSpec | None = None) -> daemon.DaemonInfo:
    """The daemon serving `lab` (default lab02) once it answers."""
    lab_id = lab.id if lab is not None else "lab02"
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        found = [info for info in daemon.running() if info.lab == lab_id]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no daemon became ready")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MOVES = re.compile(r"\x1b\[[0-9;?]*[A-HJKfhl]")  # cursor moves and clears: a new line here


def _plain(seen: list[str]) -> str:
    return _ANSI.sub("", _MOVES.sub("\n", "".join(seen))).replace("\r", "")


def read_screen_until(fd: int, needle: str, timeout: float, seen: list[str]) -> str:
    """A terminal's output read from `fd` (escape sequences removed, kept in `seen`)
    once it shows `needle`, wherever the terminal wrapped it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen.append(os.read(fd, 65536).decode(errors="replace"))
            except OSError:
                break
        text = _plain(seen)
        if needle in " ".join(text.split()):
            return text
    raise AssertionError(f"{needle!r} never shown; the screen had:\n{_plain(seen)}")
