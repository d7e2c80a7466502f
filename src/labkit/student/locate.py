"""Which workspace a command means: the folder the student is in, one above it, or `--dir`.

A student runs `labkit grade` from wherever their terminal is: inside the workspace (or
a folder of it), in the folder that holds it, or names it with `--dir`. The lab's files
may also sit a level or two down (an unzipped hand-in, `lab02/lab02/`), which is how
`labkit batch` finds them in a submission: both use `lab_roots`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from labkit.course import catalogue
from labkit.course.catalogue import LabSpec
from labkit.student import workspace
from labkit.student.workspace import WorkspaceError

SEARCH_DEPTH = 2  # how deep below a folder the lab's files may sit (e.g. alice/lab02/)
IGNORED = ("__MACOSX", "__pycache__")


def walk(root: Path, depth: int) -> Iterator[Path]:
    """Every path under `root` down to `depth` levels, never following symlinks."""
    try:
        with os.scandir(root) as found:
            items = list(found)
    except OSError:
        return
    for item in items:
        if item.name in IGNORED:
            continue
        yield Path(item.path)
        if depth > 1 and item.is_dir(follow_symlinks=False):
            yield from walk(Path(item.path), depth - 1)


def markers(lab: LabSpec) -> tuple[str, ...]:
    """Names whose presence says 'the lab's workspace is here'."""
    return (lab.files[0], f"{lab.id}.ipynb")


def holds_lab(lab: LabSpec, folder: Path) -> bool:
    """Whether `folder` itself holds one of the lab's files (or its notebook)."""
    return any(os.path.lexists(folder / m) for m in (*lab.files, *markers(lab)))


def lab_roots(lab: LabSpec, folder: Path, depth: int = SEARCH_DEPTH) -> list[str]:
    """The shallowest folders at or below `folder` holding the lab's files, as relative
    prefixes (`""` for `folder` itself, else `"sub/"`); several means it is ambiguous."""
    if holds_lab(lab, folder):
        return [""]
    candidates = set()
    for path in walk(folder, depth + 1):
        rel = path.relative_to(folder).as_posix()
        for marker in markers(lab):
            if rel.endswith("/" + marker):
                candidates.add(rel[: -len(marker)])
    if not candidates:
        return []
    shallowest = min(p.count("/") for p in candidates)
    return sorted(p for p in candidates if p.count("/") == shallowest)


@dataclass(frozen=True)
class Located:
    lab: LabSpec
    path: Path


def enclosing(start: Path) -> tuple[str, Path] | None:
    """The workspace `start` is in (itself or a folder above it): (lab id, its folder)."""
    start = start.absolute()
    for folder in (start, *start.parents):
        state = workspace.read_state(folder)
        if state is not None and isinstance(state.get("lab"), str):
            return state["lab"], folder
    return None


def locate(lab_id: str | None, start: Path, explicit: bool = False) -> Located:
    """The workspace a command at `start` (the current folder, or `--dir` if `explicit`)
    means for `lab_id` (None: the one `start` is in, or the only one below it).

    In order: the workspace `start` is in; `start` itself if it holds the lab's files;
    `./LAB`; a workspace one folder down (`fetch --dir`); the lab's files a level or
    two down. Without any, `start/LAB` (or `start` with `--dir`), whose reading then
    says what is missing.
    """
    inside = enclosing(start)
    if lab_id is None:
        if inside is not None:
            return Located(catalogue.get_lab(inside[0]), inside[1])
        known = {lab.id for lab in catalogue.catalogue()}
        below = sorted(set(workspace.find_workspaces(start)) & known)
        if len(below) != 1:
            raise WorkspaceError("which_lab", path=str(start),
                                 labs=", ".join(below) or "-")
        lab_id = below[0]
    lab = catalogue.get_lab(lab_id)
    if inside is not None and inside[0] == lab.id:
        return Located(lab, inside[1])
    if holds_lab(lab, start):
        return Located(lab, start)
    named = start / lab.id
    if named.is_dir() and (workspace.read_state(named) is not None or holds_lab(lab, named)):
        return Located(lab, named)
    fetched = workspace.find_workspaces(start).get(lab.id)
    if fetched is not None:
        return Located(lab, fetched)
    roots = lab_roots(lab, start)
    if len(roots) > 1:
        raise WorkspaceError("ambiguous_workspace", lab=lab.id, path=str(start),
                             folders=", ".join(p.rstrip("/") for p in roots[:4]))
    if roots:
        return Located(lab, start / roots[0])
    return Located(lab, start if explicit else named)
