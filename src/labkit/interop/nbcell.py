"""The body of an exported notebook's test cell: grade the saved notebook once, answer each check.

Exported notebooks import it as `labkit.notebook.check` (a stable name kept in
`labkit/notebook.py`). The kernel that runs a test cell has run the student's cells, so
grading happens in a fresh `labkit grade` process, never in the kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from labkit import i18n, settings
from labkit.course.catalogue import UnknownLab, get_lab
from labkit.results import LabResult

# Seconds beyond the lab's own limits (a whole grading, and its last call) that the cell
# waits for `labkit grade`: it starts Python, NumPy and pytest cold, on a kernel's machine.
START_SLACK = 60.0

# -- the test cell's side: grade the notebook once, answer each check ----------------------

_GRADED: dict[tuple[str, bytes], LabResult] = {}


class NotebookCheckFailed(AssertionError):
    """A labkit check did not pass: the test cell's error (nbgrader scores it zero)."""


def find_notebook(lab_id: str) -> Path:
    """The notebook a test cell belongs to: `LAB.ipynb` in the kernel's folder (as under
    `nbgrader autograde`/`validate` and a fetched workspace), else the one the Jupyter
    server named when it started this kernel."""
    here = Path.cwd() / f"{lab_id}.ipynb"
    if here.is_file():
        return here
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session.endswith(".ipynb") and Path(session).is_file():
        return Path(session)
    raise FileNotFoundError(f"{here.name} not found in {here.parent}: save the notebook there")


def grade_notebook(lab_id: str, path: Path, lang: str | None = None) -> LabResult:
    """Grade the saved notebook at `path` with `labkit grade`, in a fresh process.

    The kernel that calls this has run the student's cells, so the grading must not
    happen in it: a new interpreter grades a copy, in a sandbox of its own (never a
    daemon's, which other notebooks graded as the same user would share), and the
    result comes back as the JSON document. The result is kept per notebook content, so
    a notebook's test cells cost one grading together. The wait is bounded by the lab's
    limits (plus `START_SLACK`): a grading that outlives them is killed, and the cell fails
    saying so.
    """
    data = path.read_bytes()
    key = (lab_id, data)
    if key in _GRADED:
        return _GRADED[key]
    try:
        lab = get_lab(lab_id)
    except UnknownLab as exc:  # what `labkit grade` would have said, said here
        raise NotebookCheckFailed(exc.text(i18n.detect_lang(lang))) from None
    limit = lab.grade_timeout + lab.call_timeout + START_SLACK
    with tempfile.TemporaryDirectory(prefix=f"labkit-{lab_id}-nb-") as tmp:
        work = Path(tmp) / lab_id
        work.mkdir()
        (work / f"{lab_id}.ipynb").write_bytes(data)  # exactly the content of the key
        command = [sys.executable, "-P", "-c", "from labkit.cli import main; main()",
                   "grade", lab_id, "--dir", str(work), "--json"]
        if lang:
            command += ["--lang", lang]
        # No grading daemon: nbgrader runs every student's cells as the instructor, and one
        # daemon would grade them all in one sandbox; each notebook gets a sandbox of its own.
        env = {**os.environ, settings.DAEMON: "0"}
        try:
            done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, env=env,
                                  stdin=subprocess.DEVNULL, check=False, timeout=limit)
        except subprocess.TimeoutExpired:
            raise NotebookCheckFailed(i18n.t("notebook_grade_timeout", i18n.detect_lang(lang),
                                             lab=lab_id, seconds=f"{limit:g}")) from None
    if done.returncode not in (0, 1):
        raise NotebookCheckFailed(done.stderr.strip()
                                  or f"labkit grade exited with {done.returncode}")
    result = LabResult.from_dict(json.loads(done.stdout))
    _GRADED.clear()  # keep only the latest content
    _GRADED[key] = result
    return result


def check(lab_id: str, check_id: str, notebook: str | os.PathLike | None = None,
          lang: str | None = None) -> float | None:
    """The body of a notebook's test cell: did the notebook's code pass `check_id`?

    Full points: prints one line and returns None (nbgrader gives the cell's points).
    Partial credit: returns the points earned (nbgrader reads the number as the score).
    No points: raises `NotebookCheckFailed` with the check's message (nbgrader scores it zero).
    """
    path = Path(notebook) if notebook is not None else find_notebook(lab_id)
    result = grade_notebook(lab_id, path, lang)
    found = [c for c in result.checks if c.id == check_id]
    if not found:
        reason = result.message or f"{lab_id} has no check {check_id!r}"
        raise NotebookCheckFailed(reason)
    got = found[0]
    if got.status.value == "pass":
        print(f"{check_id}: pass ({got.points:g}/{got.max_points:g})")
        return None
    if got.points > 0:
        print(f"{check_id}: {got.status.value} -- {got.message}")
        return got.points
    note = f" ({result.message})" if result.message else ""
    raise NotebookCheckFailed(f"{check_id}: {got.status.value} -- {got.message}{note}")
