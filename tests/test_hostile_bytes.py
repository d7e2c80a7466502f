"""Every byte from a submission is data, never markup or control.

The class in `tests/hostile/bytes.toml` is graded in one batch (`--jobs 2`, through the
CLI, as an instructor runs it), then reported and exported; the test asserts that the
batch completes, that each attacker is recorded as the file says, that the correct
submissions graded after them all keep full marks, that nothing printed holds a control
character, that no CSV cell starts a formula and that the HTML page escapes the
students' text. The fast tests below check each defence on its own.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import sqlite3
import struct
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from batchkit import LAB02, LAB02_FULL, SOLUTION, made_up
from kit import TESTS

from labkit import __version__, textsafe
from labkit.classroom import exports, report, submissions
from labkit.classroom.batch import BatchEvent
from labkit.classroom.gradebook import Gradebook
from labkit.cli import render
from labkit.cli.progress import PlainProgress
from labkit.course.catalogue import lab_checks
from labkit.results import CheckResult, LabResult, Status
from labkit.student import notebookfiles
from labkit.student.notebookfiles import NotebookError

CASES = tomllib.loads((TESTS / "hostile" / "bytes.toml").read_text(encoding="utf-8"))["entry"]
CHECKS = [c.id for c in lab_checks(LAB02).checks]
CORRECT = ("zz-ok-1", "zz-ok-2", "zz-ok-3")  # sorted after every attacker: graded last
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
UNPRINTABLE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} - {"\n"}


def unescaped(literal: str) -> bytes:
    """A name as bytes.toml writes it: `\\xNN` is the byte NN."""
    return codecs.escape_decode(literal.encode())[0]


# --- building the class --------------------------------------------------------------------


def solution_edited(case: dict) -> str:
    text = SOLUTION
    if "replace" in case:
        assert text.count(case["replace"]) == 1, case["name"]
        text = text.replace(case["replace"], case["with"])
    return text + case.get("append", "")


def notebook(*cells: str) -> str:
    code = [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
             "execution_count": None} for source in (SOLUTION, *cells)]
    return json.dumps({"cells": code, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def zip_bytes(members: dict[str, str | bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def deep_notebook() -> bytes:
    """A few hundred bytes that `json.loads` would recurse into 100,000 levels deep."""
    return zip_bytes({"lab02.ipynb": '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}"})


def line_of_blanks() -> dict[str, str]:
    """A shell escape, then a long blank line, which the magics' pattern once took
    quadratic time to scan (minutes, for the whole batch)."""
    return {"lab02.ipynb": notebook("!ls\n" + " " * 100_000 + "\n")}


def corrupt_lzma() -> bytes:
    data = bytearray(zip_bytes({"broadcasting.py": SOLUTION}, zipfile.ZIP_LZMA))
    member = zipfile.ZipFile(io.BytesIO(bytes(data))).infolist()[0]
    start = member.header_offset + 30 + len(member.filename) + len(member.extra)
    data[start + 20: start + member.compress_size - 20] = b"\xff" * (member.compress_size - 40)
    return bytes(data)


def version_needed() -> bytes:
    data = bytearray(zip_bytes({"broadcasting.py": SOLUTION}))
    struct.pack_into("<B", data, data.rfind(b"PK\x01\x02") + 6, 99)  # needs unzip 9.9
    return bytes(data)


def member_name_not_utf8() -> bytes:
    data = bytearray(zip_bytes({"broadcasting.py": SOLUTION, "zzzz.txt": "x"}, zipfile.ZIP_STORED))
    data = data.replace(b"zzzz.txt", b"\xff\xfe\x1b[2J.x")
    central = data.rfind(b"PK\x01\x02")
    flags = struct.unpack_from("<H", data, central + 8)[0]
    struct.pack_into("<H", data, central + 8, flags | 0x800)  # "the name is UTF-8": it is not
    return bytes(data)


CRAFTED: dict[str, Callable[[], bytes | dict[str, str]]] = {
    "deep_notebook": deep_notebook, "line_of_blanks": line_of_blanks,
    "corrupt_lzma": corrupt_lzma, "version_needed": version_needed,
    "member_name_not_utf8": member_name_not_utf8,
}


def build(case: dict, root: Path) -> None:
    """Write one case's entry into the submissions folder `root`."""
    name = os.fsdecode(unescaped(case["entry"]))
    if "crafted" in case:
        made = CRAFTED[case["crafted"]]()
        if isinstance(made, bytes):
            (root / f"{name}.zip").write_bytes(made)
            return
        files = made
    elif "cells" in case:
        files = {"lab02.ipynb": notebook(*case["cells"]).replace("@LONE_SURROGATE@", "\\ud800")}
    elif "notebook" in case:
        files = {"lab02.ipynb": case["notebook"]}
    else:
        files = {"broadcasting.py": solution_edited(case)}
    if case.get("zip"):
        (root / f"{name}.zip").write_bytes(zip_bytes(files))
        return
    (root / name).mkdir()
    for rel, data in files.items():
        (root / name / rel).write_text(data)


