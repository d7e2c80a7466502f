"""A student's workspace: fetching a lab into it, reading it back, remembering grades.

The workspace is the student's: nothing here overwrites it without `force`, and then
only after moving the old folder to a timestamped backup. What the kit remembers (the
last grade, for `labkit hint` and `labkit list`) lives in `.labkit/state.json`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.fsutil import write_atomic
from labkit.registry import LabSpec
from labkit.results import LabResult

MAX_FILE_BYTES = 1024 * 1024
STATE_FILE = Path(".labkit") / "state.json"
STATE_SCHEMA = "labkit.state/1"


class WorkspaceError(Exception):
    """A problem with the student's files; `key` and `params` name a kit message."""

    def __init__(self, key: str, **params: Any) -> None:
        super().__init__(key, params)
        self.key = key
        self.params = params


@dataclass(frozen=True)
class Fetched:
    path: Path
    backup: Path | None


def fetch(lab: LabSpec, dest: Path, lang: str, force: bool = False) -> Fetched:
    """Put the lab's stubs and its README (in `lang`) into `dest`.

    The new workspace is assembled beside `dest` and renamed into place, so a failed
    fetch leaves nothing half-made behind.
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())) and not force:
        raise WorkspaceError("workspace_exists", path=str(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        for rel in lab.files:
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(lab.exercise_dir / rel, target)
        shutil.copyfile(lab.readme(lang), staging / "README.md")
        write_state(staging, {"lab": lab.id, "last": None})
        backup = None
        if dest.exists():
            if any(dest.iterdir()) or not dest.is_dir():
                backup = dest.with_name(f"{dest.name}.backup-{time.strftime('%Y%m%d-%H%M%S')}")
                dest.rename(backup)
            else:
                dest.rmdir()
        staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Fetched(dest, backup)


def collect(lab: LabSpec, path: Path) -> dict[str, bytes]:
    """The lab's files from a workspace, refusing anything that is not a plain file."""
    if not path.is_dir():
        raise WorkspaceError("no_workspace", lab=lab.id, path=str(path))
    files = {}
    for rel in lab.files:
        target = path / rel
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            raise WorkspaceError(
                "missing_file", lab=lab.id, path=rel, files=", ".join(lab.files)
            ) from None
        if not stat.S_ISREG(info.st_mode):
            kind = "symlink" if stat.S_ISLNK(info.st_mode) else "not a file"
            raise WorkspaceError("bad_file", path=rel, reason=kind)
        if info.st_size > MAX_FILE_BYTES:
            raise WorkspaceError("file_too_large", path=rel, limit=MAX_FILE_BYTES)
        files[rel] = target.read_bytes()
    return files


def digest(files: dict[str, bytes]) -> str:
    """A content hash of the graded files (names included), stable across machines."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + len(files[rel]).to_bytes(8, "big") + files[rel])
    return "sha256:" + h.hexdigest()


def materialize(files: dict[str, bytes], dest: Path) -> None:
    """Write the collected files into a fresh directory (the graded copy)."""
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def read_state(path: Path) -> dict[str, Any] | None:
    """What the kit remembers of a workspace, or None if it holds no readable state."""
    try:
        state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("schema") == STATE_SCHEMA else None


def write_state(path: Path, state: dict[str, Any]) -> None:
    write_atomic(path / STATE_FILE, json.dumps({"schema": STATE_SCHEMA, **state}, indent=2))


def record_grade(path: Path, result: LabResult) -> None:
    """Remember the last grade (for `hint` and `list`), replacing the file atomically."""
    write_state(path, {"lab": result.lab, "last": result.to_dict()})


def last_grade(path: Path) -> LabResult | None:
    state = read_state(path)
    if not state or not state.get("last"):
        return None
    try:
        return LabResult.from_dict(state["last"])
    except (KeyError, ValueError, TypeError):
        return None
