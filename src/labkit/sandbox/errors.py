"""How a worker or the sandbox can fail, as the engine tells its outcomes apart.

These are the back end's words to the engine, the same whichever back end ran the code:
a timeout, a crash, or a fault of the kit (which no student loses points for).
"""

from __future__ import annotations

from typing import Any

from labkit.errors import EnglishError


class WorkerFailure(Exception):
    """The worker could not answer: base of the timeout and crash outcomes."""

    where: str = ""  # what the grader asked for when it failed (set by the engine's proxy)


class WorkerTimeout(WorkerFailure):
    """The worker did not answer within the call's time limit (`limit`, s) and was killed."""

    def __init__(self, message: str, limit: float = 0.0) -> None:
        super().__init__(message)
        self.limit = limit


class GradingTimeout(WorkerTimeout):
    """The whole grading ran past its limit (`Sandbox.deadline`)."""


class WorkerCrashed(WorkerFailure):
    """The worker exited, was killed by a signal, or sent something unreadable."""

    def __init__(self, exitcode: int | None, detail: str = "") -> None:
        super().__init__(detail or f"exit code {exitcode}")
        self.exitcode = exitcode
        self.detail = detail


class KitFault(WorkerFailure):
    """The kit, not the student's code, could not grade a check: a worker or zygote ended
    from outside the student's code, a worker the machine starved, or a measurement the
    machine was too busy to make. A check that meets one is run again on a fresh worker
    (`labkit.engine.plugin.Retrying`); one that meets it twice makes the grading the
    kit's failure, never a point the student lost. Not a `WorkerCrashed`.

    `detail` says what happened (English, for logs); a grader may instead name one of
    its lab's bilingual messages, `key` with `params` (see `labkit.engine.api.kit_fault`).
    """

    def __init__(self, detail: str = "", key: str = "", **params: Any) -> None:
        super().__init__(detail or key)
        self.detail, self.key, self.params = detail, key, params


class WorkerStarved(KitFault):
    """The worker missed its deadline because the machine gave it too little CPU: it
    waited to run for most of the time limit and ran for little of it (see the back
    end's worker handle)."""


class SandboxFailure(KitFault):
    """The sandbox could not start a worker, even in a fresh zygote: the kit failed,
    not the submission (see `Sandbox.failure`)."""


class IsolationError(EnglishError, RuntimeError):
    """The requested isolation is not available (or not a known mode)."""
