"""The course material checks itself: solutions earn full marks, stubs earn zero, and
every known-buggy variant loses exactly the points of the checks it breaks, on this
machine's back end and again on the portable one (`back_end`), which students' macOS
and Windows laptops get (issue 28).

On the portable back end, the mutants graded are one for each check that a mutant
breaks (`portable_mutants`): each check's failure is then seen through that back end's
evidence, at a fraction of the cost of a fresh interpreter per check for every mutant.
`LABKIT_TEST_PORTABLE=all` grades every mutant there (the portable workflow does, on
macOS and Windows, where it is the only back end).
"""

from __future__ import annotations

import json
import os

import jsonschema
import pytest
from kit import (
    Variant,
    grade_cached,
    grade_variant,
    lost_checks,
    solution_files,
    stub_files,
    variants,
)

from labkit.course.catalogue import catalogue, lab_checks
from labkit.engine.cold import grade_files
from labkit.results import SCHEMA_FILE, LabResult, Status

LABS = [lab for lab in catalogue() if lab.grader_dir.is_dir()]
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))


def validate(result: LabResult) -> None:
    VALIDATOR.validate(result.to_dict())


@pytest.fixture(params=["default", "portable"])
def back_end(request, monkeypatch) -> str:
    """The isolation the test grades in: this machine's (`auto` or $LABKIT_ISOLATION) or
    the portable back end."""
    if request.param == "portable":
        monkeypatch.setenv("LABKIT_ISOLATION", "portable")
    return request.param


def on(result: LabResult, back_end: str) -> LabResult:
    """`result`, checked to come from the back end asked for."""
    assert (result.isolation == "portable") == (back_end == "portable"), result.isolation
    return result


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_solution_earns_full_marks(lab, back_end):
    """Cold (`labkit grade` without a daemon) and warm (a batch's grading process)."""
    for result in (grade_files(lab, solution_files(lab)), grade_cached(lab, solution_files(lab))):
        on(result, back_end)
        validate(result)
        assert lost_checks(result) == []
        assert result.score == result.max_score == lab_checks(lab).max_score > 0
        assert [c.id for c in result.checks] == [c.id for c in lab_checks(lab).checks]


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_untouched_stub_earns_zero_and_every_check_fails(lab, back_end):
    result = on(grade_files(lab, stub_files(lab), lang="es"), back_end)
    validate(result)
    assert result.score == 0
    assert {c.status for c in result.checks} == {Status.FAIL}
    assert all(c.message for c in result.checks)


MUTANTS = variants("mutants")


def portable_mutants(mutants: list[Variant]) -> list[Variant]:
    """The first mutant to break each check (in the files' order): every check a mutant
    breaks is broken by one of these."""
    chosen, covered = [], set()
    for mutant in mutants:
        broken = {(mutant.lab, check) for check in mutant.breaks}
        if not broken <= covered:
            chosen.append(mutant)
            covered |= broken
    return chosen


ON_PORTABLE = (MUTANTS if os.environ.get("LABKIT_TEST_PORTABLE") == "all"
               else portable_mutants(MUTANTS))
MUTANT_CASES = [pytest.param(mutant, back_end, id=f"{back_end}-{mutant.lab}-{mutant.name}")
                for back_end in ("default", "portable")
                for mutant in (MUTANTS if back_end == "default" else ON_PORTABLE)]


@pytest.mark.parametrize(("mutant", "isolation"), MUTANT_CASES)
def test_mutant_loses_exactly_the_checks_it_breaks(mutant: Variant, isolation: str,
                                                   monkeypatch):
    if isolation == "portable":
        monkeypatch.setenv("LABKIT_ISOLATION", "portable")
    result = on(grade_variant(mutant), isolation)
    validate(result)
    known = {c.id for c in result.checks}
    assert set(mutant.breaks) <= known, "mutant names a check that does not exist"
    lost = {c.id for c in result.checks if c.points < c.max_points}
    assert lost == set(mutant.breaks), lost_checks(result)
    expected = Status(mutant.entry.get("status", "fail"))  # an honest bug fails, not errors
    for c in result.checks:
        if c.id in mutant.breaks:
            assert (c.id, c.status) == (c.id, expected) and c.message


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_each_lab_has_at_least_ten_mutants(lab):
    assert sum(m.lab == lab.id for m in MUTANTS) >= 10


def test_numpy_integers_count_as_ints_in_lab02():
    """lab02's README lets numbers come back as NumPy scalars: strides of np.int64 are
    fine."""
    from labkit.course.catalogue import get_lab

    lab = get_lab("lab02")
    source = solution_files(lab)["broadcasting.py"].decode()
    source = source.replace("return tuple(reversed(strides))",
                            "return tuple(np.int64(s) for s in reversed(strides))")
    result = grade_files(lab, {"broadcasting.py": source.encode()})
    assert result.score == result.max_score


ALTERNATIVES = variants("alternatives")


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=lambda v: f"{v.lab}-{v.name}")
def test_natural_alternative_earns_full_marks(alternative: Variant, back_end):
    """Correct code written another way its README allows: full marks, warm and cold
    (warm only on the portable back end: cold, it grades as the solution does)."""
    lab = next(lab for lab in LABS if lab.id == alternative.lab)
    graded = [grade_variant(alternative)]
    if back_end == "default":
        graded.append(grade_files(lab, alternative.files()))
    for result in graded:
        on(result, back_end)
        assert lost_checks(result) == []
        assert result.score == result.max_score
