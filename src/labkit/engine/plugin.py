"""The pytest plugin of a trusted grading run.

It gives grader tests their `student` fixture (a proxy to a worker), records how each
check ended, and turns pytest's outcomes into check statuses: a failed assertion or an
exception the student's code raised is `fail`, a call that ran out of time is
`timeout`, a worker that died or sent garbage is `error`.
"""

from __future__ import annotations

import inspect
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pytest

from labkit import i18n, platform
from labkit.course.catalogue import LabChecks, LabSpec, concerns
from labkit.engine import _compat, inputs
from labkit.engine.api import CheckFailed
from labkit.engine.proxy import Session, Student, StudentRaised
from labkit.results import Status
from labkit.sandbox.codec import OpaqueValue
from labkit.sandbox.errors import (
    GradingTimeout,
    KitFault,
    WorkerCrashed,
    WorkerFailure,
    WorkerTimeout,
)
from labkit.sandbox.facade import Sandbox

# The whole grading ran past its limit: the call that was waiting ends, and remaining
# checks do not start (the sandbox bounds every call by `Sandbox.deadline`).
GradeTimeout = GradingTimeout
MAX_WRONG = 8  # wrong parts a partial-credit message names
SHRINK_CALLS = 40  # candidates tried, at most, to find a smaller failing input for a message
SHRINK_SECONDS = 3.0  # and never longer than this (a safety net: the count ends it first)
SHRINK_MARGIN = 2.0  # s of the grading's limit shrinking leaves to the checks after it


@dataclass
class Outcome:
    """How one check ended, before points are assigned."""

    status: Status
    message: str = ""
    fraction: float | None = None
    output: str = ""
    import_error: tuple[str, str] | None = None  # (file, what its import raised): not graded
    refused: bool = False  # failed by a refusal of the source analysis (`api.refuse`)


class Credit:
    """Partial credit for the current check: `credit.partial(right, out_of)`."""

    def __init__(self) -> None:
        self.fraction: float | None = None
        self.wrong: tuple[str, ...] = ()

    def partial(self, earned: float, possible: float, wrong: Sequence[str] = ()) -> None:
        """`wrong`: the grader's names of the parts that were wrong (quiz keys), shown."""
        self.fraction = max(0.0, min(1.0, earned / possible)) if possible else 0.0
        self.wrong = tuple(str(w) for w in wrong)


@dataclass
class Grading:
    """What belongs to one grading, and only to it: a warm process starts a new one for
    every submission, so nothing of one grading's state can reach the next."""

    sandbox: Sandbox
    lang: str
    deadline: float
    broken: dict[str, WorkerFailure] = field(default_factory=dict)  # modules that failed
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # by nodeid
    sessions: dict[str, Session] = field(default_factory=dict)
    credits: dict[str, Credit] = field(default_factory=dict)
    shared: Session | None = None  # a passing check's worker, for the next check
    total: int = 0  # checks this grading runs
    started: int = 0  # of them, begun so far
    progress: Progress | None = None
    outputs: dict[str, str] = field(default_factory=dict)  # by nodeid, read before shrinking
    # by nodeid: whether the zygote that served the check outlived it (`Retrying` asks)
    outlived: dict[str, bool] = field(default_factory=dict)
    retried: list[BaseException] = field(default_factory=list)  # failures run again once


# progress(k, n): check k of n has begun (for a live line on the student's terminal)
Progress = Callable[[int, int], None]


def selected(check_id: str, only: str | None) -> bool:
    """Whether `--only FUNCTION` keeps a check: its id is FUNCTION.aspect (or FUNCTION)."""
    return only is None or concerns(check_id, only)


