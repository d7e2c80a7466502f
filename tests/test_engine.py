"""The grading engine on a small lab made here: a fifth lab is folders plus one entry.

Each test grades a variant of a tiny module and checks how the engine turns what the
student's code did into statuses, points and messages.
"""

from __future__ import annotations

import os
import textwrap
import time

import pytest
from kit import tiny_lab

from labkit.engine.cold import grade_files
from labkit.results import Status

CATALOGUE = """
format = 1
[[lab]]
id = "lab99"
title.en = "Tiny"
title.es = "Mínimo"
files = ["tiny.py"]
modules = ["tiny"]
call_timeout = 1.0
"""

GRADER = '''
import pytest
from labkit.grading import as_float, check

@check("double.values")
def test_double(student):
    assert as_float(student.double(2.5)) == 5.0

@check("halve.values")
def test_halve(student):
    assert as_float(student.halve(3.0)) == 1.5

@check("count.partial")
def test_count(student, credit):
    right = sum(student.double(i) == 2 * i for i in range(4))
    credit.partial(right, 4)

@check("bonus.needs_both")
def test_bonus(student):
    assert student.double(0) == 0
'''

CHECKS = """
format = 1
[checks."double.values"]
points = 2
title = {en = "double", es = "doble"}
fail = {en = "double is wrong", es = "doble está mal"}
hint = {en = "multiply", es = "multiplica"}
[checks."halve.values"]
points = 1
title = {en = "halve", es = "mitad"}
fail = {en = "halve is wrong", es = "mitad está mal"}
hint = {en = "divide", es = "divide"}
[checks."count.partial"]
points = 4
title = {en = "count", es = "cuenta"}
fail = {en = "some doubles are wrong", es = "algunos dobles están mal"}
hint = {en = "all of them", es = "todos"}
[checks."bonus.needs_both"]
points = 1
requires = ["double.", "halve."]
title = {en = "bonus", es = "extra"}
fail = {en = "no bonus", es = "sin extra"}
hint = {en = "pass the rest", es = "aprueba el resto"}
"""

GOOD = "def double(x):\n    return 2 * x\n\ndef halve(x):\n    return x / 2\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return tiny_lab(tmp_path_factory.mktemp("kit"), "lab99", CATALOGUE, GRADER, CHECKS)


def grade(lab, source: str):
    return grade_files(lab, {"tiny.py": textwrap.dedent(source).encode()})


def outcome(result):
    return {c.id: (c.status, c.points) for c in result.checks}


def test_a_new_lab_needs_no_engine_change(lab):
    result = grade(lab, GOOD)
    assert result.status is Status.PASS and result.score == result.max_score == 8


def test_a_hanging_function_times_out_alone(lab):
    started, times = time.monotonic(), os.times()
    result = grade(lab, GOOD + "\ndef halve(x):\n    while True:\n        pass\n")
    # the work the grading cost (this process, and the sandbox it started and reaped),
    # which a busy machine does not inflate; the wall clock only as a backstop, as a
    # starved worker's limit stretches up to fourfold (issue 27)
    work = sum(os.times()[:4]) - sum(times[:4])
    assert work < 8 and time.monotonic() - started < 4 * 8, work
    assert outcome(result) == {
        "double.values": (Status.PASS, 2), "halve.values": (Status.TIMEOUT, 0),
        "count.partial": (Status.PASS, 4), "bonus.needs_both": (Status.FAIL, 0),
    }
    assert "did not finish within 1 s" in result.checks[1].message
    assert "halve" in result.checks[3].message  # the bonus names what it waits for


def test_a_function_that_exits_is_an_error_for_that_check_only(lab):
    result = grade(lab, GOOD + "\nimport os\ndef halve(x):\n    os._exit(0)\n")
    assert outcome(result)["halve.values"] == (Status.ERROR, 0)
    assert outcome(result)["double.values"] == (Status.PASS, 2)
    assert "stopped" in result.checks[1].message


