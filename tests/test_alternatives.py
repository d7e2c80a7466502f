"""Natural correct solutions earn full marks: no check is stricter than the README.

Each entry of tests/alternatives/<lab>.toml is the reference solution rewritten the way a
student could well write it (a lock passed as an argument, a data pointer read through
the array interface, a list for a shape, float64 draws cast to float32). A check that
takes points from one of them asks for more than the lab's README does. Each is graded,
warm and cold, by tests/test_grader_quality.py; here, how the lab01 lock rule tells an
accepted shape from its near misses.
"""

from __future__ import annotations

import importlib.util

import pytest
from kit import REPO, variants

from labkit.course.catalogue import catalogue

ALTERNATIVES = variants("alternatives")


def test_every_lab_with_alternatives_has_at_least_two():
    counts = {lab.id: sum(a.lab == lab.id for a in ALTERNATIVES) for lab in catalogue()}
    assert all(n >= 2 for n in counts.values() if n), counts


def _lab01_grader():
    """grader/lab01/test_aliasing.py, loaded under a private name (its source reading)."""
    spec = importlib.util.spec_from_file_location(
        "lab01_grader_for_tests", REPO / "grader" / "lab01" / "test_aliasing.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOCK_PER_THREAD = {
    # each a lock-per-thread (or lock-never-taken) twin of an accepted alternative: the
    # source alone must refuse it, whatever a probe in the worker reports
    "argument_made_in_the_loop": ("locked_count_lock_passed_to_module_function", [
        ("    lock = threading.Lock()\n    totals = [0]\n", "    totals = [0]\n"),
        ("args=(lock, totals,", "args=(threading.Lock(), totals,")]),
    "subclass_makes_its_own": ("locked_count_thread_subclass_with_self_lock", [
        ("        self.lock = lock\n", "        self.lock = threading.Lock()\n")]),
    "keyword_lock_not_taken": ("locked_count_acquire_release_keyword_lock", [
        ("        lock.acquire()\n        try:\n            counts[0] += 1\n"
         "        finally:\n            lock.release()", "        counts[0] += 1")]),
}


@pytest.mark.parametrize("case", sorted(LOCK_PER_THREAD))
def test_lab01_lock_rule_still_refuses_each_shape_without_one_shared_lock(case):
    grader = _lab01_grader()
    name, edits = LOCK_PER_THREAD[case]
    (alternative,) = [a for a in ALTERNATIVES if a.name == name]
    source = alternative.files()["aliasing.py"].decode()
    assert grader._lock_in_source({"aliasing.py": source.encode()}) is None
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    assert grader._lock_in_source({"aliasing.py": source.encode()}) == "no_lock"
