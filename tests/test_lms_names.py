"""What a student names a file never decides whose it is (issue 29), and what LMSs,
browsers and rosters really hold is read as such (issue 31).

Each LMS prefixes what a student uploaded with its own text: Moodle
`Full Name_participant_assignsubmission_file_`, Canvas `login_[late_]user_attachment_`;
Gradescope keeps each submission in a folder its metadata names. The uploaded name after
that prefix is the student's, and may imitate any prefix. Every fixture here is shaped as
the LMS writes it, with an attacker (id 1002) whose uploads imitate a classmate's.
"""

from __future__ import annotations

import os
import warnings
import zipfile

import pytest
from batchkit import LAB02, MUTANT, SOLUTION, STUB, zipped
from click.testing import CliRunner
from test_layouts import CANVAS_ROSTER, canvas_class, gradescope_class

from labkit.classroom import batch, layouts, roster, submissions
from labkit.classroom.gradebook import Gradebook
from labkit.cli import main
from labkit.course.catalogue import get_lab

# Names a student may give a file: other students' prefixes in each LMS's format, the
# separators, unicode (digits that are not ASCII, a right-to-left override, a byte that
# is not UTF-8), a newline, a very long name.
HOSTILE = [
    "x_1001_assignsubmission_file_broadcasting.py",
    "Ana Ruiz_1001_assignsubmission_file_broadcasting.py",
    "Ana Ruiz_1001_assignsubmission_onlinetext_",
    "_1001_assignsubmission_file_",
    "__1001__assignsubmission_file___broadcasting.py",
    "smithana_1001_5001_broadcasting.py",
    "solbea_late_1003_5002_broadcasting.py",
    "late_1003_5002_broadcasting.py",
    "1001_5001_broadcasting.py",
    "submission_metadata.yml",
    "ñandú_١٠٠١_assignsubmission_file_broadcasting.py",
    "\u202eyp.gnitsacdaorb_1003_9_x.py",
    "a\nb_1001_assignsubmission_file_broadcasting.py",
    os.fsdecode(b"\xff_1001_1_broadcasting.py"),
    "_" * 60 + "1001_assignsubmission_file_" + "x" * 100 + ".py",
]


def read_text(entry):
    return submissions.read(LAB02, entry, "en").files["broadcasting.py"].decode()


def by_student(found):
    return {e.student: e for e in found.entries}


def assert_nobody_moved(found, attacker_prefix):
    """1001 and 1003 graded from their own files; 1002 from its own, all of them."""
    entries = by_student(found)
    assert sorted(entries) == ["1001", "1002", "1003"], sorted(entries)
    assert not any(e.duplicate_of for e in entries.values())
    assert read_text(entries["1001"]) == SOLUTION
    assert read_text(entries["1003"]) == SOLUTION and not entries["1003"].late
    assert read_text(entries["1002"]) == MUTANT
    if entries["1002"].kind == "files":
        assert all(name.startswith(attacker_prefix) for _, name in entries["1002"].files)
        for other in ("1001", "1003"):
            assert not any(name.startswith(attacker_prefix) for _, name in entries[other].files)


# --- Moodle ---------------------------------------------------------------------------------