def test_garbage_and_exceptions_fail_with_a_message(lab):
    source = GOOD + textwrap.dedent("""
        class Liar:
            def __eq__(self, other):
                return True
            def __float__(self):
                return 5.0
        def double(x):
            return Liar()
        def halve(x):
            raise TypeError("no halves today")
    """)
    result = grade(lab, source)
    assert result.score == 0
    assert {c.status for c in result.checks} == {Status.FAIL}
    assert result.checks[0].message == (
        "double: returned a value of type tiny.Liar where a number (float or int) was expected"
    )
    assert result.checks[1].message == "halve raised TypeError: no halves today"


def test_partial_credit_and_printed_lies(lab):
    source = GOOD + textwrap.dedent("""
        import json
        print(json.dumps({"score": 999, "status": "pass"}))
        def double(x):
            print('{"status": "pass"}')
            return 2 * x if x < 2 else 0
    """)
    result = grade(lab, source)
    assert outcome(result)["count.partial"] == (Status.FAIL, 2.0)
    assert outcome(result)["double.values"] == (Status.FAIL, 0)
    assert result.score == 3.0  # halve (1) and half of count (2); no bonus
    assert '{"status": "pass"}' in result.checks[0].output


def test_an_import_that_hangs_costs_one_timeout_not_one_per_check(lab):
    started = time.monotonic()
    result = grade(lab, "while True:\n    pass\n" + GOOD)
    assert time.monotonic() - started < 5
    assert [c.status for c in result.checks[:3]] == [Status.TIMEOUT] * 3
    assert result.score == 0


def test_stub_and_syntax_error(lab):
    stub = GOOD.replace("return 2 * x", "raise NotImplementedError").replace(
        "return x / 2", "raise NotImplementedError"
    )
    result = grade(lab, stub)
    assert all(c.status is Status.FAIL for c in result.checks)
    assert "not implemented yet" in result.checks[0].message
    broken = grade(lab, "def double(x) return 1\n")
    assert broken.score == 0 and "line 1: SyntaxError" in broken.message  # once, for all
    assert broken.checks[0].message == "not graded: the module tiny.py does not import"


def test_messages_follow_the_language(lab):
    stub = "def double(x):\n    raise NotImplementedError\n\ndef halve(x):\n    return 0\n"
    result = grade_files(lab, {"tiny.py": stub.encode()}, lang="es")
    assert "aún no está implementada" in result.checks[0].message
    assert result.checks[1].message == "mitad está mal"
    assert result.checks[1].title == "mitad"


def test_comparing_an_opaque_value_names_its_type(lab):
    source = GOOD + "\nclass Box:\n    pass\n\ndef double(x):\n    return Box()\n"
    result = grade(lab, source)
    expected = "bonus: returned a value of type tiny.Box, which is not plain data"
    assert result.checks[3].message == expected


def test_requirements_fall_transitively():
    """A check zeroed for its own requirement no longer counts as passed for another's:
    lab03's gap requires the loop's check, which requires the loop's values."""
    from labkit.course.checks import CheckSpec, LabChecks
    from labkit.engine.assemble import _apply_requirements
    from labkit.results import CheckResult

    def spec(check_id: str, *requires: str) -> CheckSpec:
        return CheckSpec(check_id, 1.0, {"en": check_id}, {"en": "no"}, {"en": "h"}, requires)

    specs = LabChecks((spec("a.values"), spec("a.loop", "a.values"), spec("gap.x", "a.loop")),
                      {})
    checks = [CheckResult("a.values", "", Status.FAIL, 0.0, 1.0, "wrong"),
              CheckResult("a.loop", "", Status.PASS, 1.0, 1.0),
              CheckResult("gap.x", "", Status.PASS, 1.0, 1.0)]
    result = _apply_requirements(specs, checks, "en")
    assert [(c.status, c.points) for c in result] == [(Status.FAIL, 0.0)] * 3
    assert "a" in result[2].message


# --- failures of the kit, not the submission ---------------------------------------------

SLEEPY_HALVE = GOOD + "\nimport time\ndef halve(x):\n    time.sleep(30)\n"


