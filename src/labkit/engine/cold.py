"""Grade one submission's files: start the sandbox, run the graders.

The graders run under pytest in this (trusted) process and never import the student's
code; the student's modules are imported only by workers in the sandbox. The sandbox
is started before pytest is imported, so the two start-ups overlap. With `daemon=True`
a warm grading process (`labkit.student.daemon`) grades instead when one answers, which is why
nothing heavy (NumPy, pytest) is imported before it is known to be needed.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from labkit.course.catalogue import LabSpec, lab_checks
from labkit.engine.assemble import assemble
from labkit.errors import LabkitError
from labkit.results import LabResult

if TYPE_CHECKING:
    from labkit.engine.plugin import Progress
    from labkit.sandbox.facade import Sandbox


def grade_files(lab: LabSpec, files: dict[str, bytes], lang: str = "en", *,
                only: str | None = None, progress: Progress | None = None) -> LabResult:
    """Grade already-collected files, held in memory: only the sandbox writes them, into
    each worker's fresh folder. `only`: just that function's checks (`plugin.selected`);
    `progress(k, n)` is told as each check begins."""
    from labkit.sandbox.backend import SandboxConfig
    from labkit.sandbox.facade import Sandbox

    started = time.monotonic()
    probes = lab.grader_dir / "probes.py"
    config = SandboxConfig(
        files=files,
        modules=lab.modules,
        sys_path=lab.sys_path,
        probes=probes if probes.is_file() else None,
    )
    with Sandbox(config) as sandbox:
        outcomes = _run_graders(lab, sandbox, lang, only, progress)
    raise_kit_failure(sandbox)
    return assemble(lab, files, lang, outcomes, time.monotonic() - started, sandbox.isolation)


class KitFailure(LabkitError):
    """The kit, not the submission, failed during a grading (a sandbox that could not
    start a worker): there is no grade to give, only a retry."""

    def __init__(self, detail: str) -> None:
        super().__init__("kit_failed", detail=detail[:200])
        self.detail = detail


def raise_kit_failure(sandbox: Sandbox) -> None:
    """Checks that found no worker would otherwise be graded as the student's failures."""
    if sandbox.failure is not None:
        raise KitFailure(str(sandbox.failure))


def _run_graders(lab: LabSpec, sandbox: Sandbox, lang: str, only: str | None = None,
                 progress: Progress | None = None) -> list[tuple[str, object]]:
    import pytest  # imported here so that the sandbox's start-up overlaps it

    from labkit.engine.plugin import GradingPlugin, Retrying, Shrinking

    plugin = GradingPlugin(lab, lab_checks(lab))
    plugin.only = only
    plugin.begin(sandbox, lang, progress)
    saved = os.environ.get("PYTEST_ADDOPTS")
    os.environ.pop("PYTEST_ADDOPTS", None)  # the student's environment must not steer us
    try:
        code = pytest.main(pytest_args(lab), plugins=[plugin, Retrying(plugin),
                                                         Shrinking(plugin)])
    finally:
        if saved is not None:
            os.environ["PYTEST_ADDOPTS"] = saved
    if plugin.interrupted:  # pytest swallowed the Ctrl-C: it is the caller's to see
        raise KeyboardInterrupt
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
