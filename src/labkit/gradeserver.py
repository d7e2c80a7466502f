"""A long-lived trusted grading process for batch grading (`labkit.batch` starts N).

`run_warm` is the warm core it shares with the daemon behind `labkit grade`
(`labkit.daemon`).

Runs as `python -m labkit.gradeserver REQUEST_FD REPLY_FD`. It keeps pytest, NumPy and
hypothesis imported, the lab's graders collected (`labkit.warm`) and one `Zygote`
running, and grades one submission per request. Requests and replies are JSON lines on
two pipes (never pickle: the replies carry text the student's code influenced):

    -> {"op": "init", "lab": {...LabSpec fields...}}      <- {"ready": true, "pid": N}
    -> {"op": "grade", "id": 7, "dir": "/tmp/...", "lang": "en"}
    <- {"id": 7, "result": {...labkit.result/1...}}  or  {"id": 7, "error": "..."}

The submission's files are already in `dir` (a fresh copy the parent made); they are
graded in place. End of input ends the process. Standard output and error are not part
of the protocol (pytest or hypothesis may print); the parent sends them to a log.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from labkit.registry import LabSpec

if TYPE_CHECKING:
    from labkit.warm import GradeFn


def lab_to_json(lab: LabSpec) -> dict[str, Any]:
    return {
        "id": lab.id,
        "title": lab.title,
        "files": list(lab.files),
        "modules": list(lab.modules),
        "sys_path": list(lab.sys_path),
        "call_timeout": lab.call_timeout,
        "grade_timeout": lab.grade_timeout,
        "exercise_dir": str(lab.exercise_dir),
        "grader_dir": str(lab.grader_dir),
        "share_worker": lab.share_worker,
    }


def lab_from_json(data: dict[str, Any]) -> LabSpec:
    return LabSpec(
        id=data["id"],
        title=dict(data["title"]),
        files=tuple(data["files"]),
        modules=tuple(data["modules"]),
        sys_path=tuple(data["sys_path"]),
        call_timeout=float(data["call_timeout"]),
        grade_timeout=float(data["grade_timeout"]),
        exercise_dir=Path(data["exercise_dir"]),
        grader_dir=Path(data["grader_dir"]),
        share_worker=bool(data["share_worker"]),
    )


def _send(out: BinaryIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
    out.flush()


def run_warm(lab: LabSpec, loop: Callable[[GradeFn], None]) -> None:
    """Start a zygote, collect `lab`'s graders once, then call `loop(grade)` until it returns.

    `grade(workdir, files, lang)` grades files already materialised in `workdir`.
    """
    from labkit import warm
    from labkit.sandbox import Zygote

    zygote = Zygote()
    zygote.start()  # its NumPy import overlaps ours and pytest's collection
    try:
        warm.run(lab, zygote, loop)
    finally:
        zygote.close()


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    from labkit import workspace

    first = requests.readline()
    if not first:
        return
    lab = lab_from_json(json.loads(first)["lab"])

    def loop(grade: GradeFn) -> None:
        _send(replies, {"ready": True, "pid": os.getpid()})
        for line in requests:
            request = json.loads(line)
            try:
                workdir = Path(request["dir"])
                files = workspace.collect(lab, workdir)
                result = grade(workdir, files, request.get("lang", "en"))
                reply = {"id": request["id"], "result": result.to_dict()}
            except Exception as exc:  # noqa: BLE001 - reported, and the next one goes on
                reply = {"id": request["id"], "error": f"{type(exc).__name__}: {exc}"}
            _send(replies, reply)

    run_warm(lab, loop)


def main() -> None:
    requests = os.fdopen(int(sys.argv[1]), "rb")
    replies = os.fdopen(int(sys.argv[2]), "wb")
    try:
        serve(requests, replies)
    except BrokenPipeError:  # the batch went away: nothing left to tell it
        pass


if __name__ == "__main__":
    main()
