"""Course material is read strictly, by one loader per file, and `checks.toml` is parsed
once per process while it is unchanged; docs/writing-labs.md says what is true, nothing
cites a file outside the repository, and `labkit dev new` starts a lab the kit accepts."""

from __future__ import annotations

import ast
import os
import re
import shutil
import textwrap
import tomllib

import pytest
from click.testing import CliRunner
from kit import REPO, Variant, variants

from labkit.cli import main
from labkit.course import checks as checks_module
from labkit.course import kitcheck
from labkit.course.catalogue import catalogue, lab_checks, load_catalogue, parse_catalogue
from labkit.course.checks import load_checks, parse_checks
from labkit.course.material import CourseError
from labkit.errors import LabkitError

LAB = """\
format = 1

[[lab]]
id = "lab02"
title.en = "Strides"
title.es = "Strides"
files = ["broadcasting.py"]
modules = ["broadcasting"]
"""

CHECKS = """\
format = 1

[checks."safe_mse.x"]
points = 2
title = {en = "t", es = "t"}
fail = {en = "f", es = "f"}
hint = {en = "h", es = "h"}

[messages.some_key]
en = "m"
es = "m"
"""


def _catalogue_error(text: str, tmp_path) -> str:
    with pytest.raises(CourseError) as info:
        parse_catalogue(text, tmp_path)
    return str(info.value)


def _checks_error(text: str) -> str:
    with pytest.raises(CourseError) as info:
        parse_checks(text, "grader/lab02/checks.toml")
    return str(info.value)


def test_the_kit_loads():
    labs = catalogue()
    assert [lab.id for lab in labs] == ["lab01", "lab02", "lab03", "lab04", "lab05", "lab06"]
    assert all(lab_checks(lab).max_score > 0 for lab in labs)
    assert [lab.id for lab in labs if lab.timed] == ["lab03", "lab05"]  # their checks time calls
    assert parse_checks(CHECKS, "c").get("safe_mse.x").points == 2.0


@pytest.mark.parametrize(("edit", "expected"), [
    (("modules", "share_workers = true\nmodules"), "lab \"lab02\": unknown key 'share_workers'"),
    (("modules", "call_timout = 3\nmodules"), "lab \"lab02\": unknown key 'call_timout'"),
    (("modules", 'call_timeout = "3"\nmodules'),
     'lab "lab02": call_timeout must be a positive number'),
    (("modules", "grade_timeout = 0\nmodules"),
     'lab "lab02": grade_timeout must be a positive number'),
    (("modules", "share_worker = 1\nmodules"), 'lab "lab02": share_worker must be true or false'),
    (("modules", "timed = 1\nmodules"), 'lab "lab02": timed must be true or false'),
    (('files = ["broadcasting.py"]\n', ""), "lab \"lab02\": missing key 'files'"),
    (('["broadcasting.py"]', '"broadcasting.py"'),
     'lab "lab02": files must be a non-empty list of non-empty strings'),
    (('["broadcasting.py"]', '["../broadcasting.py"]'),
     "lab \"lab02\": files: '../broadcasting.py' must be a relative path inside the lab"),
    (('title.es = "Strides"\n', ""), "lab \"lab02\": missing key 'title.es'"),
    (('title.es = "Strides"', 'title.fr = "Strides"'), "lab \"lab02\": unknown key 'title.fr'"),
    (('title.es = "Strides"', 'title.es = ""'), 'lab "lab02": title.es must be a non-empty string'),
    (('"lab02"', '"Lab 2"'), 'lab "Lab 2": id \'Lab 2\' must be lower-case letters, digits and '
                             "_, starting with a letter"),
    (('id = "lab02"\n', ""), "lab #1: missing key 'id'"),
    (("format = 1", "format = 2"), "format 2 is not supported (this labkit reads 1)"),
    (("format = 1\n", ""), "missing key 'format'"),
    (("format = 1", "format = 1\nlabs = []"), "unknown key 'labs'"),
    (("[[lab]]", "[lab]"), "lab must be an array of tables ([[lab]])"),
    (("format = 1", "format = 1\n[[lab]]\nid = 'x'\n= 2"), "is not valid TOML: Invalid"),
])
def test_what_is_wrong_in_labs_toml_is_named(tmp_path, edit, expected):
    old, new = edit
    assert LAB.count(old) == 1
    assert _catalogue_error(LAB.replace(old, new), tmp_path).startswith(f"labs.toml: {expected}")


def test_repeated_lab_ids(tmp_path):
    text = LAB + LAB.split("\n", 2)[2]
    assert _catalogue_error(text, tmp_path) == "labs.toml: lab ids are not unique: lab02"


