"""Exports from the gradebook: CSV (a row per student, a column per check), JSONL (the
result documents) and Gradescope results.json; and `labkit grade --format gradescope`."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from batchkit import LAB02, LAB02_FULL, SOLUTION, made_up, made_up_gradebook

from labkit.classroom import exports
from labkit.course.catalogue import lab_checks
from labkit.interop import gradescope
from labkit.results import SCHEMA_FILE

VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
CHECKS = [c.id for c in lab_checks(LAB02).checks]
GRADESCOPE_TEST_KEYS = {"name", "score", "max_score", "status", "output", "visibility"}
GRADESCOPE_SCHEMA = jsonschema.Draft202012Validator(  # Gradescope's documented fields
    json.loads((Path(__file__).with_name("gradescope_results.schema.json")).read_text()))


@pytest.fixture()
def out(tmp_path):
    made_up_gradebook(tmp_path / "gradebook.sqlite")
    return tmp_path


def labkit(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from labkit.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def test_csv_has_a_row_per_student_and_a_column_per_check(out):
    dest, count = exports.export(out, "csv")
    assert dest == out / "grades.csv" and count == 5
    with open(dest, newline="") as handle:
        table = list(csv.reader(handle))
    assert table[0] == ["student", "status", *CHECKS, "total", "max_score", "message"]
    by_student = {row[0]: dict(zip(table[0], row, strict=True)) for row in table[1:]}
    assert list(by_student) == ["ana", "ben", "cruz", "dora", "eli"]
    full = f"{LAB02_FULL:g}"
    assert by_student["ana"]["total"] == full and by_student["ana"]["max_score"] == full
    ben = by_student["ben"]  # the current grading, not his older one
    assert ben["status"] == "fail" and ben[CHECKS[1]] == "0" and ben[CHECKS[4]] == "0"
    assert float(ben["total"]) == sum(float(ben[c]) for c in CHECKS) == LAB02_FULL - 4
    eli = by_student["eli"]  # could not be graded: nothing measured, which is not 0
    assert eli["status"] == "error" and eli["total"] == "" and eli["max_score"] == full
    assert all(eli[c] == "" for c in CHECKS) and "not a readable zip" in eli["message"]
    assert by_student["ana"]["message"] == ""


def test_exports_are_as_readable_as_any_file_the_user_writes(out):
    old = os.umask(0o022)
    try:
        dest, _ = exports.export(out, "csv")
        assert stat.S_IMODE(dest.stat().st_mode) == 0o644
        os.umask(0o077)
        dest, _ = exports.export(out, "jsonl")
        assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_csv_cells_from_submissions_cannot_be_formulas(tmp_path):
    from labkit.classroom.gradebook import Gradebook

    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(run_id=None, student="=HYPERLINK(1)", source="x", kind="folder",
                    digest="d", grader_key="k", result=made_up({}, message="@SUM(A1)\x1b[2J"))
    dest, _ = exports.export(tmp_path, "csv")
    with open(dest, newline="") as handle:
        (_, row) = list(csv.reader(handle))
    assert row[0] == "'=HYPERLINK(1)" and row[-1].startswith("'@SUM(A1)")
    assert "\x1b" not in row[-1]


def test_jsonl_lines_carry_valid_result_documents(out):
    dest, _ = exports.export(out, "jsonl", dest=out / "all.jsonl")
    lines = dest.read_text().splitlines()
    assert len(lines) == 5
    for line in lines:
        entry = json.loads(line)
        assert set(entry) == {"student", "source", "graded_at", "result"}
        VALIDATOR.validate(entry["result"])
    assert json.loads(lines[2])["result"]["lang"] == "es"


def test_gradescope_files_have_the_autograder_shape(out):
    dest, count = gradescope.export(out)
    files = sorted(dest.glob("*/results.json"))
    assert [f.parent.name for f in files] == ["ana", "ben", "cruz", "dora", "eli"]
    for file in files:
        GRADESCOPE_SCHEMA.validate(json.loads(file.read_text()))
    ben = json.loads((dest / "ben" / "results.json").read_text())
    assert ben["score"] == LAB02_FULL - 4 and len(ben["tests"]) == len(CHECKS)
    for test in ben["tests"]:
        assert set(test) >= GRADESCOPE_TEST_KEYS
        assert test["status"] in ("passed", "failed") and test["visibility"] == "visible"
    failed = [t for t in ben["tests"] if t["status"] == "failed"]
    assert [t["score"] for t in failed] == [0, 0] and all(t["output"] for t in failed)
    assert sum(t["score"] for t in ben["tests"]) == ben["score"]
    cruz = json.loads((dest / "cruz" / "results.json").read_text())  # graded in Spanish
    assert "puntos" in cruz["output"]
    assert any("debe" in t["output"] or "incorrecto" in t["output"] for t in cruz["tests"])
    eli = json.loads((dest / "eli" / "results.json").read_text())
    assert eli["score"] == 0 and eli["tests"] == [] and "zip" in eli["output"]


def test_gradescope_output_includes_what_the_code_printed():
    import dataclasses

    result = made_up({CHECKS[0]: "fail"}, lang="es")
    checks = list(result.checks)
    checks[0] = dataclasses.replace(checks[0], output="hola\n")
    document = gradescope.document(dataclasses.replace(result, checks=tuple(checks)))
    assert "Tu código imprimió" in document["tests"][0]["output"]
    assert "hola" in document["tests"][0]["output"]


def test_export_errors_are_clear(tmp_path, out):
    with pytest.raises(exports.ExportError, match="no gradebook"):
        exports.export(tmp_path / "nowhere", "csv")
    with pytest.raises(exports.ExportError, match="no gradings of lab01"):
        exports.export(out, "csv", lab="lab01")
    with pytest.raises(exports.ExportError, match="unknown format"):
        exports.export(out, "xlsx")


def test_cli_export_writes_and_says_where(out):
    done = labkit("export", str(out), "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out / 'grades.csv'} (5 students)"
    done = labkit("export", str(out / "gradebook.sqlite"), "--format", "jsonl", "-o",
                  str(out / "x.jsonl"))
    assert done.returncode == 0 and (out / "x.jsonl").is_file()
    bad = labkit("export", str(out), "--format", "pdf")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_grade_format_gradescope_and_json_alias(tmp_path):
    work = tmp_path / "lab02"
    work.mkdir()
    (work / "broadcasting.py").write_text(SOLUTION)
    done = labkit("grade", "lab02", "--format", "gradescope", "--lang", "en", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    GRADESCOPE_SCHEMA.validate(document)
    assert document["score"] == LAB02_FULL and len(document["tests"]) == len(CHECKS)
    assert all(set(t) >= GRADESCOPE_TEST_KEYS and t["status"] == "passed"
               for t in document["tests"])
    clash = labkit("grade", "lab02", "--json", "--format", "table", cwd=tmp_path)
    assert clash.returncode == 2 and "contradict" in clash.stderr
    missing = labkit("grade", "lab02", "--format", "gradescope", "--lang", "es",
                     "--dir", str(tmp_path / "nope"))
    assert missing.returncode == 2
    failed = json.loads(missing.stdout)  # Gradescope still gets a results.json
    assert failed["score"] == 0 and failed["tests"] == [] and "labkit fetch" in failed["output"]
