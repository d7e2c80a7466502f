"""lab03's forgeries (tests/hostile/forgery_lab03.toml) earn no more than their honest part.

Each is the stub with the two sums written honestly and an attack on what lab03's other
checks believe (the probes' frames and clock, `sys.modules`, builtins, NumPy, the
worker's side of the callbacks, hand-built PNGs). Graded cold (`engine.cold`) and warm
(`labkit batch`'s grading process, every forgery in turn, then the solution), under both
isolations: the points may come only from the checks named `honest`, at most
`max_score` in all.
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

LAB = get_lab("lab03")
CASES = tomllib.loads((TESTS / "hostile" / "forgery_lab03.toml").read_text())["forgery"]
MODES = [pytest.param("bwrap", marks=pytest.mark.skipif(not shutil.which("bwrap"),
                                                         reason="bwrap is not installed")),
         "process"]


def forged(entry: dict) -> dict[str, bytes]:
    base = solution_files(LAB) if entry["base"] == "solution" else stub_files(LAB)
    rel = LAB.files[0]
    return {**base, rel: base[rel] + entry["append"].encode()}


def assert_honest_part_only(entry: dict, result: LabResult) -> None:
    report = {c.id: (c.points, c.message[:90]) for c in result.checks if c.points}
    dishonest = [c.id for c in result.checks
                 if c.points and not any(c.id.startswith(h) for h in entry["honest"])]
    assert dishonest == [] and result.score <= entry["max_score"], (entry["name"], report)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("entry", CASES, ids=[entry["name"] for entry in CASES])
def test_a_forgery_graded_cold_earns_only_its_honest_part(entry, mode, monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    result = grade_files(LAB, forged(entry))
    assert result.isolation == mode
    assert_honest_part_only(entry, result)


@pytest.mark.parametrize("mode", MODES)
def test_forgeries_graded_warm_earn_only_their_honest_part(mode, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    folders = tmp_path / "class"
    for index, entry in enumerate(CASES):
        write_files(forged(entry), folders / f"f{index:02d}")
    write_files(solution_files(LAB), folders / "zz-solution")
    summary = batch.grade_many(LAB, folders, tmp_path / "out", jobs=1)
    assert summary.graded == len(CASES) + 1
    with Gradebook(summary.gradebook) as book:
        results = {row.student: LabResult.from_dict(row.result) for row in book.current(LAB.id)}
    for index, entry in enumerate(CASES):
        assert results[f"f{index:02d}"].isolation == mode
        assert_honest_part_only(entry, results[f"f{index:02d}"])
    solution = results["zz-solution"]
    assert solution.score == solution.max_score, [(c.id, c.message) for c in solution.failed]
