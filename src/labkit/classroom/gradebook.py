"""The gradebook: every batch grading of a class, in one SQLite file.

Written as each submission finishes, one transaction per submission (WAL journal), so a
batch killed at any point loses nothing it had recorded and a rerun picks up the rest.
The schema is versioned: `schema_version` lists the migrations applied, and opening a
gradebook applies the missing ones in order (`MIGRATIONS`). Version 1:

- `runs`: one row per `labkit batch` run (lab, submissions folder, jobs, call timeout,
  start/finish times, counts). `finished_at` stays NULL for a run that was killed.
- `students`: one row per student id (the entry's name in the submissions folder).
- `submissions`: one row per grading of a student's entry: `digest` (`sha256:` of the
  graded files; for an entry that could not be read, of the entry itself), `grader_key`
  (fingerprint of the kit version, the lab's graders and the grading options; a change
  regrades), `status`, `score`, `max_score`, `duration_s`, `graded_at` (UTC, ISO 8601),
  `isolation`, `lang`, `message`, `retry` (1 when the failure was the kit's, not the
  submission's: a rerun grades it again) and `document` (the full `labkit.result/1`
  JSON). Older gradings of a student stay; the current one is the highest `id`
  (view `latest_submissions`).
- `check_results`: one row per check of a submission, in grader order (`position`):
  `check_id`, `title`, `status`, `points`, `max_points`, `message`, `output`.

Version 2 (issue 18: LMS downloads and rosters): `students` gains `name`, `email` and
`section` (from the LMS or the roster; the id is the LMS's, the entry's name stays in
`submissions.source`); `submissions` gains `late` (the LMS marked it late) and `missing`
(a roster student with no entry: status `error`, kind `none`, nothing graded), `runs`
gains `layout` (how the download was read, so `labkit similarity` reads it again), and its
`kind` may also be `files` (loose files of one student, as Canvas delivers them). SQLite
cannot change a CHECK constraint, so `submissions` is rebuilt with its rows kept, as
SQLite's documentation describes (foreign keys off while it runs).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labkit.errors import EnglishError
from labkit.results import LabResult

SCHEMA_VERSION = 2
FILE_NAME = "gradebook.sqlite"  # inside a batch's output folder

_V1_COLUMNS = ("id, student_id, lab, run_id, source, kind, digest, grader_key, status, score,"
               " max_score, duration_s, graded_at, isolation, lang, labkit_version, message,"
               " retry, document")

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            lab TEXT NOT NULL,
            source TEXT NOT NULL,
            jobs INTEGER NOT NULL,
            call_timeout REAL NOT NULL,
            labkit_version TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            graded INTEGER NOT NULL DEFAULT 0,
            skipped INTEGER NOT NULL DEFAULT 0,
            errors INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE students (
            id TEXT PRIMARY KEY,
            first_seen TEXT NOT NULL
        )""",
        """CREATE TABLE submissions (
            id INTEGER PRIMARY KEY,
            student_id TEXT NOT NULL REFERENCES students(id),
            lab TEXT NOT NULL,
            run_id INTEGER REFERENCES runs(id),
            source TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('folder', 'zip')),
            digest TEXT NOT NULL,
            grader_key TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'error')),
            score REAL NOT NULL,
            max_score REAL NOT NULL,
            duration_s REAL NOT NULL,
            graded_at TEXT NOT NULL,
            isolation TEXT NOT NULL,
            lang TEXT NOT NULL,
            labkit_version TEXT NOT NULL,
            message TEXT NOT NULL,
            retry INTEGER NOT NULL DEFAULT 0,
            document TEXT NOT NULL
        )""",
        "CREATE INDEX submissions_by_student ON submissions (lab, student_id, id)",
        """CREATE TABLE check_results (
            submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            check_id TEXT NOT NULL,
            title TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'error', 'timeout')),
            points REAL NOT NULL,
            max_points REAL NOT NULL,
            message TEXT NOT NULL,
            output TEXT NOT NULL,
            PRIMARY KEY (submission_id, position)
        )""",
        "CREATE INDEX check_results_by_check ON check_results (check_id, status)",
        """CREATE VIEW latest_submissions AS
            SELECT s.* FROM submissions s
            WHERE s.id = (SELECT max(id) FROM submissions
                          WHERE lab = s.lab AND student_id = s.student_id)""",
    ),
    2: (
        "DROP VIEW latest_submissions",
        """CREATE TABLE submissions_v2 (
            id INTEGER PRIMARY KEY,
            student_id TEXT NOT NULL REFERENCES students(id),
            lab TEXT NOT NULL,
            run_id INTEGER REFERENCES runs(id),
            source TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('folder', 'zip', 'files', 'none')),
            digest TEXT NOT NULL,
            grader_key TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'error')),
            score REAL NOT NULL,
            max_score REAL NOT NULL,
            duration_s REAL NOT NULL,
            graded_at TEXT NOT NULL,
            isolation TEXT NOT NULL,
            lang TEXT NOT NULL,
            labkit_version TEXT NOT NULL,
            message TEXT NOT NULL,
            retry INTEGER NOT NULL DEFAULT 0,
            document TEXT NOT NULL,
            late INTEGER NOT NULL DEFAULT 0,
            missing INTEGER NOT NULL DEFAULT 0
        )""",
        f"INSERT INTO submissions_v2 ({_V1_COLUMNS}) SELECT {_V1_COLUMNS} FROM submissions",
        "DROP TABLE submissions",
        "ALTER TABLE submissions_v2 RENAME TO submissions",
        "CREATE INDEX submissions_by_student ON submissions (lab, student_id, id)",
        "CREATE INDEX submissions_by_source ON submissions (lab, source, id)",
        """CREATE VIEW latest_submissions AS
            SELECT s.* FROM submissions s
            WHERE s.id = (SELECT max(id) FROM submissions
                          WHERE lab = s.lab AND student_id = s.student_id)""",
        "ALTER TABLE students ADD COLUMN name TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE students ADD COLUMN email TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE students ADD COLUMN section TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN layout TEXT NOT NULL DEFAULT ''",
    ),
}


