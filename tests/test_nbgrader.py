"""End to end with the real nbgrader: the exported course is accepted by
`nbgrader generate_assignment`, `nbgrader autograde` gives the solution notebook full
points and the released one zero, and labkit's grades land in nbgrader's gradebook."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from labkit.cli import main
from labkit.course.catalogue import catalogue, lab_checks
from labkit.interop import nbgrader as nbgrader_course
from labkit.student import policy

pytestmark = pytest.mark.slow

LABS = [lab for lab in catalogue() if (lab.grader_dir / "checks.toml").is_file()]
AUTOGRADED = "lab02"  # one lab goes through `nbgrader autograde` (kernels are slow)
HIDDEN = "sliding_windows."


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=ERROR"],
                          cwd=course, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@contextmanager
def gradebook(course: Path):
    """nbgrader's own API on the course's gradebook."""
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's, under SQLAlchemy 2
        with Gradebook(nbgrader_course.db_url(course / "gradebook.db"), "labkit") as gb:
            yield gb


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """Every lab exported with the CLI, then released by `nbgrader generate_assignment`."""
    course = tmp_path_factory.mktemp("course")
    out = CliRunner().invoke(main, ["nbgrader", "export", str(course), "--hide", HIDDEN,
                                    "--lang", "en", *(lab.id for lab in LABS)])
    assert out.exit_code == 0, out.output
    nbgrader(course, "generate_assignment", "*")
    return course


def notebook(course: Path, where: str, lab_id: str) -> dict:
    return json.loads((course / where / lab_id / f"{lab_id}.ipynb").read_text())


def test_the_export_is_a_valid_nbgrader_source(course):
    import nbformat

    assert (course / "nbgrader_config.py").read_text().startswith(nbgrader_course.CONFIG_MARKER)
    for lab in LABS:
        source = notebook(course, "source", lab.id)
        nbformat.validate(nbformat.from_dict(source))
        tests = [c["metadata"]["nbgrader"] for c in source["cells"]
                 if c["metadata"].get("nbgrader", {}).get("grade")]
        assert len(tests) == len(lab_checks(lab).checks)
        assert {t["grade_id"]: t["points"] for t in tests} == {
            nbgrader_course.grade_id(c.id): c.points for c in lab_checks(lab).checks}
        assert all(t["locked"] and not t["solution"] for t in tests)
        solutions = [c for c in source["cells"] if c["metadata"].get("nbgrader", {}).get(
            "solution")]
        assert solutions and all("### BEGIN SOLUTION" in c["source"] for c in solutions)


def test_the_release_hides_solutions_and_hidden_tests(course):
    for lab in LABS:
        text = json.dumps(notebook(course, "release", lab.id))
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
        assert "raise NotImplementedError()" in text
    hidden = [c for c in notebook(course, "source", AUTOGRADED)["cells"]
              if HIDDEN in c["source"] and "BEGIN HIDDEN TESTS" in c["source"]]
    assert hidden


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_labkit_grades_the_source_full_and_the_release_zero(course, lab, tmp_path):
    for where, full in (("source", True), ("release", False)):
        work = tmp_path / where
        work.mkdir()
        shutil.copyfile(course / where / lab.id / f"{lab.id}.ipynb", work / f"{lab.id}.ipynb")
        result = policy.grade(lab, work)
        assert result.score == (result.max_score if full else 0), (where, result.failed)


def test_autograde_solution_full_release_zero(course):
    lab = next(lab for lab in LABS if lab.id == AUTOGRADED)
    for student, where in (("sol", "source"), ("stub", "release")):
        target = course / "submitted" / student / lab.id
        target.mkdir(parents=True)
        shutil.copyfile(course / where / lab.id / f"{lab.id}.ipynb", target / f"{lab.id}.ipynb")
    nbgrader(course, "autograde", lab.id)
    points = {nbgrader_course.grade_id(c.id): c.points for c in lab_checks(lab).checks}
    with gradebook(course) as gb:
        solution = gb.find_submission(lab.id, "sol")
        assert solution.score == solution.max_score == lab_checks(lab).max_score
        stub = gb.find_submission(lab.id, "stub")
        assert stub.score == 0 and stub.max_score == solution.max_score
        graded = {g.name: g.auto_score for g in gb.find_submission_notebook(
            lab.id, lab.id, "sol").grades}
        assert graded == points
    # the hidden tests ran: they were put back into the released notebook and failed
    autograded = notebook(course, "autograded/stub", lab.id)
    hidden = [c for c in autograded["cells"]
              if "".join(c["source"]).startswith(f"# labkit check: {HIDDEN}")]
    assert hidden and all("BEGIN HIDDEN TESTS" in "".join(c["source"]) for c in hidden)
    assert all(o["output_type"] == "error" for c in hidden for o in c["outputs"])


def test_push_labkit_grades_into_the_nbgrader_gradebook(course, tmp_path):
    from labkit.classroom.gradebook import Gradebook

    lab = next(lab for lab in LABS if lab.id == AUTOGRADED)
    work = tmp_path / "carol"
    work.mkdir()
    shutil.copyfile(course / "source" / lab.id / f"{lab.id}.ipynb", work / f"{lab.id}.ipynb")
    full = policy.grade(lab, work)
    pushed = nbgrader_course.push_results(course / "gradebook.db",
                                          [("carol", full), ("dave", full)])
    assert pushed.rows == (("carol", lab.id, full.score, full.max_score),
                           ("dave", lab.id, full.score, full.max_score))
    with gradebook(course) as gb:
        assert gb.find_submission(lab.id, "carol").score == full.score
        for check in full.checks:
            grade = gb.find_grade(nbgrader_course.grade_id(check.id), lab.id, lab.id, "carol")
            assert grade.score == check.points and not grade.needs_manual_grade

    # a gradebook that has never seen the course gets the assignment and its cells
    fresh = tmp_path / "fresh.db"
    nbgrader_course.push_results(fresh, [("carol", full)])
    from nbgrader.api import Gradebook as NbGradebook

    with NbGradebook(nbgrader_course.db_url(fresh), "labkit") as gb:
        assert gb.find_submission(lab.id, "carol").score == full.score
        assert gb.find_notebook(lab.id, lab.id).max_score == full.max_score

    # through labkit's own gradebook (what `labkit batch` fills) and the CLI: a regrade
    shutil.copyfile(course / "release" / lab.id / f"{lab.id}.ipynb", work / f"{lab.id}.ipynb")
    zero = policy.grade(lab, work)
    out_dir = tmp_path / "labkit-out"  # as `labkit batch` leaves it
    with Gradebook(out_dir / "gradebook.sqlite") as labkit_book:
        labkit_book.record(run_id=None, student="carol", source=str(work), kind="folder",
                           digest=zero.digest, grader_key="k", result=zero)
    out = CliRunner().invoke(main, ["nbgrader", "push", str(out_dir),
                                    "--db", str(course / "gradebook.db")])
    assert out.exit_code == 0, out.output
    assert f"{lab.id}  carol  0/{zero.max_score:g}" in out.output
    with gradebook(course) as gb:
        assert gb.find_submission(lab.id, "carol").score == 0
        assert gb.find_submission(lab.id, "dave").score == full.max_score  # others untouched
    bad = CliRunner().invoke(main, ["nbgrader", "push", str(out_dir),
                                    "--db", str(tmp_path / "no" / "such" / "gradebook.db")])
    assert bad.exit_code == 2 and "nbgrader gradebook" in bad.output


def test_batch_writes_into_the_nbgrader_gradebook(course, tmp_path):
    lab = next(lab for lab in LABS if lab.id == AUTOGRADED)
    for student, where in (("erin", "source"), ("frank", "release")):
        (tmp_path / "class" / student).mkdir(parents=True)
        shutil.copyfile(course / where / lab.id / f"{lab.id}.ipynb",
                        tmp_path / "class" / student / f"{lab.id}.ipynb")
    out = CliRunner().invoke(main, [
        "batch", lab.id, str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--jobs", "1",
        "--nbgrader-db", str(course / "gradebook.db")])
    assert out.exit_code == 0, out.output
    assert "2 grade(s) written to nbgrader's gradebook" in out.output
    with gradebook(course) as gb:
        assert gb.find_submission(lab.id, "erin").score == lab_checks(lab).max_score
        assert gb.find_submission(lab.id, "frank").score == 0
