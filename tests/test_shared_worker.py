"""`share_worker`: a check that passed hands its worker on to the next check.

The student module keeps a count of calls, so each check can tell whether its worker
is fresh. The same graders run in a lab that shares workers and in one that does not;
cold (`grade_files`) and warm (`run_warm`, as `labkit batch` and the daemon grade)
must agree.
"""

from __future__ import annotations

import shutil

import pytest
from kit import REPO

from labkit.course import catalogue as registry
from labkit.engine import proxy
from labkit.engine.cold import grade_files
from labkit.engine.warm import run_warm
from labkit.results import Status

STUDENT = """
import os

CALLS = []

def record():
    CALLS.append(1)
    return len(CALLS)

def spoil():
    CALLS.extend([1] * 100)
    return -1

def square(x):
    record()
    return x * x + (x >= 3)

def shout(word, times=1):
    print(word * times)

def die():
    os._exit(3)
"""

GRADER = """
from hypothesis import given, strategies as st
from labkit.grading import PROPERTY, check

@check("record.first")
def test_first(student):
    assert student.record() == 1

@check("record.second")  # passes only in the worker record.first used
def test_second(student):
    assert student.record() == 2

@check("spoil.fails")
def test_spoil(student):
    assert student.spoil() == 0

@check("record.after_failure")  # fails only in the worker spoil.fails used
def test_after_failure(student):
    assert student.record() == 1

@check("square.values")  # fails at x = 3 with calls still ahead (warm)
@PROPERTY
@given(x=st.integers(0, 40))
def test_square(student, x):
    assert student.square(x) == x * x

@check("record.after_property")
def test_after_property(student):
    assert student.record() == 1

@check("shout.flood")  # more than a worker's output keeps
def test_shout_flood(student):
    assert student.shout("x", 50_000) is None

@check("shout.first")
def test_shout_first(student):
    assert student.shout("alpha") is None

@check("shout.second")
def test_shout_second(student):
    assert student.shout("beta") is None

@check("die.crashes")
def test_die(student):
    student.die()

@check("record.after_crash")
def test_after_crash(student):
    assert student.record() == 1

FIRST = []

@check("once.first")
def test_once_first(student):
    FIRST.append(student.probe("count", once=True))

@check("once.second")  # the same answer: shared, or a fresh worker's first again
def test_once_second(student):
    assert student.probe("count", once=True) == FIRST[-1]

@check("once.again")  # without `once`: passes only in the worker once.first used
def test_once_again(student):
    assert student.probe("count") == FIRST[-1] + 1

@check("record.fresh", fresh=True)  # takes no worker, though the one before passed
def test_fresh(student):
    assert student.record() == 1

@check("record.after_fresh")  # and hands none on
def test_after_fresh(student):
    assert student.record() == 1

@check("once.by_bytes")  # two arrays whose reprs are the same are two requests
def test_once_by_bytes(student):
    import numpy as np
    a = np.zeros(5000)
    b = a.copy()
    b[2500] = 1.0
    assert repr(a) == repr(b)
    assert student.probe("count_of", a, once=True) != student.probe("count_of", b, once=True)
"""

PROBES = """
def count(student):
    return student.record()

def count_of(student, value):
    return student.record()
"""

IDS = ["record.first", "record.second", "spoil.fails", "record.after_failure",
       "square.values", "record.after_property", "shout.flood", "shout.first", "shout.second",
       "die.crashes", "record.after_crash", "once.first", "once.second", "once.again",
       "record.fresh", "record.after_fresh", "once.by_bytes"]

NOT_PASSING = {"spoil.fails": Status.FAIL, "square.values": Status.FAIL,
               "die.crashes": Status.ERROR}


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """lab96 shares workers, lab97 does not; both have the graders above."""
    root = tmp_path_factory.mktemp("kit")
    entries = []
    for lab_id, shared in (("lab96", "true"), ("lab97", "false")):
        entries.append(f'[[lab]]\nid = "{lab_id}"\ntitle.en = "S"\ntitle.es = "S"\n'
                       f'files = ["counter.py"]\nmodules = ["counter"]\ncall_timeout = 2.0\n'
                       f'share_worker = {shared}\n')
        (root / "exercises" / lab_id).mkdir(parents=True)
        grader = root / "grader" / lab_id
        grader.mkdir(parents=True)
        (grader / f"test_{lab_id}.py").write_text(GRADER)  # distinct module names
        (grader / "probes.py").write_text(PROBES)
        checks = "format = 1\n" + "".join(
            f'[checks."{check_id}"]\npoints = 1\ntitle = {{en = "t", es = "t"}}\n'
            f'fail = {{en = "{check_id} failed", es = "f"}}\nhint = {{en = "h", es = "h"}}\n'
            for check_id in IDS)
        (grader / "checks.toml").write_text(checks)
    shutil.copy(REPO / "grader" / "pytest.ini", root / "grader" / "pytest.ini")
    (root / "labs.toml").write_text("format = 1\n" + "".join(entries))
    return registry.get_lab("lab96", root), registry.get_lab("lab97", root)


FILES = {"counter.py": STUDENT.encode()}


def statuses(result):
    return {c.id: c.status for c in result.checks}


