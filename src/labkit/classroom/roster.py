"""A class roster: which LMS student each entry of a download is, and who sent nothing.

`read(path)` takes the CSV an LMS exports — Canvas's gradebook (`Student, ID, SIS User
ID, SIS Login ID, Section`), Moodle's grading worksheet (`Identifier, Full name, Email
address`, the identifier being `Participant N`), Gradescope's roster (`First Name, Last
Name, SID, Email, Sections`) or a plain `id, name, email, section` file — and `place`
renames entries to the roster's ids: an entry matches a person by its id (the Canvas
user id, the Moodle participant id, the Gradescope SID), its email, or its folder name
against the login ids and the email's user part. A key two people share matches nobody.

Rows that are not students are on no roster (`Placed.not_students`): staff, where the
export has a role column (Gradescope's `Role`: TA, Instructor, Reader; Moodle's
participants `Roles`: Teacher, Non-editing teacher, Manager...), and the test student an
LMS adds for its "student view" (Canvas: "Test Student", "Student, Test" in its
gradebook). A role labkit does not know counts as a student: a student left out would
be missing from every count, a staff member kept is only listed as missing.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from labkit import textsafe
from labkit.classroom.submissions import Entry, one_per_student
from labkit.errors import EnglishError

MAX_ROSTER_BYTES = 16 * 1024 * 1024
MAX_ROWS = 100_000

_ID = ("id", "identifier", "sid", "student id", "student_id", "user id")
_NAME = ("student", "full name", "name", "student name")
_EMAIL = ("email", "email address", "e-mail")
_SECTION = ("section", "sections", "group", "groups")
_LOGINS = ("sis login id", "sis user id", "login", "login id", "username", "id number",
           "integration id")
_ROLE = ("role", "roles")
# roles of people who teach, grade or watch, as Canvas, Moodle and Gradescope name them
_STAFF = frozenset(("ta", "teacher", "instructor", "reader", "grader", "manager", "designer",
                    "observer", "non-editing teacher", "editing teacher", "teaching assistant",
                    "teacher assistant", "course creator", "tutor", "editingteacher",
                    "teacherenrollment", "taenrollment", "designerenrollment",
                    "observerenrollment", "profesor", "profesor sin permiso de edición"))
_TEST_STUDENT = frozenset(("test student", "student, test"))
_PARTICIPANT = re.compile(r"^(?:participant|participante)\s*(\d+)$", re.IGNORECASE)


class RosterError(EnglishError):
    """The roster file cannot be used (one line, for the CLI)."""


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    email: str
    section: str
    keys: frozenset[str]  # every text an entry may be matched by (lowercased)
    student: bool = True  # False: staff, or the LMS's test student (see the module's doc)


@dataclass(frozen=True)
class Placed:
    entries: list[Entry]  # renamed to the roster's ids where matched
    unlisted: list[str]  # entries that match nobody on the roster (graded all the same)
    missing: list[Person]  # on the roster, with no entry
    not_students: list[Person] = field(default_factory=list)  # rows left out: staff, tests


def read(path: Path) -> list[Person]:
    """The people of a roster CSV (size-bounded; a header row names the columns)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_ROSTER_BYTES + 1)
    except OSError as exc:
        raise RosterError(f"cannot read the roster {path}: {exc.strerror}") from None
    if len(data) > MAX_ROSTER_BYTES:
        raise RosterError(f"the roster {path} is larger than {MAX_ROSTER_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("cp1252", errors="replace")  # Excel's default on Windows
    try:
        rows = list(_rows(csv.reader(io.StringIO(text, newline=""))))
    except csv.Error as exc:
        raise RosterError(f"the roster {path} is not a CSV file: {exc}") from None
    if not rows:
        raise RosterError(f"the roster {path} is empty")
    header = [h.strip().lower() for h in rows[0]]
    column = {name: i for i, name in reversed(list(enumerate(header)))}

    def pick(names: Iterable[str], row: list[str]) -> str:
        for name in names:
            if name in column and column[name] < len(row) and row[column[name]].strip():
                return row[column[name]].strip()
        return ""

    if not any(n in column for n in (*_ID, *_EMAIL, *_LOGINS)):
        raise RosterError(f"the roster {path} has no id or email column (its header: "
                          f"{textsafe.shown(', '.join(rows[0])[:200])})")
    people = []
    for row in rows[1:]:
        ident = pick(_ID, row)
        name = pick(_NAME, row) or " ".join(filter(None, (pick(("first name",), row),
                                                          pick(("last name",), row))))
        email = pick(_EMAIL, row)
        if name.strip().lower() == "points possible" or not (ident or email):
            continue  # Canvas's second row, and blank lines
        participant = _PARTICIPANT.match(ident)
        if participant:
            ident = participant[1]
        logins = [row[column[n]].strip() for n in _LOGINS
                  if n in column and column[n] < len(row) and row[column[n]].strip()]
        keys = {k.lower() for k in (ident, email, *logins) if k}
        if email and "@" in email:
            keys.add(email.split("@", 1)[0].lower())
        roles = {r.strip().lower() for r in re.split(r"[,;]", pick(_ROLE, row)) if r.strip()}
        student = not (roles and roles <= _STAFF) and name.strip().lower() not in _TEST_STUDENT
        people.append(Person(textsafe.shown(ident or email), textsafe.shown(name),
                             textsafe.shown(email), textsafe.shown(pick(_SECTION, row)),
                             frozenset(keys), student))
    return people


def _rows(reader: Iterable[list[str]]) -> Iterable[list[str]]:
    for count, row in enumerate(reader):
        if count > MAX_ROWS:
            raise RosterError(f"the roster has more than {MAX_ROWS} rows")
        if any(cell.strip() for cell in row):
            yield row


def place(entries: list[Entry], people: list[Person]) -> Placed:
    """Entries named by the roster's ids, with the roster's names, emails and sections.
    Rows that are not students match no entry and are never missing."""
    not_students = [p for p in people if not p.student]
    people = [p for p in people if p.student]
    index: dict[str, Person | None] = {}
    for someone in people:
        for key in someone.keys:
            index[key] = None if key in index and index[key] != someone else someone
    placed: list[Entry] = []
    unlisted: list[str] = []
    seen: set[str] = set()
    for entry in entries:
        person = next((p for k in _entry_keys(entry) if (p := index.get(k)) is not None), None)
        if person is None:
            unlisted.append(entry.source)
            placed.append(entry)
            continue
        seen.add(person.id)
        placed.append(replace(entry, student=person.id, person=person.name or entry.person,
                              email=person.email or entry.email, section=person.section))
    missing = [p for p in people if p.id not in seen]
    return Placed(one_per_student(placed), unlisted, missing, not_students)


def _entry_keys(entry: Entry) -> list[str]:
    name = entry.source
    stem = name[:-4] if name.lower().endswith(".zip") else name
    return [k.lower() for k in (entry.student, entry.email, stem) if k]
