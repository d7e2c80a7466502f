"""LMS downloads (Canvas, Moodle, Gradescope) and rosters: which entry is whose, what is
left out and why, and a class graded from each download under the LMS's own ids."""

from __future__ import annotations

import csv
import json
import sqlite3
import zipfile

import pytest
from batchkit import LAB02, LAB02_FULL, MUTANT, SOLUTION, STUB, zipped

from labkit.classroom import batch, layouts, lms, roster, submissions
from labkit.classroom.gradebook import MIGRATIONS, Gradebook

# --- the downloads, as each LMS names them ------------------------------------------------


def canvas_class(root):
    """A Canvas "Download submissions" folder; returns what each user id should grade as."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "smithalice_101_5001_broadcasting.py").write_text(STUB)  # first upload
    (root / "smithalice_101_5007_broadcasting-1.py").write_text(SOLUTION)  # resubmitted
    (root / "smithalice_101_5008_notes.txt").write_text("see code")
    (root / "jonesbob_LATE_102_5003_broadcasting.py").write_text(MUTANT)
    zipped(root, "leecarol_103_5004_lab02", {"lab02/broadcasting.py": SOLUTION})
    (root / "kimdan_104_5005_essay.txt").write_text("no code")
    (root / "grades_readme.txt").write_text("not a submission")
    return {"101": "pass", "102": "fail", "103": "pass", "104": "error"}


def moodle_class(root):
    root.mkdir(parents=True, exist_ok=True)
    first = root / "Alice Smith_201_assignsubmission_file_"
    first.mkdir()
    (first / "broadcasting.py").write_text(SOLUTION)
    second = root / "Bob Jones_202_assignsubmission_file_"
    second.mkdir()
    zipped(second, "lab02", {"lab02/broadcasting.py": SOLUTION, "lab02/notes.md": "x"})
    text = root / "Bob Jones_202_assignsubmission_onlinetext_"
    text.mkdir()
    (text / "onlinetext.html").write_text("<p>see my zip</p>")
    third = root / "Carol Lee_203_assignsubmission_file_"
    third.mkdir()
    zipped(third, "mine", {"../broadcasting.py": SOLUTION})  # a zip slip, inside a folder
    return {"201": "pass", "202": "pass", "203": "error"}


METADATA = """\
submission_9001:
  :submitters:
  - :name: Alice Smith
    :sid: '301'
    :email: alice@uni.edu
  :created_at: 2026-11-30 10:00:00.000000000 -08:00
  :score: 0.0
submission_9002:
  :submitters:
  - :name: Bob Jones
    :sid: '302'
    :email: bob@uni.edu
  - :name: Carol Lee
    :sid: ''
    :email: carol@uni.edu
