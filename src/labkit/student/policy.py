"""How `labkit grade` grades a workspace: through a warm daemon when one answers, else here.

The choice lives apart from the engine so that the engine never depends on the daemon
(the daemon itself runs the engine's warm path).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.course.catalogue import LabSpec
from labkit.engine.cold import grade_files
from labkit.results import LabResult
from labkit.student import daemon, workspace

if TYPE_CHECKING:  # the plugin imports pytest: a warm grade never needs it here
    from labkit.engine.plugin import Progress


def grade(lab: LabSpec, path: Path, lang: str = "en", *, use_daemon: bool = False,
          only: str | None = None, progress: Progress | None = None) -> LabResult:
    """Grade the workspace at `path`; raises `WorkspaceError` for unusable files.

    `use_daemon`: let a warm daemon grade if one answers, else grade here and start one
    for next time (both only where `labkit.student.daemon.enabled()` says daemons are wanted).
    `only`: just that function's checks; `progress(k, n)` as each check begins.
    """
    submission = workspace.collect_submission(lab, path, lang)
    use_daemon = use_daemon and daemon.enabled()
    result = daemon.grade(lab, submission.files, lang, only, progress) if use_daemon else None
    if result is None:
        result = grade_files(lab, submission.files, lang, only=only, progress=progress)
        if use_daemon:
            daemon.start(lab)
    if submission.note:  # e.g. the IPython lines left out of a notebook
        result = replace(result, message=" ".join(filter(None, (result.message, submission.note))))
    return result
