"""The saves `labkit watch` regrades on: the lab's own files in one workspace.

`watchfiles` (inotify underneath) tells of a save at once; where it is missing or the
folder cannot be watched (some network or container filesystems), the files are polled.
Only the lab's files count: the grade's own state, backups and an editor's swap files
change too, and must not start another grade.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from labkit.course.catalogue import LabSpec

POLL_SECONDS = 0.3
DEBOUNCE_MS = 150  # an editor's save is often several writes in a row


def watched(lab: LabSpec) -> set[str]:
    """The names, relative to the workspace, whose change means 'grade again'."""
    return {*lab.files, f"{lab.id}.ipynb"}


def start(lab: LabSpec, path: Path, changed: Callable[[], None],
          stop: threading.Event, poll: bool = False) -> threading.Thread:
    """Call `changed()` (from a thread of its own) after each save of a lab file under
    `path`, until `stop` is set. `poll`: poll even where `watchfiles` could watch."""
    thread = threading.Thread(target=_run, args=(lab, path, changed, stop, poll), daemon=True)
    thread.start()
    return thread


def _run(lab: LabSpec, path: Path, changed: Callable[[], None], stop: threading.Event,
         poll: bool) -> None:
    if not poll:
        try:
            _notified(lab, path, changed, stop)
            return
        except (ImportError, OSError, RuntimeError):
            pass  # no watchfiles, or a folder it cannot watch: poll instead
    _polled(lab, path, changed, stop)


def _notified(lab: LabSpec, path: Path, changed: Callable[[], None],
              stop: threading.Event) -> None:
    import watchfiles

    root = path.resolve()
    names = watched(lab)

    def ours(_change: object, where: str) -> bool:
        with contextlib.suppress(ValueError):
            return Path(where).relative_to(root).as_posix() in names
        return False

    for _ in watchfiles.watch(root, watch_filter=ours, debounce=DEBOUNCE_MS, step=50,
                              stop_event=stop, rust_timeout=500, raise_interrupt=False):
        changed()


def _stamps(path: Path, names: set[str]) -> dict[str, tuple[int, int] | None]:
    stamps: dict[str, tuple[int, int] | None] = {}
    for name in names:
        try:
            info = os.stat(path / name, follow_symlinks=False)
            stamps[name] = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamps[name] = None
    return stamps


def _polled(lab: LabSpec, path: Path, changed: Callable[[], None],
            stop: threading.Event) -> None:
    names = watched(lab)
    before = _stamps(path, names)
    while not stop.wait(POLL_SECONDS):
        now = _stamps(path, names)
        if now != before:
            before = now
            changed()
