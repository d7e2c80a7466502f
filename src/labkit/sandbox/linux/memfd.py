"""Sealed memfds: the job bundle every worker's files come from, and the memory a worker
shares with the grader (Linux only: `memfd_create` and file seals).

Sealing is what makes them safe to hand to the zygote: no worker can change what the
next one gets, nor resize the memory under the grader's reads.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from pathlib import Path

from labkit.sandbox import protocol

MAX_PROBES_BYTES = 4 * 1024**2
ARENA_BYTES = 16 * 1024**2  # memory a worker shares with the grader (only what is written costs)


def make_arena() -> int:
    """A memfd of `ARENA_BYTES` that a worker and the grader both map (see
    `labkit.sandbox.shared`), sealed at that size, seals included: a worker that could
    shrink it would make the grader's reads fault, one that could grow it would spend
    memory, one that could seal it against writes would freeze the grader's inputs.
    """
    fd = os.memfd_create("labkit-shared", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, ARENA_BYTES)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_bundle(files: Mapping[str, bytes], probes: Path | None) -> int:
    """A sealed memfd holding the graded files and the probe source, as one framed
    message: their names in the header, their contents as blobs (the probe source last).

    The zygote reads it for every worker; being sealed, no worker can change what the
    next one gets.
    """
    names = sorted(files)
    blobs = [files[name] for name in names]
    probe_name = None
    if probes is not None:
        source = probes.read_bytes()
        if len(source) > MAX_PROBES_BYTES:
            raise ValueError(f"{probes} is over {MAX_PROBES_BYTES} bytes")
        probe_name = str(probes)
        blobs.append(source)
    packed = protocol.pack({"files": names, "probes": probe_name}, blobs)
    fd = os.memfd_create("labkit-job", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with os.fdopen(os.dup(fd), "wb") as handle:
            handle.write(packed)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd
