"""Gradescope's autograder format: one grading as `results.json`, a class as one file each.

`document(result)` is what `labkit grade --format gradescope` prints, so labkit can be a
Gradescope autograder; `export(out)` writes `<dest>/<student>/results.json` for every
student's current grading in a batch's gradebook. Texts are in the grading's language.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labkit import i18n
from labkit.classroom.exports import open_gradebook, pick_lab
from labkit.classroom.gradebook import locate
from labkit.fsutil import write_atomic
from labkit.results import LabResult, Status, points

DEFAULT_NAME = "gradescope"


def document(result: LabResult) -> dict[str, Any]:
    """One grading in Gradescope's autograder `results.json` format."""
    lang = result.lang
    tests = []
    for check in result.checks:
        output = check.message
        if check.output.strip():
            output = f"{output}\n\n{i18n.t('output_excerpt', lang)}\n{check.output}".strip()
        tests.append({
            "name": f"{check.id}: {check.title}",
            "score": check.points,
            "max_score": check.max_points,
            "status": "passed" if check.status is Status.PASS else "failed",
            "output": output,
            "visibility": "visible",
        })
    passed = sum(c.status is Status.PASS for c in result.checks)
    summary = i18n.t("total", lang, score=points(result.score),
                     max_score=points(result.max_score),
                     passed=passed, count=len(result.checks), duration=result.duration_s)
    return {
        "score": result.score,
        "execution_time": round(result.duration_s, 3),
        "output": "\n".join(filter(None, (result.message, summary))),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def folder_name(student: str) -> str:
    """A file name for a student id: ids come from LMS files and rosters and may hold
    `/` or be `..`: `%`, `/`, NUL and a leading dot are percent-quoted."""
    name = student.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    return "%2E" + name[1:] if name.startswith(".") else name or "%00"


def export(out: Path, dest: Path | None = None, lab: str | None = None) -> tuple[Path, int]:
    """Write every current grading under `out` as Gradescope files; (where, how many)."""
    with open_gradebook(out) as book:
        lab_id = pick_lab(book, lab)
        dest = dest or locate(out)[1] / DEFAULT_NAME
        count = book.count(lab_id)
        for stored in book.current(lab_id):
            data = document(LabResult.from_dict(stored.result))
            write_atomic(dest / folder_name(stored.student) / "results.json",
                         json.dumps(data, ensure_ascii=False, indent=2))
    return dest, count
