"""Batch grading: a small class (folders, zips, broken and hostile entries), the
gradebook it leaves, reruns that skip what did not change, and a batch killed with
SIGKILL half-way that loses nothing and completes when run again."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from batchkit import LAB02, LAB02_FULL, MUTANT, SOLUTION, STUB, folder, small_class
from kit import solution_files, stub_files, variants, write_files

from labkit import fileset
from labkit.classroom import batch, gradebook
from labkit.course.catalogue import catalogue, lab_checks
from labkit.results import SCHEMA_FILE, LabResult, Status

VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
CHECKS = [c.id for c in lab_checks(LAB02).checks]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    kinds = small_class(root / "class")
    events: list[batch.BatchEvent] = []
    summary = batch.grade_many(LAB02, root / "class", root / "out", jobs=2, timeout=0.5,
                               on_event=events.append)
    return root, kinds, summary, events


def rows(db_path: Path, sql: str, *params) -> list[tuple]:
    db = sqlite3.connect(db_path)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def current(db_path: Path) -> dict[str, LabResult]:
    return {student: LabResult.from_dict(json.loads(doc)) for student, doc in
            rows(db_path, "SELECT student_id, document FROM latest_submissions")}


def test_every_student_gets_a_result_and_the_batch_goes_on(graded):
    root, kinds, summary, events = graded
    assert summary.total == len(kinds) == 10
    assert [(i.name, i.reason) for i in summary.ignored] == [
        ("README.txt", "neither a folder nor a .zip")]
    assert (summary.graded, summary.skipped, summary.errors) == (5, 0, 5)
    results = current(summary.gradebook)
    assert set(results) == set(kinds)
    for result in results.values():
        VALIDATOR.validate(result.to_dict())
    assert results["alice"].status is Status.PASS and results["alice"].score == LAB02_FULL
    assert results["judy"].status is Status.PASS  # zip with the files two folders down
    assert results["bob"].score == 0 and {c.status for c in results["bob"].checks} == {Status.FAIL}
    lost = {c.id for c in results["carol"].checks if c.points < c.max_points}
    assert lost == {"safe_mse.aligned_pairs"}
    ivan = results["ivan"]
    assert ivan.status is Status.FAIL and {c.status for c in ivan.checks} == {Status.TIMEOUT}
    assert ivan.duration_s < 0.5 + 2.5  # the import hangs once; later checks fail at once


@pytest.mark.parametrize("student, words", [
    ("dave", "not a readable zip"),
    ("eve", "leaves its folder"),
    ("frank", "more than 64 MB"),
    ("gina", "is empty"),
    ("hank", "none of the lab's files"),
])
def test_unusable_entries_are_errors_with_a_clear_message(graded, student, words):
    result = current(graded[2].gradebook)[student]
    assert result.status is Status.ERROR and result.score == 0 and result.checks == ()
    assert words in result.message
    assert result.isolation == batch.NO_ISOLATION


def test_progress_events_count_up_to_the_total(graded):
    events = graded[3]
    assert events[0].kind == "start" and events[0].total == 10
    assert [e.done for e in events[1:]] == list(range(1, 11))
    assert {e.kind for e in events[1:]} == {"graded", "error"}


def test_the_gradebook_holds_students_submissions_and_checks(graded):
    root, kinds, summary, _ = graded
    db = summary.gradebook
    assert db == root / "out" / "gradebook.sqlite"
    assert rows(db, "SELECT max(version) FROM schema_version") == [(gradebook.SCHEMA_VERSION,)]
    assert rows(db, "PRAGMA journal_mode") == [("wal",)]
    assert {r[0] for r in rows(db, "SELECT id FROM students")} == set(kinds)
    (run,) = rows(db, "SELECT lab, jobs, call_timeout, finished_at, graded, skipped, errors"
                      " FROM runs")
    assert run[:3] == ("lab02", 2, 0.5) and run[3] and run[4:] == (5, 0, 5)
    alice = rows(db, "SELECT digest, status, score, max_score, duration_s, graded_at,"
                     " isolation, kind, source, retry FROM submissions WHERE student_id = ?",
                 "alice")
    assert len(alice) == 1
    digest, status, score, max_score, duration, graded_at, isolation, kind, source, retry = alice[0]
    assert digest == fileset.digest({"broadcasting.py": SOLUTION.encode()})
    assert (status, score, max_score, kind, source, retry) == (
        "pass", LAB02_FULL, LAB02_FULL, "folder", "alice", 0)
    assert duration > 0 and graded_at.endswith("Z") and isolation
    checks = rows(db, "SELECT c.check_id, c.status, c.points FROM check_results c"
                      " JOIN submissions s ON s.id = c.submission_id WHERE s.student_id = ?"
                      " ORDER BY c.position", "carol")
    assert [c[0] for c in checks] == CHECKS
    assert [c[0] for c in checks if c[1] != "pass"] == ["safe_mse.aligned_pairs"]
    assert rows(db, "SELECT count(*) FROM check_results c JOIN submissions s"
                    " ON s.id = c.submission_id WHERE s.status = 'error'") == [(0,)]
    assert not (root / "out" / ".scratch").exists()


def test_rerun_skips_unchanged_regrades_changed_and_regrade_forces(tmp_path):
    subs = tmp_path / "class"
    folder(subs, "alice", SOLUTION)
    folder(subs, "bob", STUB)
    (subs / "empty").mkdir()
    out = tmp_path / "out"
    first = batch.grade_many(LAB02, subs, out, jobs=1)
    assert (first.graded, first.skipped, first.errors) == (2, 0, 1)
    again = batch.grade_many(LAB02, subs, out, jobs=1)
    assert (again.graded, again.skipped, again.errors) == (0, 3, 0)
    folder(subs, "bob", MUTANT)  # bob resubmits
    changed = batch.grade_many(LAB02, subs, out, jobs=1)
    assert (changed.graded, changed.skipped) == (1, 2)
    results = current(out / "gradebook.sqlite")
    assert results["bob"].score == LAB02_FULL - 2  # safe_mse.aligned_pairs
    assert rows(out / "gradebook.sqlite",
                "SELECT count(*) FROM submissions WHERE student_id = 'bob'") == [(2,)]
    forced = batch.grade_many(LAB02, subs, out, jobs=1, regrade=True)
    assert (forced.graded, forced.skipped, forced.errors) == (2, 0, 1)
    # what else decides a grade is part of the key: language, limits, the graders
    key = batch.grader_key(LAB02, "en")
    assert key == batch.grader_key(LAB02, "en")
    assert key != batch.grader_key(LAB02, "es")
    assert key != batch.grader_key(dataclasses.replace(LAB02, call_timeout=1.0), "en")


def test_a_grading_past_the_wall_limit_is_an_error_and_the_batch_goes_on(tmp_path, monkeypatch):
    subs = tmp_path / "class"
    folder(subs, "a_hangs", SOLUTION + "\nwhile True:\n    pass\n")
    folder(subs, "b_fine", SOLUTION)
    lab = dataclasses.replace(LAB02, grade_timeout=30.0)
    monkeypatch.setattr(batch, "WALL_SLACK", 2.5 - 30.0 - 5.0)  # wall limit: 2.5 s
    summary = batch.grade_many(lab, subs, tmp_path / "out", jobs=1, timeout=5)
    results = current(summary.gradebook)
    assert results["a_hangs"].status is Status.ERROR
    assert "hard limit" in results["a_hangs"].message
    assert results["b_fine"].status is Status.PASS  # graded by the replacement process
    assert rows(summary.gradebook, "SELECT retry FROM submissions WHERE student_id = 'a_hangs'") \
        == [(1,)]
    monkeypatch.setattr(batch, "WALL_SLACK", 15.0)
    again = batch.grade_many(lab, subs, tmp_path / "out", jobs=1, timeout=0.5)
    assert again.skipped == 0  # a kit failure is retried; b_fine's setup changed (timeout)
    assert current(summary.gradebook)["a_hangs"].status is Status.FAIL


def test_one_batch_at_a_time_per_output_folder(tmp_path):
    folder(tmp_path / "class", "alice", SOLUTION)
    (tmp_path / "out").mkdir()
    with batch._exclusive(tmp_path / "out"):
        with pytest.raises(batch.BatchError, match="another labkit batch"):
            batch.grade_many(LAB02, tmp_path / "class", tmp_path / "out", jobs=1)


# `labkit ...` in a fresh process that reports, at exit, whether the parent imported
# the heavy trusted-side modules (it must not: they live in the grading processes).
_CLI = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('HEAVY', sorted(m for m in ('pytest', 'numpy', 'hypothesis')"
    " if m in sys.modules), file=sys.stderr))\n"
    "from labkit.cli import main\n"
    "main()\n"
)


def _labkit(*args: str) -> list[str]:
    return [sys.executable, "-c", _CLI, *args]


def _plain_labkit(*args: str) -> list[str]:
    return [sys.executable, "-c", "from labkit.cli import main; main()", *args]


def test_sigkill_half_way_loses_nothing_and_a_rerun_completes(tmp_path):
    subs = tmp_path / "class"
    n = 14
    for i in range(n):
        folder(subs, f"s{i:02d}", (SOLUTION if i % 2 else STUB) + f"\n# {i}\n")
    out = tmp_path / "out"
    db = out / "gradebook.sqlite"
    proc = subprocess.Popen(_labkit("batch", "lab02", str(subs), "--out", str(out), "--jobs", "1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        recorded = 0
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                try:
                    recorded = rows(db, "SELECT count(*) FROM submissions")[0][0]
                except sqlite3.OperationalError:  # schema not created yet
                    recorded = 0
                if recorded >= 3:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "the batch ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(0.2)
    kept = current(db)
    assert 3 <= len(kept) < n
    for student, result in kept.items():
        VALIDATOR.validate(result.to_dict())
        assert [c.id for c in result.checks] == CHECKS
        assert result.score == (LAB02_FULL if int(student[1:]) % 2 else 0)
    assert rows(db, "SELECT count(*) FROM check_results") == [(len(kept) * len(CHECKS),)]
    assert rows(db, "SELECT finished_at FROM runs") == [(None,)]  # the killed run
    rerun = subprocess.run(_labkit("batch", "lab02", str(subs), "--out", str(out), "--jobs", "2"),
                           capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{n - len(kept)} graded, {len(kept)} unchanged (skipped)" in rerun.stdout
    final = current(db)
    assert len(final) == n
    assert rows(db, "SELECT count(*) FROM submissions") == [(n,)]  # nobody graded twice
    assert all(r.score == (LAB02_FULL if int(s[1:]) % 2 else 0) for s, r in final.items())


LAB02_MUTANTS = [m for m in variants("mutants") if m.lab == "lab02"]


def test_batch_grades_every_lab02_mutant_like_the_runner(tmp_path):
    """The warm session (collected once, hypothesis examples replayed) loses exactly the
    points each known mutant breaks, like `grade_files` does."""
    subs = tmp_path / "class"
    for mutant in LAB02_MUTANTS:
        folder(subs, mutant.name, mutant.files()["broadcasting.py"].decode())
    folder(subs, "_solution", SOLUTION)
    folder(subs, "_stub", STUB)
    summary = batch.grade_many(LAB02, subs, tmp_path / "out", jobs=2)
    results = current(summary.gradebook)
    assert results["_solution"].score == LAB02_FULL and results["_stub"].score == 0
    for mutant in LAB02_MUTANTS:
        lost = {c.id for c in results[mutant.name].checks if c.points < c.max_points}
        assert lost == set(mutant.breaks), mutant.name


OTHER_LABS = [lab for lab in catalogue() if lab.id != "lab02" and lab.grader_dir.is_dir()
              and (lab.grader_dir / "checks.toml").is_file()]


@pytest.mark.parametrize("lab", OTHER_LABS, ids=lambda lab: lab.id)
def test_batch_grades_every_lab_like_the_runner(tmp_path, lab):
    subs = tmp_path / "class"
    for name, files in (("solution", solution_files(lab)), ("stub", stub_files(lab))):
        write_files(files, subs / name)
    results = current(batch.grade_many(lab, subs, tmp_path / "out", jobs=2).gradebook)
    assert results["solution"].score == results["solution"].max_score > 0, [
        (c.id, c.message) for c in results["solution"].failed]
    assert results["stub"].score == 0


def test_bad_usage_is_a_batch_error(tmp_path):
    with pytest.raises(batch.BatchError, match="not a folder"):
        batch.grade_many(LAB02, tmp_path / "missing", tmp_path / "out")
    (tmp_path / "class").mkdir()
    with pytest.raises(batch.BatchError, match="--timeout"):
        batch.grade_many(LAB02, tmp_path / "class", tmp_path / "out", timeout=0)


def test_cli_batch_prints_a_summary_and_the_class_report(tmp_path):
    folder(tmp_path / "class", "alice", SOLUTION)
    folder(tmp_path / "class", "bob", STUB)
    done = subprocess.run(_labkit("batch", "lab02", str(tmp_path / "class"), "--jobs", "1"),
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 submissions: 2 graded, 0 unchanged (skipped), 0 could not be graded" in done.stdout
    assert "lab02: 2 students — 1 pass, 1 fail, 0 error" in done.stdout
    full = f"{LAB02_FULL:g}"
    assert f"[1/2] alice  pass  {full}/{full}" in done.stderr  # not a terminal: plain lines
    assert "HEAVY []" in done.stderr  # pytest, NumPy, hypothesis stay in the graders
    assert (tmp_path / "labkit-out" / "gradebook.sqlite").is_file()
    missing = subprocess.run(_plain_labkit("batch", "lab02", str(tmp_path / "nope")),
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    unknown = subprocess.run(_plain_labkit("batch", "lab99", str(tmp_path / "class")),
                             capture_output=True, text=True)
    assert unknown.returncode == 2 and "unknown lab" in unknown.stderr
    (tmp_path / "nobody").mkdir()
    empty = subprocess.run(_plain_labkit("batch", "lab02", str(tmp_path / "nobody"), "--out",
                                         str(tmp_path / "empty-out")),
                           capture_output=True, text=True)
    assert empty.returncode == 0, empty.stderr
    assert "lab02: 0 students" in empty.stdout
    (tmp_path / "broken").mkdir()
    for name in ("carol", "dave"):
        (tmp_path / "broken" / f"{name}.zip").write_bytes(b"not a zip")
    broken = subprocess.run(_plain_labkit("batch", "lab02", str(tmp_path / "broken"), "--out",
                                          str(tmp_path / "broken-out")),
                            capture_output=True, text=True)
    assert broken.returncode == 1, broken.stderr  # the report, then why nothing was graded
    assert "lab02: 2 students — 0 pass, 0 fail, 2 error" in broken.stdout
    assert broken.stderr.splitlines()[-1].startswith("labkit: none of the 2 submissions")


def test_scratch_is_cleaned_even_when_left_by_a_killed_run(tmp_path):
    out = tmp_path / "out"
    (out / ".scratch" / "s1" / "work").mkdir(parents=True)
    (tmp_path / "class").mkdir()
    batch.grade_many(LAB02, tmp_path / "class", out)
    assert not (out / ".scratch").exists()
    shutil.rmtree(out)


# --- reading entries (no grading) --------------------------------------------------------


def _read(root: Path, name: str):
    from labkit.classroom import submissions

    entries, _ = submissions.discover(root)
    entry = next(e for e in entries if e.student == name)
    return submissions.read(LAB02, entry, "en")


@pytest.mark.parametrize("member", ["/etc/broadcasting.py", "a/../../broadcasting.py",
                                    "..\\broadcasting.py", "C:/broadcasting.py"])
def test_zip_paths_that_leave_the_folder_are_refused(tmp_path, member):
    from batchkit import zipped

    from labkit.classroom import submissions

    zipped(tmp_path, "x", {"broadcasting.py": SOLUTION, member: "boom"})
    with pytest.raises(submissions.SubmissionError) as info:
        _read(tmp_path, "x")
    assert info.value.key == "batch_unsafe_zip"


def test_zip_reading_edge_cases(tmp_path):
    import stat
    import zipfile

    from batchkit import zipped

    from labkit.classroom import submissions

    zipped(tmp_path, "two", {"a/broadcasting.py": SOLUTION, "b/broadcasting.py": STUB})
    with pytest.raises(submissions.SubmissionError, match="ambiguous") as info:
        _read(tmp_path, "two")
    assert info.value.key == "batch_ambiguous" and "a, b" in info.value.text("en")
    zipped(tmp_path, "mac", {"__MACOSX/._broadcasting.py": "junk", "broadcasting.py": SOLUTION})
    assert _read(tmp_path, "mac").files == {"broadcasting.py": SOLUTION.encode()}
    link = zipfile.ZipInfo("broadcasting.py")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(tmp_path / "link.zip", "w") as archive:
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(submissions.SubmissionError) as info:
        _read(tmp_path, "link")
    assert info.value.key == "bad_file"
    zipped(tmp_path, "huge", {"broadcasting.py": "#" * (2 * 1024 * 1024)})
    with pytest.raises(submissions.SubmissionError) as info:
        _read(tmp_path, "huge")
    assert info.value.key == "file_too_large"


def test_two_entries_for_one_student_are_an_error(tmp_path):
    from batchkit import zipped

    from labkit.classroom import submissions

    folder(tmp_path, "alice", SOLUTION)
    zipped(tmp_path, "alice", {"broadcasting.py": SOLUTION})
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "alice")
    entries, ignored = submissions.discover(tmp_path)
    assert [e.student for e in entries] == ["alice"] and ignored == ["link"]
    with pytest.raises(submissions.SubmissionError) as info:
        submissions.read(LAB02, entries[0], "es")
    assert "alice, alice.zip" in info.value.text("es")


def test_error_digest_follows_the_entry(tmp_path):
    from labkit.classroom import submissions

    (tmp_path / "dave.zip").write_bytes(b"not a zip")
    entry = submissions.Entry("dave", tmp_path, "dave.zip", "zip")
    first = submissions.error_digest(entry)
    assert first == submissions.error_digest(entry)
    (tmp_path / "dave.zip").write_bytes(b"still not a zip")
    assert submissions.error_digest(entry) != first


# --- the warm session's replay of property-based checks -----------------------------------


def test_replay_runs_the_recorded_examples_up_to_the_first_failure():
    from hypothesis import given
    from hypothesis import strategies as st

    from labkit.engine.warm import Replay
    from labkit.grading import PROPERTY

    seen: list[int] = []

    @PROPERTY
    @given(st.integers(0, 1000))
    def prop(student, n):
        seen.append(n)
        assert n < 10

    replay = Replay(prop)
    replay.record()
    assert replay.examples and all(set(e) == {"n"} for e in replay.examples)
    assert seen == []  # recording never runs the body
    with pytest.raises(AssertionError):
        replay.run({"student": None})
    stop = next(i for i, e in enumerate(replay.examples) if e["n"] >= 10)
    assert seen == [e["n"] for e in replay.examples[: stop + 1]]
    seen.clear()
    with pytest.raises(AssertionError):
        replay.run({"student": None})
    assert seen == [e["n"] for e in replay.examples[: stop + 1]]  # the same every time


def test_replay_bodies_draw_the_same_from_the_global_prngs_every_time():
    """A check's body that draws from `random` or NumPy's global generator draws what
    hypothesis would give it (both seeded with 0), whatever drew from them before."""
    import random

    import numpy as np
    from hypothesis import given
    from hypothesis import strategies as st

    from labkit.engine.warm import Replay
    from labkit.grading import PROPERTY

    drawn: list[tuple[float, float]] = []

    @PROPERTY
    @given(st.integers(0, 3))
    def draws(student, n):
        drawn.append((random.random(), float(np.random.random())))

    replay = Replay(draws)
    replay.record()
    runs = []
    for _ in range(2):
        random.random(), np.random.random(100)  # what ran before must not matter
        drawn.clear()
        replay.run({"student": None})
        runs.append(list(drawn))
    assert runs[0] == runs[1] and len(set(runs[0])) == len(runs[0]) > 1
    assert runs[0][0] == (random.Random(0).random(), np.random.RandomState(0).random())


def test_replay_falls_back_to_hypothesis_when_the_body_needs_it():
    from hypothesis import assume, given
    from hypothesis import strategies as st

    from labkit.engine.warm import Replay
    from labkit.grading import PROPERTY

    @PROPERTY
    @given(st.integers(0, 1000))
    def picky(student, n):
        assume(n % 2 == 0)
        assert n % 2 == 0

    replay = Replay(picky)
    replay.record()
    replay.run({"student": None})  # assume() outside hypothesis: hypothesis takes over
    assert replay.examples is None
    replay.run({"student": None})


STEPS_GRADER = '''
from hypothesis import given, strategies as st
from labkit.grading import PROPERTY, check

@check("steps.in_turn")
@PROPERTY
@given(st.integers(0, 1000))
def test_in_turn(student, x):  # two calls an example: they cannot be sent ahead
    assert student.record(x) is True
    assert student.last_two(x) == [["record", x], ["last_two", x]]

@check("square.values")
@PROPERTY
@given(st.integers(0, 1000))
def test_square(student, x):  # one call an example: sent ahead
    assert student.square(x) == x * x
'''

STEPS_CHECKS = "format = 1\n" + "".join(
    f'[checks."{c}"]\npoints = 1\ntitle = {{en = "{c}", es = "{c}"}}\n'
    f'fail = {{en = "{c} is wrong", es = "{c} mal"}}\nhint = {{en = "h", es = "h"}}\n'
    for c in ("steps.in_turn", "square.values"))

STEPS = """
HISTORY = []

