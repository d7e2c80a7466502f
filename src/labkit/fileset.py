"""A submission's files as one value: `{relative path: bytes}`, its digest, how it travels.

Files are read once (from a folder, a zip or a notebook) and stay in memory; the digest
names that exact content across machines; between processes they travel in a framed
message (`labkit.sandbox.protocol`), names in the header and contents as blobs
(`as_blobs`, `from_blobs`). The only copy ever written is each worker's, which the
sandbox's zygote writes into the worker's fresh folder.
"""

from __future__ import annotations

import hashlib
from typing import Any

Files = dict[str, bytes]


def digest(files: Files) -> str:
    """A content hash of the graded files (names included), stable across machines."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + len(files[rel]).to_bytes(8, "big") + files[rel])
    return "sha256:" + h.hexdigest()


def as_blobs(files: Files) -> tuple[list[str], list[bytes]]:
    """The files as a message carries them: the names (for its header) and the contents
    (its blobs), in the same order."""
    names = sorted(files)
    return names, [files[name] for name in names]


def from_blobs(names: Any, blobs: list[bytes]) -> Files:
    """The files of a message from another process: one blob per name, each name a
    string and none twice; `ValueError` otherwise. Which names are welcome is the
    receiver's to check."""
    if (type(names) is not list or len(names) != len(blobs)
            or not all(type(name) is str for name in names) or len(set(names)) != len(names)):
        raise ValueError("the file names do not match the files")
    return dict(zip(names, blobs, strict=True))