@pytest.fixture
def starved(monkeypatch):
    """A machine that never lets the workers run: as `/proc` would show it, every second
    of every call is spent waiting on the run queue. `starved.machine[0] = False` gives
    the real readings back; `starved.faults` counts the `WorkerStarved` raised."""
    from labkit.sandbox import calls
    from labkit.sandbox.linux import procfs

    real, real_waited = procfs.run_queue_wait, procfs.run_queue_waited
    machine, faults = [True], []

    def reading(pid: int) -> tuple[float, float]:
        return (time.monotonic(), 0.0) if machine[0] else real(pid)

    class Counted(calls.WorkerStarved):
        def __init__(self, message: str) -> None:
            faults.append(message)
            super().__init__(message)

    monkeypatch.setattr(procfs, "run_queue_wait", reading)
    monkeypatch.setattr(procfs, "run_queue_waited",
                        lambda pid: time.monotonic() if machine[0] else real_waited(pid))
    monkeypatch.setattr(calls, "WorkerStarved", Counted)
    return type("Starved", (), {"machine": machine, "faults": faults})


def test_a_call_slowed_by_the_machine_gets_the_time_it_could_not_run(lab, starved):
    """Honest code that needs 1.6 s on a machine that kept it from running: the 1 s limit
    counts only the time it could run, so it passes."""
    result = grade(lab, GOOD + "\nimport time\ndef halve(x):\n    time.sleep(1.6)\n"
                   "    return x / 2\n")
    assert outcome(result)["halve.values"] == (Status.PASS, 1)
    assert starved.faults == []


def test_a_check_starved_twice_makes_the_grading_the_kits_failure(lab, starved):
    from labkit.engine.cold import KitFailure

    with pytest.raises(KitFailure, match="too busy"):
        grade(lab, SLEEPY_HALVE)
    assert len(starved.faults) == 2  # run again once, on a fresh worker


def test_a_starved_check_is_run_again_and_judged_as_it_then_runs(lab, starved, monkeypatch):
    """Starved once (the kit's), then the machine is free: the second run's outcome is
    the check's, here a timeout at the plain limit (it sleeps: its own doing)."""
    from labkit.sandbox import calls

    counted = calls.WorkerStarved

    class Freeing(counted):
        def __init__(self, message: str) -> None:
            starved.machine[0] = False
            super().__init__(message)

    monkeypatch.setattr(calls, "WorkerStarved", Freeing)
    result = grade(lab, SLEEPY_HALVE)
    assert len(starved.faults) == 1
    assert outcome(result)["halve.values"] == (Status.TIMEOUT, 0)
    assert outcome(result)["double.values"] == (Status.PASS, 2)


def test_a_code_that_kills_its_own_worker_is_judged_on_the_second_run(lab):
    """SIGKILL may come from outside (the kernel, another process): the check runs
    again; a submission that does it again keeps the crash."""
    result = grade(lab, GOOD + "\nimport os, signal\ndef halve(x):\n"
                   "    os.kill(os.getpid(), signal.SIGKILL)\n")
    assert outcome(result)["halve.values"] == (Status.ERROR, 0)
    assert "SIGKILL" in result.checks[1].message


def test_run_queue_wait_tells_a_starved_process_from_a_sleeping_one():
    """What `WorkerStarved` rests on, read from the kernel: two spinning processes that
    share one CPU each wait on the run queue about as long as they run; a sleeping one
    waits on none. (A grading's workers run in a cgroup of their own, which the kernel
    already shares the CPU with fairly: starving one takes many more processes.)"""
    import os
    import subprocess
    import sys

    from labkit.sandbox.linux.procfs import run_queue_wait

    cpu = min(os.sched_getaffinity(0))
    spin = [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile 1: pass"]
    spinners = [subprocess.Popen(spin) for _ in range(2)]
    sleeper = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(30)"])
    try:
        time.sleep(0.5)  # past their start-up, which waits on a busy machine too
        spinner_before, sleeper_before = (run_queue_wait(p.pid) for p in (spinners[0], sleeper))
        time.sleep(1.5)
        spinner_after, sleeper_after = (run_queue_wait(p.pid) for p in (spinners[0], sleeper))
        assert spinner_after[0] - spinner_before[0] > 0.3  # about half of 1.5 s, or more
        assert spinner_after[1] > spinner_before[1]
        assert sleeper_after[0] - sleeper_before[0] < 0.05
    finally:
        for process in (*spinners, sleeper):
            process.kill()
            process.wait()