def student_id(case: dict) -> str:
    return case.get("id", case["entry"])


# --- the batch, end to end ---------------------------------------------------------------


def labkit(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True,
                          timeout=600)
    return subprocess.CompletedProcess(done.args, done.returncode,
                                       done.stdout.decode(), done.stderr.decode())  # UTF-8


@dataclass
class Recorded:
    status: str
    score: float
    source: str
    result: LabResult


def recorded(gradebook: Path) -> dict[str, Recorded]:
    db = sqlite3.connect(gradebook)
    try:
        rows = db.execute("SELECT student_id, status, score, source, document"
                          " FROM latest_submissions").fetchall()
    finally:
        db.close()
    return {student: Recorded(status, score, source, LabResult.from_dict(json.loads(doc)))
            for student, status, score, source, doc in rows}


def assert_printable(text: str, what: str) -> None:
    bad = sorted({repr(c) for c in text if c in UNPRINTABLE})
    assert not bad, f"{what} prints control characters {bad}"


@pytest.mark.slow
def test_a_class_of_byte_attacks_is_graded_and_nothing_it_sends_is_obeyed(tmp_path):
    root = tmp_path / "class"
    root.mkdir()
    for case in CASES:
        build(case, root)
    for name in CORRECT:
        (root / name).mkdir()
        (root / name / "broadcasting.py").write_text(SOLUTION)
    out = tmp_path / "out"

    started = time.monotonic()
    done = labkit("batch", "lab02", str(root), "--jobs", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr  # the batch completes: errors are the students'
    assert time.monotonic() - started < 300
    ids = {student_id(case) for case in CASES} | set(CORRECT)
    assert f"{len(ids)} submissions: " in done.stdout

    got = recorded(out / "gradebook.sqlite")
    assert set(got) == ids
    for case in CASES:
        one = got[student_id(case)]
        assert one.status == case["status"], (case["name"], one.result.message)
        result = one.result
        breaks = set(case.get("breaks", ()))
        if case["status"] == "error":
            assert result.checks == ()
        else:
            for check in result.checks:
                earned = 0 if check.id in breaks else check.max_points
                assert check.points == earned, (case["name"], check.id, check.message)
        if "message_has" in case:
            texts = [result.message, *(c.message for c in result.checks if c.id in breaks)]
            assert any(case["message_has"] in t for t in texts), (case["name"], texts)
    for name in CORRECT:
        graded = got[name]
        assert graded.status == "pass" and graded.score == LAB02_FULL, graded.result.message
    assert got['mall\\xf6ry'].source == 'mall\\xf6ry'
    assert got['tr\\xe9nt'].source == 'tr\\xe9nt.zip'

    assert_printable(done.stderr, "the progress lines")
    assert_printable(done.stdout, "labkit batch")
    assert "\\x1b[2J" in done.stderr  # shown, escaped: the instructor sees what was sent
    shown = labkit("report", str(out), "--html", str(tmp_path / "class.html"))
    assert shown.returncode == 0, shown.stderr
    assert_printable(shown.stdout, "labkit report")
    assert "\\x1b[2J" in shown.stdout and "\ufffd" in shown.stdout

    page = (tmp_path / "class.html").read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=alert(1)&gt;&lt;/td&gt;&lt;/table&gt;&lt;b&gt;" in page
    assert "<img" not in page and "</table><b>" not in page

    exported = labkit("export", str(out), "--format", "csv")
    assert exported.returncode == 0, exported.stderr
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    cells = [cell for row in table[1:] for cell in row]
    assert not [cell for cell in cells if cell.startswith(FORMULA_START)]
    students = {row[0] for row in table[1:]}
    assert {"'=HYPERLINK(\"http:evil.example\",\"grades\")", "'+SUM(1,1)", "'-2+3",
            "'@cmd", "mall\\xf6ry"} <= students


# --- names -----------------------------------------------------------------------------------


def test_textsafe_is_total_and_shown_text_holds_no_control_character():
    every = "".join(map(chr, range(0x110000)))
    stored = textsafe.text(every)
    stored.encode("utf-8")  # never raises
    assert len(stored) == len(every) and stored[:0xD800] == every[:0xD800]
    printed = textsafe.shown(every)
    printed.encode("utf-8")
    assert not set(printed) & UNPRINTABLE and "\n" not in printed
    assert textsafe.shown(printed) == printed  # ids escaped once stay as they are
    assert textsafe.shown("a\nb\tc\x1b", multiline=True) == "a\nb\tc\\x1b"
    assert textsafe.shown("alice ñandú") == "alice ñandú"


def test_names_that_are_not_utf8_are_escaped_ids_and_never_merge_silently(tmp_path):
    for raw in (b"mall\xf6ry", b"mall\xe9ry", b"p\xe9ggy", b"\x1b[31mred"):
        os.mkdir(tmp_path / os.fsdecode(raw))
    (tmp_path / "p\\xe9ggy.zip").write_bytes(zip_bytes({"broadcasting.py": SOLUTION}))
    (tmp_path / os.fsdecode(b"notes\xff.txt")).write_text("ignored")
    entries, ignored = submissions.discover(tmp_path)
    by_id = {e.student: e for e in entries}
    assert set(by_id) == {"mall\\xf6ry", "mall\\xe9ry", "p\\xe9ggy", "\\x1b[31mred"}
    assert by_id["mall\\xf6ry"].path == tmp_path / os.fsdecode(b"mall\xf6ry")  # still opens
    assert by_id["mall\\xf6ry"].source == "mall\\xf6ry"
    assert ignored == ["notes\\xff.txt"]
    with pytest.raises(submissions.SubmissionError) as info:
        submissions.read(LAB02, by_id["p\\xe9ggy"], "en")
    assert info.value.text("en") == (
        "more than one submission for the same student (p\\xe9ggy, p\\xe9ggy.zip)")


def test_a_result_holding_lone_surrogates_can_be_written_everywhere(tmp_path):
    raised = made_up({CHECKS[0]: "fail"})
    checks = list(raised.checks)
    checks[0] = CheckResult(CHECKS[0], "t", Status.FAIL, 0, 1, message="raised \ud800\udcff",
                            output="out \udfff")
    result = LabResult("lab02", Status.FAIL, 13, 14, 0.1, __version__, "", "en", "process",
                       tuple(checks), message="note \ud83d")
    assert checks[0].message == "raised \ufffd\ufffd" and result.message == "note \ufffd"
    result.to_json().encode("utf-8")
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(run_id=None, student="sam", source="sam", kind="folder", digest="",
                    grader_key="k", result=LabResult.from_dict(json.loads(
                        json.dumps(result.to_dict()).replace("\\ufffd", "\\ud800"))))
        (stored,) = book.current("lab02")
    assert stored.result["message"] == "note \ufffd"


# --- what is printed ---------------------------------------------------------------------------

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m"


def test_the_grade_table_progress_lines_and_report_escape_control_characters(tmp_path):
    checks = list(made_up({CHECKS[0]: "fail"}).checks)
    checks[0] = CheckResult(CHECKS[0], "t", Status.FAIL, 0, 1, message=f"raised {ESCAPES}",
                            output=f"printed {ESCAPES}\nline two")
    result = LabResult("lab02", Status.FAIL, 13, 14, 0.1, __version__, "", "en", "process",
                       tuple(checks), message=f"from lab02.ipynb: 1:1 %time {ESCAPES}")
    table = render.table(result)
    assert_printable(table, "labkit grade")
    assert "raised \\x1b[2J\\x1b]0;owned\\x07\\u009b31m" in table
    assert "printed \\x1b[2J" in table and "line two" in table

    stream = io.StringIO()
    progress = PlainProgress(stream)
    progress(BatchEvent("start", 0, 1))
    progress(BatchEvent("graded", 1, 1, "\\x1b[31mevil", result))
    progress(BatchEvent("skipped", 1, 1, f"raw {ESCAPES}"))
    assert_printable(stream.getvalue(), "the progress lines")
    assert "%time \\x1b[2J" in stream.getvalue()

    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(run_id=None, student="trudy", source="trudy", kind="folder", digest="",
                    grader_key="k", result=result)
    text = report.text(report.from_gradebook(tmp_path))
    assert_printable(text, "labkit report")
    assert "raised \\x1b[2J" in text


def test_csv_cells_a_spreadsheet_would_run_are_quoted(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        for student in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "a=1", "ana"):
            book.record(run_id=None, student=student, source=student, kind="folder",
                        digest="", grader_key="k", result=made_up({}))
    exports.export(tmp_path, "csv")
    text = (tmp_path / "grades.csv").read_bytes().decode()
    assert "\n'\rx," in text  # a CR in an id is not csv's line end here: written as it is
    rows = list(csv.reader(io.StringIO(text.replace("\r", ""), newline="")))
    assert sorted(row[0] for row in rows[1:]) == sorted(
        ["'=1+1", "'+1", "'-1", "'@SUM(A1)", "'\tx", "'x", "a=1", "ana"])
    assert rows[1][-3:-1] == [f"{LAB02_FULL:g}"] * 2  # the kit's own numbers stay numbers


# --- notebooks ------------------------------------------------------------------------------


def parse(text: str | bytes) -> notebookfiles.Converted:
    return notebookfiles.parse(text if isinstance(text, bytes) else text.encode(), ("m.py",))


def refused(text: str | bytes) -> str:
    with pytest.raises(NotebookError) as info:
        parse(text)
    return info.value.key


def cells(*sources) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": s}
                                 for s in sources]})


