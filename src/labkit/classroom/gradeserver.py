"""A long-lived trusted grading process for batch grading (`labkit.classroom.batch` starts N).

`run_warm` is the warm core it shares with the daemon behind `labkit grade`
(`labkit.student.daemon`); unlike the daemon, it does not shrink a failing property's
input (`warm.run`): an instructor's class pays for no calls that change no grade.

Runs as `python -m labkit.classroom.gradeserver REQUEST_FD REPLY_FD`. It keeps pytest, NumPy and
hypothesis imported, the lab's graders collected (`labkit.engine.warm`) and one sandbox back end
running, and grades one submission per request. Requests and replies are framed
messages on two pipes (`labkit.sandbox.protocol`; never pickle: the replies carry text
the student's code influenced):

    -> {"op": "init", "lab": {...LabSpec.to_dict()...}}      <- {"ready": true, "pid": N}
    -> {"op": "grade", "id": 7, "lang": "en", "files": [names]}, one blob per file
    <- {"id": 7, "result": {...labkit.result/1...}}  or  {"id": 7, "error": "...", "kit": bool}

`kit` is true when the kit knew the failure for its own (`KitFailure`: a check met it
twice); the batch then grades the submission again rather than suspect it.

Each result's `host` is this machine's name, or the init message's `host` when the
process that started this one says more (a Dask worker adds its address).

The submission's files arrive in the request, as the parent read them: nothing of the
student's folder is read here, and they are written nowhere but into each worker's
fresh folder (by the sandbox). End of input ends the process, and so does an error reply (the kit
failed: the batch records it for retry and starts a fresh process). Standard output
and error are not part of the protocol (pytest or hypothesis may print); the parent
sends them to a log.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from typing import TYPE_CHECKING

from labkit import fileset
from labkit.course.catalogue import LabSpec
from labkit.engine import warm
from labkit.engine.cold import KitFailure
from labkit.sandbox import protocol

if TYPE_CHECKING:
    from labkit.engine.warm import GradeFn


def serve(requests: int, replies: int) -> None:
    """Grade the submissions that arrive on descriptor `requests` until end of input,
    replying on `replies` (blocking pipes: the batch reads and writes with deadlines)."""
    reader = protocol.Reader(requests)
    try:
        init, _ = reader.read()
    except protocol.ChannelClosed:
        return
    lab = LabSpec.from_dict(init["lab"])
    host = str(init.get("host") or socket.gethostname())

    def loop(grade: GradeFn) -> None:
        protocol.write_message(replies, {"ready": True, "pid": os.getpid()})
        while True:
            try:
                request, blobs = reader.read()
            except protocol.ChannelClosed:
                return
            try:
                files = fileset.from_blobs(request["files"], blobs)
                if not set(files) <= set(lab.files):
                    raise ValueError("files that are not the lab's")
                result = dataclasses.replace(grade(files, request.get("lang", "en")), host=host)
            except Exception as exc:  # noqa: BLE001 - reported; this process is done
                # Whatever failed (the sandbox, the engine) may fail the next student too:
                # end here, and the batch starts a fresh grading process.
                protocol.write_message(replies, {"id": request.get("id"),
                                                 "error": f"{type(exc).__name__}: {exc}",
                                                 "kit": isinstance(exc, KitFailure)})
                return
            protocol.write_message(replies, {"id": request.get("id"), "result": result.to_dict()})

    warm.run_warm(lab, loop, shrink=False)  # a batch: see `warm.run`


def main() -> None:
    try:
        serve(int(sys.argv[1]), int(sys.argv[2]))
    except protocol.ChannelClosed:  # the batch went away: nothing left to tell it
        pass


if __name__ == "__main__":
    main()
