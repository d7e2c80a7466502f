"""`labkit gradescope run LAB`: what the autograder's `run_autograder` does per submission.

Gradescope runs it as root in a container. The submission (`/autograder/submission`,
the lab's files there or a folder down, or one zip) is read with the batch's safety
rules and graded in a sandbox: bwrap where the container allows user namespaces, else
process mode, whose zygote then drops to uid 65534 (as it does whenever root grades,
see `labkit.sandbox.unprivileged`), so the student's code can write neither the results
folder nor the kit; the portable level is refused. `results.json` is
written last, once this process (a child subreaper: every process the grading started
is its descendant) has no child left; it records the isolation used and the uid the
student's code ran as. A submission that cannot be graded still gets a `results.json`
(score 0, the reason in its output).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from labkit import platform, settings
from labkit.classroom import submissions
from labkit.classroom.batch import NO_ISOLATION, error_result
from labkit.course.catalogue import LabSpec
from labkit.engine.cold import grade_files
from labkit.errors import EnglishError, LabkitError
from labkit.fsutil import write_atomic
from labkit.interop import gradescope
from labkit.results import LabResult
from labkit.sandbox import levels
from labkit.sandbox.facade import isolation_level
from labkit.sandbox.linux import procfs
from labkit.sandbox.linux.isolation import SANDBOX_UID

DEFAULT_ROOT = Path("/autograder")
_REAP_SECONDS = 10.0


class StrayProcesses(EnglishError):
    """Something the grading started outlived it: no results.json is written."""


def root() -> Path:
    """The autograder's tree: `/autograder`, or `$LABKIT_AUTOGRADER_ROOT` (tests)."""
    return Path(settings.get(settings.AUTOGRADER_ROOT) or DEFAULT_ROOT)


def run(lab: LabSpec, where: Path, lang: str = "en") -> Path:
    """Grade `where/submission` into `where/results/results.json`; that file's path."""
    results = where / "results"
    results.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # nobody but root writes here, whatever Gradescope made it
        os.chown(results, 0, 0)
        os.chmod(results, 0o755)
    levels.require(isolation_level(), "process", None, "the Gradescope autograder")
    platform.become_subreaper()
    result = _grade(lab, where, lang)
    reap_descendants()
    document = gradescope.document(result)
    ran = result.isolation != NO_ISOLATION
    document["extra_data"] = {
        "labkit_version": result.labkit_version,
        "isolation": result.isolation,
        # as seen from outside the sandbox: 65534 whenever we are root (both modes)
        "student_uid": (SANDBOX_UID if os.geteuid() == 0 else os.geteuid()) if ran else None,
    }
    path = results / "results.json"
    write_atomic(path, json.dumps(document, ensure_ascii=False, indent=2))
    return path


def _grade(lab: LabSpec, where: Path, lang: str) -> LabResult:
    entry = submissions.Entry(student="submission", root=where, name="submission",
                              kind="folder")
    try:
        collected = submissions.read(lab, entry, lang)
        return grade_files(lab, collected.files, lang)
    except LabkitError as exc:  # unreadable submission, or the kit failed: say which
        return error_result(lab, exc.text(lang), lang)


def reap_descendants(seconds: float = _REAP_SECONDS) -> None:
    """Kill and reap every child until there is none (as a subreaper, the orphans of
    our descendants become our children); `StrayProcesses` if some outlive `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        if time.monotonic() > deadline:
            raise StrayProcesses("processes started by the grading would not die")
        for child in procfs.children(os.getpid()):
            try:
                platform.kill(child)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
