"""Grades back into the LMS: Canvas's gradebook import CSV and Moodle's grading worksheet.

Without a template labkit writes each LMS's documented layout:

- Canvas: `Student, ID, SIS User ID, SIS Login ID, Section, <assignment>`, a `Points
  Possible` row first. The assignment column is named by `--assignment`: Canvas matches
  `Name (id)` to an existing assignment and creates one for a name it does not know.
- Moodle: `Identifier, Full name, Email address, Status, Grade, Maximum Grade`, the
  identifier being `Participant N` (N the participant id its download names folders by).

With a template (the CSV downloaded from the LMS: Canvas's gradebook export, Moodle's
grading worksheet) labkit fills that very file: every column and row stays the LMS's own
(ids, the assignment column, Moodle's modification times), only the grade cells of the
students it graded change. A submission that could not be graded, or a student who sent
nothing, gets an empty grade, never 0: nothing was measured. Text labkit writes (names
from a download or roster) cannot start a spreadsheet formula (`exports.cell`).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from labkit import textsafe
from labkit.classroom.exports import ExportError, cell, open_gradebook, pick_lab, unfinished
from labkit.classroom.gradebook import Stored, locate
from labkit.fsutil import write_atomic

FORMATS = ("canvas", "moodle")
DEFAULT_NAMES = {"canvas": "canvas-grades.csv", "moodle": "moodle-grades.csv"}
MAX_TEMPLATE_BYTES = 64 * 1024 * 1024
CANVAS_FIXED = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_COLUMNS = ("Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade")
_POINTS_POSSIBLE = "Points Possible"
_PARTICIPANT = re.compile(r"^\s*\S+\s+(\d+)\s*$")  # "Participant 123" (in any language)


@dataclass(frozen=True)
class LmsExport:
    dest: Path
    students: int  # rows written or filled
    unmatched: tuple[str, ...]  # graded students the template has no row for
    warning: str  # the batch had not finished ("" when it had)


def export(out: Path, fmt: str, dest: Path | None = None, lab: str | None = None,
           template: Path | None = None, assignment: str | None = None) -> LmsExport:
    """Write OUT's current gradings as `fmt`'s import file (filling `template` if given)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    rows = _read_template(template) if template is not None else None
    with open_gradebook(out) as book:
        lab_id = pick_lab(book, lab)
        dest = dest or locate(out)[1] / DEFAULT_NAMES[fmt]
        stored = list(book.current(lab_id))
        warning = unfinished(book, lab_id)
    max_score = max((float(s.result["max_score"]) for s in stored), default=0.0)
    if fmt == "canvas":
        table, filled, unmatched = (
            _canvas_new(stored, assignment or lab_id, max_score) if rows is None
            else _canvas_fill(rows, stored, assignment or lab_id))
    else:
        table, filled, unmatched = (_moodle_new(stored, max_score) if rows is None
                                    else _moodle_fill(rows, stored))
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(table)
    write_atomic(dest, buffer.getvalue())
    return LmsExport(dest, filled, tuple(unmatched), warning)


def grade(stored: Stored) -> str:
    """The grade an LMS gets: the score of a grading with a result, else empty."""
    result = stored.result
    if stored.missing or result["status"] not in ("pass", "fail"):
        return ""
    return f"{float(result['score']):g}"


# --- templates ----------------------------------------------------------------------------


def _read_template(path: Path) -> list[list[str]]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TEMPLATE_BYTES + 1)
    except OSError as exc:
        raise ExportError(f"cannot read the template {path}: {exc.strerror}") from None
    if len(data) > MAX_TEMPLATE_BYTES:
        raise ExportError(f"the template {path} is larger than "
                          f"{MAX_TEMPLATE_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExportError(f"the template {path} is not UTF-8 text (save it as CSV UTF-8)"
                          ) from None
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ExportError(f"the template {path} is not a CSV file: {exc}") from None
    if not rows or not any(rows[0]):
        raise ExportError(f"the template {path} is empty")
    return rows


def _column(header: list[str], name: str, what: str) -> int:
    wanted = name.strip().lower()
    for i, title in enumerate(header):
        if title.strip().lower() == wanted:
            return i
    raise ExportError(f"the template has no {what} column {name!r} (its columns: "
                      f"{textsafe.shown(', '.join(header))[:300]})")


