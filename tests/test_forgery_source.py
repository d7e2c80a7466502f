"""Forgeries of lab02 and lab04 earn no more than their honest part.

A forgery (`tests/hostile/source_forgery_<lab>.toml`; `tests/test_forgery.py` runs the
`forgery_<lab>.toml` ones) tampers with whatever it can reach inside
its worker: the probes, `observe`, the worker's own objects and frames, `sys.modules`,
builtins, NumPy; or hides code where a rule does not look (a package's `__init__.py`, a
docstring run with `exec`). Points rest on evidence the trusted side holds (values
judged there, the source analysed there: `labkit.engine.static`), so each case must earn
nothing beyond the checks it names `honest`, under both isolation modes, graded cold
(`labkit grade` in-process: `engine.cold.grade_files`) and warm (`labkit batch`).
"""

from __future__ import annotations

import shutil
import tomllib

import pytest
from kit import TESTS, solution_files, stub_files, write_files

from labkit.classroom import batch
from labkit.classroom.gradebook import Gradebook
from labkit.course.catalogue import get_lab
from labkit.engine.cold import grade_files
from labkit.results import LabResult

LABS = ("lab02", "lab04")
NEEDS_BWRAP = pytest.mark.skipif(not shutil.which("bwrap"), reason="bwrap is not installed")
MODES = [pytest.param("bwrap", marks=NEEDS_BWRAP, id="bwrap"),
         pytest.param("process", id="process")]


def forgeries(lab_id: str) -> list[dict]:
    path = TESTS / "hostile" / f"source_forgery_{lab_id}.toml"
    return tomllib.loads(path.read_text(encoding="utf-8"))["forgery"]


def forged_files(lab_id: str, entry: dict) -> dict[str, bytes]:
    """The base's files (stub or solution), with the case's whole `files` and `edits`."""
    lab = get_lab(lab_id)
    base = solution_files(lab) if entry.get("base") == "solution" else stub_files(lab)
    files = {rel: data.decode() for rel, data in base.items()}
    files.update(entry.get("files", {}))
    for edit in entry.get("edits") or ([entry] if "append" in entry else []):
        rel = edit.get("file", lab.files[0])
        text = files[rel]
        if "replace" in edit:
            assert text.count(edit["replace"]) == 1, (entry["name"], edit["replace"])
            text = text.replace(edit["replace"], edit["with"])
        files[rel] = edit.get("prepend", "") + text + edit.get("append", "")
    return {rel: text.encode() for rel, text in files.items()}


def assert_no_more_than_honest(entry: dict, result: LabResult) -> None:
    honest = tuple(entry.get("honest", ()))
    report = {c.id: (c.status.value, c.points, c.message[:90]) for c in result.checks}
    earned_dishonestly = [c.id for c in result.checks
                          if c.points and not any(c.id == h or (h.endswith(".") and
                                                                c.id.startswith(h))
                                                  for h in honest)]
    assert earned_dishonestly == [], (entry["name"], report)


CASES = [pytest.param(lab_id, entry, mode.values[0], marks=mode.marks,
                      id=f"{lab_id}-{entry['name']}-{mode.id}")
         for lab_id in LABS for entry in forgeries(lab_id) for mode in MODES]


@pytest.mark.parametrize(("lab_id", "entry", "mode"), CASES)
def test_forgery_graded_cold(lab_id, entry, mode, monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    result = grade_files(get_lab(lab_id), forged_files(lab_id, entry))
    assert result.isolation == mode
    assert_no_more_than_honest(entry, result)


@pytest.mark.parametrize("lab_id", LABS)
@pytest.mark.parametrize("mode", MODES)
def test_forgeries_graded_warm(lab_id, mode, tmp_path, monkeypatch):
    """One warm grading process grades every forgery in turn, then the solution (full
    marks: what the forgeries did to their workers stayed there)."""
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    lab = get_lab(lab_id)
    cases = forgeries(lab_id)
    folders = tmp_path / "class"
    for index, entry in enumerate(cases):
        write_files(forged_files(lab_id, entry), folders / f"f{index:02d}")
    write_files(solution_files(lab), folders / "zz-solution")
    summary = batch.grade_many(lab, folders, tmp_path / "out", jobs=1, timeout=lab.call_timeout)
    assert summary.graded == len(cases) + 1
    with Gradebook(summary.gradebook) as book:
        results = {row.student: LabResult.from_dict(row.result) for row in book.current(lab.id)}
    for index, entry in enumerate(cases):
        assert results[f"f{index:02d}"].isolation == mode
        assert_no_more_than_honest(entry, results[f"f{index:02d}"])
    solution = results["zz-solution"]
    assert solution.score == solution.max_score, solution.failed