def moodle_flat(root):
    """Moodle's download without "download submissions in folders" (issue 29's report)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Ana Ruiz_1001_assignsubmission_file_broadcasting.py").write_text(SOLUTION)
    (root / "Bea Sol_1003_assignsubmission_file_broadcasting.py").write_text(SOLUTION)
    attacker = "Mal Lory_1002_assignsubmission_file_"
    (root / f"{attacker}broadcasting.py").write_text(MUTANT)
    zipped(root, f"{attacker}y_1003_assignsubmission_file_w", {"broadcasting.py": STUB})
    for name in HOSTILE:
        (root / f"{attacker}{name}").write_text(STUB)
    return attacker


def test_moodle_flat_the_participant_is_moodles_prefix_never_the_uploaded_name(tmp_path):
    attacker = moodle_flat(tmp_path)
    found = layouts.discover(tmp_path, LAB02)
    assert found.layout == "moodle" and found.ignored == []
    assert_nobody_moved(found, attacker)
    assert by_student(found)["1002"].person == "Mal Lory"


def test_moodle_folders_the_uploaded_names_stay_in_their_folder(tmp_path):
    for folder, source in (("Ana Ruiz_1001_assignsubmission_file_", SOLUTION),
                           ("Bea Sol_1003_assignsubmission_file_", SOLUTION),
                           ("Mal Lory_1002_assignsubmission_file_", MUTANT)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "broadcasting.py").write_text(source)
    attacker = tmp_path / "Mal Lory_1002_assignsubmission_file_"
    for name in HOSTILE:
        (attacker / name.replace("\n", " ")).write_text(STUB)
    (attacker / "Bea Sol_1003_assignsubmission_file_").mkdir()
    (attacker / "Bea Sol_1003_assignsubmission_file_" / "broadcasting.py").write_text(STUB)
    found = layouts.discover(tmp_path, LAB02)
    assert found.layout == "moodle" and found.ignored == []
    assert_nobody_moved(found, "")


def test_moodle_two_files_for_one_lab_file_are_refused_never_merged(tmp_path):
    (tmp_path / "Ana Ruiz_1001_assignsubmission_file_broadcasting.py").write_text(SOLUTION)
    (tmp_path / "Ana Ruiz_1001_assignsubmission_file_lab02 (copy).zip").write_text("x")
    zipped(tmp_path, "Bea Sol_1003_assignsubmission_file_a", {"broadcasting.py": SOLUTION})
    zipped(tmp_path, "Bea Sol_1003_assignsubmission_file_b", {"broadcasting.py": STUB})
    entries = by_student(layouts.discover(tmp_path, LAB02))
    assert read_text(entries["1001"]) == SOLUTION  # its lab file, not the zip beside it
    with pytest.raises(submissions.SubmissionError) as info:
        submissions.read(LAB02, entries["1003"], "en")
    assert info.value.key == "batch_two_zips", info.value
    text = info.value.text("en")
    assert "Bea Sol_1003_assignsubmission_file_a.zip" in text and "_b.zip" in text


# --- Canvas ---------------------------------------------------------------------------------


def canvas_download(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "ruizana_1001_5001_broadcasting.py").write_text(SOLUTION)
    (root / "solbea_1003_5002_broadcasting.py").write_text(SOLUTION)
    attacker = "lorymal_1002_"
    (root / f"{attacker}7000_broadcasting.py").write_text(MUTANT)
    zipped(root, f"{attacker}6999_solbea_1003_5003_w", {"broadcasting.py": STUB})
    for number, name in enumerate(HOSTILE):
        (root / f"{attacker}{7001 + number}_{name}").write_text(STUB)
    return attacker


def test_canvas_the_user_is_canvas_prefix_never_the_uploaded_name(tmp_path):
    attacker = canvas_download(tmp_path)
    found = layouts.discover(tmp_path, LAB02)
    assert found.layout == "canvas" and found.ignored == []
    assert_nobody_moved(found, attacker)
    assert by_student(found)["1002"].person == "lorymal"


def test_canvas_two_uploads_of_one_lab_file_are_refused_never_one_kept_silently(tmp_path):
    (tmp_path / "ruizana_1001_5001_broadcasting.py").write_text(SOLUTION)
    (tmp_path / "ruizana_1001_5002_broadcasting.py").write_text(STUB)
    (entry,) = layouts.discover(tmp_path, LAB02).entries
    with pytest.raises(submissions.SubmissionError) as info:
        submissions.read(LAB02, entry, "en")
    assert info.value.key == "batch_two_files", info.value
    text = info.value.text("en")
    assert "ruizana_1001_5001_broadcasting.py" in text
    assert "ruizana_1001_5002_broadcasting.py" in text and "broadcasting.py" in text


def test_a_name_the_lms_wrote_empty_or_starting_with_its_separator(tmp_path):
    """Canvas keeps only word characters of a name ("!!" is "") and Moodle drops some:
    the prefix may start with `_`; the ids are still the first ones."""
    (tmp_path / "canvas").mkdir()
    (tmp_path / "canvas" / "_1001_5001_broadcasting.py").write_text(SOLUTION)
    (tmp_path / "canvas" / "_bo_late_1003_5002_x_1001_5_broadcasting.py").write_text(STUB)
    entries = by_student(layouts.discover(tmp_path / "canvas", LAB02, "canvas"))
    assert (entries["1001"].person, entries["1003"].person) == ("", "_bo")
    assert entries["1003"].late and read_text(entries["1001"]) == SOLUTION
    (tmp_path / "moodle").mkdir()
    (tmp_path / "moodle" / "_1001_assignsubmission_file_broadcasting.py").write_text(SOLUTION)
    (entry,) = layouts.discover(tmp_path / "moodle", LAB02, "moodle").entries
    assert (entry.student, entry.person, read_text(entry)) == ("1001", "", SOLUTION)


# --- Gradescope and plain folders -------------------------------------------------------------

METADATA = """\
submission_1:
  :submitters:
  - :name: Ana Ruiz
    :sid: '1001'
