"""`labkit dev check` / `dev build`: the kit's self-check, on the real kit and on made-up ones."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner
from kit import REPO, grade_cached

from labkit.cli import main
from labkit.course import kitcheck as devtools
from labkit.course.catalogue import parse_catalogue
from labkit.results import CheckResult, LabResult, Status


def test_the_kit_passes_its_own_check():
    """What `labkit dev check` runs in CI: layout, sync, solutions full marks, stubs zero."""
    report = devtools.check_kit(REPO, grader=grade_cached)
    assert [str(p) for p in report.problems] == []
    assert report.labs


CATALOGUE = """\
format = 1

[[lab]]
id = "demo"
title.en = "Demo"
title.es = "Demo"
files = ["demo.py"]
modules = ["demo"]
"""

SOLUTION = """\
def f():
    ### BEGIN SOLUTION
    return 1
    ### END SOLUTION
"""


@pytest.fixture
def kit_dir(tmp_path):
    """A one-lab kit with everything in its place (graders are not run here)."""
    (tmp_path / "labs.toml").write_text(CATALOGUE)
    (tmp_path / "solutions" / "demo").mkdir(parents=True)
    (tmp_path / "solutions" / "demo" / "demo.py").write_text(SOLUTION)
    exercises = tmp_path / "exercises" / "demo"
    exercises.mkdir(parents=True)
    (exercises / "demo.py").write_text("def f():\n    raise NotImplementedError\n")
    (exercises / "es").mkdir()
    (exercises / "es" / "demo.py").write_text("def f():\n    raise NotImplementedError\n")
    (exercises / "README.md").write_text("# Demo\n")
    (exercises / "README.es.md").write_text("# Demo\n")
    grader = tmp_path / "grader" / "demo"
    grader.mkdir(parents=True)
    (grader / "checks.toml").write_text("format = 1\n")
    (grader / "test_demo.py").write_text("")
    return tmp_path


def problems(path) -> list[str]:
    return [str(p) for p in devtools.check_kit(path, grade=False).problems]


def test_a_clean_kit_has_no_problems(kit_dir):
    assert problems(kit_dir) == []


def test_words_in_one_language_and_stubs_that_differ_in_code(kit_dir):
    solution = kit_dir / "solutions" / "demo" / "demo.py"
    solution.write_text("# One.\n" + SOLUTION)
    devtools.build(kit_dir)
    assert problems(kit_dir) == [
        "solutions/demo/demo.py: words in English only (lines 1): put them in a language block"]
    solution.write_text("### LANG en\n# One.\n### LANG es\n# # Uno.\n# x = 1\n### END LANG\n"
                        + SOLUTION)
    devtools.build(kit_dir)
    assert problems(kit_dir) == ["solutions/demo/demo.py: its stubs differ in more than words"]
    (kit_dir / "exercises" / "demo" / "es" / "demo.py").unlink()
    assert "demo: missing exercises/demo/es/demo.py" in problems(kit_dir)


def test_a_solution_that_does_not_parse_is_named_not_raised(kit_dir):
    (kit_dir / "solutions" / "demo" / "demo.py").write_text(SOLUTION + "def (:\n")
    devtools.build(kit_dir)
    assert any(p.startswith("solutions/demo/demo.py: does not parse") for p in problems(kit_dir))


def test_stray_files_missing_readmes_and_unknown_lab_folders(kit_dir):
    (kit_dir / "exercises" / "demo" / "notes.txt").write_text("x")
    (kit_dir / "solutions" / "demo" / "extra.py").write_text("x = 1\n")
    (kit_dir / "exercises" / "demo" / "__pycache__").mkdir()
    (kit_dir / "exercises" / "demo" / "__pycache__" / "demo.cpython-311.pyc").write_bytes(b"")
    (kit_dir / "exercises" / "demo" / "README.es.md").unlink()
    (kit_dir / "grader" / "old").mkdir()
    found = problems(kit_dir)
    assert "demo: stray file exercises/demo/notes.txt" in found
    assert "demo: stray file solutions/demo/extra.py" in found
    assert "demo: missing exercises/demo/README.es.md" in found
    assert "grader/old: folder of a lab not in labs.toml" in found
    assert "exercises/demo/extra.py: differs from what `labkit dev build` makes" in found
    assert not any("pycache" in p for p in found)


def test_a_stub_edited_by_hand_is_out_of_sync(kit_dir):
    (kit_dir / "exercises" / "demo" / "demo.py").write_text("def f():\n    return 0\n")
    assert problems(kit_dir) == [
        "exercises/demo/demo.py: differs from what `labkit dev build` makes"
    ]


def test_repeated_lab_ids(kit_dir):
    (kit_dir / "labs.toml").write_text(CATALOGUE + CATALOGUE.split("\n", 1)[1])
    assert problems(kit_dir) == ["labs.toml: lab ids are not unique: demo"]


def test_missing_files_and_graders(kit_dir):
    (kit_dir / "solutions" / "demo" / "demo.py").unlink()
    (kit_dir / "grader" / "demo" / "checks.toml").unlink()
    (kit_dir / "grader" / "demo" / "test_demo.py").unlink()
    found = problems(kit_dir)
    assert "demo: missing solutions/demo/demo.py" in found
    assert "demo: missing grader/demo/checks.toml" in found
    assert "demo: no grader/demo/test_*.py" in found


def result(statuses: list[tuple[str, Status, float]], message: str = "") -> LabResult:
    checks = tuple(CheckResult(cid, cid, status, points, 1.0, "" if status is Status.PASS
                               else "why") for cid, status, points in statuses)
    return LabResult("demo", Status.PASS if all(s is Status.PASS for _, s, _ in statuses)
                     else Status.FAIL, sum(p for *_, p in statuses), float(len(checks)), 0.1,
                     "0", "sha256:0", "en", "process", checks, message)


def test_judging_solution_and_stub_results(kit_dir):
    (kit_dir / "grader" / "demo" / "checks.toml").write_text(textwrap.dedent("""\
        format = 1
        [checks."f.one"]
        points = 1
        title = {en = "t", es = "t"}
        fail = {en = "f", es = "f"}
        hint = {en = "h", es = "h"}
        [checks."f.two"]
        points = 1
        title = {en = "t", es = "t"}
        fail = {en = "f", es = "f"}
        hint = {en = "h", es = "h"}
    """))
    (lab,) = parse_catalogue(CATALOGUE, kit_dir)
    full = result([("f.one", Status.PASS, 1.0), ("f.two", Status.PASS, 1.0)])
    zero = result([("f.one", Status.FAIL, 0.0), ("f.two", Status.FAIL, 0.0)])
    assert devtools.judge_solution(lab, full) == []
    assert devtools.judge_stub(lab, zero) == []
    half = result([("f.one", Status.PASS, 1.0), ("f.two", Status.TIMEOUT, 0.0)])
    assert [str(p) for p in devtools.judge_solution(lab, half)] == [
        "demo: solution: f.two timeout: why", "demo: solution scores 1/2"]
    assert [str(p) for p in devtools.judge_stub(lab, half)] == [
        "demo: stub scores 1, not 0",
        "demo: stub: f.one is pass, not a failure with a message",
        "demo: stub: f.two is timeout, not a failure with a message"]
    reordered = result([("f.two", Status.PASS, 1.0), ("f.one", Status.PASS, 1.0)])
    assert [str(p) for p in devtools.judge_solution(lab, reordered)] == [
        "demo: solution: the graders' checks differ from checks.toml"]


def test_cli_dev_check_and_build(kit_dir):
    runner = CliRunner()
    ok = runner.invoke(main, ["dev", "check", "--no-grade", "--repo", str(kit_dir)])
    assert ok.exit_code == 0, ok.output
    assert "0 problem(s) in 1 lab(s)" in ok.output
    stub = kit_dir / "exercises" / "demo" / "demo.py"
    stub.write_text("edited\n")
    bad = runner.invoke(main, ["dev", "check", "--no-grade", "--repo", str(kit_dir)])
    assert bad.exit_code == 1
    assert "exercises/demo/demo.py: differs" in bad.output
    built = runner.invoke(main, ["dev", "build", "--repo", str(kit_dir)])
    assert built.exit_code == 0
    assert "wrote exercises/demo/demo.py" in built.output
    assert stub.read_text() == "def f():\n    raise NotImplementedError\n"
    again = runner.invoke(main, ["dev", "build", "--repo", str(kit_dir)])
    assert "exercises/ is up to date" in again.output


def test_cli_dev_needs_a_checkout(tmp_path):
    out = CliRunner().invoke(main, ["dev", "check", "--repo", str(tmp_path)])
    assert out.exit_code == 2
