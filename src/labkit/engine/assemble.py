"""A grading's outcomes turned into the result document: points, requirements, digest.

Shared by the cold run (`engine.cold`) and the warm one (`engine.warm`), so both give
the same document for the same outcomes.
"""

from __future__ import annotations

from dataclasses import replace

from labkit import __version__, i18n
from labkit.course.catalogue import lab_checks
from labkit.engine import static
from labkit.fileset import digest
from labkit.results import CheckResult, LabResult, Status, total


def assemble(lab, files, lang, outcomes, duration, isolation: str | None = None) -> LabResult:
    """The result document; `isolation` is the mode the sandbox used (`Sandbox.isolation`)."""
    specs = lab_checks(lab)
    checks: list[CheckResult] = []
    for check_id, outcome in outcomes:
        spec = specs.get(check_id)
        refused = False
        if outcome is None:  # pytest never reported it: treat as a grader error
            status, message, fraction, output = Status.ERROR, "", 0.0, ""
        else:
            status, message, output = outcome.status, outcome.message, outcome.output
            refused = outcome.refused and status is not Status.PASS
            fraction = outcome.fraction if outcome.fraction is not None else (
                1.0 if status is Status.PASS else 0.0
            )
        checks.append(
            CheckResult(
                id=check_id,
                title=i18n.pick(spec.title, lang),
                status=status,
                points=round(spec.points * fraction, 4),
                max_points=spec.points,
                message=message,
                output=output,
                refused=refused,
            )
        )
    checks = _apply_requirements(specs, checks, lang)
    problem = _import_problem(files, [o for _, o in outcomes if o is not None], lang)
    score, max_score = total(tuple(checks))
    status = Status.PASS if all(c.status is Status.PASS for c in checks) else Status.FAIL
    return LabResult(
        lab=lab.id,
        status=status,
        score=score,
        max_score=max_score,
        duration_s=duration,
        labkit_version=__version__,
        digest=digest(files),
        lang=lang,
        isolation=isolation or _default_isolation(),
        checks=tuple(checks),
        message=problem,
    )


def _import_problem(files, outcomes, lang: str) -> str:
    """Once for the whole table: the first lab file whose import failed, where and why
    (a syntax error located by this side's own parse, else what the import raised)."""
    failed = [o.import_error for o in outcomes if o.import_error is not None]
    if not failed:
        return ""
    file = failed[0][0]
    detail = next((d for f, d in failed if f == file and d), "")
    located = static.syntax_error(files.get(file, b""))
    if located is not None:
        detail = located
    return i18n.t("import_problem", lang, file=file, detail=detail or "?")


def _apply_requirements(specs, checks: list[CheckResult], lang: str) -> list[CheckResult]:
    """Zero the checks whose `requires` prefixes are not all passing, transitively: a
    check zeroed for its own requirement no longer counts as passing for another's."""
    passing = {c.id for c in checks if c.status is Status.PASS}
    unmet_of: dict[str, list[str]] = {}
    changed = True
    while changed:
        changed = False
        for check in checks:
            needed = specs.get(check.id).requires
            unmet = [c.id for c in checks
                     if any(c.id.startswith(p) for p in needed) and c.id not in passing]
            if unmet and check.points and check.id not in unmet_of:
                unmet_of[check.id] = unmet
                passing.discard(check.id)
                changed = True
    result = []
    for check in checks:
        if check.id in unmet_of:
            names = ", ".join(sorted({u.split(".")[0] for u in unmet_of[check.id]}))
            check = replace(
                check, status=Status.FAIL, points=0.0,
                message=i18n.t("requires", lang, checks=names), refused=False,
            )
        result.append(check)
    return result


def _default_isolation() -> str:
    """The mode a sandbox started now would use, for callers that do not say."""
    from labkit.sandbox.errors import IsolationError
    from labkit.sandbox.facade import isolation_level

    try:
        return isolation_level()
    except IsolationError:
        return "unavailable"