class GradebookError(EnglishError):
    """The file is not a gradebook this kit can use (e.g. written by a newer one)."""


def locate(out: Path) -> tuple[Path, Path]:
    """(gradebook file, output folder) for OUT: a batch's output folder or the file itself."""
    out = Path(out)
    if out.is_file():
        return out, out.parent
    return out / FILE_NAME, out


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _rowid(cursor: sqlite3.Cursor) -> int:
    """The id of the row a successful INSERT just wrote (sqlite3 sets it after every INSERT)."""
    rowid = cursor.lastrowid
    if rowid is None:
        raise TypeError("the INSERT left no row id")
    return rowid


@dataclass(frozen=True)
class Previous:
    """What the gradebook knows of a student's last grading, to decide on skipping it."""

    digest: str
    grader_key: str
    retry: bool


@dataclass(frozen=True)
class RunInfo:
    """A `labkit batch` run, as reports and exports check it (an unfinished one warns)."""

    id: int
    lab: str
    started_at: str
    finished_at: str | None
    source: str  # the submissions folder
    layout: str  # how it was read ("" before schema 2)


@dataclass(frozen=True)
class Stored:
    """A student's current grading, as exports and reports read it."""

    student: str
    source: str
    kind: str
    graded_at: str
    result: dict[str, Any]  # the labkit.result/1 document
    late: bool = False
    missing: bool = False  # on the roster, no entry: nothing was graded
    name: str = ""
    email: str = ""
    section: str = ""


@dataclass(frozen=True)
class CheckStat:
    """How the class did on one check (current gradings only)."""

    check_id: str
    title: str
    max_points: float
    graded: int
    passed: int
    failed: int
    timeouts: int
    errors: int
    points: float
    top_message: str
    top_count: int

    @property
    def pass_rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


