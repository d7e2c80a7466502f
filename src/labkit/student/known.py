"""The workspaces this user fetched or graded, wherever they are, so `labkit list` is the
same from any folder.

One small JSON file in the user's state folder (`LABKIT_STATE_DIR`, else
`$XDG_STATE_HOME/labkit`, else `~/.local/state/labkit`) maps each lab to the workspaces
last used for it, most recent first. It is only a memory: each path is checked again
when read (still a folder holding that lab's state), a lost or unreadable file forgets
nothing that matters, and a failure to write it never fails the command that wrote it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from labkit import settings
from labkit.fsutil import write_atomic
from labkit.student import workspace

FILE_NAME = "workspaces.json"
SCHEMA = 1
KEPT = 5  # workspaces remembered per lab
MAX_BYTES = 256 * 1024  # a memory bigger than this is not ours: start again


def state_dir(environ: dict[str, str] | None = None) -> Path:
    """Where the kit keeps what it remembers of this user's workspaces."""
    env = os.environ if environ is None else environ
    chosen = settings.get(settings.STATE_DIR, env)
    if chosen:
        return Path(chosen)
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]) / "labkit"
    try:
        return Path.home() / ".local" / "state" / "labkit"
    except RuntimeError:  # no home folder to be found: remember nothing, fail nothing
        return Path(tempfile.gettempdir()) / "labkit-state"


def _read() -> dict[str, list[str]]:
    path = state_dir() / FILE_NAME
    try:
        if path.stat().st_size > MAX_BYTES:
            return {}
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        return {}
    labs = document.get("labs")
    if not isinstance(labs, dict):
        return {}
    return {lab: [p for p in paths if isinstance(p, str)][:KEPT]
            for lab, paths in labs.items() if isinstance(lab, str) and isinstance(paths, list)}


def remember(lab_id: str, path: Path) -> None:
    """Note `path` as the workspace of `lab_id` used last (never raises)."""
    labs = _read()
    where = str(path.resolve())
    labs[lab_id] = [where, *(p for p in labs.get(lab_id, []) if p != where)][:KEPT]
    with contextlib.suppress(OSError):
        write_atomic(state_dir() / FILE_NAME,
                     json.dumps({"schema": SCHEMA, "labs": labs}, indent=1))


def workspaces() -> dict[str, Path]:
    """Each lab's most recently used workspace that is still there, by lab id."""
    found = {}
    for lab_id, paths in _read().items():
        for text in paths:
            path = Path(text)
            state = workspace.read_state(path)
            if state is not None and state.get("lab") == lab_id:
                found[lab_id] = path
                break
    return found
