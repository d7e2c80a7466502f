"""The student commands, through click's CliRunner and (a few) the real executable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from batchkit import LAB02, LAB02_FULL
from click.testing import CliRunner
from kit import REPO, daemon_pids, grade_cached, stub_files

from labkit.cli import main
from labkit.course import catalogue as registry
from labkit.results import SCHEMA_FILE

SCHEMA = json.loads(SCHEMA_FILE.read_text())


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    runner = CliRunner()

    def invoke(*args: str, env: dict | None = None):
        return runner.invoke(main, list(args), env=env, catch_exceptions=False)

    return invoke


def one_error_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("labkit: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_list_shows_every_lab_and_progress(run, tmp_path):
    out = run("list").output
    labs = [lab.id for lab in registry.catalogue()]
    for lab in labs:
        assert lab in out
    assert out.count("not fetched") == len(labs)
    run("fetch", "lab02")
    assert "fetched, not graded" in run("list").output


def test_fetch_puts_stubs_and_readme_in_the_chosen_language(run, tmp_path):
    result = run("fetch", "lab02", "--lang", "es")
    assert result.exit_code == 0
    assert "labkit grade lab02" in result.output
    fetched = (tmp_path / "lab02" / "broadcasting.py").read_text()
    assert fetched == (REPO / "exercises" / "lab02" / "es" / "broadcasting.py").read_text()
    assert fetched != (REPO / "exercises" / "lab02" / "broadcasting.py").read_text()
    assert "Laboratorio 02" in (tmp_path / "lab02" / "README.md").read_text()


def test_fetch_never_overwrites_without_force(run, tmp_path):
    run("fetch", "lab02")
    work = tmp_path / "lab02" / "broadcasting.py"
    work.write_text("# my edits\n")
    result = run("fetch", "lab02")
    assert result.exit_code == 2
    assert "--force" in one_error_line(result)
    assert work.read_text() == "# my edits\n"
    forced = run("fetch", "lab02", "--force")
    assert forced.exit_code == 0
    backups = list(tmp_path.glob("lab02.backup-*"))
    assert len(backups) == 1
    assert (backups[0] / "broadcasting.py").read_text() == "# my edits\n"
    assert "raise NotImplementedError" in work.read_text()


@pytest.mark.parametrize("command", ["fetch", "grade", "hint"])
def test_unknown_lab_suggests_the_closest(run, command):
    result = run(command, "lab2")
    assert result.exit_code == 2
    assert "did you mean 'lab02'" in one_error_line(result)


def test_grade_without_workspace_or_file_is_one_line_exit_2(run, tmp_path):
    result = run("grade", "lab02")
    assert result.exit_code == 2
    assert "labkit fetch lab02" in one_error_line(result)
    run("fetch", "lab02")
    (tmp_path / "lab02" / "broadcasting.py").unlink()
    result = run("grade", "lab02")
    assert result.exit_code == 2
    assert "broadcasting.py" in one_error_line(result)


def test_grade_stub_fails_with_table_and_hints(run, tmp_path):
    run("fetch", "lab02")
    result = run("grade", "lab02")
    assert result.exit_code == 1
    assert "not implemented yet" in result.output
    assert f"Total: 0 / {LAB02_FULL:g} points" in result.output
    hints = run("hint", "lab02")
    assert hints.exit_code == 0
    assert "safe_mse.aligned_pairs" in hints.output and "as_strided" in hints.output
    one = run("hint", "lab02", "c_strides.matches_numpy")
    hinted = one.output.split("\n\nCheck ids of lab02: ")[0]  # then every id, to copy
    assert "c_strides.matches_numpy" in hinted and "safe_mse" not in hinted
    bad = run("hint", "lab02", "no.such_check")
    assert bad.exit_code == 2 and "no.such_check" in one_error_line(bad)


def test_hint_before_any_grade_is_an_error(run):
    run("fetch", "lab02")
    result = run("hint", "lab02")
    assert result.exit_code == 2
    assert "labkit grade lab02" in one_error_line(result)


def test_grade_json_is_only_the_document_and_valid(run, tmp_path):
    run("fetch", "lab02")
    shutil.copy(REPO / "solutions" / "lab02" / "broadcasting.py", tmp_path / "lab02")
    result = run("grade", "lab02", "--json")
    assert result.exit_code == 0
    document = json.loads(result.output)  # nothing but the document on stdout
    jsonschema.validate(document, SCHEMA)
    assert document["status"] == "pass" and document["score"] == document["max_score"]
    assert document["digest"].startswith("sha256:")


def test_language_follows_the_locale_and_the_option(run):
    run("fetch", "lab02")
    spanish = run("grade", "lab02", env={"LANG": "es_ES.UTF-8"})
    assert "aún no está implementada" in spanish.output and "puntos" in spanish.output
    english = run("grade", "lab02", "--lang", "en", env={"LANG": "es_ES.UTF-8"})
    assert "not implemented yet" in english.output


def test_real_executable_end_to_end(tmp_path):
    """The installed console script, in a subprocess, from a folder outside the repo."""
    labkit = shutil.which("labkit") or pytest.skip("labkit console script not installed")
    env = {**os.environ, "LANG": "C.UTF-8"}
    subprocess.run([labkit, "fetch", "lab02"], cwd=tmp_path, env=env, check=True,
                   capture_output=True)
    graded = subprocess.run([labkit, "grade", "lab02", "--json"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert graded.returncode == 1
    assert json.loads(graded.stdout)["score"] == 0
    shutil.copy(REPO / "solutions" / "lab02" / "broadcasting.py", tmp_path / "lab02")
    solved = subprocess.run([labkit, "grade", "lab02"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert solved.returncode == 0, solved.stdout + solved.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab02"]  # nothing left beside it
    bad = subprocess.run([labkit, "grade", "nope"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stdout == ""
    module = subprocess.run([sys.executable, "-m", "labkit", "--version"],
                            capture_output=True, text=True, check=True)
    assert "labkit" in module.stdout


def test_the_readme_demo_grades_stub_and_solution_and_leaves_nothing_running(tmp_path):
    labkit = shutil.which("labkit") or pytest.skip("labkit console script not installed")
    env = {**os.environ, "LANG": "C.UTF-8", "LABKIT_DAEMON": "1", "TMPDIR": str(tmp_path),
           "PATH": f"{Path(labkit).parent}{os.pathsep}{os.environ['PATH']}"}
    demo = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    full = f"{LAB02_FULL:g}"
    assert f"Total: 0 / {full} points" in demo.stdout
    assert f"Total: {full} / {full} points" in demo.stdout
    deadline = time.monotonic() + 30  # one still starting finds its folder gone and leaves
    while daemon_pids(under=tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert daemon_pids(under=tmp_path) == set()


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["fetch"], "Missing argument 'LAB'"), (["grade"], "which lab?"),
     (["grade", "lab02", "--bogus"], "--bogus"), (["fetch", "lab02", "--lang", "fr"], "--lang")],
)
def test_usage_errors_are_one_line_exit_2(run, args, needle):
    result = run(*args)
    assert result.exit_code == 2
    assert needle in one_error_line(result)


def test_unexpected_failures_are_one_line_unless_debugging(run, monkeypatch):
    def boom(*_args, **_kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("labkit.course.catalogue.catalogue", boom)
    result = run("list")
    assert result.exit_code == 2
    assert "internal error: RuntimeError: disk on fire" in one_error_line(result)
    monkeypatch.setenv("LABKIT_DEBUG", "1")
    with pytest.raises(RuntimeError):
        run("list")


def test_an_unavailable_isolation_is_a_one_line_usage_error(run):
    run("fetch", "lab02")
    result = run("grade", "lab02", env={"LABKIT_ISOLATION": "chroot-jail"})
    assert result.exit_code == 2
    assert "chroot-jail" in one_error_line(result)


def test_list_finds_workspaces_fetched_elsewhere_under_this_folder(run, tmp_path):
    run("fetch", "lab04", "--dir", "mine")
    run("fetch", "lab01")
    out = run("list").output
    assert "lab04" in out and "(mine)" in out and "(lab01)" in out
    assert out.count("not fetched") == len(registry.catalogue()) - 2
    run("grade", "lab04", "--dir", "mine")
    max_score = registry.lab_checks(registry.get_lab("lab04")).max_score
    assert f"last grade 0/{max_score:g}" in run("list").output


def test_points_show_at_most_two_decimals_in_both_languages():
    """Issue 30: a score printed as `2.5714/3`."""
    import dataclasses

    from labkit.cli import render
    from labkit.results import points

    assert [points(v) for v in (2.5714285, 18.0, 0.5, 1 / 3)] == ["2.57", "18", "0.5", "0.33"]
    result = grade_cached(LAB02, stub_files(LAB02))
    checks = (dataclasses.replace(result.checks[0], points=2.5714285, max_points=3.0),
              *result.checks[1:])
    odd = dataclasses.replace(result, checks=checks, score=2.5714285)
    for lang, words in (("en", "checks passed: "), ("es", "comprobaciones superadas: ")):
        table = render.table(dataclasses.replace(odd, lang=lang))
        assert "2.57/3" in table and "2.5714" not in table and words in table


def test_help_lists_the_students_commands_first_in_the_students_language():
    """Issue 30: --help mixed the student's six commands with the instructor's, A to Z."""
    from click.testing import CliRunner

    from labkit.cli import main

    for env, titles in (({"LANG": "en_US.UTF-8"}, ("Commands for students:",
                                                    "Commands for instructors:",
                                                    "Commands for course authors:")),
                        ({"LANG": "es_ES.UTF-8"}, ("Órdenes para estudiantes:",
                                                    "Órdenes para docentes:",
                                                    "Órdenes para autores del curso:"))):
        text = CliRunner().invoke(main, ["--help"], env={**env, "LC_ALL": ""}).output
        at = [text.index(title) for title in titles]
        assert at == sorted(at), text
        students, instructors = text[at[0]:at[1]], text[at[1]:at[2]]
        assert all(f"\n  {name} " in students for name in ("fetch", "grade", "hint", "submit"))
        assert "\n  batch " in instructors and "batch" not in students