class Gradebook:
    """An open gradebook; use as a context manager."""

    def __init__(self, path: Path, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise GradebookError(f"no gradebook at {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across process crashes
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.execute("PRAGMA cache_size=-512")  # KiB: memory stays flat with the class
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise GradebookError(f"{self.path} is not a usable gradebook: {exc}") from None

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # --- schema -------------------------------------------------------------------------

    def version(self) -> int:
        exists = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        if not exists:
            return 0
        return self.db.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]

    def _migrate(self) -> None:
        # a table rebuild (version 2) must not cascade its DROP into check_results
        self.db.execute("PRAGMA foreign_keys=OFF")
        try:
            self._apply_migrations()
        finally:
            self.db.execute("PRAGMA foreign_keys=ON")

    def _apply_migrations(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            current = self.version()
            if current > SCHEMA_VERSION:
                raise GradebookError(
                    f"{self.path} has gradebook schema {current}; this labkit knows up to "
                    f"{SCHEMA_VERSION} (upgrade labkit)"
                )
            if current == 0:
                self.db.execute(
                    "CREATE TABLE schema_version"
                    " (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    self.db.execute(statement)
                self.db.execute("INSERT INTO schema_version VALUES (?, ?)", (version, now()))
            if current and current < SCHEMA_VERSION:
                broken = self.db.execute("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise GradebookError(f"{self.path}: the migration broke {len(broken)} "
                                         "references; nothing was changed")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    # --- writing ------------------------------------------------------------------------

    def begin_run(self, lab: str, source: str, jobs: int, call_timeout: float,
                  labkit_version: str, layout: str = "") -> int:
        cursor = self.db.execute(
            "INSERT INTO runs (lab, source, jobs, call_timeout, labkit_version, started_at,"
            " layout) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (lab, source, jobs, call_timeout, labkit_version, now(), layout),
        )
        return _rowid(cursor)

    def finish_run(self, run_id: int, graded: int, skipped: int, errors: int) -> None:
        self.db.execute(
            "UPDATE runs SET finished_at = ?, graded = ?, skipped = ?, errors = ? WHERE id = ?",
            (now(), graded, skipped, errors, run_id),
        )

    def record(self, *, run_id: int | None, student: str, source: str, kind: str, digest: str,
               grader_key: str, result: LabResult, retry: bool = False, late: bool = False,
               missing: bool = False) -> int:
        """Store one finished grading and its checks in one transaction."""
        stamp = now()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT OR IGNORE INTO students (id, first_seen) VALUES (?, ?)",
                            (student, stamp))
            cursor = self.db.execute(
                "INSERT INTO submissions (student_id, lab, run_id, source, kind, digest,"
                " grader_key, status, score, max_score, duration_s, graded_at, isolation, lang,"
                " labkit_version, message, retry, document, late, missing)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (student, result.lab, run_id, source, kind, digest, grader_key,
                 result.status.value, result.score, result.max_score, result.duration_s, stamp,
                 result.isolation, result.lang, result.labkit_version, result.message,
                 int(retry), json.dumps(result.to_dict(), ensure_ascii=False), int(late),
                 int(missing)),
            )
            submission = _rowid(cursor)
            self.db.executemany(
                "INSERT INTO check_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(submission, position, c.id, c.title, c.status.value, c.points, c.max_points,
                  c.message, c.output) for position, c in enumerate(result.checks)],
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return submission

    def set_person(self, student: str, name: str, email: str, section: str) -> None:
        """Who a student is, as the LMS or the roster says (only what is known replaces)."""
        self.db.execute("INSERT OR IGNORE INTO students (id, first_seen) VALUES (?, ?)",
                        (student, now()))
        self.db.execute(
            "UPDATE students SET name = coalesce(nullif(?, ''), name),"
            " email = coalesce(nullif(?, ''), email),"
            " section = coalesce(nullif(?, ''), section) WHERE id = ?",
            (name, email, section, student),
        )

    def reassign(self, lab: str, old: str, new: str) -> None:
        """Move a student's gradings of `lab` to a new id (a roster now names the entry):
        what was graded stays graded, under the LMS's id."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT OR IGNORE INTO students (id, first_seen) VALUES (?, ?)",
                            (new, now()))
            self.db.execute("UPDATE submissions SET student_id = ? WHERE lab = ? AND"
                            " student_id = ?", (new, lab, old))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    # --- reading ------------------------------------------------------------------------

    def previous(self, lab: str, student: str) -> Previous | None:
        row = self.db.execute(
            "SELECT digest, grader_key, retry FROM submissions WHERE lab = ? AND student_id = ?"
            " ORDER BY id DESC LIMIT 1",
            (lab, student),
        ).fetchone()
        return Previous(row[0], row[1], bool(row[2])) if row else None

    def previous_of_source(self, lab: str, source: str) -> tuple[str, Previous] | None:
        """(student id, last grading) of the entry named `source`, whoever it was filed as."""
        row = self.db.execute(
            "SELECT student_id, digest, grader_key, retry FROM latest_submissions"
            " WHERE lab = ? AND source = ? AND missing = 0 ORDER BY id DESC LIMIT 1",
            (lab, source),
        ).fetchone()
        return (row[0], Previous(row[1], row[2], bool(row[3]))) if row else None

    def is_missing(self, lab: str, student: str) -> bool:
        row = self.db.execute(
            "SELECT missing FROM latest_submissions WHERE lab = ? AND student_id = ?",
            (lab, student),
        ).fetchone()
        return bool(row and row[0])

    def last_run(self, lab: str) -> RunInfo | None:
        """The latest batch run of `lab` (its `finished_at` is None if it was cut short)."""
        row = self.db.execute(
            "SELECT id, lab, started_at, finished_at, source, layout FROM runs WHERE lab = ?"
            " ORDER BY id DESC LIMIT 1", (lab,),
        ).fetchone()
        return RunInfo(*row) if row else None

    def labs(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT lab FROM submissions ORDER BY lab")]

    def count(self, lab: str) -> int:
        return self.db.execute(
            "SELECT count(DISTINCT student_id) FROM submissions WHERE lab = ?", (lab,)
        ).fetchone()[0]

    def current(self, lab: str) -> Iterator[Stored]:
        """Every student's current grading of `lab`, by student id (streamed)."""
        rows = self.db.execute(
            "SELECT s.student_id, s.source, s.kind, s.graded_at, s.document, s.late, s.missing,"
            " p.name, p.email, p.section FROM latest_submissions s"
            " JOIN students p ON p.id = s.student_id WHERE s.lab = ? ORDER BY s.student_id",
            (lab,),
        )
        for student, source, kind, graded_at, document, late, missing, name, email, sec in rows:
            yield Stored(student, source, kind, graded_at, json.loads(document), bool(late),
                         bool(missing), name, email, sec)

    def scores(self, lab: str) -> Iterator[tuple[str, float, float]]:
        """(status, score, max_score) of every current grading, lowest score first."""
        yield from self.db.execute(
            "SELECT status, score, max_score FROM latest_submissions WHERE lab = ?"
            " ORDER BY score",
            (lab,),
        )

    def failures(self, lab: str) -> Iterator[tuple[str, str, str, str]]:
        """(student, check id, status, message) of every check a current grading did not
        pass, by check then student."""
        yield from self.db.execute(
            "SELECT s.student_id, c.check_id, c.status, c.message"
            " FROM check_results c JOIN latest_submissions s ON s.id = c.submission_id"
            " WHERE s.lab = ? AND c.status != 'pass' ORDER BY c.check_id, s.student_id",
            (lab,),
        )

    def checks(self, lab: str) -> list[tuple[str, str, float]]:
        """The lab's checks as graded: (id, title, max_points), in grader order."""
        rows = self.db.execute(
            "SELECT c.check_id, max(c.title), max(c.max_points), min(c.position)"
            " FROM check_results c JOIN latest_submissions s ON s.id = c.submission_id"
            " WHERE s.lab = ? GROUP BY c.check_id ORDER BY min(c.position), c.check_id",
            (lab,),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def check_stats(self, lab: str) -> list[CheckStat]:
        """Per-check counts over the current gradings that have checks, in grader order."""
        totals = self.db.execute(
            "SELECT c.check_id, max(c.title), max(c.max_points), count(*),"
            " sum(c.status = 'pass'), sum(c.status = 'fail'), sum(c.status = 'timeout'),"
            " sum(c.status = 'error'), sum(c.points), min(c.position)"
            " FROM check_results c JOIN latest_submissions s ON s.id = c.submission_id"
            " WHERE s.lab = ? GROUP BY c.check_id ORDER BY min(c.position), c.check_id",
            (lab,),
        ).fetchall()
        messages: dict[str, tuple[str, int]] = {}
        for check_id, message, count in self.db.execute(
            "SELECT c.check_id, c.message, count(*) AS n"
            " FROM check_results c JOIN latest_submissions s ON s.id = c.submission_id"
            " WHERE s.lab = ? AND c.status != 'pass' GROUP BY c.check_id, c.message"
            " ORDER BY n DESC, c.message",
            (lab,),
        ):
            messages.setdefault(check_id, (message, count))
        return [
            CheckStat(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8] or 0.0,
                      *messages.get(r[0], ("", 0)))
            for r in totals
        ]
