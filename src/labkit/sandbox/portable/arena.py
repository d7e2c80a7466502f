"""The memory a portable worker shares with the grader (see `labkit.sandbox.shared`).

A worker must not be able to resize it: a mapping whose file shrinks makes the grader's
next read of it fault. So on Linux it is a sealed memfd (`labkit.sandbox.linux.memfd`),
on other POSIX systems an unnamed POSIX shared-memory object (macOS sizes one only
once), passed as a descriptor; on Windows a named section backed by the paging file,
whose size is fixed when it is made. Either way the grader maps it before the worker.
"""

from __future__ import annotations

import mmap
import os
import secrets
from dataclasses import dataclass
from typing import Any

ARENA_BYTES = 16 * 1024**2  # as the Linux back end's (only what is written costs)


@dataclass
class Arena:
    """The grader's mapping, and how the worker finds the same memory (`place`, sent in
    its job) with the descriptor to start it with, if any (`fd`, closed once started)."""

    mapping: mmap.mmap
    place: dict[str, Any]
    fd: int | None

    def started(self) -> None:
        """The worker holds its own descriptor now: close ours."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def make_arena(kind: str | None = None) -> Arena:
    """Memory for one worker, mapped here; `kind` ("memfd", "shm", "section") forces a
    way (a test's), else the strongest this system has."""
    kind = kind or ("section" if os.name == "nt"
                    else "memfd" if hasattr(os, "memfd_create") else "shm")
    if kind == "section":
        tag = f"labkit-{secrets.token_hex(12)}"
        mapping = mmap.mmap(-1, ARENA_BYTES, tagname=tag)  # type: ignore[call-arg]
        return Arena(mapping, {"tag": tag, "size": ARENA_BYTES}, None)
    if kind == "memfd":
        from labkit.sandbox.linux import memfd

        fd = memfd.make_arena()
    else:
        fd = _unnamed_shm()
    try:
        os.set_inheritable(fd, False)
        mapping = mmap.mmap(fd, ARENA_BYTES)
    except BaseException:
        os.close(fd)
        raise
    return Arena(mapping, {"fd": fd, "size": ARENA_BYTES}, fd)


def _unnamed_shm() -> int:
    """A POSIX shared-memory object of `ARENA_BYTES`, its name removed at once: only
    descriptors reach it."""
    import _posixshmem  # type: ignore[import-not-found]  # multiprocessing.shared_memory's

    name = f"/labkit-{secrets.token_hex(12)}"
    fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    _posixshmem.shm_unlink(name)
    try:
        os.ftruncate(fd, ARENA_BYTES)
    except BaseException:
        os.close(fd)
        raise
    return fd