submission_2:
  :submitters:
  - :name: Mal Lory
    :sid: '1002'
submission_3:
  :submitters:
  - :name: Bea Sol
    :sid: '1003'
"""


def test_gradescope_the_submitter_is_the_metadatas_never_a_name_inside(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text(METADATA)
    for folder, source in (("submission_1", SOLUTION), ("submission_2", MUTANT),
                           ("submission_3", SOLUTION)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "broadcasting.py").write_text(source)
    attacker = tmp_path / "submission_2"
    for name in HOSTILE:
        (attacker / name.replace("\n", " ")).write_text(STUB)
    (attacker / "submission_metadata.yml").write_text(METADATA.replace("1001", "1002"))
    (attacker / "submission_3").mkdir()
    (attacker / "submission_3" / "broadcasting.py").write_text(STUB)
    found = layouts.discover(tmp_path, LAB02)
    assert found.layout == "gradescope" and found.ignored == []
    assert_nobody_moved(found, "")


def test_folders_an_entry_is_its_own_whatever_its_files_are_named(tmp_path):
    for name, source in (("1001", SOLUTION), ("1003", SOLUTION)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "broadcasting.py").write_text(source)
    zipped(tmp_path, "1002", {"broadcasting.py": MUTANT, "1001/broadcasting.py": STUB,
                              **{f"x/{n}": STUB for n in HOSTILE if "\udcff" not in n}})
    found = layouts.discover(tmp_path, LAB02, "folders")
    assert_nobody_moved(found, "")


# --- the class of issue 29, graded ----------------------------------------------------------


def test_issue_29_moodle_class_is_graded_each_from_their_own_files(tmp_path):
    moodle_flat(tmp_path / "download")
    summary = batch.grade_many(LAB02, tmp_path / "download", tmp_path / "out", jobs=2)
    assert summary.layout == "moodle" and summary.ignored == ()
    with Gradebook(summary.gradebook) as book:
        stored = {s.student: s.result["status"] for s in book.current("lab02")}
    assert stored == {"1001": "pass", "1002": "fail", "1003": "pass"}


# --- issue 31: what LMSs, browsers and rosters really hold ----------------------------------


def test_canvas_marks_late_in_its_own_lower_case(tmp_path):
    """Canvas lower-cases the whole prefix it writes, its late marker with it."""
    (tmp_path / "fernándezhana_late_104042_88001157_broadcasting.py").write_text(MUTANT)
    (tmp_path / "ruizana_1001_88001158_broadcasting.py").write_text(SOLUTION)
    (tmp_path / "o_brienpat_LATE_1003_88001159_broadcasting.py").write_text(SOLUTION)
    entries = by_student(layouts.discover(tmp_path, LAB02))
    assert sorted(entries) == ["1001", "1003", "104042"]
    assert entries["104042"].late and entries["104042"].person == "fernándezhana"
    assert entries["1003"].late and entries["1003"].person == "o_brienpat"
    assert not entries["1001"].late and read_text(entries["104042"]) == MUTANT


def test_gradescope_export_unzipped_into_its_own_folder_is_read_one_level_down(tmp_path):
    """Gradescope's zip holds `assignment_<id>_export/`: unzipped, that folder is all the
    download shows at its top."""
    expected = gradescope_class(tmp_path / "download" / "assignment_4242_export")
    for layout in ("auto", "gradescope"):
        found = layouts.discover(tmp_path / "download", LAB02, layout)
        assert (found.layout, found.inside) == ("gradescope", "assignment_4242_export")
        entries = by_student(found)
        assert sorted(entries) == sorted(expected)
        assert read_text(entries["301"]) == SOLUTION
    plain = layouts.discover(tmp_path / "download", LAB02, "folders")  # as asked
    assert [e.name for e in plain.entries] == ["assignment_4242_export"] and not plain.inside


GRADESCOPE_ROSTER = ("First Name,Last Name,SID,Email,Sections\n"
                     "Alice,Smith,301,alice@uni.edu,\nBob,Jones,302,bob@uni.edu,\n"
                     "Carol,Lee,,carol@uni.edu,\n")


def test_cli_batch_grades_the_unzipped_gradescope_export(tmp_path):
    expected = gradescope_class(tmp_path / "download" / "assignment_4242_export")
    (tmp_path / "roster.csv").write_text(GRADESCOPE_ROSTER)
    done = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "download"), "--out",
                                     str(tmp_path / "out"), "--jobs", "2", "--roster",
                                     str(tmp_path / "roster.csv")])
    assert done.exit_code == 0, done.output
    assert "read the gradescope download inside assignment_4242_export" in done.output
    assert "gradescope layout, 3 submissions: 3 graded" in done.output
    assert ", 1 ignored, 0 missing" in done.output  # submission_9999: not in the metadata
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        stored = {s.student: s.result["status"] for s in book.current("lab02")}
    assert stored == expected


def test_a_download_nothing_of_which_can_be_placed_stops_with_one_line(tmp_path):
    gradescope_class(tmp_path / "download" / "assignment_4242_export")
    (tmp_path / "roster.csv").write_text(GRADESCOPE_ROSTER)
    with pytest.raises(batch.BatchError, match=r"none of the 1 submissions of .* matches "
                       r"anyone on the roster .*: assignment_4242_export"):
        batch.grade_many(LAB02, tmp_path / "download", tmp_path / "out", layout="folders",
                         roster=tmp_path / "roster.csv")
    assert not (tmp_path / "out" / "gradebook.sqlite").exists()
    text = tmp_path / "text"
    (text / "Ana Ruiz_1001_assignsubmission_onlinetext_").mkdir(parents=True)
    (text / "Ana Ruiz_1001_assignsubmission_onlinetext_" / "onlinetext.html").write_text("hi")
    done = CliRunner().invoke(main, ["batch", "lab02", str(text), "--out",
                                     str(tmp_path / "out")])
    assert done.exit_code == 2, done.output
    last = done.output.strip().splitlines()[-1]
    assert last.startswith("labkit: nothing of ") and "moodle download" in last, last
    assert "online text" in last or "onlinetext" in last, last
    assert "Traceback" not in done.output


def read_renamed(entry, lab=LAB02):
    collected = submissions.read(lab, entry, "en")
    return collected.files, collected.note


def two_files(entry):
    with pytest.raises(submissions.SubmissionError) as info:
        submissions.read(LAB02, entry, "en")
    assert info.value.key == "batch_two_files", info.value
    return info.value.text("en")


def test_canvas_browser_copies_and_case_changes_are_the_lab_file_with_a_note(tmp_path):
    (tmp_path / "ruizana_1001_5001_broadcasting (1).py").write_text(SOLUTION)
    (tmp_path / "solbea_1003_5002_Broadcasting.py").write_text(SOLUTION)
    (tmp_path / "lorymal_1002_5003_broadcasting.py").write_text(STUB)
    (tmp_path / "lorymal_1002_5004_BROADCASTING(2).py").write_text(SOLUTION)
    entries = by_student(layouts.discover(tmp_path, LAB02))
    files, note = read_renamed(entries["1001"])
    assert files["broadcasting.py"] == SOLUTION.encode()
    assert note == "broadcasting (1).py was graded as broadcasting.py"
    assert read_renamed(entries["1003"])[1] == "Broadcasting.py was graded as broadcasting.py"
    text = two_files(entries["1002"])  # which of the two was meant cannot be told
    assert "lorymal_1002_5003_broadcasting.py, lorymal_1002_5004_BROADCASTING(2).py" in text


def test_moodle_flat_and_folders_renamed_lab_files_with_a_note(tmp_path):
    (tmp_path / "Ana Ruiz_1001_assignsubmission_file_Broadcasting.py").write_text(SOLUTION)
    bea = tmp_path / "Bea Sol_1003_assignsubmission_file_"
    (bea / "lab02").mkdir(parents=True)
    (bea / "lab02" / "broadcasting (2).py").write_text(SOLUTION)
    mal = tmp_path / "Mal Lory_1002_assignsubmission_file_"
    mal.mkdir()
    (mal / "broadcasting.py").write_text(STUB)
    (mal / "Broadcasting.py").write_text(SOLUTION)
    entries = by_student(layouts.discover(tmp_path, LAB02))
    assert read_renamed(entries["1001"]) == (
        {"broadcasting.py": SOLUTION.encode()}, "Broadcasting.py was graded as broadcasting.py")
    assert read_renamed(entries["1003"]) == (
        {"broadcasting.py": SOLUTION.encode()},
        "broadcasting (2).py was graded as broadcasting.py")
    assert "Broadcasting.py, broadcasting.py" in two_files(entries["1002"])


def test_gradescope_and_zips_renamed_lab_files_with_a_note(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text(METADATA)
    (tmp_path / "submission_1").mkdir()
    (tmp_path / "submission_1" / "BroadCasting.py").write_text(SOLUTION)
    (tmp_path / "submission_2").mkdir()
    zipped(tmp_path / "submission_2", "mine", {"lab02/broadcasting (1).py": SOLUTION,
                                                "lab02/broadcasting.py": STUB})
    (tmp_path / "submission_3").mkdir()
    zipped(tmp_path / "submission_3", "lab02", {"lab02/lab02/BROADCASTING.PY": SOLUTION})
    entries = by_student(layouts.discover(tmp_path, LAB02))
    assert read_renamed(entries["1001"])[1] == "BroadCasting.py was graded as broadcasting.py"
    assert "lab02/broadcasting (1).py, lab02/broadcasting.py" in two_files(entries["1002"])
    assert read_renamed(entries["1003"]) == (
        {"broadcasting.py": SOLUTION.encode()},
        "lab02/lab02/BROADCASTING.PY was graded as broadcasting.py")


def test_a_zip_holding_one_lab_path_twice_is_refused(tmp_path):
    """A zip may hold two members of one name (or `a\\x` beside `a/x`): the last one was
    read, silently."""
    folder = tmp_path / "Ana Ruiz_1001_assignsubmission_file_"
    folder.mkdir()
    with zipfile.ZipFile(folder / "lab02.zip", "w") as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it writes
        archive.writestr("lab02/broadcasting.py", SOLUTION)
        archive.writestr("lab02\\broadcasting.py", STUB)
    (entry,) = layouts.discover(tmp_path, LAB02).entries
    assert "lab02/broadcasting.py, lab02/broadcasting.py" in two_files(entry)


def test_renamed_files_of_a_lab_in_folders(tmp_path):
    lab04 = get_lab("lab04")
    root = tmp_path / "1001" / "src" / "utils"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "Seeding.py").write_text("A = 1\n")
    (root / "logging (1).py").write_text("B = 2\n")
    (entry,) = layouts.discover(tmp_path, lab04, "folders").entries
    files, note = read_renamed(entry, lab04)
    assert files == {"src/utils/__init__.py": b"", "src/utils/seeding.py": b"A = 1\n",
                     "src/utils/logging.py": b"B = 2\n"}
    assert note == ("src/utils/Seeding.py was graded as src/utils/seeding.py; "
                    "src/utils/logging (1).py was graded as src/utils/logging.py")


def test_a_renamed_lab_file_is_graded_and_the_result_says_so(tmp_path):
    folder = tmp_path / "download" / "Ana Ruiz_1001_assignsubmission_file_"
    folder.mkdir(parents=True)
    (folder / "Broadcasting (1).py").write_text(SOLUTION)
    summary = batch.grade_many(LAB02, tmp_path / "download", tmp_path / "out", jobs=1)
    with Gradebook(summary.gradebook) as book:
        (stored,) = book.current("lab02")
    assert stored.result["status"] == "pass"
    assert "Broadcasting (1).py was graded as broadcasting.py" in stored.result["message"]


def test_canvas_test_student_is_on_no_roster(tmp_path):
    """Canvas's gradebook export lists its Test Student ("Student, Test"), with an id."""
    canvas_class(tmp_path / "download")
    (tmp_path / "roster.csv").write_text(CANVAS_ROSTER + '"Student, Test",999,,,Sec A,\n')
    people = roster.read(tmp_path / "roster.csv")
    placed = roster.place(layouts.discover(tmp_path / "download", LAB02).entries, people)
    assert [p.id for p in placed.missing] == ["105"]
    assert [(p.id, p.name) for p in placed.not_students] == [("999", "Student, Test")]