def test_a_notebook_past_a_bound_is_that_students_error():
    depth = notebookfiles.MAX_DEPTH
    assert refused('{"cells": ' + "[" * 10**6 + "]" * 10**6 + "}") == "notebook_too_deep"
    assert refused('{"cells": [' + "{}," * 10 + '{"a": ' + "[" * depth + "]" * depth + "}]}") \
        == "notebook_too_deep"
    at_the_bound = '{"cells": [{"a": ' + "[" * (depth - 3) + "]" * (depth - 3) + "}]}"
    assert parse(at_the_bound).files == {"m.py": b""}
    brackets_in_strings = cells(("[" * 5000) + '\\"{' * 5000)  # text, not structure
    assert parse(brackets_in_strings).files["m.py"].startswith(b"[[[")
    assert refused(b" " * (notebookfiles.MAX_BYTES + 1)) == "notebook_too_large"
    assert refused(cells(*["x = 1"] * (notebookfiles.MAX_CELLS + 1))) == "notebook_too_many_cells"
    assert refused(cells("#" * (notebookfiles.MAX_CELL_CHARS + 1))) == "notebook_cell_too_large"
    for cell in ({"cell_type": "code", "source": [1, 2]},
                 {"cell_type": "code", "source": "", "metadata": [1]},
                 {"cell_type": "code", "source": "", "metadata": {"nbgrader": "yes"}}):
        assert refused(json.dumps({"cells": [cell]})) == "notebook_bad_cell"


