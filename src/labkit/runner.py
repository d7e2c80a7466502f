"""Grade one workspace: copy its files aside, start the sandbox, run the graders.

The graders run under pytest in this (trusted) process and never import the student's
code; the student's modules are imported only by workers in the sandbox. The sandbox
is started before pytest is imported, so the two start-ups overlap. With `daemon=True`
a warm grading process (`labkit.daemon`) grades instead when one answers, which is why
nothing heavy (NumPy, pytest) is imported before it is known to be needed.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from labkit import __version__, daemon, i18n, workspace
from labkit.registry import LabSpec, lab_checks
from labkit.results import CheckResult, LabResult, Status, total

if TYPE_CHECKING:
    from labkit.sandbox import Sandbox


def grade(lab: LabSpec, path: Path, lang: str = "en", *, use_daemon: bool = False) -> LabResult:
    """Grade the workspace at `path`; raises `WorkspaceError` for unusable files.

    `use_daemon`: let a warm daemon grade if one answers, else grade here and start one
    for next time (both only where `labkit.daemon.enabled()` says daemons are wanted).
    """
    submission = workspace.collect_submission(lab, path, lang)
    use_daemon = use_daemon and daemon.enabled()
    result = daemon.grade(lab, submission.files, lang) if use_daemon else None
    if result is None:
        result = grade_files(lab, submission.files, lang)
        if use_daemon:
            daemon.start(lab)
    if submission.note:  # e.g. the IPython lines left out of a notebook
        result = replace(result, message=" ".join(filter(None, (result.message, submission.note))))
    return result


def grade_files(lab: LabSpec, files: dict[str, bytes], lang: str = "en") -> LabResult:
    """Grade already-collected files (the batch grader calls this directly)."""
    from labkit.sandbox import Sandbox, SandboxConfig

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"labkit-{lab.id}-") as tmp:
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        workspace.materialize(files, workdir)
        probes = lab.grader_dir / "probes.py"
        config = SandboxConfig(
            workdir=workdir,
            modules=lab.modules,
            sys_path=lab.sys_path,
            probes=probes if probes.is_file() else None,
        )
        with Sandbox(config) as sandbox:
            outcomes = _run_graders(lab, sandbox, lang)
    return _assemble(lab, files, lang, outcomes, time.monotonic() - started, sandbox.isolation)


def _run_graders(lab: LabSpec, sandbox: Sandbox, lang: str) -> list[tuple[str, object]]:
    import pytest  # imported here so that the sandbox's start-up overlaps it

    from labkit.plugin import GradingPlugin

    plugin = GradingPlugin(lab, lab_checks(lab), sandbox, lang)
    saved = os.environ.get("PYTEST_ADDOPTS")
    os.environ.pop("PYTEST_ADDOPTS", None)  # the student's environment must not steer us
    try:
        code = pytest.main(pytest_args(lab), plugins=[plugin])
    finally:
        if saved is not None:
            os.environ["PYTEST_ADDOPTS"] = saved
    ensure_collected(lab, code, bool(plugin.order))
    return [(check_id, plugin.outcomes.get(nodeid)) for nodeid, check_id in plugin.order]


def ensure_collected(lab: LabSpec, code: int, collected: bool) -> None:
    """Graders that pytest could not collect are the kit's fault, never a grade: without
    this, a broken grader file would give every submission 0 out of 0, passing."""
    import pytest

    if not collected or code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(f"{lab.id}: the graders could not be collected (pytest exit {code})")


def pytest_args(lab: LabSpec) -> list[str]:
    """The command line of a grading run: only the lab's graders and our plugin take part."""
    return [
        str(lab.grader_dir),
        "-c", str(lab.grader_dir.parent / "pytest.ini"),
        "--rootdir", str(lab.grader_dir),
        "--confcutdir", str(lab.grader_dir),
        "--disable-plugin-autoload",
        "--assert=plain",
        "-p", "no:cacheprovider",
        "-p", "no:terminal",
        "-p", "no:warnings",
        "-p", "no:logging",
        "-p", "no:doctest",
        "-p", "no:junitxml",
        "-p", "no:pastebin",
        "-p", "no:unraisableexception",  # its session-end gc.collect() calls cost ~0.2 s
        "-p", "no:threadexception",
        "-s",
    ]


def _assemble(lab, files, lang, outcomes, duration, isolation: str | None = None) -> LabResult:
    """The result document; `isolation` is the mode the sandbox used (`Sandbox.isolation`)."""
    specs = lab_checks(lab)
    checks: list[CheckResult] = []
    for check_id, outcome in outcomes:
        spec = specs.get(check_id)
        if outcome is None:  # pytest never reported it: treat as a grader error
            status, message, fraction, output = Status.ERROR, "", 0.0, ""
        else:
            status, message, output = outcome.status, outcome.message, outcome.output
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
            )
        )
    checks = _apply_requirements(specs, checks, lang)
    score, max_score = total(tuple(checks))
    status = Status.PASS if all(c.status is Status.PASS for c in checks) else Status.FAIL
    return LabResult(
        lab=lab.id,
        status=status,
        score=score,
        max_score=max_score,
        duration_s=duration,
        labkit_version=__version__,
        digest=workspace.digest(files),
        lang=lang,
        isolation=isolation or _default_isolation(),
        checks=tuple(checks),
    )


def _apply_requirements(specs, checks: list[CheckResult], lang: str) -> list[CheckResult]:
    """Zero the checks whose `requires` prefixes are not all passing."""
    passing = {c.id for c in checks if c.status is Status.PASS}
    result = []
    for check in checks:
        needed = specs.get(check.id).requires
        unmet = [
            c.id for c in checks if any(c.id.startswith(p) for p in needed) and c.id not in passing
        ]
        if unmet and check.points:
            names = ", ".join(sorted({u.split(".")[0] for u in unmet}))
            check = replace(
                check, status=Status.FAIL, points=0.0,
                message=i18n.t("requires", lang, checks=names),
            )
        result.append(check)
    return result


def _default_isolation() -> str:
    """The mode a sandbox started now would use, for callers that do not say."""
    from labkit.isolation import IsolationError, choose

    try:
        return choose().mode
    except IsolationError:
        return "unavailable"