def test_staff_rows_of_a_roster_with_roles_are_on_no_roster(tmp_path):
    """Gradescope's roster has a Role column (Student, TA, Instructor, Reader); Moodle's
    participants table a Roles one (Student, Teacher, Non-editing teacher, Manager)."""
    gradescope_class(tmp_path / "gs")
    (tmp_path / "gs.csv").write_text(
        "First Name,Last Name,SID,Email,Role,Sections\n"
        "Alice,Smith,301,alice@uni.edu,Student,\nBob,Jones,302,bob@uni.edu,Student,\n"
        "Carol,Lee,,carol@uni.edu,Student,\nTom,Ta,,tom@uni.edu,TA,\n"
        "Ines,Prof,,ines@uni.edu,Instructor,\nRay,Reader,,ray@uni.edu,Reader,\n"
        "Test,Student,,test@uni.edu,Student,\nNew,Role,,new@uni.edu,Estudiante,\n")
    placed = roster.place(layouts.discover(tmp_path / "gs", LAB02).entries,
                          roster.read(tmp_path / "gs.csv"))
    assert sorted(e.student for e in placed.entries) == ["301", "302", "carol@uni.edu"]
    assert [p.id for p in placed.missing] == ["new@uni.edu"]  # an unknown role: counted
    assert [p.name for p in placed.not_students] == [
        "Tom Ta", "Ines Prof", "Ray Reader", "Test Student"]
    (tmp_path / "moodle.csv").write_text(
        "First name,Last name,Email address,Roles,Groups,Last access to course,Status\n"
        "Ana,Ruiz,ana@uni.edu,Student,,Never,Active\n"
        'Tere,Sa,tere@uni.edu,"Teacher, Non-editing teacher",,Now,Active\n'
        'Dual,Role,dual@uni.edu,"Non-editing teacher, Student",,Now,Active\n'
        "Max,Man,max@uni.edu,Manager,,Now,Active\n")
    people = roster.read(tmp_path / "moodle.csv")
    placed = roster.place([], people)
    assert [p.id for p in placed.missing] == ["ana@uni.edu", "dual@uni.edu"]
    assert [p.id for p in placed.not_students] == ["tere@uni.edu", "max@uni.edu"]


def test_cli_batch_says_which_roster_rows_are_not_students(tmp_path):
    canvas_class(tmp_path / "download")
    (tmp_path / "roster.csv").write_text(CANVAS_ROSTER + '"Student, Test",999,,,Sec A,\n')
    done = CliRunner().invoke(main, ["batch", "lab02", str(tmp_path / "download"), "--out",
                                     str(tmp_path / "out"), "--jobs", "2", "--roster",
                                     str(tmp_path / "roster.csv")])
    assert done.exit_code == 0, done.output
    assert "1 students on the roster sent nothing: 105" in done.output
    assert ("left out 1 rows of the roster that are not students (staff, the LMS's test "
            "student): Student, Test (999)") in done.output
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        assert "999" not in {s.student for s in book.current("lab02")}
