"""Forgeries earn no more than their honest part.

A forgery (tests/hostile/forgery_<lab>.toml) is a submission that tries to earn points
by rewriting what the worker reports (probes, `observe`, the codec, the pipe) instead of
doing the work. Every point rests on evidence the trusted side obtains itself, so each
is graded cold (`engine.cold.grade_files`) and warm (`labkit batch`'s grading process)
under both isolations and must score at most its `max_score`.
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

MODES = [pytest.param("bwrap", marks=pytest.mark.skipif(not shutil.which("bwrap"),
                                                         reason="bwrap is not installed")),
         "process"]


def forgeries() -> list[tuple[str, dict]]:
    found = []
    for path in sorted((TESTS / "hostile").glob("forgery_*.toml")):
        lab = path.stem.removeprefix("forgery_")
        found += [(lab, entry) for entry in tomllib.loads(path.read_text())["forgery"]]
    return found


FORGERIES = forgeries()


def forged_files(lab_id: str, entry: dict) -> dict[str, bytes]:
    lab = get_lab(lab_id)
    base = stub_files(lab) if entry["base"] == "stub" else solution_files(lab)
    rel = entry.get("file", lab.files[0])
    return {**base, rel: base[rel] + entry["append"].encode()}


def report(result: LabResult) -> list[tuple[str, float, str]]:
    return [(c.id, c.points, c.message) for c in result.checks if c.points]


def assert_honest_part_only(entry: dict, result: LabResult) -> None:
    """At most `max_score`, and, for an entry that names its `honest` checks (id
    prefixes), points from those checks alone."""
    dishonest = [c.id for c in result.checks if c.points and "honest" in entry
                 and not any(c.id.startswith(h) for h in entry["honest"])]
    assert dishonest == [] and result.score <= entry["max_score"], (entry["name"],
                                                                    report(result))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("lab_id", "entry"), FORGERIES,
                         ids=[f"{lab}-{entry['name']}" for lab, entry in FORGERIES])
def test_a_forgery_graded_cold_earns_no_more_than_its_honest_part(lab_id, entry, mode,
                                                                  monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    result = grade_files(get_lab(lab_id), forged_files(lab_id, entry))
    assert result.isolation == mode
    assert_honest_part_only(entry, result)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lab_id", sorted({lab for lab, _ in FORGERIES}))
def test_forgeries_graded_warm_earn_no_more_than_their_honest_part(lab_id, mode, tmp_path,
                                                                   monkeypatch):
    """One grading process and one zygote for every forgery of the lab in turn, then the
    solution, which still earns full marks."""
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    lab = get_lab(lab_id)
    entries = [entry for lab_of, entry in FORGERIES if lab_of == lab_id]
    folders = tmp_path / "class"
    for entry in entries:
        write_files(forged_files(lab_id, entry), folders / entry["name"])
    write_files(solution_files(lab), folders / "zz-solution")
    summary = batch.grade_many(lab, folders, tmp_path / "out", jobs=1)
    assert summary.graded == len(entries) + 1
    with Gradebook(summary.gradebook) as book:
        results = {row.student: LabResult.from_dict(row.result) for row in book.current(lab_id)}
    for entry in entries:
        assert results[entry["name"]].isolation == mode
        assert_honest_part_only(entry, results[entry["name"]])
    assert results["zz-solution"].score == results["zz-solution"].max_score
