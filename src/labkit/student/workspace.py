"""A student's workspace: fetching a lab into it, reading it back, remembering grades.

The workspace is the student's: nothing here overwrites it without `force`, and then
only after moving the old folder to a timestamped backup. What the kit remembers (the
last grade, for `labkit hint` and `labkit list`) lives in `.labkit/state.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import __version__, fileset, i18n
from labkit.course.catalogue import LabSpec
from labkit.errors import LabkitError
from labkit.fsutil import write_atomic
from labkit.results import LabResult

MAX_FILE_BYTES = 1024 * 1024
NOTEBOOK_MAX_BYTES = 16 * MAX_FILE_BYTES  # outputs (plots) make notebooks large
STATE_FILE = Path(".labkit") / "state.json"
STATE_SCHEMA = "labkit.state/1"


class WorkspaceError(LabkitError):
    """A problem with the student's files; `key` and `params` name a kit message."""


@dataclass(frozen=True)
class Fetched:
    path: Path
    backup: Path | None


def fetch(lab: LabSpec, dest: Path, lang: str, force: bool = False) -> Fetched:
    """Put the lab's stubs and its README, both in `lang`, into `dest`.

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
            shutil.copyfile(lab.stub(rel, lang), target)
        shutil.copyfile(lab.readme(lang), staging / "README.md")
        write_state(staging, {"lab": lab.id, "last": None,
                              "fetched": {"labkit": __version__, "lang": lang,
                                          "stubs": stubs_digest(lab, lang)}})
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


def reset_file(lab: LabSpec, path: Path, rel: str, lang: str = "en") -> Path | None:
    """Put the `lang` stub of one lab file back into the workspace at `path`; the
    student's version, unless it is that file's stub in some language, is first moved to
    a timestamped backup beside it (the rule of `fetch --force`). Returns that backup, if
    one was made."""
    if rel not in lab.files:
        raise WorkspaceError("reset_unknown_file", file=rel, lab=lab.id, files=", ".join(lab.files))
    target = path / rel
    stubs = {stub.read_bytes() for stub in lab.stubs(rel) if stub.is_file()}
    backup = None
    if os.path.lexists(target):
        try:
            same = target.is_file() and not target.is_symlink() and target.read_bytes() in stubs
        except OSError:
            same = False
        if not same:
            backup = target.with_name(f"{target.name}.backup-{time.strftime('%Y%m%d-%H%M%S')}")
            target.rename(backup)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, lab.stub(rel, lang).read_bytes())
    return backup


def changed_since(lab: LabSpec, path: Path, last: LabResult) -> bool:
    """Whether the workspace's files are no longer the ones `last` graded."""
    from labkit.fileset import digest

    try:
        return digest(collect_submission(lab, path).files) != last.digest
    except (LabkitError, OSError):
        return True


@dataclass(frozen=True)
class Submission:
    """The files to grade, and a note (in the grading's language) on how they were read."""

    files: dict[str, bytes]
    note: str = ""


# Reads one of a submission's files: (relative path, size limit) -> its bytes, or
# FileNotFoundError if it is not there, WorkspaceError if it may not be graded.
Read = Callable[[str, int], bytes]


def collect_submission(lab: LabSpec, path: Path, lang: str = "en") -> Submission:
    """The lab's files from a workspace folder (see `read_submission`), refusing anything
    that is not a plain file."""
    if not path.is_dir():
        raise WorkspaceError("no_workspace", lab=lab.id, path=str(path))
    return read_submission(lab, lambda rel, limit: read_plain_file(path, rel, limit), lang)


def read_submission(lab: LabSpec, read: Read, lang: str = "en") -> Submission:
    """The lab's files as `read` gives them (from a folder, or a zip read in memory): its
    `.py` files, or else its `LAB.ipynb`.

    A submission that lacks a lab file but holds the lab's notebook is graded from the
    notebook (see `labkit.student.notebookfiles`); the note says what was left out of it.
    """
    files = {}
    for rel in lab.files:
        try:
            files[rel] = read(rel, MAX_FILE_BYTES)
        except FileNotFoundError:
            name = f"{lab.id}.ipynb"
            try:
                data = read(name, NOTEBOOK_MAX_BYTES)
            except FileNotFoundError:
                raise WorkspaceError(
                    "missing_file", lab=lab.id, path=rel, files=", ".join(lab.files)
                ) from None
            return _notebook_submission(lab, name, data, lang)
    return Submission(files)


_KINDS = {stat.S_IFLNK: "symlink", stat.S_IFCHR: "device", stat.S_IFBLK: "device",
          stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFDIR: "folder"}


