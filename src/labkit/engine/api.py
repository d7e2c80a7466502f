"""What grader files import: the check decorator, property settings and value helpers.

Graders are ordinary pytest files. Each test carries `@check("name.aspect")`, whose
points and bilingual texts live in the lab's `checks.toml`; the `student` fixture
proxies calls to the worker (see `proxy`). Helpers here turn student values into
trusted Python values or fail the check with a message that reveals no expected value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

from labkit import i18n
from labkit.engine._compat import draw_without_local_constants
from labkit.engine.proxy import Callback, CallRecord, Measurement, Observation, StudentRaised
from labkit.engine.static import Refusal, declarations_only, mentions, refusals
from labkit.sandbox.codec import Opaque
from labkit.sandbox.errors import KitFault

__all__ = [
    "PROPERTY",
    "CallRecord",
    "Callback",
    "CheckFailed",
    "KitFault",
    "Measurement",
    "Observation",
    "Refusal",
    "StudentRaised",
    "as_array",
    "as_float",
    "as_int",
    "callback",
    "check",
    "declarations_only",
    "fail",
    "kit_fault",
    "mentions",
    "refusals",
    "refuse",
]

F = TypeVar("F", bound=Callable[..., Any])

# Property-based checks: the same workspace always gets the same grade (derandomize),
# nothing is stored between runs, and failures are not shrunk (the counterexample is
# never shown to the student, so shrinking would only spend time).
PROPERTY = settings(
    database=None,
    derandomize=True,
    deadline=None,
    max_examples=25,
    phases=[Phase.explicit, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


draw_without_local_constants()


class CheckFailed(AssertionError):
    """A failure with a specific message from the lab's `checks.toml` `[messages]`."""

    def __init__(self, key: str, **params: Any) -> None:
        super().__init__(key)
        self.key = key
        self.params = params


def check(check_id: str, *, fresh: bool = False) -> Callable[[F], F]:
    """Mark a grader test as the check `check_id` of the lab's `checks.toml`.

    `fresh`: in a lab that shares workers, this check neither takes a worker handed on
    nor hands its own on (it changes, or judges, interpreter-wide state).
    """
    return pytest.mark.labkit_check(check_id, fresh=fresh)


def callback(fn: Callable[..., Any], name: str | None = None) -> Callback:
    """`fn` (this process's callable) as an argument the student's code can call: each
    call runs `fn` here and is recorded as `name` in `student.last_call.callbacks`."""
    return Callback(fn, name)


def fail(key: str, **params: Any) -> None:
    """Fail the current check with the message `key` from `checks.toml`."""
    raise CheckFailed(key, **params)


def kit_fault(key: str, **params: Any) -> None:
    """End the current check as the kit's failure, not the student's (an `error` whose
    text says so): what it had to measure, the machine would not let it (a busy machine
    that stayed too busy through every repeat). `key` names the lab's `checks.toml`
    message that says what, with `params`."""
    raise KitFault(key=key, **params)


def refuse(found: Sequence[Refusal]) -> None:
    """Fail the current check if the source analysis refused anything: with the first
    refusal, as the message `refused_<kind>` of the lab's `checks.toml` (parameters
    `file`, `line`, `what`, and `instead`: the kit's advice on what to write in its
    place, told in the grading's language), so the student reads why the check paid
    nothing and what to change. The result marks the check as refused (`labkit hint`
    then explains the refusal, not the algorithm)."""
    if found:
        first = found[0]
        fail(f"refused_{first.kind}", file=first.file, line=first.line, what=first.what,
             instead=i18n.Phrase(first.instead))


def _type_name(value: Any) -> str:
    return value.type_name if isinstance(value, Opaque) else type(value).__name__


def as_float(value: Any, key: str = "not_a_number") -> float:
    """A student's number as a trusted float: Python and NumPy real scalars only."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        fail(key, type=_type_name(value))
    return float(value)


def as_int(value: Any, key: str = "not_an_int") -> int:
    """A student's integer as a trusted int (bool is not an integer here)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        fail(key, type=_type_name(value))
    return int(value)


def as_array(value: Any, key: str = "not_an_array") -> np.ndarray:
    """A student's array: it must have arrived as an `np.ndarray`."""
    if not isinstance(value, np.ndarray):
        fail(key, type=_type_name(value))
    return value
