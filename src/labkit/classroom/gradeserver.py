"""A long-lived trusted grading process for batch grading (`labkit.classroom.batch` starts N).

`run_warm` is the warm core it shares with the daemon behind `labkit grade`
(`labkit.student.daemon`).

Runs as `python -m labkit.classroom.gradeserver REQUEST_FD REPLY_FD`. It keeps pytest, NumPy and
hypothesis imported, the lab's graders collected (`labkit.engine.warm`) and one `Zygote`
running, and grades one submission per request. Requests and replies are JSON lines on
two pipes (never pickle: the replies carry text the student's code influenced):

    -> {"op": "init", "lab": {...LabSpec fields...}}      <- {"ready": true, "pid": N}
    -> {"op": "grade", "id": 7, "dir": "/tmp/...", "lang": "en"}
    <- {"id": 7, "result": {...labkit.result/1...}}  or  {"id": 7, "error": "..."}

The submission's files are already in `dir` (a fresh copy the parent made); they are
graded in place. End of input ends the process, and so does an error reply (the kit
failed: the batch records it for retry and starts a fresh process). Standard output
and error are not part of the protocol (pytest or hypothesis may print); the parent
sends them to a log.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from labkit.course.catalogue import LabSpec
from labkit.engine import warm

if TYPE_CHECKING:
    from labkit.engine.warm import GradeFn


def _send(out: BinaryIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
    out.flush()


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    from labkit.student import workspace

    first = requests.readline()
    if not first:
        return
    lab = LabSpec.from_dict(json.loads(first)["lab"])

    def loop(grade: GradeFn) -> None:
        _send(replies, {"ready": True, "pid": os.getpid()})
        for line in requests:
            request = json.loads(line)
            try:
                files = workspace.collect(lab, Path(request["dir"]))
                result = grade(files, request.get("lang", "en"))
                reply = {"id": request["id"], "result": result.to_dict()}
            except Exception as exc:  # noqa: BLE001 - reported; this process is done
                # Whatever failed (the sandbox, the engine) may fail the next student too:
                # end here, and the batch starts a fresh grading process.
                _send(replies, {"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})
                return
            _send(replies, reply)

    warm.run_warm(lab, loop)


def main() -> None:
    requests = os.fdopen(int(sys.argv[1]), "rb")
    replies = os.fdopen(int(sys.argv[2]), "wb")
    try:
        serve(requests, replies)
    except BrokenPipeError:  # the batch went away: nothing left to tell it
        pass


if __name__ == "__main__":
    main()