def test_notebook_text_that_no_parser_should_choke_on():
    lone = cells("x = 1  # \ud800")  # JSON: "\\ud800", which decodes to a lone surrogate
    assert parse(lone).files["m.py"] == "x = 1  # \ufffd\n".encode()
    started = time.process_time()  # this process's work, whatever else the machine runs
    blanks = parse(cells("x = 1\n" + " " * 20_000 + "y = 2", "!ls\n" + " " * 20_000))
    assert time.process_time() - started < 2  # linear: the pattern it replaced took 6 s here
    assert [(d.cell, d.line) for d in blanks.dropped] == [(2, 1)]
    deep = parse(cells("x = " + "-" * 100_000 + "1", "y = " + "a." * 100_000 + "b"))
    assert deep.files["m.py"].startswith(b"x = ---")  # graded as is: the worker says why


def test_a_notebook_in_a_zip_that_crashes_a_parser_is_that_students_error(tmp_path):
    (tmp_path / "nina.zip").write_bytes(deep_notebook())
    assert (tmp_path / "nina.zip").stat().st_size < 600
    (entry,), _ = submissions.discover(tmp_path)
    with pytest.raises(submissions.SubmissionError) as info:
        submissions.read(LAB02, entry, "es")
    assert info.value.text("es") == ("lab02.ipynb anida su JSON a más de 100 niveles de "
                                     "profundidad: no es un notebook que labkit pueda leer")


# --- zips ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("crafted", ["corrupt_lzma", "version_needed", "member_name_not_utf8"])
def test_a_crafted_zip_is_a_bad_zip_not_a_crash(tmp_path, crafted):
    (tmp_path / "x.zip").write_bytes(CRAFTED[crafted]())
    (entry,), _ = submissions.discover(tmp_path)
    with pytest.raises(submissions.SubmissionError) as info:
        submissions.read(LAB02, entry, "en")
    assert info.value.key == "batch_bad_zip"


def test_zips_of_many_members_or_cut_short_are_refused(tmp_path):
    many = {f"{i}": b"" for i in range(submissions.MAX_ZIP_MEMBERS + 1)}
    (tmp_path / "many.zip").write_bytes(zip_bytes({"broadcasting.py": SOLUTION, **many}))
    whole = zip_bytes({"lab02.ipynb": notebook()})
    for cut in (10, len(whole) // 2, len(whole) - 5):
        (tmp_path / f"cut{cut}.zip").write_bytes(whole[:cut])
    entries, _ = submissions.discover(tmp_path)
    for entry in entries:
        with pytest.raises(submissions.SubmissionError) as info:
            submissions.read(LAB02, entry, "en")
        assert info.value.key == ("batch_zip_bomb" if entry.student == "many"
                                  else "batch_bad_zip")
