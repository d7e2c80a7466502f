"""Exports from the gradebook: CSV, JSON Lines and Gradescope `results.json` files.

- CSV: one row per student (current grading): `student`, `status`, one column of points
  per check (in grader order), `total`, `max_score`, `message`. A submission that could
  not be graded (or a roster student with none) has empty check cells: nothing was
  measured, which is not 0. A text cell that a spreadsheet would read as a formula (it
  starts with `=`, `+`, `-`, `@`, a tab or a CR) is written behind a single quote, as
  OWASP advises against CSV injection.
- Canvas and Moodle gradebook imports: `labkit.classroom.lms`.
- JSONL: one line per student, `{"student", "source", "graded_at", "result"}`, where
  `result` is the full `labkit.result/1` document.
- Gradescope: `<dest>/<student>/results.json` in Gradescope's autograder format, so
  labkit can serve as a Gradescope autograder (`gradescope(result)` builds one; `labkit
  grade --format gradescope` prints it for one workspace).

Files are written atomically (a reader sees the old file or the new one, never half).
Texts students read (test output) are in the result's language.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

from labkit import textsafe
from labkit.classroom.gradebook import Gradebook, GradebookError, locate
from labkit.course import catalogue as registry
from labkit.errors import EnglishError
from labkit.fsutil import write_atomic

FORMATS = ("csv", "jsonl")  # gradescope: `labkit.interop.gradescope`
DEFAULT_NAMES = {"csv": "grades.csv", "jsonl": "results.jsonl"}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may run


class ExportError(EnglishError):
    """The export cannot be made (one line, for the CLI)."""


def open_gradebook(out: Path) -> Gradebook:
    """The existing gradebook of OUT (a batch's output folder, or the file itself)."""
    try:
        return Gradebook(locate(out)[0], create=False)
    except GradebookError as exc:
        raise ExportError(str(exc)) from None


def pick_lab(book: Gradebook, lab: str | None) -> str:
    """The lab to export or report: the one asked for, or the only one graded."""
    labs = book.labs()
    if lab is not None:
        if lab not in labs:
            raise ExportError(f"the gradebook has no gradings of {lab} (it has: "
                              f"{', '.join(labs) or 'none'})")
        return lab
    if len(labs) != 1:
        raise ExportError("the gradebook is empty" if not labs else
                          f"the gradebook holds several labs ({', '.join(labs)}): pass --lab")
    return labs[0]


def check_columns(book: Gradebook, lab: str) -> list[str]:
    """The lab's check ids in grader order, from the gradings, else from the catalogue."""
    ids = [check_id for check_id, _, _ in book.checks(lab)]
    if not ids:
        try:
            ids = [c.id for c in registry.lab_checks(registry.get_lab(lab)).checks]
        except (LookupError, OSError):
            ids = []
    return ids


def csv_text(book: Gradebook, lab: str) -> str:
    checks = check_columns(book, lab)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "status", *checks, "total", "max_score", "message"])
    for stored in book.current(lab):
        result = stored.result
        graded = result["status"] != "error"
        points = {c["id"]: c["points"] for c in result["checks"]}
        writer.writerow([
            cell(stored.student), result["status"],
            *(_num(points.get(c, 0)) if graded else "" for c in checks),
            _num(result["score"]) if graded else "", _num(result["max_score"]),
            cell(textsafe.shown(result["message"])),
        ])
    return buffer.getvalue()


def unfinished(book: Gradebook, lab: str) -> str:
    """A warning when `lab`'s last batch run has not finished ("" when it has): what is
    reported or exported then is not the whole class."""
    run = book.last_run(lab)
    if run is None or run.finished_at is not None:
        return ""
    return (f"warning: the last labkit batch of {lab} (run {run.id}, started {run.started_at}) "
            "has not finished: it is still running or was stopped; these grades are "
            "incomplete (run the batch again to complete them)")


def jsonl_lines(book: Gradebook, lab: str) -> Iterator[str]:
    for stored in book.current(lab):
        yield json.dumps({"student": stored.student, "source": stored.source,
                          "graded_at": stored.graded_at, "result": stored.result},
                         ensure_ascii=False)


def export(out: Path, fmt: str, dest: Path | None = None,
           lab: str | None = None) -> tuple[Path, int]:
    """Write one export of the gradebook under `out`; returns (where, how many students)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    with open_gradebook(out) as book:
        lab_id = pick_lab(book, lab)
        dest = dest or locate(out)[1] / DEFAULT_NAMES[fmt]
        count = book.count(lab_id)
        if fmt == "csv":
            write_atomic(dest, csv_text(book, lab_id))
        else:
            write_atomic(dest, "".join(line + "\n" for line in jsonl_lines(book, lab_id)))
    return dest, count


def _num(value: float) -> str:
    return f"{float(value):g}"


def cell(text: str) -> str:
    """A cell of the student's text that no spreadsheet runs as a formula."""
    return "'" + text if text.startswith(_FORMULA_START) else text
