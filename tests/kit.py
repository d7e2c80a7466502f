"""Helpers shared by the kit's tests: read solutions and stubs, apply mutants, grade."""

from __future__ import annotations

import os
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from labkit.course.catalogue import LabSpec, catalogue, get_lab
from labkit.engine.cold import grade_files
from labkit.fileset import digest
from labkit.results import LabResult
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
    """Every variant under tests/<kind>/<lab>.toml (kind: mutants, hostile, or alternatives:
    correct solutions written differently, which must earn full marks)."""
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


_GRADED: dict[tuple[str, str, str], LabResult] = {}


def grade_cached(lab: LabSpec, files: dict[str, bytes], lang: str = "en") -> LabResult:
    """Grade files once per test session (the grader-quality tests and the kit's
    self-check both grade every solution)."""
    key = (lab.id, digest(files), lang)
    if key not in _GRADED:
        _GRADED[key] = grade_files(lab, files, lang)
    return _GRADED[key]


def grade_variant(variant: Variant, lang: str = "en") -> LabResult:
    return grade_files(get_lab(variant.lab), variant.files(), lang)


def daemon_pids(socket: Path | None = None) -> set[int]:
    """Processes started as a grading daemon (`python -m labkit.student.daemon`), for `socket` only
    if given, whether serving or about to exit."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"labkit.student.daemon" in argv and (socket is None or bytes(socket) in argv):
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