"""


def gradescope_class(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "submission_metadata.yml").write_text(METADATA)
    (root / "submission_9001").mkdir()
    (root / "submission_9001" / "broadcasting.py").write_text(SOLUTION)
    (root / "submission_9002" / "lab02").mkdir(parents=True)
    (root / "submission_9002" / "lab02" / "broadcasting.py").write_text(STUB)
    (root / "submission_9999").mkdir()  # not in the metadata
    return {"301": "pass", "302": "fail", "carol@uni.edu": "fail"}


def read_text(entry):
    return submissions.read(LAB02, entry, "en").files["broadcasting.py"].decode()


# --- discovery ----------------------------------------------------------------------------


def test_canvas_groups_files_by_user_keeps_the_newest_and_marks_late(tmp_path):
    expected = canvas_class(tmp_path)
    found = layouts.discover(tmp_path, LAB02)
    assert found.layout == "canvas" and layouts.detect(tmp_path) == "canvas"
    entries = {e.student: e for e in found.entries}
    assert sorted(entries) == sorted(expected)
    assert read_text(entries["101"]) == SOLUTION  # broadcasting-1.py, not the first upload
    assert entries["101"].person == "smithalice" and not entries["101"].late
    assert entries["102"].late and read_text(entries["102"]) == MUTANT
    assert entries["103"].kind == "zip" and read_text(entries["103"]) == SOLUTION
    with pytest.raises(submissions.SubmissionError, match="none of the lab's files"):
        submissions.read(LAB02, entries["104"], "en")
    assert [(i.name, "Canvas" in i.reason) for i in found.ignored] == [
        ("grades_readme.txt", True)]


def test_moodle_folders_by_participant_a_zip_inside_read_safely(tmp_path):
    moodle_class(tmp_path)
    found = layouts.discover(tmp_path, LAB02)
    assert found.layout == "moodle"
    entries = {e.student: e for e in found.entries}
    assert sorted(entries) == ["201", "202", "203"]
    assert entries["201"].person == "Alice Smith" and read_text(entries["201"]) == SOLUTION
    assert read_text(entries["202"]) == SOLUTION  # the zip the student uploaded
    with pytest.raises(submissions.SubmissionError, match="leaves its folder"):
        submissions.read(LAB02, entries["203"], "en")
    (ignored,) = found.ignored
    assert "onlinetext" in ignored.name and ignored.expected and "not files" in ignored.reason
    assert not found.mostly_ignored


def test_moodle_flat_files_without_folders(tmp_path):
    (tmp_path / "Ana Ruiz_211_assignsubmission_file_broadcasting.py").write_text(SOLUTION)
    (tmp_path / "Ana Ruiz_211_assignsubmission_file_notes.txt").write_text("x")
    (entry,) = layouts.discover(tmp_path, LAB02).entries
    assert entry.student == "211" and entry.kind == "files" and read_text(entry) == SOLUTION


def test_gradescope_export_by_metadata_with_group_members(tmp_path):
    expected = gradescope_class(tmp_path)
    found = layouts.discover(tmp_path, LAB02)
    assert found.layout == "gradescope"
    entries = {e.student: e for e in found.entries}
    assert sorted(entries) == sorted(expected)
    assert entries["301"].email == "alice@uni.edu" and entries["301"].person == "Alice Smith"
    assert entries["302"].name == entries["carol@uni.edu"].name == "submission_9002"
    assert read_text(entries["302"]) == STUB  # a folder down, as a batch finds it
    assert [i.name for i in found.ignored] == ["submission_9999"]


def test_gradescope_metadata_is_bounded_and_checked(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e]\n"
        "g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n")
    with pytest.raises(layouts.LayoutError, match="larger or deeper"):
        layouts.discover(tmp_path, LAB02)
    (tmp_path / "submission_metadata.yml").write_text("- just\n- a list\n")
    with pytest.raises(layouts.LayoutError, match="not a Gradescope"):
        layouts.discover(tmp_path, LAB02)
    (tmp_path / "submission_metadata.yml").write_text("a: [unclosed\n")
    with pytest.raises(layouts.LayoutError, match="not valid YAML"):
        layouts.discover(tmp_path, LAB02)


def test_names_are_data_escaped_before_they_are_stored(tmp_path):
    odd = tmp_path / "Eve\x1b[31m Red_205_assignsubmission_file_"
    odd.mkdir()
    (odd / "broadcasting.py").write_text(SOLUTION)
    (entry,) = layouts.discover(tmp_path, LAB02, "moodle").entries
    assert "\x1b" not in entry.person and "\\x1b" in entry.person


def test_a_download_read_in_the_wrong_layout_stops_and_says_what_it_saw(tmp_path):
    canvas_class(tmp_path / "class")
    with pytest.raises(batch.BatchError, match=r"could not be placed as a moodle download.*"
                       r"--layout"):
        batch.grade_many(LAB02, tmp_path / "class", tmp_path / "out", layout="moodle")
    assert not (tmp_path / "out" / "gradebook.sqlite").exists()
    with pytest.raises(layouts.LayoutError, match="unknown layout"):
        layouts.discover(tmp_path / "class", LAB02, "blackboard")


# --- rosters ------------------------------------------------------------------------------

CANVAS_ROSTER = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Lab 02 (777)\n"
    "    Points Possible,,,,,14\n"
    '"Smith, Alice",101,S101,asmith,Sec A,\n'
    '"Jones, Bob",102,S102,bjones,Sec B,\n'
    '"Lee, Carol",103,S103,clee,Sec A,\n'
    '"Kim, Dan",104,S104,dkim,Sec B,\n'
    '"Diaz, Eva",105,S105,ediaz,Sec A,\n'
)


def test_roster_formats_and_matching(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text(CANVAS_ROSTER)
    people = roster.read(path)
    assert [p.id for p in people] == ["101", "102", "103", "104", "105"]
    assert people[0].name == "Smith, Alice" and people[0].section == "Sec A"
    path.write_text("Identifier,Full name,Email address,Status\n"
                    "Participant 201,Alice Smith,alice@uni.edu,Submitted\n"
                    "Participant 209,Zoe Park,zoe@uni.edu,No submission\n")
    moodle = roster.read(path)
    assert [(p.id, p.email) for p in moodle] == [("201", "alice@uni.edu"), ("209", "zoe@uni.edu")]
    entries = [submissions.Entry("201", tmp_path, "x", "folder"),
               submissions.Entry("zoe", tmp_path, "zoe", "folder"),  # by the email's user
               submissions.Entry("stranger", tmp_path, "stranger", "folder")]
    placed = roster.place(entries, moodle)
    assert [(e.student, e.person) for e in placed.entries] == [
        ("201", "Alice Smith"), ("209", "Zoe Park"), ("stranger", "")]
    assert placed.unlisted == ["stranger"] and placed.missing == []
    path.write_text("colour,size\nred,2\n")
    with pytest.raises(roster.RosterError, match="no id or email column"):
        roster.read(path)
    path.write_bytes(b"id\n" + b"x" * (roster.MAX_ROSTER_BYTES + 1))
    with pytest.raises(roster.RosterError, match="larger than"):
        roster.read(path)


def test_a_key_two_people_share_matches_nobody(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("id,name,email\n1,A,sam@a.edu\n2,B,sam@b.edu\n")
    placed = roster.place([submissions.Entry("sam", tmp_path, "sam", "folder")],
                          roster.read(path))
    assert placed.unlisted == ["sam"] and len(placed.missing) == 2


# --- the gradebook's migration ------------------------------------------------------------


def test_a_version_1_gradebook_is_migrated_and_keeps_its_gradings(tmp_path):
    from batchkit import made_up

    path = tmp_path / "gradebook.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
    for statement in MIGRATIONS[1]:
        db.execute(statement)
    db.execute("INSERT INTO schema_version VALUES (1, 'then')")
    db.execute("INSERT INTO students VALUES ('ana', 'then')")
    result = made_up({"safe_mse.aligned_pairs": "fail"})
    db.execute("INSERT INTO submissions (student_id, lab, source, kind, digest, grader_key,"
               " status, score, max_score, duration_s, graded_at, isolation, lang,"
               " labkit_version, message, document) VALUES ('ana', 'lab02', 'ana', 'folder',"
               " 'd', 'k', 'fail', ?, 14, 0.1, 'then', 'process', 'en', 'old', '', ?)",
               (result.score, json.dumps(result.to_dict())))
    db.executemany("INSERT INTO check_results VALUES (1, ?, ?, 't', ?, ?, ?, '', '')",
                   [(i, c.id, c.status.value, c.points, c.max_points)
                    for i, c in enumerate(result.checks)])
    db.commit()
    db.close()
    with Gradebook(path) as book:
        assert book.version() == 2
        (stored,) = book.current("lab02")
        assert stored.student == "ana" and not stored.late and not stored.missing
        assert stored.result["score"] == result.score
        assert len(book.checks("lab02")) == len(result.checks)  # not cascaded away
        assert book.previous("lab02", "ana").digest == "d"
    with Gradebook(path) as book:  # reopening applies nothing twice
        assert book.version() == 2


# --- whole classes ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def canvas_graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("canvas")
    expected = canvas_class(root / "download")
    (root / "roster.csv").write_text(CANVAS_ROSTER)
    summary = batch.grade_many(LAB02, root / "download", root / "out", jobs=2,
                               roster=root / "roster.csv")
    return root, expected, summary


def test_a_canvas_class_is_graded_under_canvas_ids_with_a_roster(canvas_graded):
    root, expected, summary = canvas_graded
    assert summary.layout == "canvas" and summary.missing == ("105",)
    assert [i.name for i in summary.ignored] == ["grades_readme.txt"]
    with Gradebook(summary.gradebook) as book:
        stored = {s.student: s for s in book.current("lab02")}
    assert {k: v.result["status"] for k, v in stored.items() if not v.missing} == expected
    assert stored["102"].late and not stored["101"].late
    assert stored["101"].name == "Smith, Alice" and stored["101"].section == "Sec A"
    assert stored["105"].missing and stored["105"].result["status"] == "error"
    assert "roster" in stored["105"].result["message"]
    again = batch.grade_many(LAB02, root / "download", root / "out", jobs=2,
                             roster=root / "roster.csv")
    assert again.graded == 0 and again.skipped == 4
    with Gradebook(summary.gradebook) as book:  # the missing row is not written twice
        assert book.db.execute("SELECT count(*) FROM submissions WHERE missing = 1"
                               ).fetchone()[0] == 1


def test_canvas_download_to_canvas_import_in_two_commands(canvas_graded, tmp_path):
    root, expected, summary = canvas_graded
    made = lms.export(summary.out, "canvas", dest=tmp_path / "import.csv",
                      template=root / "roster.csv", assignment="Lab 02")
    rows = {r[1]: r[5] for r in csv.reader(made.dest.read_text().splitlines())}
    full = f"{LAB02_FULL:g}"
    assert rows["101"] == rows["103"] == full and rows["104"] == rows["105"] == ""
    assert rows["102"] not in ("", full, "0")  # the mutant loses one check
    assert made.unmatched == ()


def test_a_rerun_with_a_roster_moves_gradings_to_the_lms_ids_without_regrading(tmp_path):
    root = tmp_path / "class"
    for name, source in (("asmith", SOLUTION), ("bjones", STUB)):
        (root / name).mkdir(parents=True)
        (root / name / "broadcasting.py").write_text(source)
    first = batch.grade_many(LAB02, root, tmp_path / "out", jobs=1)
    assert first.graded == 2
    (tmp_path / "roster.csv").write_text(CANVAS_ROSTER)
    second = batch.grade_many(LAB02, root, tmp_path / "out", jobs=1,
                              roster=tmp_path / "roster.csv")
    assert second.graded == 0 and second.skipped == 2
    with Gradebook(second.gradebook) as book:
        stored = {s.student: s for s in book.current("lab02")}
    assert sorted(stored) == ["101", "102", "103", "104", "105"]
    assert stored["101"].source == "asmith" and stored["101"].result["status"] == "pass"
    assert stored["102"].result["status"] == "fail"
    assert all(stored[k].missing for k in ("103", "104", "105"))


def test_moodle_and_gradescope_classes_are_graded(tmp_path):
    expected = moodle_class(tmp_path / "moodle")
    summary = batch.grade_many(LAB02, tmp_path / "moodle", tmp_path / "out-m", jobs=2)
    gs_expected = gradescope_class(tmp_path / "gs")
    gs = batch.grade_many(LAB02, tmp_path / "gs", tmp_path / "out-g", jobs=2)
    for result, wanted in ((summary, expected), (gs, gs_expected)):
        with Gradebook(result.gradebook) as book:
            assert {s.student: s.result["status"] for s in book.current("lab02")} == wanted
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text("Identifier,Full name,Email address,Status,Grade,Maximum Grade\n"
                         "Participant 201,Alice Smith,a@u.edu,Submitted,,14\n"
                         "Participant 202,Bob Jones,b@u.edu,Submitted,,14\n"
                         "Participant 203,Carol Lee,c@u.edu,Submitted,,14\n")
    made = lms.export(summary.out, "moodle", template=worksheet)
    grades = [r[4] for r in csv.reader(made.dest.read_text().splitlines())][1:]
    assert grades == [f"{LAB02_FULL:g}"] * 2 + [""]
    assert zipfile.is_zipfile(tmp_path / "moodle" / "Bob Jones_202_assignsubmission_file_"
                              / "lab02.zip")


def test_cli_batch_lists_what_it_left_out_and_stops_on_the_wrong_layout(tmp_path):
    from click.testing import CliRunner

    from labkit.cli import main

    canvas_class(tmp_path / "download")
    (tmp_path / "roster.csv").write_text(CANVAS_ROSTER)
    wrong = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "download"), "--out",
                                      str(tmp_path / "out"), "--layout", "gradescope"])
    assert wrong.exit_code == 2 and "submission_metadata.yml" in wrong.output
    wrong = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "download"), "--out",
                                      str(tmp_path / "out"), "--layout", "folders"])
    assert wrong.exit_code == 2
    assert "could not be placed as a folders download" in wrong.output
    done = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "download"), "--out",
                                     str(tmp_path / "out"), "--jobs", "2", "--roster",
                                     str(tmp_path / "roster.csv")])
    assert done.exit_code == 0, done.output
    assert "ignored 1 items of the canvas download:" in done.output
    assert "  grades_readme.txt: not a file named as Canvas names submissions" in done.output
    assert "1 students on the roster sent nothing: 105" in done.output
    assert ("canvas layout, 4 submissions: 3 graded, 0 unchanged (skipped), 1 could not be "
            "graded, 1 ignored, 1 missing") in done.output
    assert "could not be graded (1):\n  104 (Kim, Dan):" in done.output
    assert "missing (no submission) (1):\n  105 (Diaz, Eva)" in done.output
    assert "late (1):\n  102 (Jones, Bob)" in done.output


def test_a_gradings_id_moves_only_when_no_entry_of_the_run_holds_it(tmp_path):
    from batchkit import made_up

    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(run_id=None, student="302", source="submission_9002", kind="folder",
                    digest="d", grader_key="k", result=made_up({}))
        book.record(run_id=None, student="asmith", source="asmith", kind="folder",
                    digest="d", grader_key="k", result=made_up({}))
        group = submissions.Entry("carol@uni.edu", tmp_path, "submission_9002", "folder")
        # Bob is graded in this run too: Carol's entry is new, not Bob's renamed
        assert batch._previous(book, "lab02", group, "d", "k", {"302", "carol@uni.edu"}) is None
        assert book.previous("lab02", "302") is not None
        renamed = submissions.Entry("101", tmp_path, "asmith", "folder")
        assert batch._previous(book, "lab02", renamed, "d", "k", {"101"}).digest == "d"
        assert book.previous("lab02", "asmith") is None  # moved to the roster's id
        changed = submissions.Entry("102", tmp_path, "asmith", "folder")  # other files now
        assert batch._previous(book, "lab02", changed, "other", "k", {"102"}) is None
        assert book.previous("lab02", "101") is not None  # not moved: it is graded anew


# --- each LMS's download to its own import file, as an instructor types it -------------------


def _cli(*args):
    from click.testing import CliRunner

    from labkit.cli import main

    done = CliRunner().invoke(main, [str(a) for a in args])
    assert done.exit_code == 0, done.output
    return done.output


@pytest.mark.slow
def test_each_lms_download_to_its_own_import_in_two_commands(tmp_path):
    """Canvas: the download and the gradebook export it came with (the roster is that
    export) -> the same CSV filled in. Moodle: its folders -> its grading worksheet.
    Gradescope: its submission export -> one results.json per submission in Gradescope's
    own format, under each submitter's id (Gradescope's own run is the autograder,
    tests/test_autograder.py)."""
    import jsonschema
    from kit import TESTS

    full = f"{LAB02_FULL:g}"
    canvas = canvas_class(tmp_path / "canvas")
    (tmp_path / "canvas-export.csv").write_text(CANVAS_ROSTER)
    _cli("batch", "lab02", tmp_path / "canvas", "--out", tmp_path / "out-c", "--jobs", "2",
         "--roster", tmp_path / "canvas-export.csv")
    _cli("export", tmp_path / "out-c", "--format", "canvas", "--template",
         tmp_path / "canvas-export.csv", "--assignment", "Lab 02", "-o",
         tmp_path / "canvas-import.csv")
    rows = list(csv.reader((tmp_path / "canvas-import.csv").read_text().splitlines()))
    assert rows[0] == next(csv.reader(CANVAS_ROSTER.splitlines()))  # Canvas's own header
    grades = {row[1]: row[5] for row in rows[2:]}
    assert {k for k, v in canvas.items() if v == "pass"} == {k for k, v in grades.items()
                                                             if v == full}
    assert grades["104"] == grades["105"] == "" and grades["102"] not in ("", full)

    moodle = moodle_class(tmp_path / "moodle")
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text("Identifier,Full name,Email address,Status,Grade,Maximum Grade\n"
                         + "".join(f"Participant {pid},P {pid},{pid}@u.edu,Submitted,,"
                                   f"{full}\n" for pid in sorted(moodle)))
    _cli("batch", "lab02", tmp_path / "moodle", "--out", tmp_path / "out-m", "--jobs", "2")
    _cli("export", tmp_path / "out-m", "--format", "moodle", "--template", worksheet,
         "-o", tmp_path / "moodle-import.csv")
    rows = list(csv.DictReader((tmp_path / "moodle-import.csv").read_text().splitlines()))
    assert {row["Identifier"].split()[-1]: row["Grade"] for row in rows} == {
        pid: (full if status == "pass" else "") for pid, status in moodle.items()}

    gradescope = gradescope_class(tmp_path / "gs")
    _cli("batch", "lab02", tmp_path / "gs", "--out", tmp_path / "out-g", "--jobs", "2")
    _cli("export", tmp_path / "out-g", "--format", "gradescope", "-o", tmp_path / "gs-import")
    schema = jsonschema.Draft202012Validator(
        json.loads((TESTS / "gradescope_results.schema.json").read_text()))
    found = {}
    for path in sorted((tmp_path / "gs-import").glob("*/results.json")):
        document = json.loads(path.read_text())
        schema.validate(document)
        found[path.parent.name] = document["score"]
    assert set(found) == set(gradescope)
    assert {k for k, v in found.items() if v == LAB02_FULL} == {
        k for k, v in gradescope.items() if v == "pass"}
