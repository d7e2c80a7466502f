"""Kit failures are not the student's (issue 27): a check that the kit could not grade is
run again on a fresh worker (`labkit.engine.plugin.Retrying`); if the kit fails it again,
the grading is the kit's failure (`KitFailure`, "not graded"), never a fail, a timeout or
"your code killed the sandbox".

Each cause is reproduced by injecting it: a grader that cannot measure (`kit_fault`), a
zygote that answers later than the kit waits (a starved machine; the delay is injected by
stopping the zygote), and a grading process whose other children must outlive its zygote.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from kit import tiny_lab

from labkit.engine.cold import KitFailure, grade_files
from labkit.results import Status
from labkit.sandbox.linux import zygote

CATALOGUE = """
format = 1
[[lab]]
id = "lab98"
title.en = "Faults"
title.es = "Fallos"
files = ["tiny.py"]
modules = ["tiny"]
call_timeout = 5.0
"""

GRADER = '''
from labkit.grading import as_float, check, kit_fault

@check("double.values")
def test_double(student):
    assert as_float(student.double(2.5)) == 5.0

@check("halve.values")
def test_halve(student):
    assert as_float(student.halve(3.0)) == 1.5

@check("busy.measure")
def test_busy(student, submission):
    assert as_float(student.double(1.0)) == 2.0
    if b"# unmeasurable" in submission["tiny.py"]:  # the machine never let it measure
        kit_fault("too_busy", tries=7)
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
[checks."busy.measure"]
points = 1
title = {en = "busy", es = "ocupado"}
fail = {en = "busy is wrong", es = "ocupado está mal"}
hint = {en = "wait", es = "espera"}
[messages.too_busy]
en = "the machine stayed too busy in {tries} tries"
es = "la máquina siguió demasiado ocupada en {tries} intentos"
"""

GOOD = "def double(x):\n    return 2 * x\n\ndef halve(x):\n    return x / 2\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return tiny_lab(tmp_path_factory.mktemp("kit"), "lab98", CATALOGUE, GRADER, CHECKS)


def grade(lab, source: str = GOOD, lang: str = "en"):
    return grade_files(lab, {"tiny.py": textwrap.dedent(source).encode()}, lang)


def outcome(result):
    return {c.id: c.status for c in result.checks}


def test_a_check_the_grader_could_not_measure_twice_is_the_kits_failure_in_both_languages(lab):
    for lang, text, said in (("en", "not your submission", "too busy in 7 tries"),
                             ("es", "no tu entrega", "demasiado ocupada en 7 intentos")):
        with pytest.raises(KitFailure) as failure:
            grade(lab, GOOD + "# unmeasurable\n", lang=lang)
        message = failure.value.text(lang)
        assert text in message and said in message, message


def test_a_zygote_that_answers_late_costs_the_check_nothing(lab, monkeypatch):
    """A starved machine: the zygote answers the ping that follows a check later than the
    kit waits, so the kit gives it up (and every worker it forked). Before, that check was
    reported as "the code run by double killed the process that starts the workers"; now
    it is run again on a fresh zygote.

    The delay is injected: the zygote is stopped for a second at the first ping, as a
    machine too busy to run it would keep it off every CPU (the wait is cut to 0.3 s)."""
    monkeypatch.setenv("LABKIT_ISOLATION", "process")  # the zygote is this process's child
    monkeypatch.setattr(zygote, "ANSWER_SECONDS", 0.3)
    answers, stalled = zygote.Zygote.answers, []

    def late(running):
        if not stalled and running._process is not None:
            stalled.append(running._process.pid)
            os.kill(stalled[0], signal.SIGSTOP)
            threading.Timer(1.0, _resume, (stalled[0],)).start()
        return answers(running)

    monkeypatch.setattr(zygote.Zygote, "answers", late)
    result = grade(lab)
    assert stalled
    # the check met a zygote the kit gave up on, and was run again on a fresh one
    assert set(outcome(result).values()) == {Status.PASS}
    assert not any("killed the process" in c.message for c in result.checks)


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def test_a_zygote_a_worker_kills_is_still_that_codes_error(lab):
    """What a student's code does to its zygote stays its own error: the kit did not give
    that zygote up."""
    kills = GOOD + textwrap.dedent("""
        import os, signal

        def halve(x):
            os.kill(os.getppid(), signal.SIGKILL)
            return x / 2
    """)
    result = grade(lab, kills)
    assert outcome(result)["halve.values"] is Status.ERROR
    assert "killed the process that starts the workers" in result.checks[1].message
    assert outcome(result)["double.values"] is Status.PASS


def test_closing_a_process_mode_zygote_spares_the_grading_processs_other_children(
        lab, monkeypatch):
    """The grading process is a child subreaper in process mode, so a dead zygote's
    workers become its children, and closing the zygote ends them. Its own other children,
    started after the zygote (a helper, a spinning load), are not the zygote's: before,
    they were killed too."""
    monkeypatch.setenv("LABKIT_ISOLATION", "process")
    helpers = []
    started = zygote.Zygote.start

    def start_then_a_helper(running):
        started(running)
        helpers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))

    monkeypatch.setattr(zygote.Zygote, "start", start_then_a_helper)
    try:
        result = grade(lab)
        assert outcome(result)["double.values"] is Status.PASS
        assert helpers and all(helper.poll() is None for helper in helpers)
    finally:
        for helper in helpers:
            helper.kill()
            helper.wait()
