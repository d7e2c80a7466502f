"""Grades back into Canvas and Moodle: their import files written from scratch, and their
own downloaded files filled in (read back with `csv`, row by row)."""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest
from batchkit import made_up

from labkit import __version__
from labkit.classroom import exports, lms
from labkit.classroom.batch import error_result
from labkit.classroom.gradebook import Gradebook
from labkit.course.catalogue import get_lab, lab_checks

LAB02 = get_lab("lab02")
CHECKS = [c.id for c in lab_checks(LAB02).checks]
# id -> (name, email, section, result kind)
CLASS = {
    "101": ("Smith, Alice", "alice@uni.edu", "Sec A", "pass"),
    "102": ("Jones, Bob", "bob@uni.edu", "Sec B", "fail"),
    "103": ("=Lee, Carol", "carol@uni.edu", "Sec A", "error"),  # a name that looks a formula
    "104": ("Kim, Dan", "dan@uni.edu", "Sec B", "missing"),
}
FULL = f"{lab_checks(LAB02).max_score:g}"  # lab02's full marks
FAILED_ONE = made_up({CHECKS[1]: "fail"})
EXPECTED = {"101": FULL, "102": f"{FAILED_ONE.score:g}", "103": "", "104": ""}


@pytest.fixture()
def out(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        run = book.begin_run("lab02", "/download", 2, 5.0, __version__)
        for student, (name, email, section, kind) in CLASS.items():
            book.set_person(student, name, email, section)
            if kind == "pass":
                result = made_up({})
            elif kind == "fail":
                result = FAILED_ONE
            else:
                result = error_result(LAB02, "broken zip" if kind == "error" else "no submission",
                                      "en")
            book.record(run_id=run, student=student, source=f"entry-{student}", kind="folder"
                        if kind != "missing" else "none", digest="d", grader_key="k",
                        result=result, missing=kind == "missing", late=student == "102")
        book.finish_run(run, 3, 0, 1)
    return tmp_path


def table(path):
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return list(csv.reader(handle))


def test_canvas_import_without_a_template_has_canvas_layout(out):
    made = lms.export(out, "canvas", assignment="Lab 02 (777)")
    rows = table(made.dest)
    assert made.dest == out / "canvas-grades.csv" and made.students == 4 and not made.warning
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 02 (777)"]
    assert rows[1][0].strip() == "Points Possible" and rows[1][5] == FULL
    by_id = {r[1]: r for r in rows[2:]}
    assert {k: r[5] for k, r in by_id.items()} == EXPECTED  # error and missing: empty, not 0
    assert by_id["101"][0] == "Smith, Alice" and by_id["101"][4] == "Sec A"
    assert by_id["103"][0] == "'=Lee, Carol"


CANVAS_TEMPLATE = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Lab 01 (776),Lab 02 (777),Current Score\n"
    "    Points Possible,,,,,10,14,(read only)\n"
    '"Smith, Alice",101,S101,asmith,Sec A,9,,64.3\n'
    '"Jones, Bob",102,S102,bjones,Sec B,7,3,50\n'
    '"Diaz, Eva",105,S105,ediaz,Sec A,10,,100\n'
    '"Lee, Carol",103,S103,clee,Sec A,8,5,57.1\n'
    "Student, Test,999,,,Sec A,,,\n"
)


def test_canvas_template_is_filled_in_place(out, tmp_path):
    template = tmp_path / "export.csv"
    template.write_text(CANVAS_TEMPLATE)
    made = lms.export(out, "canvas", template=template, assignment="Lab 02")
    before, after = table(template), table(made.dest)
    assert len(after) == len(before) and after[0] == before[0] and after[1] == before[1]
    column = before[0].index("Lab 02 (777)")
    for old, new in zip(before[2:], after[2:], strict=True):
        student = old[1]
        wanted = EXPECTED.get(student, old[column])  # rows labkit did not grade: unchanged
        assert new[column] == wanted, student
        assert new[:column] + new[column + 1:] == old[:column] + old[column + 1:]
    assert made.students == 3 and made.unmatched == ()  # 104 sent nothing: not "unmatched"
    with pytest.raises(exports.ExportError, match="no assignment columns named 'Lab 09'"):
        lms.export(out, "canvas", template=template, assignment="Lab 09")


def test_canvas_template_matches_by_sis_login_too(out, tmp_path):
    template = tmp_path / "export.csv"
    template.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Lab 02 (777)\n"
                        '"Someone",555,,entry-101,Sec A,\n')
    made = lms.export(out, "canvas", template=template, assignment="Lab 02 (777)")
    assert table(made.dest)[1][5] == FULL and made.unmatched == ("102", "103")


def test_moodle_worksheet_without_and_with_a_template(out, tmp_path):
    made = lms.export(out, "moodle")
    rows = table(made.dest)
    assert rows[0] == ["Identifier", "Full name", "Email address", "Status", "Grade",
                       "Maximum Grade"]
    by_id = {r[0]: r for r in rows[1:]}
    assert {k: r[4] for k, r in by_id.items()} == {f"Participant {k}": v
                                                   for k, v in EXPECTED.items()}
    assert by_id["Participant 104"][3] == "No submission" and by_id["Participant 101"][5] == FULL
    template = tmp_path / "worksheet.csv"
    template.write_text(
        "\ufeffIdentifier,Full name,Email address,Status,Grade,Maximum Grade,"
        "Grade can be changed,Last modified (submission),Last modified (grade),"
        "Feedback comments\n"
        "Participant 101,Alice Smith,alice@uni.edu,Submitted for grading,,14.00,Yes,"
        '"Monday, 30 November 2026, 10:00 AM",-,\n'
        "Participant 102,Bob Jones,bob@uni.edu,Submitted for grading,,14.00,Yes,-,-,\n"
        "Participant 106,Zoe Park,zoe@uni.edu,No submission,,14.00,Yes,-,-,\n"
        "Participant 777,Carol Lee,carol@uni.edu,Submitted for grading,5.00,14.00,Yes,-,-,\n")
    filled = lms.export(out, "moodle", dest=tmp_path / "up.csv", template=template)
    before, after = table(template), table(filled.dest)
    assert after[0] == before[0] and len(after) == len(before)
    grades = {r[0]: r[4] for r in after[1:]}
    # 777 is Carol by her email: an error, so her old grade gives way to an empty one
    assert grades == {"Participant 101": FULL, "Participant 102": EXPECTED["102"],
                      "Participant 106": "",
                      "Participant 777": ""}
    assert after[1][7] == "Monday, 30 November 2026, 10:00 AM"  # Moodle's own columns kept
    assert filled.students == 3


def test_an_unfinished_batch_says_so(out, tmp_path):
    with Gradebook(out / "gradebook.sqlite") as book:
        book.begin_run("lab02", "/download", 2, 5.0, __version__)  # never finished
    made = lms.export(out, "canvas")
    assert made.warning.startswith("warning: the last labkit batch of lab02")
    done = subprocess.run([sys.executable, "-m", "labkit", "export", str(out), "--format",
                           "moodle"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].startswith("warning: the last labkit batch")
    bad = subprocess.run([sys.executable, "-m", "labkit", "export", str(out), "--format",
                          "csv", "--assignment", "x"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "--format canvas or moodle" in bad.stderr