def _index(stored: Iterable[Stored]) -> dict[str, Stored]:
    """Every text a template row may name a student by: id, entry name, email."""
    found: dict[str, Stored] = {}
    for s in stored:
        for key in (s.student, s.email, s.source):
            if key:
                found.setdefault(key.strip().lower(), s)
    return found


def _fill(rows: list[list[str]], keys: list[int], grade_at: int, stored: list[Stored],
          key_of: Callable[[str], str] = str.strip) -> tuple[int, list[str]]:
    """Set the grade cell of every row one of whose `keys` cells names a graded student."""
    index = _index(stored)
    filled: set[str] = set()
    for row in rows:
        match = None
        for at in keys:
            value = key_of(row[at]) if at < len(row) else ""
            if value and (match := index.get(value.strip().lower())) is not None:
                break
        if match is None:
            continue
        while len(row) <= grade_at:
            row.append("")
        row[grade_at] = grade(match)
        filled.add(match.student)
    unmatched = [s.student for s in stored if s.student not in filled and not s.missing]
    return len(filled), unmatched


# --- Canvas -------------------------------------------------------------------------------


def _canvas_new(stored: list[Stored], assignment: str, max_score: float
                ) -> tuple[list[list[str]], int, list[str]]:
    table = [[*CANVAS_FIXED, cell(assignment)],
             [f"    {_POINTS_POSSIBLE}", "", "", "", "", f"{max_score:g}"]]
    for s in stored:
        table.append([cell(s.name or s.student), cell(s.student), "", "", cell(s.section),
                      grade(s)])
    return table, len(stored), []


def _canvas_fill(rows: list[list[str]], stored: list[Stored], assignment: str
                 ) -> tuple[list[list[str]], int, list[str]]:
    header = rows[0]
    at = _canvas_assignment(header, assignment)
    keys = [_column(header, name, "Canvas") for name in ("ID", "SIS User ID", "SIS Login ID")]
    body = [r for r in rows[1:] if not (r and r[0].strip().lower() == _POINTS_POSSIBLE.lower())]
    filled, unmatched = _fill(body, keys, at, stored)
    return rows, filled, unmatched


def _canvas_assignment(header: list[str], assignment: str) -> int:
    """The column `assignment` names: `Name (id)` exactly, or `Name` of one `Name (id)`."""
    wanted = assignment.strip().lower()
    exact = [i for i, t in enumerate(header) if t.strip().lower() == wanted]
    if exact:
        return exact[0]
    named = [i for i, t in enumerate(header)
             if re.fullmatch(re.escape(wanted) + r"\s*\(\d+\)", t.strip().lower())]
    if len(named) == 1:
        return named[0]
    columns = [t for t in header[len(CANVAS_FIXED):] if re.search(r"\(\d+\)\s*$", t)]
    raise ExportError(f"the Canvas template has {'several' if named else 'no'} assignment "
                      f"columns named {assignment!r}: pass --assignment with one of "
                      f"{textsafe.shown(', '.join(columns))[:300] or 'its columns'}")


# --- Moodle -------------------------------------------------------------------------------


def _moodle_new(stored: list[Stored], max_score: float
                ) -> tuple[list[list[str]], int, list[str]]:
    table = [list(MOODLE_COLUMNS)]
    for s in stored:
        ident = f"Participant {s.student}" if s.student.isdigit() else s.student
        status = "No submission" if s.missing else "Submitted for grading"
        table.append([cell(ident), cell(s.name), cell(s.email), status, grade(s),
                      f"{max_score:g}"])
    return table, len(stored), []


def _moodle_fill(rows: list[list[str]], stored: list[Stored]
                 ) -> tuple[list[list[str]], int, list[str]]:
    header = rows[0]
    ident = _column(header, "Identifier", "Moodle")
    email = _column(header, "Email address", "Moodle")
    at = _column(header, "Grade", "Moodle")

    def participant(text: str) -> str:
        match = _PARTICIPANT.match(text)
        return match[1] if match else text

    filled, unmatched = _fill(rows[1:], [ident, email], at, stored, participant)
    return rows, filled, unmatched