def test_a_check_hands_its_worker_on_unless_it_crashed_or_failed_a_property(labs):
    """A passing check and a check failing on values hand their worker on (the spoiled
    counter reaches record.after_failure); a failed property check and a crash do not
    (record.after_property and record.after_crash start afresh). A probe asked `once`
    is answered once by the worker serving (once.second gets once.first's answer, while
    the same worker, asked again without `once`, counts on: once.again). A check marked
    `fresh` neither takes nor hands on a worker (record.fresh, record.after_fresh)."""
    shared, fresh = (grade_files(lab, FILES) for lab in labs)
    assert statuses(shared) == {i: NOT_PASSING.get(i, Status.PASS) for i in IDS} | {
        "record.after_failure": Status.FAIL}
    # Without sharing, no check's worker has seen an earlier check's calls.
    assert statuses(fresh) == {i: NOT_PASSING.get(i, Status.PASS) for i in IDS} | {
        "record.second": Status.FAIL, "once.again": Status.FAIL}


def test_each_check_shows_only_what_it_printed(labs):
    """Even after a check that printed more than is kept, each shows its own excerpt."""
    for lab in labs:
        output = {c.id: c.output for c in grade_files(lab, FILES).checks}
        assert "alpha" in output["shout.first"] and "beta" not in output["shout.first"]
        assert "beta" in output["shout.second"] and "alpha" not in output["shout.second"]


def test_warm_gradings_share_as_cold_ones_do(labs, monkeypatch):
    """Twice in one warm process: the second grading starts with a fresh worker too.
    The property check's calls go ahead to the worker handed on to it, and the replies
    left unread when it fails do not reach the next check."""
    lab = labs[0]
    sent_ahead = []
    send_ahead = proxy.Session.send_ahead

    def spy(self, requests, *args):
        sent_ahead.append(self.worker is not None)
        return send_ahead(self, requests, *args)

    monkeypatch.setattr(proxy.Session, "send_ahead", spy)
    cold = grade_files(lab, FILES)
    warm = []

    def loop(grade):
        for _ in range(2):
            warm.append(grade(FILES, "en"))

    run_warm(lab, loop)
    assert sent_ahead == [True, True]  # one per warm grading, on a running worker
    for result in warm:
        assert [(c.id, c.status, c.message) for c in result.checks] == \
            [(c.id, c.status, c.message) for c in cold.checks]


def test_share_worker_must_be_a_boolean(tmp_path):
    text = ('format = 1\n[[lab]]\nid = "lab95"\ntitle.en = "S"\nfiles = ["a.py"]\n'
            'modules = ["a"]\nshare_worker = "yes"\n')
    with pytest.raises(ValueError, match="share_worker must be true or false"):
        registry.parse_catalogue(text, tmp_path)


def test_graders_that_cannot_be_collected_are_an_error_not_a_grade(labs, tmp_path):
    """A grader file that does not compile: pytest collects nothing, which must not
    read as 0 out of 0, passing."""
    root = labs[0].grader_dir.parent.parent
    broken = tmp_path / "kit"
    shutil.copytree(root, broken)
    (broken / "grader" / "lab97" / "test_lab97.py").write_text("def test_x(:\n")
    with pytest.raises(RuntimeError, match="lab97: the graders could not be collected"):
        grade_files(registry.get_lab("lab97", broken), FILES)


def test_a_frozen_request_is_encoded_once_and_nothing_mutable_is_kept(monkeypatch):
    """`once` keeps the encoding of a request whose arguments are exactly-immutable
    objects (the same tuple of cases, grading after grading); a list, a tuple holding
    one, or a subclass that could change is encoded afresh every time."""
    encodes = []
    encode = proxy._encode
    monkeypatch.setattr(proxy, "_encode", lambda *a: encodes.append(a) or encode(*a))
    monkeypatch.setattr(proxy, "_ENCODED", {})

    def ask(*args):
        return proxy._encoded_once("probe", "describe", "m", {"name": "p", "args": list(args),
                                                              "kwargs": {}})

    cases = (((3, 4), "<f8", (("index", slice(None, None, -1)),)), (None, 1.5, ...))
    first = ask(cases)
    assert ask(cases) is first and len(encodes) == 1
    assert ask(tuple(cases))[2] == first[2]  # the same object: no copy is made

    class Shape(tuple):
        pass

    steps = [("T", None)]
    for mutable in (steps, (steps,), Shape((1, 2)), (slice([1], None),)):
        before = len(encodes)
        memo = ask(mutable)[2]
        if isinstance(mutable, list):
            mutable.append(("T", None))
        elif mutable and isinstance(mutable[0], list):
            mutable[0].append(("reshape", (-1,)))
        assert len(encodes) == before + 1
        again = ask(mutable)[2]
        assert len(encodes) == before + 2
        assert (again != memo) == (not isinstance(mutable, Shape) and
                                   not isinstance(mutable[0], slice))

    monkeypatch.setattr(proxy, "_FROZEN_KEEP", 2)
    values = [(n,) for n in range(5)]
    kept = [ask(value) for value in values]  # the oldest are dropped: never over the cap
    assert len(proxy._ENCODED) == 2 and kept[-1] is ask(values[-1])
