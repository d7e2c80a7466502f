"""The portable worker: a process of its own per check, started with `subprocess` by
`labkit.sandbox.portable` on any system Python runs on.

Runs as `python -I -B -m labkit.sandbox.child.portable` in a new, empty folder (its
working directory, HOME and TMPDIR), its standard input the request channel and its
standard output the reply channel; what it prints goes to its standard error, the
output pipe. The back end starts it before it knows the job (one is kept ready while
the previous check runs), so it first imports NumPy and the call loop, then waits for
its job as the first framed message: the modules, the limits, where the memory it
shares with the grader is, and the job's files and probe source as blobs. It writes
the files, maps the memory, lowers its limits where the system has them (on Windows
the back end's Job Object holds it from outside), and serves calls (`worker.Worker`).
Nothing here is trusted: what it says is data the grader decodes under limits.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # CPython's C module behind `signal`: no stubs
import io
import mmap
import os
import sys
from typing import Any

from labkit.sandbox import codec, protocol
from labkit.sandbox.child import limits
from labkit.sandbox.child.files import write_files
from labkit.sandbox.child.worker import Worker, load_probes

MAX_JOB = 256 * 1024**2  # the first message: the job's files, as the grader read them


def _channels() -> tuple[int, int]:
    """Take the request and reply channels off the standard streams (never inherited by
    what the student's code starts), and point standard output at the output pipe."""
    requests, replies = os.dup(0), os.dup(1)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.dup2(2, 1)
    # Unbuffered, as with `python -u`: a worker is killed, never flushed, at the end.
    sys.stdout, sys.stderr = (io.TextIOWrapper(open(fd, "wb", 0, closefd=False),
                                               write_through=True) for fd in (1, 2))
    return requests, replies


def _arena(place: Any) -> mmap.mmap | None:
    """This side's mapping of the memory shared with the grader: a descriptor it was
    started with (POSIX), or a named mapping (Windows)."""
    if not isinstance(place, dict):
        return None
    size = int(place["size"])
    if not 0 < size <= protocol.MAX_MESSAGE:
        raise ValueError(f"shared memory of {size} bytes")
    if "fd" in place:
        fd = int(place["fd"])
        mapping = mmap.mmap(fd, size)
        os.close(fd)
        return mapping
    return mmap.mmap(-1, size, tagname=str(place["tag"]))  # type: ignore[call-arg]  # Windows


def _job(reader: protocol.Reader) -> tuple[dict[str, Any], dict[str, bytes], Any]:
    """The job: its header, its files and its probes (loaded). The lab's probes may come
    first, in a message of their own, as soon as the back end knows them: then they load
    while the previous check runs, and the job only names them."""
    header, blobs = reader.read()
    loaded: tuple[str, Any] | None = None
    if "preload" in header:
        if len(blobs) != 1:
            raise ValueError("probes sent ahead are one source")
        loaded = (str(header["preload"]), load_probes(str(header["preload"]), blobs[0]))
        header, blobs = reader.read()
    names, probe = header["files"], header.get("probes")
    sent = probe is not None and not header.get("preloaded")
    if len(names) + sent != len(blobs):
        raise ValueError("the job's names do not match its files")
    files = dict(zip(names, blobs[: len(names)], strict=True))
    if probe is None:
        return header, files, None
    if sent:
        return header, files, load_probes(probe, blobs[-1])
    if loaded is None or loaded[0] != probe:
        raise ValueError("the job names probes that were not sent")
    return header, files, loaded[1]


def main() -> None:
    requests, replies = _channels()
    protocol.write_message(replies, {"ready": True})
    reader = protocol.Reader(requests, MAX_JOB)
    try:
        header, files, probes = _job(reader)
    except protocol.ChannelClosed:  # kept ready, never needed
        os._exit(0)
    reader.limit = protocol.MAX_MESSAGE
    job = header["job"]
    workdir = os.getcwd()
    write_files(workdir, files)
    arena = _arena(header.get("arena"))
    if arena is not None:
        codec.serve_shared(memoryview(arena))
    sys.path[:0] = [os.path.normpath(os.path.join(workdir, rel))
                    for rel in job.get("sys_path") or ["."]]
    limits.install(dict(job.get("limits") or {}))
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    if hasattr(_signal, "SIGPIPE"):
        _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    Worker(list(job["modules"]), probes).serve(requests, replies, job.get("import"), reader)
    os._exit(0)  # nothing to flush; the grader has hung up


if __name__ == "__main__":
    main()