class GradingPlugin:
    """Registered with `pytest.main(plugins=[...])`; grades one submission at a time.

    `begin(sandbox, lang)` starts a grading (a fresh `Grading`); the cold run begins
    once, a warm process once per submission.
    """

    def __init__(self, lab: LabSpec, checks: LabChecks) -> None:
        self.lab, self.checks = lab, checks
        self.order: list[tuple[str, str]] = []  # (nodeid, check id) in grader order
        self._grading: Grading | None = None
        self.only: str | None = None  # grade only this function's checks (cold runs)
        self.interrupted = False  # Ctrl-C: pytest stopped early, there is no grade

    def begin(self, sandbox: Sandbox, lang: str, progress: Progress | None = None,
              total: int | None = None) -> None:
        """Start grading one submission in `sandbox`, with messages in `lang`;
        `progress` is told as each of its `total` checks begins."""
        self._grading = Grading(sandbox, lang, time.monotonic() + self.lab.grade_timeout,
                                total=len(self.order) if total is None else total,
                                progress=progress)

    def end(self) -> None:
        """The grading is over: drop its state (the sandbox, sessions, outcomes) so a
        long-lived process holds nothing of it while it waits for the next one."""
        self.release()
        self._grading = None

    @property
    def grading(self) -> Grading:
        if self._grading is None:
            raise RuntimeError("no grading has begun")  # a kit bug, never a student's
        return self._grading

    @property
    def outcomes(self) -> dict[str, Outcome]:
        """How each check of the current grading ended, by nodeid."""
        return self.grading.outcomes

    # --- fixtures ---------------------------------------------------------------------

    @pytest.fixture
    def student(self, request: pytest.FixtureRequest) -> Any:
        """The student's code, in a fresh worker for each check.

        A lab that declares `share_worker` (its functions keep no state) lets a check
        hand its worker on to the next one, which saves starting a worker per check,
        when the check passed, or failed on values with the worker idle and alive (see
        `_hands_on`). A check whose worker timed out, crashed or still owes a reply
        never does: whatever it left behind stays with it. Nor does a check marked
        `fresh`, which never takes one either.
        """
        grading = self.grading
        left = grading.deadline - time.monotonic()
        if left <= 0:
            raise GradeTimeout("grade")
        grading.sandbox.deadline = grading.deadline
        nodeid = request.node.nodeid
        marker = request.node.get_closest_marker("labkit_check")
        fresh = bool(marker and marker.kwargs.get("fresh"))
        session, grading.shared = grading.shared, None
        if session is not None and fresh:
            session.close()
            session = None
        if session is None:
            session = Session(grading.sandbox, min(self.lab.call_timeout, left), grading.broken)
        else:
            session.next_check(min(self.lab.call_timeout, left))
        grading.sessions[nodeid] = session
        yield Student(session)
        outcome = grading.outcomes.get(nodeid)
        if (self.lab.share_worker and not fresh and outcome is not None
                and session.worker is not None and session.ready
                and _hands_on(outcome.status, request.node)):
            grading.shared = session
        else:
            session.close()

    def release(self) -> None:
        """Stop the worker a passing check left for the next one: the grading is over."""
        grading = self._grading
        if grading is not None and grading.shared is not None:
            grading.shared.close()
            grading.shared = None

    @pytest.fixture
    def credit(self, request: pytest.FixtureRequest) -> Credit:
        credit = self.grading.credits[request.node.nodeid] = Credit()
        return credit

    @pytest.fixture
    def submission(self) -> Mapping[str, bytes]:
        """The graded files, `{path: bytes}` (read-only), for reading source text: the
        bytes the workers were given, held here, never read back from a folder."""
        return MappingProxyType(self.grading.sandbox.config.files)

    # --- hooks ------------------------------------------------------------------------

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "labkit_check(id): the check a grader test is")

    def pytest_sessionfinish(self) -> None:
        self.release()

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # a Ctrl-C itself; pytest also tells of its own `Interrupted` (a collection error)
        if type(excinfo.value) is KeyboardInterrupt:
            self.interrupted = True

    def pytest_runtest_logstart(self) -> None:
        grading = self._grading
        if grading is not None and grading.progress is not None:
            grading.started += 1
            grading.progress(grading.started, max(grading.total, grading.started))

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]
                                      ) -> None:
        kept, dropped = [], []
        for item in items:
            marker = item.get_closest_marker("labkit_check")
            if marker is None:
                raise pytest.UsageError(f"{item.nodeid} has no @check(...)")
            if selected(marker.args[0], self.only):
                self.order.append((item.nodeid, marker.args[0]))
                kept.append(item)
            else:
                dropped.append(item)
        if dropped:
            items[:] = kept
            config.hook.pytest_deselected(items=dropped)
        if self._grading is not None:
            self._grading.total = len(kept)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        if call.when == "call" or (call.when == "setup" and report.failed):
            self._record(item.nodeid, call, _compat.inner_test(getattr(item, "obj", None)))
        return report

    def _record(self, nodeid: str, call: pytest.CallInfo, prop: object = None) -> None:
        grading = self.grading
        session = grading.sessions.get(nodeid)
        output = grading.outputs.get(nodeid, session.output() if session else "")
        credit = grading.credits.get(nodeid)
        if session is not None and session.generations and \
                not grading.outlived.get(nodeid, True):
            # its worker killed the zygote: whatever it replied first, the check is the
            # same error in every run (a race between the reply and the kill otherwise);
            # unless the kit gave up on that zygote itself, which is no code's fault
            where = dict(self.order)[nodeid].split(".")[0]
            why = grading.sandbox.given_up(session.generations)
            outcome = Outcome(Status.ERROR, i18n.t("sandbox_killed", grading.lang, where=where)
                              if why is None else
                              i18n.t("kit_fault", grading.lang, where=where, detail=why))
            if why is not None and grading.sandbox.failure is None:  # run twice (`Retrying`)
                grading.sandbox.failure = KitFault(why)
            credit = None
        elif call.excinfo is None:
            outcome = Outcome(Status.PASS)
        else:
            outcome = self.classify(call.excinfo.value, dict(self.order)[nodeid])
            if prop is not None and session is not None and session.last_input is not None \
                    and _shows_input(call.excinfo.value):
                outcome.message = i18n.t("failing_input", grading.lang, message=outcome.message,
                                         call=inputs.call_text(*session.last_input))
        if credit is not None and credit.fraction is not None:
            outcome.fraction = credit.fraction
            if credit.fraction < 1 and outcome.status is Status.PASS:
                outcome.status = Status.FAIL
                outcome.message = i18n.pick(self.checks.get(dict(self.order)[nodeid]).fail,
                                            grading.lang)
                if credit.wrong:
                    keys = ", ".join(credit.wrong[:MAX_WRONG])
                    more = len(credit.wrong) - MAX_WRONG
                    outcome.message = i18n.t("wrong_keys", grading.lang, message=outcome.message,
                                             keys=keys + (f" (+{more})" if more > 0 else ""))
        outcome.output = output
        grading.outcomes[nodeid] = outcome

    def classify(self, exc: BaseException, check_id: str) -> Outcome:
        """The status and one-line message for an exception that ended a check."""
        lang = self.grading.lang
        where = getattr(exc, "where", "") or check_id.split(".")[0]
        if isinstance(exc, CheckFailed):
            if exc.key == "refused_unreadable" and str(exc.params.get("file", "")).endswith(".py") \
                    and str(exc.params.get("what", "")).startswith("not valid Python"):
                file = str(exc.params["file"])  # not Python: the import fails the same way
                return Outcome(Status.FAIL, i18n.t("not_graded_import", lang, file=file),
                               import_error=(file, ""))
            texts = self.checks.messages.get(exc.key)
            refused = exc.key.startswith("refused_")
            if texts is not None:
                params = {key: value.text(lang) if isinstance(value, i18n.Phrase) else value
                          for key, value in exc.params.items()}
                return Outcome(Status.FAIL, i18n.pick(texts, lang).format(**params),
                               refused=refused)
            if i18n.has(exc.key):
                return Outcome(Status.FAIL, f"{where}: " + i18n.t(exc.key, lang, **exc.params),
                               refused=refused)
        if isinstance(exc, StudentRaised):
            if exc.where.startswith("import "):  # told once, above the table (`assemble`)
                module = exc.where.removeprefix("import ")
                detail = f"{exc.type_name}: {exc.message}".replace("\n", " ")[:300]
                file = self._module_file(module)
                return Outcome(Status.FAIL, i18n.t("not_graded_import", lang, file=file),
                               import_error=(file, detail))
            if exc.not_implemented:
                return Outcome(Status.FAIL, i18n.t("not_implemented", lang, where=where))
            message = exc.message.replace("\n", " ")[:200]
            return Outcome(
                Status.FAIL,
                i18n.t("student_raised", lang, where=where, type=exc.type_name, message=message),
            )
        if isinstance(exc, KitFault):  # never the student's: an error that says so
            detail = self.kit_detail(exc, lang)
            return Outcome(Status.ERROR, i18n.t("kit_fault", lang, where=where, detail=detail))
        if isinstance(exc, GradeTimeout):
            seconds = f"{self.lab.grade_timeout:g}"
            return Outcome(Status.TIMEOUT, i18n.t("grade_timeout", lang, seconds=seconds))
        if isinstance(exc, WorkerTimeout):
            seconds = f"{self.lab.call_timeout:g}"
            return Outcome(Status.TIMEOUT, i18n.t("timeout", lang, where=where, seconds=seconds))
        if isinstance(exc, WorkerCrashed):
            detail = exc.detail or _exit_detail(exc.exitcode)
            return Outcome(Status.ERROR, i18n.t("crashed", lang, where=where, detail=detail))
        if isinstance(exc, OpaqueValue):
            return Outcome(Status.FAIL, f"{where}: " + i18n.t("opaque_value", lang,
                                                             type=exc.type_name))
        if isinstance(exc, AssertionError | pytest.fail.Exception):  # incl. pytest.raises
            return Outcome(Status.FAIL, i18n.pick(self.checks.get(check_id).fail, lang))
        return Outcome(Status.ERROR, i18n.t("grader_error", lang, type=type(exc).__name__))


    def kit_detail(self, fault: KitFault, lang: str) -> str:
        """What a `KitFault` says happened: its lab message (`kit_fault(key)`) in `lang`,
        else its English detail."""
        texts = self.checks.messages.get(fault.key) if fault.key else None
        return i18n.pick(texts, lang).format(**fault.params) if texts else str(fault)

    def _module_file(self, module: str) -> str:
        """The lab file a module name stands for (`pkg.mod` -> `pkg/mod.py`)."""
        stem = module.replace(".", "/")
        for rel in self.lab.files:
            if rel in (f"{stem}.py", f"{stem}/__init__.py"):
                return rel
        return f"{stem}.py"


