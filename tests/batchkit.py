"""Helpers for the batch, export and report tests: a small class of lab02 submissions,
and gradebooks filled with made-up results (no grading needed)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from kit import REPO

from labkit import __version__
from labkit.classroom.gradebook import Gradebook
from labkit.course.catalogue import get_lab, lab_checks
from labkit.results import CheckResult, LabResult, Status, total

LAB02 = get_lab("lab02")
LAB02_FULL = lab_checks(LAB02).max_score  # full marks, from checks.toml: labs gain items
SOLUTION = (REPO / "solutions" / "lab02" / "broadcasting.py").read_text()
STUB = (LAB02.exercise_dir / "broadcasting.py").read_text()
MUTANT = SOLUTION.replace("return float(np.mean((va - vb) ** 2))",
                          "return float(np.sum((va - vb) ** 2))")  # breaks safe_mse.aligned_pairs
LOOPS = SOLUTION + "\nwhile True:\n    pass\n"
assert MUTANT != SOLUTION


def folder(root: Path, name: str, source: str, rel: str = "broadcasting.py") -> Path:
    target = root / name / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)
    return root / name


def zipped(root: Path, name: str, members: dict[str, bytes | str]) -> Path:
    path = root / f"{name}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def bomb(root: Path, name: str, megabytes: int) -> Path:
    """A small zip that declares `megabytes` of zeros (plus a valid lab file)."""
    path = root / f"{name}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("broadcasting.py", SOLUTION)
        with archive.open("padding.bin", "w", force_zip64=True) as handle:
            chunk = bytes(1 << 20)
            for _ in range(megabytes):
                handle.write(chunk)
    return path


def small_class(root: Path) -> dict[str, str]:
    """The class of the batch tests; returns student -> what it is."""
    root.mkdir(parents=True, exist_ok=True)
    folder(root, "alice", SOLUTION)
    zipped(root, "bob", {"bob/broadcasting.py": STUB, "bob/notes.txt": "hi"})
    folder(root, "carol", MUTANT)
    (root / "dave.zip").write_bytes(b"PK\x03\x04 this is not really a zip")
    zipped(root, "eve", {"../broadcasting.py": SOLUTION})
    bomb(root, "frank", 65)
    (root / "gina").mkdir()
    folder(root, "hank", "nothing to see", rel="notes.txt")
    folder(root, "ivan", LOOPS)
    zipped(root, "judy", {"judy/lab02/broadcasting.py": SOLUTION})
    (root / "README.txt").write_text("downloaded from the LMS")
    return {"alice": "correct", "bob": "stub", "carol": "mutant", "dave": "corrupt zip",
            "eve": "zip slip", "frank": "zip bomb", "gina": "empty", "hank": "unrelated",
            "ivan": "loops", "judy": "correct, nested zip"}


def made_up(status_of: dict[str, str], lang: str = "en", message: str = "") -> LabResult:
    """A lab02 result whose checks have the given statuses (others pass)."""
    specs = lab_checks(LAB02)
    checks = []
    for spec in specs.checks:
        status = Status(status_of.get(spec.id, "pass"))
        checks.append(CheckResult(
            id=spec.id, title=spec.title[lang], status=status,
            points=spec.points if status is Status.PASS else 0.0, max_points=spec.points,
            message="" if status is Status.PASS else spec.fail[lang],
        ))
    score, max_score = total(tuple(checks))
    return LabResult(
        lab="lab02", status=Status.PASS if score == max_score else Status.FAIL, score=score,
        max_score=max_score, duration_s=0.25, labkit_version=__version__,
        digest="sha256:" + "0" * 64, lang=lang, isolation="process", checks=tuple(checks),
        message=message,
    )


def made_up_gradebook(path: Path) -> dict[str, LabResult]:
    """A gradebook of five students with known results; returns what was stored."""
    ids = [c.id for c in lab_checks(LAB02).checks]
    results = {
        "ana": made_up({}),
        "ben": made_up({ids[1]: "fail", ids[4]: "timeout"}),
        "cruz": made_up({ids[1]: "fail"}, lang="es"),
        "dora": made_up({i: "fail" for i in ids}),
        "eli": LabResult(lab="lab02", status=Status.ERROR, score=0.0, max_score=LAB02_FULL,
                         duration_s=0.0, labkit_version=__version__, digest="", lang="en",
                         isolation="none", message="eli.zip is not a readable zip file"),
    }
    with Gradebook(path) as book:
        run = book.begin_run("lab02", "/class", 2, 5.0, __version__)
        book.record(run_id=run, student="ben", source="ben", kind="folder",
                    digest="sha256:" + "1" * 64, grader_key="k", result=made_up({}))  # older
        for student, result in results.items():
            book.record(run_id=run, student=student, source=student, kind="folder",
                        digest="sha256:" + "2" * 64, grader_key="k", result=result)
        book.finish_run(run, len(results), 0, 1)
    return results
