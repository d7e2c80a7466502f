"""A warm grading session: pytest collected once for a lab, then many workspaces graded.

`cold.grade_files` pays pytest's start-up and collection, and hypothesis's example
generation, on every grading. A batch grader process instead opens one `WarmSession`
and grades every submission it is sent with the same collected items:

- pytest runs once (`run(loop)`); inside its test loop, `loop(grade)` is called, and
  each `grade(...)` runs the protocol of every collected item again, with the
  plugin's per-grading state reset (`BatchPlugin.begin`).
- property-based checks are replayed: the examples hypothesis generates for a check
  are recorded once per process (with a stand-in test that always passes) and each
  grading runs the check's body on them in order, stopping at the first failure, as
  hypothesis does without shrinking. The examples therefore never depend on the
  submission or on what was graded before in the same process. A check whose body
  needs hypothesis at run time (`assume`, `note`, `st.data()`) runs under hypothesis.
  When each example makes one call to the student, the calls go to the worker
  together (`Replay._run_ahead`): one round trip a check instead of one an example.
- random generators kept at module level by graders (NumPy `Generator`/`RandomState`,
  `random.Random`) are reset to their state after import before every grading, so a
  submission's grade does not depend on which submissions the process graded before.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import inspect
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest

from labkit import platform
from labkit.course.catalogue import LabSpec, lab_checks
from labkit.engine import _compat, cold
from labkit.engine.assemble import assemble
from labkit.engine.plugin import Grading, GradingPlugin, Progress, Retrying, Shrinking, selected
from labkit.engine.proxy import Asked, Diverged, Rehearsal, Request, Session, Student, StudentRaised
from labkit.results import LabResult
from labkit.sandbox import protocol
from labkit.sandbox.backend import Backend, SandboxConfig
from labkit.sandbox.errors import WorkerFailure
from labkit.sandbox.facade import Sandbox, open_backend

# grade(files, lang, cancel=None): the submission's files as they were read,
# `{path: bytes}`; `cancel`, a `Cancel` another thread may set to stop the grading.
GradeFn = Callable[..., LabResult]


class GradingCancelled(Exception):
    """The grading was cancelled (`Cancel.set`): there is no result to give."""


_POKE_SECONDS = 0.05


class Cancel:
    """'Stop this grading now', set from another thread (a daemon's client hung up).

    Setting it moves the grading's deadline to now, so every check still to come ends at
    once as out of time, and a signal to the main thread ends the wait for a worker
    that is under way as a timeout (the worker is stopped as after any timeout). The
    signal raises only inside such a wait, where a timeout is expected and handled;
    anywhere else it only leaves the new deadline to act, so pytest, the zygote and the
    grader's own code are never interrupted in the middle. The signal is repeated
    until the grading is over, in case it lands just before a wait begins. Where no
    thread can signal the main thread (Windows), the deadline is moved from the thread
    that cancels, and the wait under way runs to its own end.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._over = threading.Event()
        self._lock = threading.Lock()  # held to signal, and to stop signalling
        self._plugin: BatchPlugin | None = None
        self._wakes = False  # whether a signal reaches the main thread (`guarding`)

    def is_set(self) -> bool:
        return self._event.is_set()

    def finish(self) -> None:
        """The grading is over (cancelled or not): `set` returns, signals stop."""
        self._over.set()

    def finished(self) -> bool:
        return self._over.is_set()

    def set(self) -> None:
        """Cancel (from any thread); returns once the grading has noticed or ended."""
        self._event.set()
        while not self._over.is_set():
            with self._lock:
                if self._plugin is not None and self._wakes:  # our handler is installed
                    platform.wake_main_thread()
                elif self._plugin is not None:
                    self._expire(self._plugin)
            self._over.wait(_POKE_SECONDS)

    def _expire(self, plugin: BatchPlugin) -> Grading | None:
        """Move the grading's deadlines to now; None if it has not begun or is over."""
        grading = plugin._grading
        if not self._event.is_set() or grading is None:
            return None
        now = time.monotonic()
        grading.deadline = min(grading.deadline, now)
        grading.sandbox.deadline = now
        return grading

    def _handler(self, _signum: int, frame: Any) -> None:
        grading = self._expire(self._plugin) if self._plugin is not None else None
        if grading is None:
            return  # not begun yet (the next signal comes soon) or over
        backend = grading.sandbox.backend
        if frame is not None and frame.f_code in backend.blocking:
            caller = frame.f_back
            waits = backend.waits
            for _ in range(6):
                if caller is None:
                    break
                if caller.f_code in waits:
                    raise protocol.ChannelTimeout()
                caller = caller.f_back

    @contextlib.contextmanager
    def guarding(self, plugin: BatchPlugin) -> Iterator[None]:
        """While `plugin` grades in the main thread, let `set` stop it."""
        with platform.main_thread_wakes(self._handler) as wakes:
            self._wakes = wakes
            self._plugin = plugin
            try:
                yield
            finally:
                with self._lock:
                    self._plugin = None


_RANDOM_AT_ZERO = random.Random(0).getstate()


def _seed_global_prngs() -> None:
    """The global PRNGs (`random`'s and NumPy's) as seeding them with 0 leaves them, as
    hypothesis seeds them for an example: a check's body that draws from them draws
    the same in every grading, whatever ran before. Seeding is cheap; saving their
    state to restore it would cost ten times as much, and nothing here needs it back."""
    import numpy as np

    random.setstate(_RANDOM_AT_ZERO)
    np.random.seed(0)


class _NotReplayable(Exception):
    """The check's body needs hypothesis itself; run it under hypothesis."""


class Replay:
    """The recorded examples of one property-based check and how to run them."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        inner = _compat.inner_test(wrapped)
        if inner is None:  # a Replay is made only for a check hypothesis runs (`@given`)
            raise TypeError(f"{wrapped!r} is not a hypothesis test")
        self.inner: Callable[..., Any] = inner
        self.fixtures = list(inspect.signature(wrapped).parameters)
        self.examples: list[dict[str, Any]] | None = None
        self.frozen: list[bool] = []  # examples made only of immutable values need no copy
        self.ahead = True  # whether to send its calls ahead (`_run_ahead`)

    def record(self) -> None:
        """Run hypothesis once with a body that passes, keeping what it generated."""
        from hypothesis.errors import HypothesisException

        seen: list[dict[str, Any]] = []
        fixtures = set(self.fixtures)

        def stand_in(*args: Any, **kwargs: Any) -> None:
            example = {k: v for k, v in kwargs.items() if k not in fixtures}
            if args or any(type(v).__name__ == "DataObject" for v in example.values()):
                raise _NotReplayable
            seen.append(copy.deepcopy(example))

        _compat.set_inner_test(self.wrapped, stand_in)
        try:
            with _compat.drawing_as(self.wrapped, self.inner):  # the examples a cold run draws
                self.wrapped(**dict.fromkeys(self.fixtures))
            self.examples = seen
            self.frozen = [_immutable(example) for example in seen]
        except (_NotReplayable, HypothesisException):
            self.examples = None
        finally:
            _compat.set_inner_test(self.wrapped, self.inner)

    def run(self, funcargs: dict[str, Any]) -> None:
        """The check's body on each recorded example, in order; the first failure ends it."""
        from hypothesis.errors import HypothesisException

        if self.examples is None:
            self.wrapped(**funcargs)
            return
        try:
            if not self._run_ahead(funcargs):
                self._run_in_turn(funcargs)
        except HypothesisException:  # assume(), note() ...: hypothesis must drive it
            self.examples = None
            self.wrapped(**funcargs)

    def _examples(self) -> Iterator[dict[str, Any]]:
        assert self.examples is not None
        for example, frozen in zip(self.examples, self.frozen, strict=True):
            yield example if frozen else copy.deepcopy(example)

    def _run_in_turn(self, funcargs: dict[str, Any]) -> None:
        _seed_global_prngs()  # once per check: they start the same every grading
        for example in self._examples():
            self.inner(**funcargs, **example)

    def _run_ahead(self, funcargs: dict[str, Any]) -> bool:
        """Run the examples with their calls sent to the worker ahead, all at once.

        A round trip to the worker per example costs more than the call itself. When
        each example makes one call, whose arguments depend on the example alone (as a
        rehearsal shows), the worker runs the same calls in the same order either way:
        they are sent ahead, and each example takes its reply. An example that asks for
        anything else ends the attempt (`Diverged`): the check runs again in turn, in a
        fresh worker, and this check is not sent ahead again. False: run it in turn.
        After a failing example the worker may run the calls still ahead; the grade is
        the same, but what they print can appear in the check's output. The check has
        failed, so its worker serves no other check (see `GradingPlugin.student`).
        """
        student = funcargs.get("student")
        if not self.ahead or self.fixtures != ["student"] or not isinstance(student, Student):
            return False
        session: Session = student._session
        requests = self._rehearse(session)
        if requests is None or not session.ready:
            return False
        try:
            if not session.send_ahead(requests):  # too large: the same every grading
                self.ahead = False
                return False
        except StudentRaised:  # its import raised: in turn, each call imports it again
            session.restart()
            return False
        except WorkerFailure:  # the first call in turn fails the same way at once
            return False
        try:
            self._run_in_turn(funcargs)
        except Diverged:
            session.restart()
            self.ahead = False
            return False
        finally:
            session.ahead = None
        return True

    def _rehearse(self, session: Session) -> list[Request] | None:
        """Each example's first request, or None if one makes none or fails before."""
        stand_in = Student(Rehearsal(session))  # type: ignore[arg-type]
        requests = []
        _seed_global_prngs()
        for example in self._examples():
            try:
                self.inner(student=stand_in, **example)
            except Asked as asked:
                requests.append(asked.request)
                continue
            except Exception:  # noqa: BLE001 - fails before its call: run it in turn
                return None
            return None
        return requests


class BatchPlugin(GradingPlugin):
    """The grading plugin, reusable: `begin` resets what belongs to one grading."""

    def __init__(self, lab: LabSpec, loop: Callable[[GradeFn], None], backend: Backend) -> None:
        super().__init__(lab, lab_checks(lab))
        self.loop, self.backend = loop, backend
        self.items: list[pytest.Item] = []
        self.replays: dict[str, Replay] = {}
        self._random_states: list[tuple[Any, Any]] = []

    def begin(self, sandbox: Sandbox, lang: str, progress: Progress | None = None,
              total: int | None = None) -> None:
        """A new grading; the graders' module-level generators start where they did."""
        super().begin(sandbox, lang, progress, total)
        for owner, state in self._random_states:
            _set_random_state(owner, state)

    # --- hooks ------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = list(session.items)
        modules = {id(item.module): item.module for item in self.items if hasattr(item, "module")}
        for module in modules.values():
            for value in vars(module).values():
                state = _get_random_state(value)
                if state is not None:
                    self._random_states.append((value, state))
        for item in self.items:
            obj = getattr(item, "obj", None)
            if _compat.inner_test(obj) is not None:
                replay = Replay(obj)
                replay.record()
                self.replays[item.nodeid] = replay
        gc.collect()
        gc.freeze()  # what is loaded now lives as long as the process: never scan it again

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        replay = self.replays.get(pyfuncitem.nodeid)
        if replay is None:
            return None
        replay.run({name: pyfuncitem.funcargs[name] for name in replay.fixtures})
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        self.loop(self.grade)
        return True

    # --- one grading ----------------------------------------------------------------

    def grade(self, files: dict[str, bytes], lang: str, cancel: Cancel | None = None,
              only: str | None = None, progress: Progress | None = None) -> LabResult:
        """Grade the files, held in memory (the sandbox gives each worker its copy).

        `cancel` (main thread only) lets another thread stop the grading at once:
        `GradingCancelled` then, and the process is ready for the next grading.
        `only`: just that function's checks; `progress(k, n)` as each check begins.
        """
        if cancel is None:
            return self._grade(files, lang, only, progress)
        with cancel.guarding(self):
            result = self._grade(files, lang, only, progress)
        if cancel.is_set():
            raise GradingCancelled()
        return result

    def _grade(self, files: dict[str, bytes], lang: str, only: str | None,
               progress: Progress | None) -> LabResult:
        check_of = dict(self.order)
        items = [item for item in self.items if selected(check_of[item.nodeid], only)]
        started = time.monotonic()
        probes = self.lab.grader_dir / "probes.py"
        config = SandboxConfig(
            files=files,
            modules=self.lab.modules,
            sys_path=self.lab.sys_path,
            probes=probes if probes.is_file() else None,
        )
        with Sandbox(config, self.backend) as sandbox:
            self.begin(sandbox, lang, progress, len(items))
            try:
                for index, item in enumerate(items):
                    following = items[index + 1] if index + 1 < len(items) else None
                    item.ihook.pytest_runtest_protocol(item=item, nextitem=following)
            finally:
                self.release()
            outcomes = [(check_id, self.outcomes.get(nodeid)) for nodeid, check_id in self.order
                        if selected(check_id, only)]
            self.end()
        cold.raise_kit_failure(sandbox)
        return assemble(self.lab, files, lang, outcomes, time.monotonic() - started)


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), range)


