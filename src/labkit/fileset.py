"""A submission's files as one value: `{relative path: bytes}`, its digest, its one copy.

Files are read once (from a folder, a zip or a notebook) and stay in memory; the digest
names that exact content across machines; `materialize` writes the single copy a
sandbox's worker imports.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

Files = dict[str, bytes]


def digest(files: Files) -> str:
    """A content hash of the graded files (names included), stable across machines."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + len(files[rel]).to_bytes(8, "big") + files[rel])
    return "sha256:" + h.hexdigest()


def materialize(files: Files, dest: Path) -> None:
    """Write the collected files into a fresh directory (the graded copy)."""
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