class Retrying:
    """Registered beside a `GradingPlugin`, in every grading: a check whose run met a
    failure that may be the kit's is run once more, from a fresh worker.

    The kit's own (`KitFault`: a worker starved of CPU past its limit, a sandbox that
    did not start) and what a busy machine or another process can do to a worker from
    outside (a SIGKILL, the zygote gone) look the same as a submission's doing on the
    first run; on a second run, a submission does it again. So the second run's outcome
    is the check's, except that a second `KitFault` makes the whole grading the kit's
    failure (`Sandbox.failure`): never a point the student lost.
    """

    def __init__(self, plugin: GradingPlugin) -> None:
        self.plugin = plugin
        self._again: set[str] = set()  # nodeids being run the second time

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Any:
        nodeid = pyfuncitem.nodeid
        if nodeid in self._again:
            return (yield)
        grading = self.plugin.grading
        failure: Exception | None = None
        try:
            result = yield
        except Exception as exc:  # noqa: BLE001 - judged below, then raised again
            failure = exc
        session = grading.sessions.get(nodeid)
        if session is None or not self._suspect(nodeid, failure, session):
            if failure is not None:
                raise failure
            return result
        # judged again below: never a reason for another run (a module whose import failed
        # so stays failed for the checks after it)
        grading.retried += [f for f in (failure, session.failure) if f is not None]
        for module, broken in list(grading.broken.items()):
            if broken is failure or broken is session.failure:  # an import it met: again too
                del grading.broken[module]
        session.restart()
        session.generations.clear()
        credit = grading.credits.get(nodeid)
        if credit is not None:
            credit.fraction, credit.wrong = None, ()
        self._again.add(nodeid)
        try:
            again = pyfuncitem.ihook.pytest_pyfunc_call(pyfuncitem=pyfuncitem)
        except KitFault as fault:
            grading.sandbox.failure = KitFault(self.plugin.kit_detail(fault, grading.lang))
            raise
        finally:
            self._again.discard(nodeid)
            self._note_outlived(nodeid, session)
        if isinstance(session.failure, KitFault):  # met, and caught by the grader's code
            grading.sandbox.failure = KitFault(self.plugin.kit_detail(session.failure,
                                                                      grading.lang))
        return again

    def _suspect(self, nodeid: str, failure: Exception | None, session: Session) -> bool:
        outlived = self._note_outlived(nodeid, session)
        retried = self.plugin.grading.retried
        return not outlived or any(_kit_suspect(f) and not any(f is r for r in retried)
                                   for f in (failure, session.failure))

    def _note_outlived(self, nodeid: str, session: Session) -> bool:
        grading = self.plugin.grading
        outlived = not session.generations or grading.sandbox.outlived(session.generations)
        grading.outlived[nodeid] = outlived
        return outlived