def _immutable(value: Any) -> bool:
    """Whether a generated value is made only of immutable parts (tuples of ints...)."""
    if isinstance(value, _IMMUTABLE):
        return True
    if isinstance(value, tuple | frozenset):
        return all(_immutable(v) for v in value)
    if isinstance(value, dict):  # the example itself: its values are what matter
        return all(_immutable(v) for v in value.values())
    return False


class PlainReports:
    """pytest's reports without formatting tracebacks: the batch never shows them.

    pytest renders the source of every frame of a failure's traceback for its report;
    a check's outcome comes from the exception itself (`GradingPlugin`), so a one-line
    report is enough and a failing submission costs no more than a passing one.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        excinfo = call.excinfo
        when = call.when
        if when == "collect":  # pytest makes run-test reports for setup, call, teardown only
            raise ValueError("a run-test report for a collection")
        outcome: Literal["passed", "failed", "skipped"]
        longrepr: tuple[str, int, str] | str | None
        if excinfo is None:
            outcome, longrepr = "passed", None
        elif isinstance(excinfo.value, pytest.skip.Exception):
            outcome = "skipped"
            longrepr = (str(item.path), item.location[1] or 0, str(excinfo.value))
        else:
            outcome, longrepr = "failed", f"{excinfo.typename}: {str(excinfo.value)[:200]}"
        return pytest.TestReport(item.nodeid, item.location, {}, outcome, longrepr, when,
                          duration=call.duration, start=call.start, stop=call.stop)


def _get_random_state(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.random.Generator):
        return copy.deepcopy(value.bit_generator.state)
    if isinstance(value, np.random.RandomState):
        return value.get_state()
    if isinstance(value, random.Random):
        return value.getstate()
    return None


def _set_random_state(owner: Any, state: Any) -> None:
    import numpy as np

    if isinstance(owner, np.random.Generator):
        owner.bit_generator.state = copy.deepcopy(state)
    elif isinstance(owner, np.random.RandomState):
        owner.set_state(state)
    else:
        owner.setstate(state)


def run(lab: LabSpec, backend: Backend, loop: Callable[[GradeFn], None],
        shrink: bool = True) -> None:
    """Collect `lab`'s graders once, then call `loop(grade)`; returns when `loop` does.

    With `shrink`, a failing property's message names the smallest failing input found
    (`plugin.Shrinking`), as `labkit grade` does for the student in front of it; without
    it (a batch), the first of the check's examples that failed: the same points and
    statuses, without the extra calls that shrinking makes a grading pay.
    """
    plugin = BatchPlugin(lab, loop, backend)
    plugins: list[object] = [plugin, PlainReports(), Retrying(plugin)]
    plugins += [Shrinking(plugin)] if shrink else []
    saved = os.environ.pop("PYTEST_ADDOPTS", None)
    try:
        code = pytest.main(cold.pytest_args(lab), plugins=plugins)
    finally:
        if saved is not None:
            os.environ["PYTEST_ADDOPTS"] = saved
    if plugin.interrupted:  # pytest swallowed the Ctrl-C: it is the caller's to see
        raise KeyboardInterrupt
    cold.ensure_collected(lab, code, bool(plugin.items))


def run_warm(lab: LabSpec, loop: Callable[[GradeFn], None], shrink: bool = True) -> None:
    """Start a sandbox back end, collect `lab`'s graders once, then call `loop(grade)`
    until it returns.

    `grade(files, lang)` grades a submission's files as they were read, `{path: bytes}`;
    `shrink` as in `run`.
    """
    backend = open_backend()
    backend.start()  # its NumPy import overlaps ours and pytest's collection
    try:
        run(lab, backend, loop, shrink)
    finally:
        backend.close()
