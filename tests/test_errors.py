"""Every error a user can cause is a `LabkitError`, and the CLI tells it once, in --lang."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from labkit.classroom.batch import BatchError
from labkit.classroom.exports import ExportError
from labkit.classroom.gradebook import GradebookError
from labkit.classroom.submissions import SubmissionError
from labkit.cli import main
from labkit.course.authoring import MarkerError
from labkit.course.catalogue import UnknownLab
from labkit.errors import USAGE, EnglishError, LabkitError
from labkit.interop.nbgrader import CourseExportError, PushError
from labkit.sandbox.errors import IsolationError
from labkit.student.notebookfiles import NotebookError
from labkit.student.workspace import WorkspaceError

ENGLISH_ONLY = [BatchError, ExportError, GradebookError, IsolationError, MarkerError,
                CourseExportError, PushError]


@pytest.mark.parametrize("cls", ENGLISH_ONLY, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_instructors_errors_keep_their_one_line_in_every_language(cls):
    error = cls("the gradebook is empty")
    assert isinstance(error, EnglishError) and error.exit_code == USAGE
    assert str(error) == error.text("es") == "the gradebook is empty"


def test_students_errors_speak_both_languages_and_name_their_key():
    for error in (WorkspaceError("no_workspace", lab="lab02", path="/x"),
                  SubmissionError("batch_empty", name="alice.zip")):
        assert isinstance(error, LabkitError)
        assert error.text("en") != error.text("es")
        assert str(error) == f"{error.key}: {error.text('en')}"
    unreadable = NotebookError("notebook_unreadable", reason="JSONDecodeError")
    assert unreadable.text("es").startswith("el notebook no es un notebook")


def test_an_unknown_lab_suggests_or_lists_in_the_language_asked():
    assert UnknownLab("lab2", "lab02").text("es") == (
        "laboratorio desconocido 'lab2'; ¿quisiste decir 'lab02'?")
    assert UnknownLab("zzz", None, ["lab01", "lab02"]).text("en") == (
        "unknown lab 'zzz' (labs: lab01, lab02)")


def test_the_cli_tells_a_library_error_once_in_the_commands_language(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab02").mkdir()
    (tmp_path / "lab02" / "mine.py").write_text("x = 1\n")
    runner = CliRunner()
    for lang in ("en", "es"):
        result = runner.invoke(main, ["fetch", "lab02", "--lang", lang], catch_exceptions=False)
        expected = WorkspaceError("workspace_exists", path=str(tmp_path / "lab02")).text(lang)
        assert result.exit_code == USAGE
        assert result.stderr.strip().splitlines() == [f"labkit: {expected}"]