def record(x):
    HISTORY.append(["record", x])
    return len(HISTORY) <= 60  # 25 examples of 2 calls each, in one fresh worker

def last_two(x):
    HISTORY.append(["last_two", x])
    return HISTORY[-2:]

def square(x):
    HISTORY.append(["square", x])
    return x * x + (len(HISTORY) > 20)  # wrong once called often: order matters
"""


def test_calls_sent_ahead_give_the_grades_of_calls_made_in_turn(tmp_path, monkeypatch):
    """A warm grading sends a property check's calls ahead only when each example makes
    one call; a check that makes more runs again in turn in a fresh worker. Either way,
    the worker sees the calls in the order hypothesis would make them."""
    from labkit.course import catalogue as registry
    from labkit.engine import proxy
    from labkit.engine.cold import grade_files
    from labkit.engine.warm import run_warm

    (tmp_path / "labs.toml").write_text('format = 1\n[[lab]]\nid = "lab98"\ntitle.en = "S"\n'
                                        'title.es = "S"\nfiles = ["steps.py"]\n'
                                        'modules = ["steps"]\n')
    (tmp_path / "exercises" / "lab98").mkdir(parents=True)
    (tmp_path / "grader" / "lab98").mkdir(parents=True)
    shutil.copy(LAB02.grader_dir.parent / "pytest.ini", tmp_path / "grader" / "pytest.ini")
    (tmp_path / "grader" / "lab98" / "test_steps.py").write_text(STEPS_GRADER)
    (tmp_path / "grader" / "lab98" / "checks.toml").write_text(STEPS_CHECKS)
    lab = registry.get_lab("lab98", tmp_path)
    sent_ahead = []
    send_ahead = proxy.Session.send_ahead
    monkeypatch.setattr(proxy.Session, "send_ahead", lambda self, requests, *a: sent_ahead.append(
        [r[0] for r in requests]) or send_ahead(self, requests, *a))
    files = {"steps.py": STEPS.encode()}
    cold = grade_files(lab, files)
    warm = []

    def loop(grade):
        for _ in range(2):  # the second grading knows `steps.in_turn` is not sent ahead
            warm.append(grade(files, "en"))

    run_warm(lab, loop)
    statuses = {c.id: c.status for c in cold.checks}
    assert statuses == {"steps.in_turn": Status.PASS, "square.values": Status.FAIL}
    for result in warm:
        assert [(c.id, c.status, c.message) for c in result.checks] == \
            [(c.id, c.status, c.message) for c in cold.checks]
    wheres = [set(calls) for calls in sent_ahead]
    assert wheres.count({"record"}) == 1  # tried once, then run in turn
    assert wheres.count({"square"}) == 2


def test_grading_processes_start_no_math_thread_pools(tmp_path):
    """Each job's grading process shares the cores with the other jobs: NumPy's BLAS and
    OpenMP libraries must not start a pool of threads per process, which spin between
    calls."""
    grader = batch._Grader(LAB02, 0, tmp_path / "scratch", tmp_path / "logs")
    try:
        environ = Path(f"/proc/{grader.process.pid}/environ").read_bytes().split(b"\0")
    finally:
        grader.stop(kill=True)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        assert f"{name}=1".encode() in environ


class _FlakyPool:
    """A pool whose gradings fail as the kit's own (`KitFailure`) the first `fails[student]`
    times, then pass: the batch's handling of such failures, without a real fault."""

    jobs = 1

    def __init__(self, fails: dict[str, int]) -> None:
        self.fails, self.sent, self.queue = fails, [], []

    @property
    def load(self) -> int:
        return len(self.queue)

    def submit(self, task) -> None:
        self.sent.append(task.entry.student)
        self.queue.append(task)

    def wait(self):
        task = self.queue.pop(0)
        if self.fails.get(task.entry.student, 0) > 0:
            self.fails[task.entry.student] -= 1
            task.kit_fault = True
            return [(task, None, "not graded: labkit itself failed (the machine was too busy)")]
        result = LabResult(lab="lab02", status=Status.PASS, score=1.0, max_score=1.0,
                           duration_s=0.1, labkit_version="0", digest=task.files_digest,
                           lang="en", isolation="bwrap")
        return [(task, result.to_dict(), "")]

    def close(self) -> None:
        pass