def _kit_suspect(failure: BaseException | None) -> bool:
    """Whether a failure may have come from outside the submission: the kit's own, or a
    worker killed by SIGKILL (which the kit never sends a worker that answers in time,
    and the kernel sends one the machine's memory pressure chose)."""
    if isinstance(failure, KitFault):
        return True
    return isinstance(failure, WorkerCrashed) and failure.exitcode == -platform.KILL_SIGNAL


class Shrinking:
    """Registered beside a `GradingPlugin` (a plugin of its own: the warm one has a
    `pytest_pyfunc_call` of its own, which this wraps). A property check that failed on
    a wrong answer is run again under hypothesis with shrinking, so that its message
    names the smallest failing input found (`_shrink`); how it failed, and so its
    points, stay as they were."""

    def __init__(self, plugin: GradingPlugin) -> None:
        self.plugin = plugin

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Any:
        try:
            return (yield)
        except Exception as exc:
            grading = self.plugin.grading
            session = grading.sessions.get(pyfuncitem.nodeid)
            if (session is not None and session.last_input is not None and _shows_input(exc)
                    and not isinstance(exc, WorkerTimeout)  # a hang: each try would hang too
                    and _compat.inner_test(pyfuncitem.obj) is not None):
                grading.outputs[pyfuncitem.nodeid] = session.output()
                _shrink(pyfuncitem, session, exc, grading)
            raise


