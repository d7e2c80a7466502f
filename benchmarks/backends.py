"""What a check costs on each sandbox back end, side by side in one run.

For each isolation level this machine offers (`bwrap`, `process`, `portable`), in turn:
the cost of one check's worker (a fresh worker, the student's module imported, one call
answered, the worker closed), as the median of `--checks` in a row in one sandbox; and
the wall time of a whole cold grading of lab02's reference solution (`labkit grade`
without a daemon, in-process), as the median of `--runs`. Levels alternate within each
round, so that machine noise hits all alike: compare the ratios, printed against the
first level.

    python benchmarks/backends.py [--checks 40] [--runs 5] [--levels bwrap,process,portable]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from labkit.course.catalogue import get_lab  # noqa: E402
from labkit.engine.cold import grade_files  # noqa: E402
from labkit.sandbox import codec  # noqa: E402
from labkit.sandbox.backend import SandboxConfig  # noqa: E402
from labkit.sandbox.errors import IsolationError  # noqa: E402
from labkit.sandbox.facade import Sandbox, isolation_level  # noqa: E402

STUDENT = b"import numpy as np\n\ndef total(n):\n    return int(np.arange(n).sum())\n"


def per_check(level: str, checks: int) -> list[float]:
    """Seconds of each of `checks` workers: spawned, module imported, one call, closed."""
    config = SandboxConfig(files={"student.py": STUDENT}, modules=("student",),
                           isolation=level)
    seconds = []
    with Sandbox(config) as box:
        box.backend.ready()
        for _ in range(checks):
            started = time.perf_counter()
            worker = box.spawn("student")
            worker.receive(30)
            blobs: list[bytes] = []
            header = {"op": "call", "name": "total",
                      "args": codec.encode_value([1000], blobs)}
            reply, _ = worker.request(header, blobs, 30)
            assert "ok" in reply, reply
            worker.close()
            seconds.append(time.perf_counter() - started)
    return seconds


def cold_grade(level: str) -> float:
    import os

    lab = get_lab("lab02")
    files = {rel: (REPO / "solutions" / lab.id / rel).read_bytes() for rel in lab.files}
    os.environ["LABKIT_ISOLATION"] = level
    started = time.perf_counter()
    result = grade_files(lab, files)
    assert result.score == result.max_score and result.isolation == level, result.isolation
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--levels", default="bwrap,process,portable")
    args = parser.parse_args()
    levels = []
    for level in args.levels.split(","):
        try:
            if isolation_level(level) == level:
                levels.append(level)
        except IsolationError as exc:
            print(f"{level}: not here ({exc})")
    checks: dict[str, list[float]] = {level: [] for level in levels}
    grades: dict[str, list[float]] = {level: [] for level in levels}
    for _ in range(args.runs):
        for level in levels:
            checks[level] += per_check(level, max(1, args.checks // args.runs))
            grades[level].append(cold_grade(level))
    first = levels[0]
    base_check = statistics.median(checks[first])
    base_grade = statistics.median(grades[first])
    print(f"{'level':<10} {'per check (ms)':>15} {'ratio':>6} {'cold lab02 (s)':>15} {'ratio':>6}")
    for level in levels:
        check, grade = statistics.median(checks[level]), statistics.median(grades[level])
        print(f"{level:<10} {check * 1000:>15.1f} {check / base_check:>6.2f} "
              f"{grade:>15.2f} {grade / base_grade:>6.2f}")


if __name__ == "__main__":
    main()