@pytest.mark.parametrize(("edit", "expected"), [
    (("points = 2", "pionts = 2"), "check \"safe_mse.x\": unknown key 'pionts'"),
    (("points = 2", 'points = "2"'), 'check "safe_mse.x": points must be a non-negative number'),
    (("points = 2", "points = true"), 'check "safe_mse.x": points must be a non-negative number'),
    (("points = 2", "points = nan"), 'check "safe_mse.x": points must be a non-negative number'),
    (("points = 2\n", ""), "check \"safe_mse.x\": missing key 'points'"),
    (('hint = {en = "h", es = "h"}\n', ""), "check \"safe_mse.x\": missing key 'hint'"),
    (('fail = {en = "f", es = "f"}', 'fail = {en = "f"}'),
     "check \"safe_mse.x\": missing key 'fail.es'"),
    (('fail = {en = "f", es = "f"}', 'fail = "f"'),
     'check "safe_mse.x": fail must be a table of texts (fail.en, ...)'),
    (("points = 2", "points = 2\nhidden = 'yes'"),
     'check "safe_mse.x": hidden must be true or false'),
    (("points = 2", 'points = 2\nrequires = "safe_mse."'),
     'check "safe_mse.x": requires must be a list of non-empty strings'),
    (('es = "m"\n', ""), "messages: missing key 'some_key.es'"),
    (('es = "m"\n', 'es = "m"\nfr = "m"\n'), "messages: unknown key 'some_key.fr'"),
    (("format = 1", "format = 1\n[check]"), "unknown key 'check'"),
    (("format = 1", 'format = "1"'), "format '1' is not supported (this labkit reads 1)"),
    (("points = 2", "points = 2\npoints = 3"), "is not valid TOML: Cannot overwrite a value"),
])
def test_what_is_wrong_in_checks_toml_is_named(edit, expected):
    old, new = edit
    assert CHECKS.count(old) == 1
    error = _checks_error(CHECKS.replace(old, new))
    assert error.startswith(f"grader/lab02/checks.toml: {expected}"), error


def test_undecodable_checks_are_an_error():
    assert _checks_error(b"format = 1\n# \xff\n") == "grader/lab02/checks.toml: is not UTF-8 text"


def test_a_course_error_is_a_labkit_error_in_one_english_line(tmp_path):
    with pytest.raises(CourseError) as info:
        parse_catalogue(LAB.replace("modules", "share_workers = true\nmodules", 1), tmp_path)
    error = info.value
    assert isinstance(error, LabkitError) and isinstance(error, ValueError)
    assert error.exit_code == 2
    assert (error.file, error.detail) == ("labs.toml", "lab \"lab02\": unknown key 'share_workers'")
    assert error.text("es") == error.text("en") == str(error)


