"""lab05 (the GIL, measured) under load: its checks time calls, so `labkit batch` grades
a timed lab at most one submission per core, and a class graded with --jobs 2 (both jobs
busy at once, on a machine of two cores) still gives every correct submission full marks;
so does grading while busy processes oversubscribe the cores. Correct submissions are the
reference and the alternatives of tests/alternatives/lab05.toml, written differently.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator

import pytest
from batchkit import folder
from kit import REPO, solution_files, variants

from labkit.classroom import batch
from labkit.classroom.gradebook import Gradebook
from labkit.course.catalogue import get_lab
from labkit.results import LabResult

LAB05 = get_lab("lab05")
SOLUTION = (REPO / "solutions" / "lab05" / "gil.py").read_text()
# Other honest ways (tests/alternatives/lab05.toml): an executor, plain threads, futures...
ALTERNATIVES = [v for v in variants("alternatives") if v.lab == "lab05"]
BUSY = 4  # spinning processes: twice the cores of a small grading machine (issue 27)


def test_a_timed_lab_is_graded_at_most_one_submission_per_core(monkeypatch):
    monkeypatch.setattr(batch, "default_jobs", lambda: 2)
    untimed = dataclasses.replace(LAB05, timed=False)
    assert LAB05.timed and get_lab("lab03").timed and not get_lab("lab02").timed
    assert [batch.jobs_for(LAB05, jobs) for jobs in (None, 1, 2, 8)] == [2, 1, 2, 2]
    assert [batch.jobs_for(untimed, jobs) for jobs in (None, 1, 8)] == [2, 1, 8]


@pytest.mark.slow
def test_a_class_graded_two_at_a_time_gives_every_correct_submission_full_marks(tmp_path):
    subs = tmp_path / "class"
    for index in range(3):
        folder(subs, f"student{index}", SOLUTION + f"\n# student {index}\n", rel="gil.py")
    for variant in ALTERNATIVES:
        folder(subs, variant.name, variant.files()["gil.py"].decode(), rel="gil.py")
    summary = batch.grade_many(LAB05, subs, tmp_path / "out", jobs=2)
    assert (summary.graded, summary.errors) == (3 + len(ALTERNATIVES), 0)
    assert summary.jobs == min(2, batch.default_jobs())  # two at once on two cores
    with Gradebook(summary.gradebook) as book:
        results = {row.student: LabResult.from_dict(row.result) for row in book.current("lab05")}
    for student, result in results.items():
        assert result.score == result.max_score, (student, [(c.id, c.message)
                                                            for c in result.failed])


def _lost(result: LabResult) -> list[tuple[str, str, str]]:
    return [(c.id, c.status.value, c.message) for c in result.checks if c.status.value != "pass"]


def test_the_alternatives_are_correct_solutions_written_differently():
    assert len(ALTERNATIVES) >= 2
    texts = {v.files()["gil.py"] for v in ALTERNATIVES} | {SOLUTION.encode()}
    assert len(texts) == len(ALTERNATIVES) + 1


@pytest.fixture
def busy_machine() -> Iterator[int]:
    """`BUSY` processes that spin for as long as the test runs: more runnable processes
    than cores, as when other gradings share the machine. Started before any grading of
    the test (and so before its zygote): they are the test's, not the grading's."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(BUSY)]
    try:
        yield len(spinners)
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


@pytest.mark.slow
def test_correct_solutions_earn_full_marks_while_busy_processes_oversubscribe_the_cores(
        busy_machine):
    """The reference and every alternative, graded one after another while `BUSY`
    processes spin (issue 27: about one grading in eight lost points on releases_gil's
    checks under load; none may). Each lost check is named with its message, which
    carries what the grader measured."""
    from labkit.engine.cold import grade_files

    lost = {}
    for name, files in [("solution", solution_files(LAB05)),
                        *((v.name, v.files()) for v in ALTERNATIVES)]:
        result = grade_files(LAB05, files)
        if result.score != result.max_score:
            lost[name] = _lost(result)
    assert not lost


LEFT_BEHIND = "run_in_processes.none_left_behind"
UNJOINED = [v for v in variants("mutants") if v.lab == "lab05" and LEFT_BEHIND in v.breaks]


@pytest.mark.slow
def test_a_pool_left_unjoined_fails_every_time_and_a_joined_one_passes_every_time(
        busy_machine):
    """Issue 27: a pool that is never closed was accepted on most gradings and failed
    under load. Whether the call joined its processes is now seen at the instant it
    returns, so the verdict is the same every time, also with the cores oversubscribed."""
    from labkit.engine.cold import grade_files

    joined = [("solution", solution_files(LAB05))] + [(v.name, v.files()) for v in ALTERNATIVES]
    verdicts: dict[str, list[str]] = {}
    for name, files in joined + [(v.name, v.files()) for v in UNJOINED]:
        for _ in range(3):
            result = grade_files(LAB05, files, only=LEFT_BEHIND)
            verdicts.setdefault(name, []).append(result.checks[0].status.value)
    assert len(UNJOINED) >= 3
    assert {name: set(v) for name, v in verdicts.items()} == {
        **{name: {"pass"} for name, _ in joined}, **{v.name: {"fail"} for v in UNJOINED}}
