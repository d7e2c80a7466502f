"""The grader's callables called from student code, and calls measured from outside.

A `callback(fn)` argument reaches the worker as a number; each call the student's code
makes asks the trusted side, which runs `fn` and records it. `student.measure` reads the
worker's `/proc` from the trusted side. Both isolation modes, one module each.
"""

from __future__ import annotations

import shutil
import textwrap
import time
from collections.abc import Iterator

import pytest

from labkit.engine.proxy import MAX_CALLBACKS, Session, Student
from labkit.grading import callback
from labkit.sandbox.backend import SandboxConfig
from labkit.sandbox.calls import MAX_STRETCH
from labkit.sandbox.errors import WorkerCrashed, WorkerTimeout
from labkit.sandbox.facade import Sandbox

SOURCE = textwrap.dedent("""
    import threading, time

    def twice(fn, *args):
        return [fn(*args), fn(*args)]

    def flood(fn):
        while True:
            fn()

    def stash(fn):
        global KEPT
        KEPT = fn
        return repr(fn)

    def use_kept():
        return KEPT()

    def catch(fn):
        try:
            fn()
        except ValueError as exc:
            return "caught " + str(exc)

    def work_in_threads(seconds, threads):
        def spin():
            end = time.thread_time() + seconds
            while time.thread_time() < end:
                pass

        started = [threading.Thread(target=spin) for _ in range(threads)]
        for thread in started:
            thread.start()
        for thread in started:
            thread.join()

    def spin(seconds, threads):
        for _ in range(threads):
            threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
""")

MODES = [pytest.param("process"),
         pytest.param("bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None,
                                                        reason="bwrap is not installed"))]


@pytest.fixture(params=MODES)
def student(request: pytest.FixtureRequest) -> Iterator[Student]:
    config = SandboxConfig(files={"mod.py": SOURCE.encode()}, modules=("mod",),
                           isolation=request.param)
    with Sandbox(config) as sandbox:
        session = Session(sandbox, 3.0, {})
        yield Student(session)
        session.close()


def test_a_callback_runs_here_and_is_recorded_in_order(student: Student) -> None:
    seen: list[tuple] = []

    def add(a: int, b: int) -> int:
        seen.append((a, b))
        return a + b

    assert student.twice(callback(add), 2, 3) == [5, 5]
    assert seen == [(2, 3), (2, 3)]
    assert student.last_call.callbacks == ("add", "add")
    assert student.last_call.wall_s > 0


def test_the_student_sees_only_a_number(student: Student) -> None:
    assert student.stash(callback(len, name="len")) == "<grader's callable>"


def test_a_callback_of_an_earlier_call_is_refused(student: Student) -> None:
    student.stash(callback(lambda: 1))
    with pytest.raises(WorkerCrashed, match="unknown callable"):
        student.use_kept()


def test_what_the_callable_raises_the_call_raises(student: Student) -> None:
    def missing() -> None:
        raise ValueError("nope")

    assert student.catch(callback(missing)) == "caught nope"


def test_a_flood_of_callbacks_ends_the_check(student: Student) -> None:
    calls = []
    with pytest.raises(WorkerCrashed, match="calls back"):
        student.flood(callback(lambda: calls.append(1)))
    assert len(calls) == MAX_CALLBACKS


def test_callbacks_share_the_call_s_deadline(student: Student) -> None:
    """The call's 3 s hold its questions too: a flood of slow ones ends with a timeout
    after about six of them, not one limit per question. (The limit may stretch by what
    the worker waited on a busy machine's run queue, up to `MAX_STRETCH` times.)"""
    answered = []

    def slow() -> None:
        answered.append(1)
        time.sleep(0.5)

    with pytest.raises(WorkerTimeout):
        student.flood(callback(slow))
    assert 5 <= len(answered) <= MAX_STRETCH * 3.0 / 0.5 + 1


def test_a_measured_call_counts_the_worker_s_cpu_threads_and_wall(student: Student) -> None:
    got = student.measure("spin", 0.3, 2)
    assert got.result is None
    assert 0.2 <= got.cpu_s <= got.wall_s + 0.05
    assert got.threads == 3
    assert got.children == ()


def test_a_watched_call_sees_the_threads_it_started_run_and_its_own_thread_idle(
        student: Student) -> None:
    """Issue 29: `watch` samples the worker's threads from `/proc` while the call runs:
    each thread it started, with the CPU time it ran (kernel's count, as last seen), and
    the CPU time of the thread that ran the call, which here only waits."""
    got = student.watch("work_in_threads", 0.05, 3)
    assert len(got.started) == 3
    # each ran, and no more than its work: the last sample may come well before a thread
    # ends on a busy machine (the sampler waits for a CPU too), so no lower bound but 0
    assert all(0 < seen.run_s <= 0.2 and seen.at_s > 0 for seen in got.started)
    assert got.main_cpu_s is not None and got.main_cpu_s < 0.02


def test_a_watched_call_that_works_in_its_own_thread_starts_none(student: Student) -> None:
    got = student.watch("spin", 0.1, 0)
    assert got.started == ()
    assert got.main_cpu_s is not None and got.main_cpu_s >= 0.08
    assert student.measure("spin", 0.01, 0).main_cpu_s is None  # only a watched call