def test_a_kit_failure_is_graded_again_at_once_and_then_reported_not_graded(tmp_path):
    """A grading the kit failed (a check that met a `KitFault` twice) is no loss: the batch
    grades it again in the same run, and if the kit fails it again it is recorded as not
    graded, to be graded on the next run, never as the submission's doing."""
    subs = tmp_path / "class"
    for name in ("once", "twice", "fine"):
        folder(subs, name, SOLUTION)
    pool = _FlakyPool({"once": 1, "twice": 2})
    summary = batch.grade_many(LAB02, subs, tmp_path / "out",
                               pool=lambda *args: pool)
    results = current(summary.gradebook)
    assert sorted(pool.sent) == ["fine", "once", "once", "twice", "twice"]
    assert results["once"].status is Status.PASS and results["fine"].status is Status.PASS
    assert results["twice"].status is Status.ERROR
    assert "labkit itself failed" in results["twice"].message
    assert rows(summary.gradebook, "SELECT retry FROM submissions WHERE student_id = 'twice'") \
        == [(1,)]
    pool = _FlakyPool({"twice": 1})  # the next run: the kit fails once more, then grades it
    again = batch.grade_many(LAB02, subs, tmp_path / "out", pool=lambda *args: pool)
    assert pool.sent == ["twice", "twice"] and again.skipped == 2
    assert current(summary.gradebook)["twice"].status is Status.PASS
