"""lab05 (the GIL, measured) under load: its checks time calls, so `labkit batch` grades
a timed lab at most one submission per core, and a class graded with --jobs 2 (both jobs
busy at once, on a machine of two cores) still gives every correct submission full marks.
"""

from __future__ import annotations

import dataclasses

import pytest
from batchkit import folder
from kit import REPO

from labkit.classroom import batch
from labkit.classroom.gradebook import Gradebook
from labkit.course.catalogue import get_lab
from labkit.results import LabResult

LAB05 = get_lab("lab05")
SOLUTION = (REPO / "solutions" / "lab05" / "gil.py").read_text()
# Another honest way: an executor for the processes, plain threads and a queue of results.
OTHER = SOLUTION + '''

from concurrent.futures import ProcessPoolExecutor


def run_in_processes(fn, items, workers):
    if workers < 1:
        raise ValueError("workers")
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def run_in_threads(fn, items, workers):
    if workers < 1:
        raise ValueError("workers")
    todo, results = queue.Queue(), [None] * len(items)
    for index, item in enumerate(items):
        todo.put((index, item))

    def work():
        while True:
            try:
                index, item = todo.get_nowait()
            except queue.Empty:
                return
            results[index] = fn(item)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
'''


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
    folder(subs, "student_other", OTHER, rel="gil.py")
    summary = batch.grade_many(LAB05, subs, tmp_path / "out", jobs=2)
    assert (summary.graded, summary.errors) == (4, 0)
    assert summary.jobs == min(2, batch.default_jobs())  # two at once on two cores
    with Gradebook(summary.gradebook) as book:
        results = {row.student: LabResult.from_dict(row.result) for row in book.current("lab05")}
    for student, result in results.items():
        assert result.score == result.max_score, (student, [(c.id, c.message)
                                                            for c in result.failed])