def test_loaded_records_are_read_only():
    (lab, *_) = catalogue()
    spec = lab_checks(lab).checks[0]
    with pytest.raises(TypeError):
        spec.title["en"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        lab.title["en"] = "changed"  # type: ignore[index]


@pytest.fixture
def kit(tmp_path):
    """A copy of the kit's course material, to break."""
    for name in ("solutions", "exercises", "grader"):
        shutil.copytree(REPO / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    shutil.copy(REPO / "labs.toml", tmp_path / "labs.toml")
    return tmp_path


def test_dev_check_reports_bad_material_as_problems(kit):
    checks = kit / "grader" / "lab02" / "checks.toml"
    checks.write_text(checks.read_text().replace("points = 2", "pionts = 2", 1))
    lab03 = kit / "grader" / "lab03" / "checks.toml"
    lab03.write_text(lab03.read_text() + "\n[messages.broken\n")
    out = CliRunner().invoke(main, ["dev", "check", "--no-grade", "--repo", str(kit)])
    assert out.exit_code == 1, out.output
    lines = out.output.splitlines()
    assert "grader/lab02/checks.toml: check \"safe_mse.aligned_pairs\": unknown key 'pionts'" \
        in lines
    assert any(line.startswith("grader/lab03/checks.toml: is not valid TOML: ") for line in lines)
    assert lines[-1] == f"2 problem(s) in {len(catalogue())} lab(s)"
    assert "internal error" not in out.output


def test_dev_check_reports_an_invalid_catalogue(kit):
    (kit / "labs.toml").write_text((kit / "labs.toml").read_text() + "\n[[lab]\n")
    out = CliRunner().invoke(main, ["dev", "check", "--no-grade", "--repo", str(kit)])
    assert out.exit_code == 1
    assert out.output.startswith("labs.toml: is not valid TOML: ")
    assert "internal error" not in out.output


def test_grading_with_bad_checks_raises_the_same_error(kit):
    from labkit.engine.cold import grade_files

    checks = kit / "grader" / "lab02" / "checks.toml"
    checks.write_text(checks.read_text().replace("points = 2", "pionts = 2", 1))
    lab = next(lab for lab in load_catalogue(kit) if lab.id == "lab02")
    (problem,) = [p for p in kitcheck.check_kit(kit, grade=False).problems]
    with pytest.raises(CourseError) as info:
        grade_files(lab, {"broadcasting.py": b""})
    assert str(info.value) == str(problem)


def test_checks_are_parsed_once_while_unchanged(tmp_path, monkeypatch):
    parsed = []
    parse = checks_module.parse_checks
    monkeypatch.setattr(checks_module, "parse_checks",
                        lambda data, file: parsed.append(file) or parse(data, file))
    path = tmp_path / "grader" / "lab02" / "checks.toml"
    path.parent.mkdir(parents=True)
    path.write_text(CHECKS)
    first = load_checks(path)
    assert load_checks(path) is first and len(parsed) == 1
    assert parsed == ["grader/lab02/checks.toml"]
    # Same size, and the old mtime put back: the change is still seen (ctime moved on).
    stat = path.stat()
    path.write_text(CHECKS.replace("points = 2", "points = 3"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_checks(path).get("safe_mse.x").points == 3.0
    # A grader folder replaced by another file (written elsewhere, renamed in place).
    other = tmp_path / "new.toml"
    other.write_text(CHECKS.replace("points = 2", "points = 4"))
    other.replace(path)
    assert load_checks(path).get("safe_mse.x").points == 4.0
    assert len(parsed) == 3


GRADER = textwrap.dedent('''
    from labkit.grading import check

    @check("one.value")
    def test_one(student):
        assert student.one() == 1
''')


def test_a_grading_parses_its_checks_once(tmp_path, monkeypatch):
    from labkit.engine.cold import grade_files

    (tmp_path / "labs.toml").write_text(LAB.replace("lab02", "lab90")
                                        .replace("broadcasting", "one"))
    grader = tmp_path / "grader" / "lab90"
    grader.mkdir(parents=True)
    shutil.copy(REPO / "grader" / "pytest.ini", tmp_path / "grader" / "pytest.ini")
    (grader / "test_one.py").write_text(GRADER)
    (grader / "checks.toml").write_text(CHECKS.replace("safe_mse.x", "one.value"))
    (lab,) = load_catalogue(tmp_path)
    parsed = []
    parse = checks_module.parse_checks
    monkeypatch.setattr(checks_module, "parse_checks",
                        lambda data, file: parsed.append(file) or parse(data, file))
    for _ in range(2):
        result = grade_files(lab, {"one.py": b"def one():\n    return 1\n"})
        assert result.score == result.max_score == 2
    assert parsed == ["grader/lab90/checks.toml"]


# -- docs/writing-labs.md is true -------------------------------------------------------

DOC = REPO / "docs" / "writing-labs.md"
FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
MIN_MUTANTS = 10


def doc_blocks(language: str) -> list[str]:
    """The doc's fenced blocks in `language`, dedented (some sit inside list items)."""
    return [textwrap.dedent(body) for _, lang, body in FENCE.findall(DOC.read_text())
            if lang == language]


def load_example(text: str) -> None:
    """Load a TOML example as the kit loads that kind of file; fail on any other kind."""
    raw = tomllib.loads(text)
    if "lab" in raw:
        parse_catalogue(text, REPO)
    elif "checks" in raw:
        parse_checks(text, "docs/writing-labs.md")
    elif "mutant" in raw:
        for entry in raw["mutant"]:
            (lab,) = [lab for lab in catalogue() if entry.get("file", lab.files[0]) in lab.files]
            variant = Variant(lab.id, entry["name"], tuple(entry["breaks"]), (entry,), entry)
            assert variant.files()  # the edit applies, once, to the lab's solution
            assert set(variant.breaks) <= {c.id for c in lab_checks(lab).checks}
    else:
        raise AssertionError(f"a TOML example of no known file:\n{text}")


def test_the_doc_has_examples_of_every_kind():
    kinds = {key for text in doc_blocks("toml") for key in tomllib.loads(text)}
    assert {"lab", "checks", "mutant"} <= kinds
    assert doc_blocks("python")


@pytest.mark.parametrize("text", doc_blocks("toml"))
def test_every_toml_example_in_the_doc_loads(text):
    load_example(text)


@pytest.mark.parametrize("text", doc_blocks("python"))
def test_every_python_example_in_the_doc_parses(text):
    ast.parse(text)


def test_the_doc_says_what_ci_demands():
    text = " ".join(DOC.read_text().split())
    assert f"at least {MIN_MUTANTS} mutants in `tests/mutants/<lab>.toml`" in text


@pytest.mark.parametrize("lab", catalogue(), ids=lambda lab: lab.id)
def test_every_lab_in_the_catalogue_has_enough_mutants(lab):
    assert (REPO / "tests" / "mutants" / f"{lab.id}.toml").is_file()
    assert sum(m.lab == lab.id for m in variants("mutants")) >= MIN_MUTANTS


OUTSIDE = "LABS" + ".md"  # a file of the course outside this repository


def test_nothing_points_outside_the_repository():
    """Graders and docs cite the lab's own README, which restates the contract."""
    roots = [REPO / name for name in ("grader", "docs", "exercises", "solutions", "src",
                                      "tests")]
    files = [REPO / "README.md", *(p for root in roots for p in root.rglob("*")
                                   if p.is_file() and p.suffix in (".py", ".md", ".toml"))]
    citing = [str(p.relative_to(REPO)) for p in files if OUTSIDE in p.read_text()]
    assert citing == []


# -- labkit dev new -----------------------------------------------------------------------


@pytest.fixture
def kit_copy(tmp_path):
    """What a checkout holds of the course: catalogue, solutions, stubs, graders, mutants."""
    for name in ("solutions", "exercises", "grader", "tests/mutants"):
        shutil.copytree(REPO / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    shutil.copy(REPO / "labs.toml", tmp_path / "labs.toml")
    return tmp_path


def test_dev_new_writes_a_lab_that_passes_the_kit_check(kit_copy):
    from labkit.engine.cold import grade_files

    before = (kit_copy / "labs.toml").read_text()
    out = CliRunner().invoke(main, ["dev", "new", "lab07", "--repo", str(kit_copy)])
    assert out.exit_code == 0, out.output
    assert "wrote solutions/lab07/lab07.py" in out.output.splitlines()
    after = (kit_copy / "labs.toml").read_text()
    assert after.startswith(before)  # appended: the catalogue's comments stay
    report = kitcheck.check_kit(kit_copy, only=["lab07"], grader=grade_files)
    assert [str(p) for p in report.problems] == []
    assert report.labs == ("lab07",)
    lab = next(lab for lab in load_catalogue(kit_copy) if lab.id == "lab07")
    (mutant,) = tomllib.loads((kit_copy / "tests" / "mutants" / "lab07.toml").read_text())[
        "mutant"]
    solution = (kit_copy / "solutions" / "lab07" / "lab07.py").read_text()
    assert solution.count(mutant["replace"]) == 1
    result = grade_files(lab, {"lab07.py": solution.replace(mutant["replace"],
                                                            mutant["with"]).encode()})
    assert [c.id for c in result.checks if c.points < c.max_points] == mutant["breaks"]


@pytest.mark.parametrize(("lab_id", "message"), [
    ("lab02", "lab 'lab02' already exists in labs.toml"),
    ("Lab5", "invalid lab id 'Lab5': lower-case letters, digits and _, starting with a letter"),
    ("lab-5", "invalid lab id 'lab-5': lower-case letters, digits and _, starting with a "
              "letter"),
    ("random", "invalid lab id 'random': the lab's module would be named like a Python "
               "keyword or standard module"),
])
def test_dev_new_refuses_a_taken_or_invalid_id(kit_copy, lab_id, message):
    before = sorted(p for p in kit_copy.rglob("*"))
    catalogue_text = (kit_copy / "labs.toml").read_text()
    out = CliRunner().invoke(main, ["dev", "new", lab_id, "--repo", str(kit_copy)])
    assert out.exit_code == 2
    assert out.output.splitlines() == [f"labkit: {message}"]
    assert sorted(p for p in kit_copy.rglob("*")) == before
    assert (kit_copy / "labs.toml").read_text() == catalogue_text


def test_dev_new_refuses_a_lab_whose_folder_is_left_over(kit_copy):
    (kit_copy / "grader" / "lab07").mkdir()
    out = CliRunner().invoke(main, ["dev", "new", "lab07", "--repo", str(kit_copy)])
    assert out.exit_code == 2
    assert out.output.splitlines() == ["labkit: lab 'lab07': grader/lab07 already exists"]
