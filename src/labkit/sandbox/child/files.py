"""The job's files written into a worker's new folder, whoever starts the worker.

The names come from the grader, but a worker's folder is where the student's code runs:
a name that would leave the folder (absolute, `..`, empty parts) is refused rather than
written, whichever back end asked.
"""

from __future__ import annotations

import os


def write_files(workdir: str, files: dict[str, bytes]) -> None:
    """Write `files` ({relative path with "/": bytes}) into the existing `workdir`,
    each created anew (`ValueError` for a name that would leave it)."""
    for rel, data in files.items():
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") or "\\" in p or ":" in p
                                      for p in parts):
            raise ValueError(f"bad file name {rel!r}")
        target = os.path.join(workdir, *parts)
        if len(parts) > 1:
            os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "xb") as handle:
            handle.write(data)