def read_plain_file(root: Path, rel: str, limit: int) -> bytes:
    """The bytes of `root/rel`, which must be a regular file of at most `limit` bytes.

    No symlink is followed anywhere below `root` (not the file, not a folder on the
    way), nothing but a regular file is opened (a FIFO or a device could block or act
    on open), and what is read is the file that was checked. `WorkspaceError` names
    the problem; a missing file raises `FileNotFoundError`.
    """
    *folders, name = Path(rel).parts
    opened: list[int] = []
    try:
        opened.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for folder in folders:
            try:
                opened.append(os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                      | os.O_CLOEXEC, dir_fd=opened[-1]))
            except FileNotFoundError:
                raise
            except OSError:
                raise WorkspaceError("bad_file", path=rel,
                                     reason=i18n.Phrase("reason_link_on_the_way",
                                                        folder=folder)) from None
        info = os.stat(name, dir_fd=opened[-1], follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "other")
            raise WorkspaceError("bad_file", path=rel, reason=i18n.Phrase(f"reason_{kind}"))
        if info.st_size > limit:
            raise WorkspaceError("file_too_large", path=rel, limit=limit)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                         | os.O_CLOEXEC, dir_fd=opened[-1])
        except OSError:  # replaced since the check (a symlink now: ELOOP)
            changed = i18n.Phrase("reason_changed")
            raise WorkspaceError("bad_file", path=rel, reason=changed) from None
        opened.append(fd)
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            raise WorkspaceError("bad_file", path=rel, reason=i18n.Phrase("reason_changed"))
        chunks, size = [], 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise WorkspaceError("file_too_large", path=rel, limit=limit)
        return b"".join(chunks)
    finally:
        for fd in opened:
            os.close(fd)


def _notebook_submission(lab: LabSpec, name: str, data: bytes, lang: str) -> Submission:
    """The lab's files converted from the notebook `name` (its bytes: `data`)."""
    from labkit.student import notebookfiles as notebook

    try:
        converted = notebook.parse(data, lab.files)
    except notebook.NotebookError as exc:
        raise WorkspaceError(exc.key, notebook=name, **exc.params) from None
    for rel, data in converted.files.items():
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError("file_too_large", path=rel, limit=MAX_FILE_BYTES)
    notes = []
    if converted.dropped:
        shown = "; ".join(str(d) for d in converted.dropped[:3])
        more = len(converted.dropped) - 3
        notes.append(i18n.t("notebook_dropped", lang, notebook=name,
                            lines=shown + (f" (+{more})" if more > 0 else "")))
    if converted.empty:
        notes.append(i18n.t("notebook_empty", lang, notebook=name,
                            files=", ".join(converted.empty)))
    return Submission(converted.files, " ".join(notes))


def read_state(path: Path) -> dict[str, Any] | None:
    """What the kit remembers of a workspace, or None if it holds no readable state."""
    try:
        state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("schema") == STATE_SCHEMA else None


def find_workspaces(root: Path) -> dict[str, Path]:
    """The workspaces at `root` or one folder below it, by lab (`fetch --dir` included).

    Where one lab has several, the most recently graded (or fetched) one is shown.
    """
    found: dict[str, tuple[float, Path]] = {}
    try:
        candidates = [root, *sorted(p for p in root.iterdir() if p.is_dir())]
    except OSError:
        return {}
    for path in candidates:
        state = read_state(path)
        if state is None or not isinstance(state.get("lab"), str):
            continue
        try:
            stamp = (path / STATE_FILE).stat().st_mtime
        except OSError:
            continue
        if state["lab"] not in found or stamp > found[state["lab"]][0]:
            found[state["lab"]] = (stamp, path)
    return {lab: path for lab, (_, path) in found.items()}


def write_state(path: Path, state: dict[str, Any]) -> None:
    write_atomic(path / STATE_FILE, json.dumps({"schema": STATE_SCHEMA, **state}, indent=2))


def record_grade(path: Path, result: LabResult) -> None:
    """Remember the last grade (for `hint` and `list`), replacing the file atomically;
    what `fetch` noted is kept."""
    fetched = (read_state(path) or {}).get("fetched")
    write_state(path, {"lab": result.lab, "last": result.to_dict(),
                       **({"fetched": fetched} if isinstance(fetched, dict) else {})})


def stubs_digest(lab: LabSpec, lang: str) -> str:
    """A digest of the stubs `fetch` copies for `lab` in `lang`: it changes when a newer
    kit ships other stubs."""
    return fileset.digest({rel: lab.stub(rel, lang).read_bytes() for rel in lab.files})


def stub_news(lab: LabSpec, path: Path) -> str | None:
    """The labkit version the workspace was fetched with, if the stubs it was fetched
    from have changed since (a newer kit); None when they have not, or it is unknown."""
    fetched = (read_state(path) or {}).get("fetched")
    if not isinstance(fetched, dict) or not isinstance(fetched.get("stubs"), str):
        return None
    lang = fetched.get("lang") if fetched.get("lang") in i18n.LANGUAGES else i18n.LANGUAGES[0]
    try:
        now = stubs_digest(lab, str(lang))
    except OSError:
        return None
    return str(fetched.get("labkit", "?"))[:40] if now != fetched["stubs"] else None


def last_grade(path: Path) -> LabResult | None:
    state = read_state(path)
    if not state or not state.get("last"):
        return None
    try:
        return LabResult.from_dict(state["last"])
    except (KeyError, ValueError, TypeError):
        return None