def _shrink(item: pytest.Function, session: Session, failed: Exception, grading: Grading) -> None:
    """Leave in `session.last_input` the smallest input hypothesis finds failing the check
    as it failed (the same exception type), trying at most `SHRINK_CALLS` candidates:
    a count, not a time, so that `labkit grade` names the same input cold and warm
    however busy the machine (a batch does not shrink: `warm.run`). `SHRINK_SECONDS`
    and the grading's deadline still bound it: past either, and past the count, every
    candidate counts as passing, so hypothesis ends at once with the smallest found so
    far.

    The shrinking runs in a fresh worker (the failed one may be stopped, or changed), with
    each call bounded by the same time; the derandomized examples make warm and cold
    gradings find the same input.
    """
    from hypothesis import Phase, settings

    wrapped = item.obj
    inner = _compat.inner_test(wrapped)
    if inner is None:
        return
    stop = min(time.monotonic() + SHRINK_SECONDS, grading.deadline - SHRINK_MARGIN)
    smallest = [session.last_input]
    tried = [0]

    def bounded(*args: Any, **kwargs: Any) -> None:
        tried[0] += 1
        if tried[0] > SHRINK_CALLS or time.monotonic() >= stop:
            return
        try:
            inner(*args, **kwargs)
        except type(failed) as exc:
            if not isinstance(exc, WorkerTimeout):  # cut by `stop`, not failing by itself
                smallest.append(session.last_input)
            raise

    names = [n for n in inspect.signature(wrapped).parameters if n in item.funcargs]
    before = wrapped._hypothesis_internal_use_settings
    deadline = grading.sandbox.deadline
    session.restart()
    _compat.set_inner_test(wrapped, bounded)
    wrapped._hypothesis_internal_use_settings = settings(
        before, phases=[Phase.explicit, Phase.generate, Phase.shrink])
    grading.sandbox.deadline = min(deadline or stop, stop)
    try:
        wrapped(**{name: item.funcargs[name] for name in names})
    except Exception:  # noqa: BLE001 - the check's outcome is the first run's, not this one's
        pass
    finally:
        grading.sandbox.deadline = deadline
        wrapped._hypothesis_internal_use_settings = before
        _compat.set_inner_test(wrapped, inner)
        session.restart()
    session.last_input = smallest[-1]


def _shows_input(exc: BaseException) -> bool:
    """Whether a failed property check should name its input: a wrong answer, a raise
    or a hang in a call, not a stub, a grading out of time or a module that won't import."""
    if isinstance(exc, StudentRaised):
        return not exc.not_implemented and not exc.where.startswith("import ")
    if isinstance(exc, GradeTimeout):
        return False
    return isinstance(exc, AssertionError | CheckFailed | WorkerTimeout | pytest.fail.Exception)


def _exit_detail(exitcode: int | None) -> str:
    if exitcode is None:
        return "killed"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def _hands_on(status: Status, item: pytest.Item) -> bool:
    """Whether a check that ended with `status` (its worker alive and idle) may hand its
    worker on. A passing check always may. A failing one may unless it is a property
    check: `labkit grade` shrinks a failing property under hypothesis while a batch
    stops at the first failing example, so the two would leave the worker after
    different calls, and the next check must see the same worker in both."""
    if status is Status.PASS:
        return True
    return status is Status.FAIL and _compat.inner_test(getattr(item, "obj", None)) is None
