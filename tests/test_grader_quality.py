"""The course material checks itself: solutions earn full marks, stubs earn zero, and
every known-buggy variant loses exactly the points of the checks it breaks, on this
machine's back end and again on the portable one (`back_end`), which students' macOS
and Windows laptops get (issue 28)."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: f"{m.lab}-{m.name}")
def test_mutant_loses_exactly_the_checks_it_breaks(mutant: Variant, back_end):
    result = on(grade_variant(mutant), back_end)
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
